/*
 * setup_decl.c - reading a setup declaration (setup_decl.h) with libyaml.
 *
 * libyaml's events are first made into a small tree (bounded in depth and
 * size), which is then checked key by key, so every message can name the
 * line of what it refuses. Only YAML's plain data is taken: aliases,
 * anchors, tags other than !!str and a second document are refused. A
 * scalar is taken as the text written (an unquoted 3.10 stays "3.10").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

#include "setup_decl.h"

#define TREE_DEPTH_MAX 8
#define TREE_NODES_MAX 4096

enum ynode_kind { Y_SCALAR, Y_SEQ, Y_MAP };

struct ynode {
	enum ynode_kind kind;
	int line;            /* 1-based */
	char *text;          /* scalar */
	bool plain;          /* scalar written without quotes */
	struct ynode **kids; /* seq: items; map: key, value, key, value... */
	size_t n, cap;
};

struct parse {
	const char *file;
	char *msg;
	size_t msg_size;
	yaml_parser_t p;
	size_t nodes;
};

__attribute__((format(printf, 3, 4))) static int
fail(struct parse *ps, int line, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(ps->msg, ps->msg_size, "%s:%d: ", ps->file, line);
	if (n < 0 || (size_t)n >= ps->msg_size)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(ps->msg + n, ps->msg_size - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static void ynode_free(struct ynode *y)
{
	if (!y)
		return;
	for (size_t i = 0; i < y->n; i++)
		ynode_free(y->kids[i]);
	free(y->kids);
	free(y->text);
	free(y);
}

static int ynode_add(struct ynode *parent, struct ynode *kid)
{
	if (parent->n == parent->cap) {
		size_t cap = parent->cap ? parent->cap * 2 : 8;
		struct ynode **k = realloc(parent->kids, cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		parent->kids = k;
		parent->cap = cap;
	}
	parent->kids[parent->n++] = kid;
	return 0;
}

static int next_event(struct parse *ps, yaml_event_t *ev)
{
	if (yaml_parser_parse(&ps->p, ev))
		return 0;
	int line = (int)ps->p.problem_mark.line + 1;
	return fail(ps, line, "not valid YAML: %s",
		    ps->p.problem ? ps->p.problem : "syntax error");
}

static int read_node(struct parse *ps, yaml_event_t *ev, int depth,
		     struct ynode **ret);

/* The items of a sequence or mapping, up to its end event. */
static int read_kids(struct parse *ps, struct ynode *y, int depth)
{
	for (;;) {
		yaml_event_t ev;
		int rc = next_event(ps, &ev);
		if (rc)
			return rc;
		if (ev.type == YAML_SEQUENCE_END_EVENT ||
		    ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		struct ynode *kid = NULL;
		rc = read_node(ps, &ev, depth + 1, &kid);
		yaml_event_delete(&ev);
		if (!rc)
			rc = ynode_add(y, kid);
		if (rc) {
			ynode_free(kid);
			return rc;
		}
	}
}

/* The node that event @ev begins (the caller deletes @ev). */
static int read_node(struct parse *ps, yaml_event_t *ev, int depth,
		     struct ynode **ret)
{
	int line = (int)ev->start_mark.line + 1;
	const yaml_char_t *anchor = NULL, *tag = NULL;

	if (ev->type == YAML_ALIAS_EVENT)
		return fail(ps, line, "aliases (*name) are not supported");
	if (ev->type == YAML_SCALAR_EVENT) {
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
	} else if (ev->type == YAML_SEQUENCE_START_EVENT) {
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
	} else if (ev->type == YAML_MAPPING_START_EVENT) {
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
	} else {
		return fail(ps, line, "unexpected YAML event");
	}
	if (anchor)
		return fail(ps, line, "anchors (&name) are not supported");
	if (tag && strcmp((const char *)tag, YAML_STR_TAG) != 0)
		return fail(ps, line, "tag %s is not supported", tag);
	if (depth > TREE_DEPTH_MAX)
		return fail(ps, line, "nested too deep");
	if (++ps->nodes > TREE_NODES_MAX)
		return fail(ps, line, "too many items (at most %d)",
			    TREE_NODES_MAX);

	struct ynode *y = calloc(1, sizeof(*y));
	if (!y)
		return -ENOMEM;
	y->line = line;
	int rc = 0;
	if (ev->type == YAML_SCALAR_EVENT) {
		y->kind = Y_SCALAR;
		y->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
			   !tag;
		y->text = strndup((const char *)ev->data.scalar.value,
				  ev->data.scalar.length);
		if (!y->text)
			rc = -ENOMEM;
		else if (strlen(y->text) != ev->data.scalar.length)
			rc = fail(ps, line, "a value holds a NUL byte");
	} else {
		y->kind = ev->type == YAML_SEQUENCE_START_EVENT ? Y_SEQ : Y_MAP;
		rc = read_kids(ps, y, depth);
	}
	if (rc) {
		ynode_free(y);
		return rc;
	}
	*ret = y;
	return 0;
}

/* The document's root node, or NULL for an empty file. */
static int read_doc(struct parse *ps, struct ynode **ret)
{
	yaml_event_t ev;
	struct ynode *root = NULL;
	int rc;
	bool in_doc = false, done = false;

	*ret = NULL;
	while (!done) {
		rc = next_event(ps, &ev);
		if (rc) {
			ynode_free(root);
			return rc;
		}
		int line = (int)ev.start_mark.line + 1;
		switch (ev.type) {
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (in_doc)
				rc = fail(ps, line,
					  "a second YAML document (one only)");
			in_doc = true;
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			if (root)
				rc = fail(ps, line, "unexpected content");
			else
				rc = read_node(ps, &ev, 0, &root);
			break;
		}
		yaml_event_delete(&ev);
		if (rc) {
			ynode_free(root);
			return rc;
		}
	}
	*ret = root;
	return 0;
}

/* ---- names and checks ---- */

bool setup_name_valid(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > SETUP_NAME_MAX)
		return false;
	char c = s[0];
	if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	      (c >= '0' && c <= '9') || c == '@'))
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789._+:=@/-") == n;
}

bool setup_version_valid(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > SETUP_VERSION_MAX || s[0] == '.' || s[n - 1] == '.' ||
	    strstr(s, ".."))
		return false;
	return strspn(s, "0123456789.") == n;
}

/* A plain scalar YAML would read as null. */
static bool is_null(const struct ynode *y)
{
	return y->kind == Y_SCALAR && y->plain &&
	       (!y->text[0] || strcmp(y->text, "~") == 0 ||
		strcasecmp(y->text, "null") == 0);
}

/* A plain scalar YAML would read as a number or a boolean. */
static const char *non_string(const struct ynode *y)
{
	static const char *const bools[] = { "true", "false", "yes",
					     "no",   "on",    "off" };
	if (y->kind != Y_SCALAR || !y->plain)
		return NULL;
	for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
		if (strcasecmp(y->text, bools[i]) == 0)
			return "a boolean";
	const char *t = y->text + (y->text[0] == '-' || y->text[0] == '+');
	if (*t && strspn(t, "0123456789._eE+-") == strlen(t) &&
	    strspn(t, "0123456789") > 0)
		return "a number";
	return NULL;
}

static const char *kind_name(const struct ynode *y)
{
	return y->kind == Y_SEQ ? "a list" :
	       y->kind == Y_MAP ? "a mapping" :
				  "a single value";
}

/* @y (a mapping): refuses keys that are not scalars, duplicates, and
 * keys not in @known (NULL-terminated); @where names the mapping. */
static int check_keys(struct parse *ps, const struct ynode *y,
		      const char *const *known, const char *where)
{
	for (size_t i = 0; i < y->n; i += 2) {
		const struct ynode *k = y->kids[i];
		if (k->kind != Y_SCALAR)
			return fail(ps, k->line, "%s: a key must be a name",
				    where);
		bool ok = false;
		for (const char *const *w = known; *w && !ok; w++)
			ok = strcmp(*w, k->text) == 0;
		if (!ok) {
			char expect[160] = "";
			size_t off = 0;
			for (const char *const *w = known; *w; w++)
				off += (size_t)snprintf(
					expect + off, sizeof(expect) - off,
					"%s%s", w == known ? "" : ", ", *w);
			return fail(ps, k->line,
				    "unknown key \"%.60s\" in %s (expected %s)",
				    k->text, where, expect);
		}
		for (size_t j = 0; j < i; j += 2)
			if (strcmp(y->kids[j]->text, k->text) == 0)
				return fail(ps, k->line,
					    "duplicate key \"%s\" in %s "
					    "(first on line %d)",
					    k->text, where, y->kids[j]->line);
	}
	return 0;
}

static const struct ynode *value_of(const struct ynode *map, const char *key)
{
	/* a key that is not a scalar (YAML's "? [a]") has no text */
	for (size_t i = 0; map && i + 1 < map->n; i += 2)
		if (map->kids[i]->text && strcmp(map->kids[i]->text, key) == 0)
			return map->kids[i + 1];
	return NULL;
}

/* A list of package names at @y (key @what) into @ret. */
static int take_list(struct parse *ps, const struct ynode *y, const char *what,
		     struct setup_list *ret)
{
	if (is_null(y))
		return 0;
	if (y->kind != Y_SEQ)
		return fail(ps, y->line,
			    "%s must be a list of package names "
			    "([a, b] or one \"- name\" per line), not %s",
			    what, kind_name(y));
	if (y->n > SETUP_LIST_MAX)
		return fail(ps, y->line, "%s: more than %d packages", what,
			    SETUP_LIST_MAX);
	ret->v = calloc(y->n ? y->n : 1, sizeof(*ret->v));
	if (!ret->v)
		return -ENOMEM;
	for (size_t i = 0; i < y->n; i++) {
		const struct ynode *it = y->kids[i];
		const char *ns = non_string(it);
		if (it->kind != Y_SCALAR)
			return fail(ps, it->line,
				    "%s: each item must be a package name, "
				    "not %s",
				    what, kind_name(it));
		if (ns)
			return fail(ps, it->line,
				    "%s: \"%.60s\" is %s, not a package name "
				    "(quote it if it is one)",
				    what, it->text, ns);
		if (!it->text[0] || is_null(it))
			return fail(ps, it->line, "%s: an empty package name",
				    what);
		if (it->text[0] == '-')
			return fail(ps, it->line,
				    "%s: \"%.60s\" begins with '-': a package "
				    "manager would take it for an option",
				    what, it->text);
		if (!setup_name_valid(it->text))
			return fail(ps, it->line,
				    "%s: \"%.60s\" is not a package name "
				    "(letters, digits and ._+:=@/- only, at "
				    "most %d, no white space or shell "
				    "characters)",
				    what, it->text, SETUP_NAME_MAX);
		for (size_t j = 0; j < i; j++)
			if (strcmp(ret->v[j], it->text) == 0)
				return fail(ps, it->line,
					    "%s: \"%s\" is listed twice", what,
					    it->text);
		ret->v[i] = strdup(it->text);
		if (!ret->v[i])
			return -ENOMEM;
		ret->n = i + 1;
	}
	return 0;
}

static int take_version(struct parse *ps, const struct ynode *y,
			const char *what, char **ret)
{
	if (is_null(y))
		return 0;
	if (y->kind != Y_SCALAR)
		return fail(ps, y->line,
			    "%s must be a version such as %s, not %s", what,
			    strcmp(what, "node.version") ? "\"3.12\"" :
							   "\"22\"",
			    kind_name(y));
	if (!setup_version_valid(y->text))
		return fail(ps, y->line,
			    "%s: \"%.60s\" is not a version (digits and dots, "
			    "e.g. %s)",
			    what, y->text,
			    strcmp(what, "node.version") ? "\"3.12\"" :
							   "\"22\"");
	*ret = strdup(y->text);
	return *ret ? 0 : -ENOMEM;
}

/* python: or node: */
static int take_lang(struct parse *ps, const struct ynode *y, const char *lang,
		     char **ret_version, struct setup_list *ret_pkgs)
{
	static const char *const keys[] = { "version", "packages", NULL };
	char what[32];

	if (is_null(y))
		return 0;
	if (y->kind != Y_MAP)
		return fail(ps, y->line,
			    "%s must be a mapping (version:, packages:), not "
			    "%s",
			    lang, kind_name(y));
	int rc = check_keys(ps, y, keys, lang);
	const struct ynode *v = value_of(y, "version");
	snprintf(what, sizeof(what), "%s.version", lang);
	if (!rc && v)
		rc = take_version(ps, v, what, ret_version);
	v = value_of(y, "packages");
	snprintf(what, sizeof(what), "%s.packages", lang);
	if (!rc && v)
		rc = take_list(ps, v, what, ret_pkgs);
	return rc;
}

static int take_sandbox(struct parse *ps, const struct ynode *y,
			struct setup_decl *d)
{
	static const char *const keys[] = { "toolchain", "python", "node",
					    "packages", NULL };
	if (is_null(y))
		return 0;
	if (y->kind != Y_MAP)
		return fail(ps, y->line,
			    "the sandbox section must be a mapping "
			    "(toolchain:, python:, node:, packages:), not %s",
			    kind_name(y));
	int rc = check_keys(ps, y, keys, "the sandbox section");
	const struct ynode *v = value_of(y, "toolchain");
	if (!rc && v) {
		if (v->kind == Y_SCALAR && strcmp(v->text, "never") == 0)
			d->toolchain_never = true;
		else if (v->kind != Y_SCALAR || strcmp(v->text, "auto") != 0)
			rc = fail(ps, v->line,
				  "toolchain must be auto or never, not "
				  "\"%.60s\"",
				  v->kind == Y_SCALAR ? v->text : kind_name(v));
	}
	v = value_of(y, "python");
	if (!rc && v)
		rc = take_lang(ps, v, "python", &d->python_version, &d->pip);
	v = value_of(y, "node");
	if (!rc && v)
		rc = take_lang(ps, v, "node", &d->node_version, &d->npm);
	v = value_of(y, "packages");
	if (!rc && v)
		rc = take_list(ps, v, "packages", &d->sys);
	return rc;
}

int setup_decl_parse(const char *text, size_t len, const char *file,
		     struct setup_decl *ret, char *msg, size_t msg_size)
{
	struct parse ps = { .file = file, .msg = msg, .msg_size = msg_size };
	struct setup_decl d = { 0 };
	struct ynode *root = NULL;

	if (msg_size)
		msg[0] = '\0';
	if (len > SETUP_FILE_MAX) {
		snprintf(msg, msg_size, "%s: larger than %zu bytes", file,
			 SETUP_FILE_MAX);
		return -EINVAL;
	}
	if (!yaml_parser_initialize(&ps.p))
		return -ENOMEM;
	yaml_parser_set_input_string(&ps.p, (const unsigned char *)text, len);
	int rc = read_doc(&ps, &root);
	yaml_parser_delete(&ps.p);
	if (!rc && root && !is_null(root)) {
		static const char *const top[] = { "sandbox", NULL };
		if (root->kind != Y_MAP)
			rc = fail(&ps, root->line,
				  "expected a mapping (sandbox: with "
				  "toolchain:, python:, node:, packages:), "
				  "not %s",
				  kind_name(root));
		else if (value_of(root, "sandbox"))
			rc = check_keys(&ps, root, top, "the file");
		if (!rc && root->kind == Y_MAP) {
			const struct ynode *sb = value_of(root, "sandbox");
			rc = take_sandbox(&ps, sb ? sb : root, &d);
		}
	}
	ynode_free(root);
	if (rc) {
		setup_decl_release(&d);
		return rc;
	}
	*ret = d;
	return 0;
}

int setup_decl_load(const char *path, struct setup_decl *ret, char *msg,
		    size_t msg_size)
{
	char *buf = malloc(SETUP_FILE_MAX + 1);
	size_t len = 0;

	if (!buf)
		return -ENOMEM;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(msg, msg_size, "setup file %s: %s", path, strerror(e));
		free(buf);
		return -EINVAL;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, SETUP_FILE_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			snprintf(msg, msg_size, "setup file %s: %s", path,
				 strerror(e));
			close(fd);
			free(buf);
			return -EINVAL;
		}
		len += (size_t)n;
		if (n == 0 || len > SETUP_FILE_MAX)
			break;
	}
	close(fd);
	int rc = setup_decl_parse(buf, len, path, ret, msg, msg_size);
	free(buf);
	return rc;
}

void setup_list_release(struct setup_list *l)
{
	for (size_t i = 0; l->v && i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

void setup_decl_release(struct setup_decl *d)
{
	if (!d)
		return;
	free(d->python_version);
	free(d->node_version);
	d->python_version = d->node_version = NULL;
	setup_list_release(&d->pip);
	setup_list_release(&d->npm);
	setup_list_release(&d->sys);
}

bool setup_decl_empty(const struct setup_decl *d)
{
	return !d->python_version && !d->node_version && !d->pip.n &&
	       !d->npm.n && !d->sys.n;
}

/* ---- the hash ---- */

static void fnv(uint64_t *h, const char *s)
{
	/* each part ends with a NUL, so ("ab","c") and ("a","bc") differ */
	for (const unsigned char *p = (const unsigned char *)s;; p++) {
		*h ^= *p;
		*h *= 0x100000001b3ULL;
		if (!*p)
			break;
	}
}

static void fnv_list(uint64_t *h, const char *kind, const struct setup_list *l)
{
	char count[24];
	snprintf(count, sizeof(count), "%zu", l->n);
	fnv(h, kind);
	fnv(h, count);
	for (size_t i = 0; i < l->n; i++)
		fnv(h, l->v[i]);
}

void setup_decl_hash(const struct setup_decl *d, char buf[17])
{
	uint64_t h = 0xcbf29ce484222325ULL;
	fnv(&h, "osbfs-setup 1");
	fnv(&h, d->toolchain_never ? "never" : "auto");
	fnv(&h, "python");
	fnv(&h, d->python_version ? d->python_version : "");
	fnv(&h, "node");
	fnv(&h, d->node_version ? d->node_version : "");
	fnv_list(&h, "pip", &d->pip);
	fnv_list(&h, "npm", &d->npm);
	fnv_list(&h, "sys", &d->sys);
	snprintf(buf, 17, "%016llx", (unsigned long long)h);
}

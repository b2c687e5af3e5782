/*
 * config.c - the settings file the official OpenSandbox CLI keeps
 * (~/.opensandbox/config.toml), read and edited here for `osb` and osbfs.
 *
 * The reader takes the part of TOML that file uses: [section] headers,
 * key = "string" | 'string' | integer | true | false, comments and blank
 * lines. Anything else is refused with the file and line, so a file is
 * never half understood. Unknown sections and keys are skipped (the
 * official CLI may know more of them); known keys must have their type.
 *
 * The editor (osb_cfgfile_set) changes one line and keeps every other
 * byte, comments too, and replaces the file by a rename.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "osb_i.h"

#define CFG_MAX_SIZE (64 * 1024)

static const char template_text[] =
	"# OpenSandbox settings, shared by the official CLI, osb and osbfs.\n"
	"# Command-line flags win over the environment, which wins over this file.\n"
	"\n"
	"[connection]\n"
	"# api_key = \"...\"\n"
	"# domain = \"localhost:8080\"\n"
	"# protocol = \"http\"\n"
	"# request_timeout = 30\n"
	"# use_server_proxy = false\n"
	"\n"
	"[defaults]\n"
	"# image = \"opensandbox/code-interpreter:latest\"\n"
	"# timeout = \"10m\"  # or \"none\": never expires\n";

enum val_type { VAL_STR, VAL_INT, VAL_BOOL };

struct val {
	enum val_type type;
	char *s;      /* VAL_STR, malloc'd */
	long long i;  /* VAL_INT */
	bool b;       /* VAL_BOOL */
};

/* The keys this file means something for, with their types. */
static const struct known {
	const char *section, *key;
	enum val_type type;
	size_t str_off; /* offset of the char * field, for strings */
} known[] = {
	{ "connection", "api_key", VAL_STR, offsetof(struct osb_cfgfile, api_key) },
	{ "connection", "domain", VAL_STR, offsetof(struct osb_cfgfile, domain) },
	{ "connection", "protocol", VAL_STR, offsetof(struct osb_cfgfile, protocol) },
	{ "connection", "request_timeout", VAL_INT, 0 },
	{ "connection", "use_server_proxy", VAL_BOOL, 0 },
	{ "defaults", "image", VAL_STR, offsetof(struct osb_cfgfile, image) },
	{ "defaults", "timeout", VAL_STR, offsetof(struct osb_cfgfile, timeout) },
};

#define NKNOWN (sizeof(known) / sizeof(known[0]))

static const struct known *find_known(const char *section, const char *key)
{
	for (size_t i = 0; i < NKNOWN; i++)
		if (strcmp(known[i].section, section) == 0 &&
		    strcmp(known[i].key, key) == 0)
			return &known[i];
	return NULL;
}

static const char *type_name(enum val_type t)
{
	return t == VAL_STR ? "a string" : t == VAL_INT ? "an integer" :
							  "true or false";
}

int osb_cfgfile_default_path(char *buf, size_t size)
{
	const char *home = getenv("HOME");
	if (!home || !*home)
		return -ENOENT;
	if ((size_t)snprintf(buf, size, "%s/.opensandbox/config.toml", home) >=
	    size)
		return -ENAMETOOLONG;
	return 0;
}

static bool bare_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-';
}

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* After a value or header: only white space and a comment may follow. */
static bool rest_is_empty(const char *p)
{
	p = skip_ws(p);
	return !*p || *p == '#';
}

static int put_utf8(char *out, unsigned long cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		if (cp >= 0xd800 && cp <= 0xdfff)
			return -1;
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	if (cp > 0x10ffff)
		return -1;
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A quoted string at *pp (basic "..." or literal '...'), on one line.
 * Returns NULL with @why set when it is not one. */
static char *parse_string(const char **pp, const char **why)
{
	const char *p = *pp;
	char q = *p++;
	size_t cap = strlen(p) + 1;
	char *out = malloc(cap), *o = out;

	if (!out) {
		*why = "out of memory";
		return NULL;
	}
	if (q == '"' && p[0] == '"' && p[1] == '"')
		goto fail_multi;
	if (q == '\'' && p[0] == '\'' && p[1] == '\'')
		goto fail_multi;
	for (;;) {
		char c = *p++;
		if (!c) {
			*why = "a string without its closing quote";
			goto fail;
		}
		if (c == q)
			break;
		if ((unsigned char)c < 0x20 && c != '\t') {
			*why = "a control character in a string";
			goto fail;
		}
		if (c != '\\' || q == '\'') {
			*o++ = c;
			continue;
		}
		c = *p++;
		switch (c) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case 'n': *o++ = '\n'; break;
		case 't': *o++ = '\t'; break;
		case 'r': *o++ = '\r'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'u':
		case 'U': {
			int nd = c == 'u' ? 4 : 8;
			unsigned long cp = 0;
			for (int i = 0; i < nd; i++) {
				char h[2] = { p[i], '\0' };
				if (!isxdigit((unsigned char)p[i])) {
					*why = "a bad \\u escape";
					goto fail;
				}
				cp = cp * 16 + strtoul(h, NULL, 16);
			}
			p += nd;
			int n = put_utf8(o, cp);
			if (n < 0) {
				*why = "a \\u escape that is no character";
				goto fail;
			}
			o += n;
			break;
		}
		default:
			*why = "an unknown escape in a string";
			goto fail;
		}
	}
	*o = '\0';
	*pp = p;
	return out;
fail_multi:
	*why = "a multi-line string (not supported here)";
fail:
	free(out);
	return NULL;
}

/* The value at @p: a string, an integer or a boolean, then nothing but a
 * comment. */
static int parse_value(const char *p, struct val *v, const char **why)
{
	memset(v, 0, sizeof(*v));
	if (*p == '"' || *p == '\'') {
		v->type = VAL_STR;
		v->s = parse_string(&p, why);
		if (!v->s)
			return -EINVAL;
	} else if (strncmp(p, "true", 4) == 0 && !bare_char(p[4])) {
		v->type = VAL_BOOL;
		v->b = true;
		p += 4;
	} else if (strncmp(p, "false", 5) == 0 && !bare_char(p[5])) {
		v->type = VAL_BOOL;
		p += 5;
	} else if (isdigit((unsigned char)*p) ||
		   ((*p == '-' || *p == '+') && isdigit((unsigned char)p[1]))) {
		const char *d = p + (*p == '-' || *p == '+');
		char *end;
		if (d[0] == '0' && isdigit((unsigned char)d[1])) {
			*why = "an integer with a leading zero";
			return -EINVAL;
		}
		errno = 0;
		v->type = VAL_INT;
		v->i = strtoll(p, &end, 10);
		if (errno || bare_char(*end) || *end == '.') {
			*why = "a value that is not a string, an integer or "
			       "a boolean";
			return -EINVAL;
		}
		p = end;
	} else {
		*why = *p ? "a value that is not a string, an integer or a "
			    "boolean" :
			    "a key without a value";
		return -EINVAL;
	}
	if (!rest_is_empty(p)) {
		free(v->s);
		v->s = NULL;
		*why = "more after the value";
		return -EINVAL;
	}
	return 0;
}

static int store(struct osb_cfgfile *f, const struct known *k, struct val *v,
		 const char **why)
{
	if (v->type != k->type) {
		*why = type_name(k->type);
		return -EINVAL;
	}
	switch (k->type) {
	case VAL_STR: {
		char **field = (char **)((char *)f + k->str_off);
		free(*field);
		*field = v->s;
		v->s = NULL;
		return 0;
	}
	case VAL_INT:
		if (v->i <= 0 || v->i > 86400 * 365) {
			*why = "a positive number of seconds";
			return -EINVAL;
		}
		f->request_timeout_s = (long)v->i;
		return 0;
	case VAL_BOOL:
		f->use_server_proxy = v->b;
		return 0;
	}
	return -EINVAL;
}

/* Names seen so far, to refuse a key or a section given twice. */
struct seen {
	char **names;
	size_t n;
};

static int seen_add(struct seen *s, const char *section, const char *key)
{
	char name[512];
	snprintf(name, sizeof(name), "%s%s%s", section, key ? "." : "[]",
		 key ? key : "");
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->names[i], name) == 0)
			return -EEXIST;
	char **g = realloc(s->names, (s->n + 1) * sizeof(*g));
	if (!g)
		return -ENOMEM;
	s->names = g;
	s->names[s->n] = strdup(name);
	if (!s->names[s->n])
		return -ENOMEM;
	s->n++;
	return 0;
}

static void seen_release(struct seen *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
}

/* A bare name at *pp (a section or a key), copied into @out. */
static int bare_name(const char **pp, char *out, size_t size)
{
	const char *p = *pp;
	size_t n = 0;
	while (bare_char(p[n]))
		n++;
	if (!n || n >= size)
		return -EINVAL;
	memcpy(out, p, n);
	out[n] = '\0';
	*pp = p + n;
	return 0;
}

/* One line (without its '\n'); *section is the current section. */
static int parse_line(struct osb_cfgfile *f, char *line, char *section,
		      size_t section_size, struct seen *seen, const char **why,
		      char *msg, size_t msg_size)
{
	char key[128];
	const char *p = skip_ws(line);
	size_t len = strlen(line);

	if (len && line[len - 1] == '\r')
		line[--len] = '\0';
	if (!*p || *p == '#')
		return 0;
	if (*p == '[') {
		if (p[1] == '[') {
			*why = "an array of tables (not supported here)";
			return -EINVAL;
		}
		p = skip_ws(p + 1);
		if (bare_name(&p, section, section_size)) {
			*why = "a section name that is not a bare name";
			return -EINVAL;
		}
		p = skip_ws(p);
		if (*p != ']' || !rest_is_empty(p + 1)) {
			*why = "a section header that is not [name]";
			return -EINVAL;
		}
		if (seen_add(seen, section, NULL)) {
			*why = "a section given twice";
			return -EINVAL;
		}
		return 0;
	}
	if (bare_name(&p, key, sizeof(key))) {
		*why = *p == '"' || *p == '\'' ?
			       "a quoted key (not supported here)" :
			       "a line that is not a key = value, a [section] or "
			       "a comment";
		return -EINVAL;
	}
	p = skip_ws(p);
	if (*p == '.') {
		*why = "a dotted key (not supported here)";
		return -EINVAL;
	}
	if (*p != '=') {
		*why = "a key without '='";
		return -EINVAL;
	}
	p = skip_ws(p + 1);
	struct val v;
	int rc = parse_value(p, &v, why);
	if (rc)
		return rc;
	if (seen_add(seen, section, key)) {
		free(v.s);
		*why = "a key given twice";
		return -EINVAL;
	}
	const struct known *k = find_known(section, key);
	if (k)
		rc = store(f, k, &v, why);
	if (rc == -EINVAL) {
		/* say which key wants what */
		snprintf(msg, msg_size, "%s.%s must be %s", section, key, *why);
		*why = msg;
	}
	free(v.s);
	return rc;
}

static int read_file(const char *path, char **ret, struct stat *st,
		     struct osb_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e != ENOENT)
			osb_error_set(err, 0, "", "%s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fd, st) < 0) {
		int e = errno;
		osb_error_set(err, 0, "", "%s: %s", path, strerror(e));
		close(fd);
		return -e;
	}
	if (!S_ISREG(st->st_mode) || st->st_size > CFG_MAX_SIZE) {
		int e = S_ISREG(st->st_mode) ? EFBIG : EINVAL;
		osb_error_set(err, 0, "", "%s: %s", path,
			      e == EFBIG ? "too large for a settings file" :
					   "not a regular file");
		close(fd);
		return -e;
	}
	char *buf = malloc((size_t)st->st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, (size_t)st->st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			osb_error_set(err, 0, "", "%s: %s", path, strerror(e));
			free(buf);
			close(fd);
			return -e;
		}
		if (n == 0 || (len += (size_t)n) == (size_t)st->st_size)
			break;
	}
	close(fd);
	buf[len] = '\0';
	if (strlen(buf) != len) {
		osb_error_set(err, 0, "", "%s: holds a NUL byte", path);
		free(buf);
		return -EINVAL;
	}
	*ret = buf;
	return 0;
}

int osb_cfgfile_parse(const char *path, const char *text,
		      struct osb_cfgfile *ret, struct osb_error *err)
{
	struct osb_cfgfile f = { .use_server_proxy = -1 };
	struct seen seen = { 0 };
	char section[128] = "", msg[256];
	const char *why = NULL;
	int rc = 0, lineno = 0;

	char *copy = strdup(text);
	f.path = strdup(path);
	if (!copy || !f.path) {
		free(copy);
		free(f.path);
		return -ENOMEM;
	}
	f.exists = true;
	for (char *line = copy, *next; line && !rc; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		rc = parse_line(&f, line, section, sizeof(section), &seen, &why,
				msg, sizeof(msg));
	}
	seen_release(&seen);
	explicit_bzero(copy, strlen(text));
	free(copy);
	if (rc) {
		if (rc == -EINVAL)
			osb_error_set(err, 0, "", "%s:%d: %s", path, lineno,
				      why ? why : "cannot be read");
		osb_cfgfile_release(&f);
		return rc;
	}
	*ret = f;
	return 0;
}

int osb_cfgfile_load(const char *path, struct osb_cfgfile *ret,
		     struct osb_error *err)
{
	struct stat st;
	char *text = NULL;

	int rc = read_file(path, &text, &st, err);
	if (rc == -ENOENT) {
		memset(ret, 0, sizeof(*ret));
		ret->use_server_proxy = -1;
		ret->path = strdup(path);
		return ret->path ? 0 : -ENOMEM;
	}
	if (rc)
		return rc;
	rc = osb_cfgfile_parse(path, text, ret, err);
	explicit_bzero(text, strlen(text));
	free(text);
	if (!rc)
		ret->key_exposed = ret->api_key && (st.st_mode & 077);
	return rc;
}

void osb_cfgfile_release(struct osb_cfgfile *f)
{
	if (!f)
		return;
	if (f->api_key)
		explicit_bzero(f->api_key, strlen(f->api_key));
	free(f->api_key);
	free(f->domain);
	free(f->protocol);
	free(f->image);
	free(f->timeout);
	free(f->path);
	memset(f, 0, sizeof(*f));
	f->use_server_proxy = -1;
}

static const char *env_get(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static int bool_word(const char *s)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0)
			return 1;
		if (strcasecmp(s, no[i]) == 0)
			return 0;
	}
	return -1;
}

void osb_config_layer(struct osb_config *cfg, const struct osb_cfgfile *file)
{
	const char *v;

	osb_config_from_env(cfg);
	if (!cfg->protocol)
		cfg->protocol = env_get("OPEN_SANDBOX_PROTOCOL");
	if (!cfg->request_timeout_ms &&
	    (v = env_get("OPEN_SANDBOX_REQUEST_TIMEOUT"))) {
		char *end;
		long s = strtol(v, &end, 10);
		if (!*end && s > 0 && s < 86400 * 365)
			cfg->request_timeout_ms = s * 1000;
	}
	int proxy = -1;
	if ((v = env_get("OPEN_SANDBOX_USE_SERVER_PROXY")))
		proxy = bool_word(v);
	static const struct osb_cfgfile none = { .use_server_proxy = -1 };
	if (!file)
		file = &none;
	if (proxy < 0)
		proxy = file->use_server_proxy;
	if (!cfg->use_server_proxy && proxy > 0)
		cfg->use_server_proxy = true;
	if (!cfg->domain)
		cfg->domain = file->domain;
	if (!cfg->api_key)
		cfg->api_key = file->api_key;
	if (!cfg->protocol)
		cfg->protocol = file->protocol;
	if (!cfg->request_timeout_ms && file->request_timeout_s)
		cfg->request_timeout_ms = file->request_timeout_s * 1000;
}

int osb_duration_parse(const char *s, long *ret_secs)
{
	static const struct {
		char unit;
		long secs;
	} units[] = { { 'h', 3600 }, { 'm', 60 }, { 's', 1 } };
	long long total = 0;
	size_t next = 0;
	const char *p = s;

	if (strcasecmp(s, "none") == 0) {
		*ret_secs = 0;
		return 0;
	}
	if (!*p)
		return -EINVAL;
	while (*p) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		char *end;
		errno = 0;
		long long n = strtoll(p, &end, 10);
		if (errno || n > 100LL * 365 * 86400)
			return -EINVAL;
		if (!*end && p == s) { /* a plain number: seconds */
			total = n;
			break;
		}
		size_t u = next;
		while (u < 3 && units[u].unit != *end)
			u++;
		if (u == 3)
			return -EINVAL;
		total += n * units[u].secs;
		next = u + 1;
		p = end + 1;
	}
	if (total > 100LL * 365 * 86400)
		return -EINVAL;
	*ret_secs = (long)total;
	return 0;
}

/* The directory of @path, made (0700) if missing: ~/.opensandbox. */
static int make_parent(const char *path, struct osb_error *err)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			int e = errno;
			osb_error_set(err, 0, "", "%s: %s", dir, strerror(e));
			return -e;
		}
	}
	return 0;
}

int osb_cfgfile_init(const char *path, bool force, struct osb_error *err)
{
	int rc = make_parent(path, err);
	if (rc)
		return rc;
	int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
		    (force ? O_TRUNC : O_EXCL);
	int fd = open(path, flags, 0600);
	if (fd < 0) {
		int e = errno;
		if (e == EEXIST)
			osb_error_set(err, 0, "",
				      "%s exists already (--force replaces it)",
				      path);
		else
			osb_error_set(err, 0, "", "%s: %s", path, strerror(e));
		return -e;
	}
	rc = osb_write_all(fd, template_text, strlen(template_text));
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc)
		osb_error_set(err, 0, "", "%s: %s", path, strerror(-rc));
	return rc;
}

/* @value as TOML for @k (or, for a key not known here, as it looks:
 * a boolean, an integer, else a string). malloc'd. */
static char *toml_value(const struct known *k, const char *value,
			struct osb_error *err)
{
	enum val_type t;
	char *end;
	errno = 0;
	long long n = strtoll(value, &end, 10);
	bool is_int = *value && !*end && !errno;
	bool is_bool = strcmp(value, "true") == 0 || strcmp(value, "false") == 0;

	t = k ? k->type : is_bool ? VAL_BOOL : is_int ? VAL_INT : VAL_STR;
	if (t == VAL_INT && (!is_int || (k && (n <= 0 || n > 86400 * 365)))) {
		osb_error_set(err, 0, "", "%s.%s must be a positive integer",
			      k->section, k->key);
		return NULL;
	}
	if (t == VAL_BOOL && bool_word(value) < 0) {
		osb_error_set(err, 0, "", "%s.%s must be true or false",
			      k->section, k->key);
		return NULL;
	}
	if (t == VAL_BOOL)
		return strdup(bool_word(value) ? "true" : "false");
	if (t == VAL_INT)
		return strdup(value);
	size_t cap = strlen(value) * 6 + 3;
	char *out = malloc(cap), *o = out;
	if (!out)
		return NULL;
	*o++ = '"';
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		if (*p == '"' || *p == '\\') {
			*o++ = '\\';
			*o++ = (char)*p;
		} else if (*p < 0x20 || *p == 0x7f) {
			o += sprintf(o, "\\u%04x", *p);
		} else {
			*o++ = (char)*p;
		}
	}
	*o++ = '"';
	*o = '\0';
	return out;
}

/* Is @line "KEY =" or the template's "# KEY ="? */
static bool line_sets(const char *line, const char *key)
{
	const char *p = skip_ws(line);
	if (*p == '#')
		p = skip_ws(p + 1);
	size_t n = strlen(key);
	if (strncmp(p, key, n) != 0 || bare_char(p[n]))
		return false;
	return *skip_ws(p + n) == '=';
}

/* The section a header line opens, into @out; false if it is none. */
static bool line_section(const char *line, char *out, size_t size)
{
	const char *p = skip_ws(line);
	if (*p != '[' || p[1] == '[')
		return false;
	p = skip_ws(p + 1);
	return bare_name(&p, out, size) == 0 && *skip_ws(p) == ']';
}

/* The lines of @text, in place ('\n' cut); *ret_n of them. */
static char **split_lines(char *text, size_t *ret_n)
{
	size_t n = 1;
	for (const char *p = text; *p; p++)
		n += *p == '\n';
	char **v = calloc(n + 3, sizeof(*v)); /* room for three more */
	if (!v)
		return NULL;
	n = 0;
	for (char *line = text, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!next && !*line)
			break; /* after the last '\n' */
		v[n++] = line;
	}
	*ret_n = n;
	return v;
}

/* Inserts @s at @at of @v (which has room for it). */
static void insert_line(char **v, size_t *n, size_t at, char *s)
{
	memmove(v + at + 1, v + at, (*n - at) * sizeof(*v));
	v[at] = s;
	(*n)++;
}

/* Sets @key in @section among the lines @v: on its line, or after the
 * template's commented line for it, or at the end of the section, or in
 * a new section at the end. @newline is the "KEY = VALUE" line. */
static void edit_lines(char **v, size_t *n, const char *section,
		       const char *key, char *newline, char *header)
{
	char cur[128] = "";
	bool in = false, found = false;
	size_t last = 0, commented = 0;

	for (size_t i = 0; i < *n; i++) {
		char sec[128];
		if (line_section(v[i], sec, sizeof(sec))) {
			snprintf(cur, sizeof(cur), "%s", sec);
			in = strcmp(cur, section) == 0;
			if (in) {
				found = true;
				last = i;
			}
			continue;
		}
		if (!in)
			continue;
		if (line_sets(v[i], key)) {
			if (*skip_ws(v[i]) != '#') {
				v[i] = newline;
				return;
			}
			if (!commented)
				commented = i;
		}
		if (*skip_ws(v[i]))
			last = i;
	}
	if (commented) {
		insert_line(v, n, commented + 1, newline);
	} else if (found) {
		insert_line(v, n, last + 1, newline);
	} else {
		static char blank[1];
		if (*n && *skip_ws(v[*n - 1]))
			v[(*n)++] = blank;
		v[(*n)++] = header;
		v[(*n)++] = newline;
	}
}

static int write_replace(const char *path, char **v, size_t n, mode_t mode,
			 struct osb_error *err)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	int fd = mkostemp(tmp, O_CLOEXEC);
	int rc = fd < 0 ? -errno : 0;
	if (!rc && fchmod(fd, mode) < 0)
		rc = -errno;
	for (size_t i = 0; !rc && i < n; i++) {
		rc = osb_write_all(fd, v[i], strlen(v[i]));
		if (!rc)
			rc = osb_write_all(fd, "\n", 1);
	}
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0 && close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc) {
		if (fd >= 0)
			unlink(tmp);
		osb_error_set(err, 0, "", "%s: %s", path, strerror(-rc));
	}
	return rc;
}

int osb_cfgfile_set(const char *path, const char *name, const char *value,
		    struct osb_error *err)
{
	char section[128], key[128];
	struct osb_cfgfile f;
	struct stat st;
	const char *p = name;
	char *text = NULL;
	size_t text_len;

	if (bare_name(&p, section, sizeof(section)) || *p != '.' ||
	    (p++, bare_name(&p, key, sizeof(key))) || *p) {
		osb_error_set(err, 0, "",
			      "\"%s\" is not SECTION.KEY (connection.domain, "
			      "defaults.image...)",
			      name);
		return -EINVAL;
	}
	int rc = read_file(path, &text, &st, err);
	if (rc == -ENOENT) {
		text = strdup(template_text);
		st.st_mode = 0600;
		rc = text ? make_parent(path, err) : -ENOMEM;
	}
	if (rc) {
		free(text);
		return rc;
	}
	text_len = strlen(text);
	/* a file this reader refuses is not edited blindly */
	rc = osb_cfgfile_parse(path, text, &f, err);
	if (rc) {
		free(text);
		return rc;
	}
	osb_cfgfile_release(&f);
	char *tv = toml_value(find_known(section, key), value, err);
	size_t hl = strlen(section) + 4, ll = strlen(key) + 4;
	char *header = malloc(hl), *line = tv ? malloc(ll + strlen(tv)) : NULL;
	size_t n = 0;
	char **v = line && header ? split_lines(text, &n) : NULL;
	if (!v) {
		rc = tv ? -ENOMEM : -EINVAL;
		goto out;
	}
	snprintf(header, hl, "[%s]", section);
	snprintf(line, ll + strlen(tv), "%s = %s", key, tv);
	edit_lines(v, &n, section, key, line, header);
	rc = write_replace(path, v, n, st.st_mode & 07777, err);
out:
	free(v);
	free(tv);
	free(line);
	free(header);
	explicit_bzero(text, text_len);
	free(text);
	return rc;
}

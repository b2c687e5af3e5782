/*
 * config.c - the settings file the official OpenSandbox CLI keeps
 * (~/.opensandbox/config.toml), read here for `osb` and osbfs, and the
 * order of the layers: flags > environment > file (config_edit.c
 * writes the file).
 *
 * The reader takes the part of TOML that file uses: [section] headers,
 * key = "string" | 'string' | integer | true | false, comments and blank
 * lines. Anything else is refused with the file and line, so a file is
 * never half understood. Unknown sections and keys are skipped (the
 * official CLI may know more of them); known keys must have their type.
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

#include "config_i.h"
#include "osb_i.h"

#define CFG_MAX_SIZE (64L * 1024)

struct val {
	enum val_type type;
	char *s;     /* VAL_STR, malloc'd */
	long long i; /* VAL_INT */
	bool b;      /* VAL_BOOL */
};

/* The keys this file means something for, with their types. */
static const struct known known[] = {
	{ "connection", "api_key", VAL_STR,
	  offsetof(struct osb_cfgfile, api_key) },
	{ "connection", "domain", VAL_STR,
	  offsetof(struct osb_cfgfile, domain) },
	{ "connection", "protocol", VAL_STR,
	  offsetof(struct osb_cfgfile, protocol) },
	{ "connection", "request_timeout", VAL_INT, 0 },
	{ "connection", "use_server_proxy", VAL_BOOL, 0 },
	{ "defaults", "image", VAL_STR, offsetof(struct osb_cfgfile, image) },
	{ "defaults", "timeout", VAL_STR,
	  offsetof(struct osb_cfgfile, timeout) },
};

#define NKNOWN (sizeof(known) / sizeof(known[0]))

const struct known *cfg_find_key(const char *section, const char *key)
{
	for (size_t i = 0; i < NKNOWN; i++)
		if (strcmp(known[i].section, section) == 0 &&
		    strcmp(known[i].key, key) == 0)
			return &known[i];
	return NULL;
}

static const char *type_name(enum val_type t)
{
	return t == VAL_STR ? "a string" :
	       t == VAL_INT ? "an integer" :
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

bool cfg_bare_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-';
}

const char *cfg_skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* After a value or header: only white space and a comment may follow. */
static bool rest_is_empty(const char *p)
{
	p = cfg_skip_ws(p);
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
		case '"':
			*o++ = '"';
			break;
		case '\\':
			*o++ = '\\';
			break;
		case 'n':
			*o++ = '\n';
			break;
		case 't':
			*o++ = '\t';
			break;
		case 'r':
			*o++ = '\r';
			break;
		case 'b':
			*o++ = '\b';
			break;
		case 'f':
			*o++ = '\f';
			break;
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
	} else if (strncmp(p, "true", 4) == 0 && !cfg_bare_char(p[4])) {
		v->type = VAL_BOOL;
		v->b = true;
		p += 4;
	} else if (strncmp(p, "false", 5) == 0 && !cfg_bare_char(p[5])) {
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
		if (errno || cfg_bare_char(*end) || *end == '.') {
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
		if (v->i <= 0 || v->i > 86400L * 365) {
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
int cfg_bare_name(const char **pp, char *out, size_t size)
{
	const char *p = *pp;
	size_t n = 0;
	while (cfg_bare_char(p[n]))
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
	const char *p = cfg_skip_ws(line);
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
		p = cfg_skip_ws(p + 1);
		if (cfg_bare_name(&p, section, section_size)) {
			*why = "a section name that is not a bare name";
			return -EINVAL;
		}
		p = cfg_skip_ws(p);
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
	if (cfg_bare_name(&p, key, sizeof(key))) {
		*why = *p == '"' || *p == '\'' ?
			       "a quoted key (not supported here)" :
			       "a line that is not a key = value, a [section] "
			       "or "
			       "a comment";
		return -EINVAL;
	}
	p = cfg_skip_ws(p);
	if (*p == '.') {
		*why = "a dotted key (not supported here)";
		return -EINVAL;
	}
	if (*p != '=') {
		*why = "a key without '='";
		return -EINVAL;
	}
	p = cfg_skip_ws(p + 1);
	struct val v;
	int rc = parse_value(p, &v, why);
	if (rc)
		return rc;
	if (seen_add(seen, section, key)) {
		free(v.s);
		*why = "a key given twice";
		return -EINVAL;
	}
	const struct known *k = cfg_find_key(section, key);
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

int cfg_read_file(const char *path, char **ret, struct stat *st,
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

	int rc = cfg_read_file(path, &text, &st, err);
	if (rc == -ENOENT) {
		memset(ret, 0, sizeof(*ret));
		ret->use_server_proxy = -1;
		ret->path = strdup(path);
		return ret->path ? 0 : -ENOMEM;
	}
	if (rc || !text) /* no text: a read that failed without an errno */
		return rc ? rc : -EIO;
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

int cfg_bool_word(const char *s)
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
		if (!*end && s > 0 && s < 86400L * 365)
			cfg->request_timeout_ms = s * 1000;
	}
	int proxy = -1;
	if ((v = env_get("OPEN_SANDBOX_USE_SERVER_PROXY")))
		proxy = cfg_bool_word(v);
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

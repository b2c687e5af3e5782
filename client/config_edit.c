/*
 * config_edit.c - writes the settings file (config.c reads it): `init`
 * makes a commented template, `set` changes one line and keeps every
 * other byte, comments too, and replaces the file by a rename.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_i.h"
#include "osb_i.h"

static const char template_text[] =
	"# OpenSandbox settings, shared by the official CLI, osb and osbfs.\n"
	"# Command-line flags win over the environment, which wins over this "
	"file.\n"
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
	bool is_bool =
		strcmp(value, "true") == 0 || strcmp(value, "false") == 0;

	t = k ? k->type : is_bool ? VAL_BOOL : is_int ? VAL_INT : VAL_STR;
	/* without a known key, t is what the value looks like */
	if (k && t == VAL_INT && (!is_int || n <= 0 || n > 86400L * 365)) {
		osb_error_set(err, 0, "", "%s.%s must be a positive integer",
			      k->section, k->key);
		return NULL;
	}
	if (k && t == VAL_BOOL && cfg_bool_word(value) < 0) {
		osb_error_set(err, 0, "", "%s.%s must be true or false",
			      k->section, k->key);
		return NULL;
	}
	if (t == VAL_BOOL)
		return strdup(cfg_bool_word(value) ? "true" : "false");
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
	const char *p = cfg_skip_ws(line);
	if (*p == '#')
		p = cfg_skip_ws(p + 1);
	size_t n = strlen(key);
	if (strncmp(p, key, n) != 0 || cfg_bare_char(p[n]))
		return false;
	return *cfg_skip_ws(p + n) == '=';
}

/* The section a header line opens, into @out; false if it is none. */
static bool line_section(const char *line, char *out, size_t size)
{
	const char *p = cfg_skip_ws(line);
	if (*p != '[' || p[1] == '[')
		return false;
	p = cfg_skip_ws(p + 1);
	return cfg_bare_name(&p, out, size) == 0 && *cfg_skip_ws(p) == ']';
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
			if (*cfg_skip_ws(v[i]) != '#') {
				v[i] = newline;
				return;
			}
			if (!commented)
				commented = i;
		}
		if (*cfg_skip_ws(v[i]))
			last = i;
	}
	if (commented) {
		insert_line(v, n, commented + 1, newline);
	} else if (found) {
		insert_line(v, n, last + 1, newline);
	} else {
		static char blank[1];
		if (*n && *cfg_skip_ws(v[*n - 1]))
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

	if (cfg_bare_name(&p, section, sizeof(section)) || *p != '.' ||
	    (p++, cfg_bare_name(&p, key, sizeof(key))) || *p) {
		osb_error_set(err, 0, "",
			      "\"%s\" is not SECTION.KEY (connection.domain, "
			      "defaults.image...)",
			      name);
		return -EINVAL;
	}
	int rc = cfg_read_file(path, &text, &st, err);
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
	char *tv = toml_value(cfg_find_key(section, key), value, err);
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

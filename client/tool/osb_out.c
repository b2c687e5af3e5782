/*
 * osb_out.c - results of `osb` as JSON, YAML, an aligned table or raw
 * lines. A command builds a record (a JSON value, kept in cJSON here and
 * in osb_yaml.c, nowhere else in the tool) and cli_print() prints it as
 * the -o format says; most commands print their own raw lines, the rest
 * get a record's (tab-separated cells, "key: value" members).
 *
 * What a table or a line for a terminal shows of the sandbox or the
 * server (names, messages) is escaped (osb_escape()): a name holding
 * an escape sequence or a newline shows as \x1b or \n. JSON is escaped
 * by its own rules, and the raw lines and file contents stay as they are.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_tool.h"

/* A record is a cJSON value; a failed allocation marks the root. */
struct cli_rec;
#define J(r) ((cJSON *)(r))
#define R(j) ((struct cli_rec *)(j))

struct cli_rec *rec_object(void)
{
	return R(cJSON_CreateObject());
}

struct cli_rec *rec_array(void)
{
	return R(cJSON_CreateArray());
}

void rec_free(struct cli_rec *r)
{
	cJSON_Delete(J(r));
}

static void add(struct cli_rec *r, const char *key, cJSON *v)
{
	if (!r || !v) {
		cJSON_Delete(v);
		return;
	}
	if (cJSON_IsArray(J(r)))
		cJSON_AddItemToArray(J(r), v);
	else
		cJSON_AddItemToObject(J(r), key, v);
}

void rec_str(struct cli_rec *r, const char *key, const char *v)
{
	add(r, key, v ? cJSON_CreateString(v) : cJSON_CreateNull());
}

void rec_int(struct cli_rec *r, const char *key, long long v)
{
	add(r, key, cJSON_CreateNumber((double)v));
}

void rec_num(struct cli_rec *r, const char *key, double v)
{
	add(r, key, cJSON_CreateNumber(v));
}

void rec_bool(struct cli_rec *r, const char *key, bool v)
{
	add(r, key, cJSON_CreateBool(v));
}

void rec_time(struct cli_rec *r, const char *key, time_t t)
{
	char buf[64];
	if (!t) {
		rec_str(r, key, NULL);
		return;
	}
	osb_time_format(t, buf, sizeof(buf));
	rec_str(r, key, buf);
}

void rec_kv(struct cli_rec *r, const char *key, const struct osb_kvlist *l)
{
	struct cli_rec *o = rec_add_object(r, key);
	for (size_t i = 0; o && i < l->n; i++)
		rec_str(o, l->items[i].key, l->items[i].value);
}

int rec_json(struct cli_rec *r, const char *key, const char *json)
{
	cJSON *v = cJSON_ParseWithOpts(json, NULL, true);
	if (!v)
		return -EINVAL;
	add(r, key, v);
	return 0;
}

char *rec_to_json(const struct cli_rec *r)
{
	return r ? cJSON_PrintUnformatted(J(r)) : NULL;
}

void rec_move(struct cli_rec *r, const char *key, struct cli_rec *v)
{
	add(r, key, J(v));
}

struct cli_rec *rec_add_object(struct cli_rec *r, const char *key)
{
	cJSON *o = cJSON_CreateObject();
	add(r, key, o);
	return r ? R(o) : NULL;
}

struct cli_rec *rec_add_array(struct cli_rec *r, const char *key)
{
	cJSON *a = cJSON_CreateArray();
	add(r, key, a);
	return r ? R(a) : NULL;
}

static char *escaped(const char *s)
{
	return osb_escape(s, strlen(s));
}

/* A value as a table cell: strings escaped, arrays joined by spaces,
 * null as "-"; @raw: strings as they are, null as "". malloc'd. */
static char *cell(const cJSON *v, bool raw)
{
	if (!v || cJSON_IsNull(v))
		return strdup(raw ? "" : "-");
	if (cJSON_IsString(v))
		return raw ? strdup(v->valuestring) : escaped(v->valuestring);
	if (cJSON_IsBool(v))
		return strdup(cJSON_IsTrue(v) ? "true" : "false");
	if (cJSON_IsArray(v)) {
		size_t len = 1;
		const cJSON *e;
		cJSON_ArrayForEach(e, v)
		{
			char *s = cell(e, raw);
			len += s ? strlen(s) + 1 : 0;
			free(s);
		}
		char *out = calloc(1, len);
		size_t at = 0;
		cJSON_ArrayForEach(e, v)
		{
			char *s = cell(e, raw);
			size_t n = s ? strlen(s) : 0;
			/* the cells may have changed since they were measured
			 */
			if (out && s && at + !!at + n < len) {
				if (at)
					out[at++] = ' ';
				memcpy(out + at, s, n + 1);
				at += n;
			}
			free(s);
		}
		return out;
	}
	return cJSON_PrintUnformatted(v);
}

/* The rows of a key/value table: nested objects flattened as a.b. */
struct kvrows {
	char **keys, **vals;
	size_t n, cap;
	bool raw; /* nothing escaped */
	bool failed;
};

static void kv_add(struct kvrows *t, const char *prefix, const cJSON *o)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, o)
	{
		char key[256];
		snprintf(key, sizeof(key), "%s%s%s", prefix, *prefix ? "." : "",
			 e->string ? e->string : "");
		if (cJSON_IsObject(e) && cJSON_GetArraySize(e) > 0) {
			kv_add(t, key, e);
			continue;
		}
		if (t->n == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 16;
			char **k = realloc(t->keys, cap * sizeof(*k));
			if (k)
				t->keys = k;
			char **v =
				k ? realloc(t->vals, cap * sizeof(*v)) : NULL;
			if (v)
				t->vals = v;
			if (!k || !v) {
				t->failed = true;
				return;
			}
			t->cap = cap;
		}
		t->keys[t->n] = t->raw ? strdup(key) : escaped(key);
		t->vals[t->n] = cell(e, t->raw);
		t->n++;
	}
}

static void print_padded(const char *s, size_t width, bool last)
{
	if (last)
		printf("%s\n", s);
	else
		printf("%-*s  ", (int)width, s);
}

/* An object as KEY VALUE rows; @raw: "key: value" lines. */
static int print_kv(const cJSON *o, bool raw)
{
	struct kvrows t = { .raw = raw };
	size_t w = 3;
	kv_add(&t, "", o);
	for (size_t i = 0; i < t.n; i++)
		if (t.keys[i] && strlen(t.keys[i]) > w)
			w = strlen(t.keys[i]);
	if (!raw) {
		print_padded("KEY", w, false);
		print_padded("VALUE", 0, true);
	}
	for (size_t i = 0; i < t.n; i++) {
		const char *k = t.keys[i] ? t.keys[i] : "?";
		const char *v = t.vals[i] ? t.vals[i] : "?";
		if (raw) {
			printf("%s:%s%s\n", k, *v ? " " : "", v);
		} else {
			print_padded(k, w, false);
			print_padded(v, 0, true);
		}
		free(t.keys[i]);
		free(t.vals[i]);
	}
	free(t.keys);
	free(t.vals);
	return t.failed ? -ENOMEM : 0;
}

/* An array of objects as a table; @raw: tab-separated, no header. */
static int print_rows(const cJSON *a, const char *const *cols, bool raw)
{
	size_t nc = 0, nr = (size_t)cJSON_GetArraySize(a);
	while (cols[nc])
		nc++;
	/* +1: a table without columns is still an allocation */
	size_t *w = calloc(nc + 1, sizeof(*w));
	char **cells = calloc((nr + 1) * nc + 1, sizeof(*cells));
	if (!w || !cells) {
		free(w);
		free(cells);
		return -ENOMEM;
	}
	for (size_t c = 0; c < nc; c++) {
		/* "status.state" is headed STATUS */
		char *h = strndup(cols[c], strcspn(cols[c], "."));
		for (char *p = h; p && *p; p++)
			*p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		cells[c] = h;
	}
	size_t r = 1;
	const cJSON *row;
	cJSON_ArrayForEach(row, a)
	{
		for (size_t c = 0; c < nc; c++) {
			/* a column may name a member of a member: status.state
			 */
			const cJSON *v = row;
			char name[128];
			snprintf(name, sizeof(name), "%s", cols[c]);
			char *save, *part = strtok_r(name, ".", &save);
			for (; part && v; part = strtok_r(NULL, ".", &save))
				v = cJSON_GetObjectItemCaseSensitive(v, part);
			cells[r * nc + c] = cell(v, raw);
		}
		r++;
	}
	for (size_t i = 0; i < r * nc; i++)
		if (cells[i] && strlen(cells[i]) > w[i % nc])
			w[i % nc] = strlen(cells[i]);
	bool failed = false;
	for (size_t i = raw ? nc : 0; i < r * nc; i++) {
		const char *c = cells[i] ? cells[i] : "?";
		bool last = i % nc == nc - 1;
		failed |= !cells[i];
		if (raw)
			printf("%s%c", c, last ? '\n' : '\t');
		else
			print_padded(c, w[i % nc], last);
	}
	for (size_t i = 0; i < r * nc; i++)
		free(cells[i]);
	free(cells);
	free(w);
	return failed ? -ENOMEM : 0;
}

/* @v as JSON indented by two spaces a level (as the official CLI prints
 * it; cJSON's own indents by tabs). */
static int print_json(const cJSON *v, int depth)
{
	bool obj = cJSON_IsObject(v);
	if (!obj && !cJSON_IsArray(v)) {
		char *s = cJSON_PrintUnformatted(v);
		if (!s)
			return -ENOMEM;
		fputs(s, stdout);
		free(s);
		return 0;
	}
	if (!v->child) {
		fputs(obj ? "{}" : "[]", stdout);
		return 0;
	}
	putchar(obj ? '{' : '[');
	for (const cJSON *e = v->child; e; e = e->next) {
		printf("\n%*s", (depth + 1) * 2, "");
		if (obj) {
			cJSON *k = cJSON_CreateString(e->string);
			char *ks = k ? cJSON_PrintUnformatted(k) : NULL;
			cJSON_Delete(k);
			if (!ks)
				return -ENOMEM;
			printf("%s: ", ks);
			free(ks);
		}
		int rc = print_json(e, depth + 1);
		if (rc)
			return rc;
		if (e->next)
			putchar(',');
	}
	printf("\n%*s%c", depth * 2, "", obj ? '}' : ']');
	return 0;
}

int cli_print(struct osb_cli *cli, struct cli_rec *r, const char *const *cols)
{
	int rc = r ? 0 : -ENOMEM;

	bool raw = cli->format == CLI_RAW;

	if (!rc && cli->format == CLI_JSON) {
		rc = print_json(J(r), 0);
		putchar('\n');
	} else if (!rc && cli->format == CLI_YAML) {
		rc = yaml_print(r);
	} else if (!rc && cJSON_IsArray(J(r)) && cols) {
		rc = print_rows(J(r), cols, raw);
	} else if (!rc) {
		rc = print_kv(J(r), raw);
	}
	rec_free(r);
	return rc ? cli_fail(NULL, rc, NULL) : 0;
}

int cli_print_line(struct cli_rec *r)
{
	char *s = r ? cJSON_PrintUnformatted(J(r)) : NULL;
	rec_free(r);
	if (!s)
		return cli_fail(NULL, -ENOMEM, NULL);
	puts(s);
	free(s);
	return 0;
}

void cli_line(const struct osb_cli *cli, const char *fmt, ...)
{
	va_list ap;
	char *text = NULL;

	va_start(ap, fmt);
	int n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	char *esc =
		cli->format == CLI_TABLE ? osb_escape(text, (size_t)n) : NULL;
	printf("%s\n", esc ? esc : text);
	free(esc);
	free(text);
}

void cli_done(struct osb_cli *cli, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (cli->quiet && !CLI_STRUCTURED(cli->format))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!CLI_STRUCTURED(cli->format)) {
		cli_line(cli, "%s", msg);
		return;
	}
	struct cli_rec *r = rec_object();
	rec_str(r, "status", "ok");
	rec_str(r, "message", msg);
	cli_print(cli, r, NULL);
}

/*
 * osb_yaml.c - a result of `osb` (a record: a JSON value) as YAML, for
 * -o yaml: block mappings and sequences indented by two spaces, "{}" and
 * "[]" for empty ones. A string is written plain only when nothing in
 * it could be read back as something else (a number, a boolean, null, a
 * date, a key, a comment, another line): letters, digits and "_./:@+=-",
 * a letter or '/' first, and no YAML keyword. Any other string is
 * double-quoted with JSON's escapes, which YAML's double-quoted style
 * reads the same, so a name from the sandbox (an escape sequence, a
 * newline) comes out escaped, never as it is.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "osb_tool.h"

static bool plain_ok(const char *s)
{
	static const char *const words[] = {
		"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"
	};
	bool letter = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z');
	if (!letter && *s != '/')
		return false;
	for (const char *p = s; *p; p++) {
		bool ok = (*p >= 'a' && *p <= 'z') ||
			  (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || strchr("_./:@+=-", *p);
		if (!ok)
			return false;
	}
	if (s[strlen(s) - 1] == ':')
		return false;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasecmp(s, words[i]) == 0)
			return false;
	return true;
}

/* A string, plain or double-quoted. */
static int put_str(const char *s)
{
	if (plain_ok(s)) {
		fputs(s, stdout);
		return 0;
	}
	cJSON *j = cJSON_CreateString(s);
	char *q = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!q)
		return -ENOMEM;
	fputs(q, stdout);
	free(q);
	return 0;
}

static bool block(const cJSON *v)
{
	return (cJSON_IsObject(v) || cJSON_IsArray(v)) && v->child;
}

/* A value that is no block: a scalar, or an empty mapping or sequence. */
static int put_scalar(const cJSON *v)
{
	if (cJSON_IsString(v))
		return put_str(v->valuestring);
	if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
		fputs(cJSON_IsObject(v) ? "{}" : "[]", stdout);
		return 0;
	}
	char *s = cJSON_PrintUnformatted(v); /* null, true, 42, 4.5 */
	if (!s)
		return -ENOMEM;
	fputs(s, stdout);
	free(s);
	return 0;
}

/* @v (a block) at @indent; @inline_first: its first line goes on the
 * line already begun (after "- "). */
static int put_block(const cJSON *v, int indent, bool inline_first)
{
	bool map = cJSON_IsObject(v);
	int rc = 0;

	for (const cJSON *e = v->child; e && !rc; e = e->next) {
		if (e != v->child || !inline_first)
			printf("%*s", indent, "");
		if (map) {
			rc = put_str(e->string ? e->string : "");
			fputc(':', stdout);
		} else {
			fputc('-', stdout);
		}
		if (rc)
			break;
		if (block(e) && map) {
			fputc('\n', stdout);
			rc = put_block(e, indent + 2, false);
		} else if (block(e)) {
			fputc(' ', stdout);
			rc = put_block(e, indent + 2, true);
		} else {
			fputc(' ', stdout);
			rc = put_scalar(e);
			fputc('\n', stdout);
		}
	}
	return rc;
}

int yaml_print(const struct cli_rec *r)
{
	const cJSON *v = (const cJSON *)r;
	if (block(v))
		return put_block(v, 0, false);
	int rc = put_scalar(v);
	fputc('\n', stdout);
	return rc;
}

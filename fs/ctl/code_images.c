/*
 * code_images.c - a run's images as files beside its output: a file tool
 * cannot decode the base64 of result.json, so each image a result's MIME
 * bundle carries (image/png, image/jpeg and image/gif as base64,
 * image/svg+xml as text) is decoded as the result comes and shown as
 * code/LANG/image-N.EXT (N from 1, in the order they came), until the
 * next run. At most CODE_IMAGES_MAX a run; what the run's output may hold
 * (TEXT_MAX) bounds their bytes.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code_i.h"

static const struct {
	const char *mime, *ext;
	bool base64;
} kinds[] = {
	{ "image/png", "png", true },
	{ "image/jpeg", "jpg", true },
	{ "image/gif", "gif", true },
	{ "image/svg+xml", "svg", false },
};

static int b64_value(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

/* Decodes base64 @s (whitespace skipped, '=' ends it) into a malloc'd
 * *@ret of *@ret_len bytes. 0, -EINVAL (not base64) or -ENOMEM. */
static int b64_decode(const char *s, char **ret, size_t *ret_len)
{
	size_t n = strlen(s);
	char *out = malloc(n / 4 * 3 + 3);
	if (!out)
		return -ENOMEM;
	size_t len = 0;
	unsigned acc = 0;
	int bits = 0;
	for (const char *p = s; *p && *p != '='; p++) {
		if (strchr(" \t\r\n", *p))
			continue;
		int v = b64_value((unsigned char)*p);
		if (v < 0) {
			free(out);
			return -EINVAL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[len++] = (char)((acc >> bits) & 0xff);
		}
	}
	*ret = out;
	*ret_len = len;
	return 0;
}

/* The text of a MIME value: a string, or (Jupyter's way) an array of
 * strings to join. malloc'd, NULL when it is neither or out of memory. */
static char *mime_text(const cJSON *v)
{
	if (cJSON_IsString(v))
		return strdup(v->valuestring);
	if (!cJSON_IsArray(v))
		return NULL;
	size_t n = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, v)
	{
		if (!cJSON_IsString(e))
			return NULL;
		n += strlen(e->valuestring);
	}
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	s[0] = '\0';
	size_t at = 0;
	cJSON_ArrayForEach(e, v)
	{
		size_t l = strlen(e->valuestring);
		memcpy(s + at, e->valuestring, l + 1);
		at += l;
	}
	return s;
}

static size_t images_bytes(const struct code_result *r)
{
	size_t total = 0;
	for (size_t i = 0; i < r->nimages; i++)
		total += r->images[i].len;
	return total;
}

/* Adds @len bytes at @data (taken) as an image with extension @ext. */
static int add_image(struct code_result *r, const char *ext, char *data,
		     size_t len)
{
	if (r->nimages == CODE_IMAGES_MAX ||
	    images_bytes(r) + len > CODE_IMAGES_BYTES) {
		free(data);
		r->truncated = true;
		return 0;
	}
	struct code_image *a =
		realloc(r->images, (r->nimages + 1) * sizeof(*a));
	if (!a) {
		free(data);
		return -ENOMEM;
	}
	r->images = a;
	struct code_image *im = &a[r->nimages++];
	snprintf(im->ext, sizeof(im->ext), "%s", ext);
	im->data = data;
	im->len = len;
	return 0;
}

int code_images_take(struct code_result *r, const char *bundle_json)
{
	cJSON *b = cJSON_Parse(bundle_json);
	int rc = 0;
	for (size_t k = 0;
	     !rc && cJSON_IsObject(b) && k < sizeof(kinds) / sizeof(*kinds);
	     k++) {
		char *text = mime_text(
			cJSON_GetObjectItemCaseSensitive(b, kinds[k].mime));
		if (!text)
			continue;
		char *data = NULL;
		size_t len = 0;
		if (kinds[k].base64) {
			rc = b64_decode(text, &data, &len);
			free(text);
			if (rc == -EINVAL) /* not an image after all */
				rc = 0;
		} else {
			data = text;
			len = strlen(text);
		}
		if (!rc && data)
			rc = add_image(r, kinds[k].ext, data, len);
	}
	cJSON_Delete(b);
	return rc;
}

void code_images_release(struct code_result *r)
{
	for (size_t i = 0; i < r->nimages; i++)
		free(r->images[i].data);
	free(r->images);
	r->images = NULL;
	r->nimages = 0;
}

void code_image_file_name(const struct code_result *r, size_t i, char *buf,
			  size_t size)
{
	snprintf(buf, size, "image-%zu.%s", i + 1, r->images[i].ext);
}

bool code_image_name(struct code *cd, struct code_ctx *cx, size_t i, char *buf,
		     size_t size)
{
	pthread_mutex_lock(&cd->lock);
	bool there = i < cx->r.nimages;
	if (there)
		code_image_file_name(&cx->r, i, buf, size);
	pthread_mutex_unlock(&cd->lock);
	return there;
}

int code_image_find(struct code *cd, struct code_ctx *cx, const char *name)
{
	char mine[32];
	int found = -1;
	pthread_mutex_lock(&cd->lock);
	for (size_t i = 0; i < cx->r.nimages && found < 0; i++) {
		code_image_file_name(&cx->r, i, mine, sizeof(mine));
		if (strcmp(mine, name) == 0)
			found = (int)i;
	}
	pthread_mutex_unlock(&cd->lock);
	return found;
}

int code_image_text(struct code *cd, struct code_ctx *cx, size_t i,
		    struct text *out)
{
	pthread_mutex_lock(&cd->lock);
	int rc = i < cx->r.nimages ? text_add(out, cx->r.images[i].data,
					      cx->r.images[i].len) :
				     -ENOENT;
	pthread_mutex_unlock(&cd->lock);
	return rc;
}

bool code_name_is_image(const char *name)
{
	size_t n = 0;
	if (strncmp(name, "image-", 6) != 0)
		return false;
	const char *p = name + 6;
	while (p[n] >= '0' && p[n] <= '9')
		n++;
	if (!n || p[n] != '.')
		return false;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(*kinds); k++)
		if (strcmp(p + n + 1, kinds[k].ext) == 0)
			return true;
	return false;
}

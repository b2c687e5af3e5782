/*
 * util.c - small helpers of libosb: growable buffers with a cap, URL
 * encoding, key/value lists, errors, clocks, shell quoting, UTF-8 checks,
 * text escaped for a log or a terminal, and the RFC 3339 times of the
 * APIs.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "osb_i.h"

int buf_append(struct buf *b, const void *data, size_t len)
{
	if (b->max && b->len + len > b->max)
		return -EFBIG;
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + len + 1)
			cap *= 2;
		char *p = realloc(b->data, cap);
		if (!p)
			return -ENOMEM;
		b->data = p;
		b->cap = cap;
	}
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	char small[512];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n < sizeof(small))
		return buf_append(b, small, (size_t)n);

	char *big = malloc((size_t)n + 1);
	if (!big)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	int rc = buf_append(b, big, (size_t)n);
	free(big);
	return rc;
}

void buf_release(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

char *buf_steal(struct buf *b)
{
	char *p = b->data;
	if (!p)
		p = strdup("");
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

int url_encode(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char enc[3];
		int rc;
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		    *p == '.' || *p == '~' || *p == '/') {
			rc = buf_append(b, p, 1);
		} else {
			enc[0] = '%';
			enc[1] = hex[*p >> 4];
			enc[2] = hex[*p & 15];
			rc = buf_append(b, enc, 3);
		}
		if (rc)
			return rc;
	}
	return 0;
}

int query_add(struct buf *q, const char *name, const char *value)
{
	int rc = buf_append(q, q->len ? "&" : "?", 1);
	if (!rc)
		rc = url_encode(q, name);
	if (!rc)
		rc = buf_append(q, "=", 1);
	if (!rc)
		rc = url_encode(q, value);
	return rc;
}

void osb_error_clear(struct osb_error *err)
{
	if (!err)
		return;
	err->status = 0;
	err->code[0] = '\0';
	err->message[0] = '\0';
}

void osb_error_set(struct osb_error *err, int status, const char *code,
		   const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	err->status = status;
	snprintf(err->code, sizeof(err->code), "%s", code ? code : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

char *xstrdup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* ---- key/value lists ---- */

int osb_kvlist_add(struct osb_kvlist *l, const char *key, const char *value)
{
	struct osb_kv *items = realloc(l->items, (l->n + 1) * sizeof(*items));
	if (!items)
		return -ENOMEM;
	l->items = items;
	items[l->n].key = strdup(key);
	items[l->n].value = strdup(value ? value : "");
	if (!items[l->n].key || !items[l->n].value) {
		free(items[l->n].key);
		free(items[l->n].value);
		return -ENOMEM;
	}
	l->n++;
	return 0;
}

int osb_kvlist_add_pair(struct osb_kvlist *l, const char *pair)
{
	const char *eq = strchr(pair, '=');
	if (!eq || eq == pair)
		return -EINVAL;
	char *key = strndup(pair, (size_t)(eq - pair));
	if (!key)
		return -ENOMEM;
	int rc = osb_kvlist_add(l, key, eq + 1);
	free(key);
	return rc;
}

const char *osb_kvlist_get(const struct osb_kvlist *l, const char *key)
{
	if (!l)
		return NULL;
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->items[i].key, key) == 0)
			return l->items[i].value;
	return NULL;
}

void osb_kvlist_release(struct osb_kvlist *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].key);
		free(l->items[i].value);
	}
	free(l->items);
	l->items = NULL;
	l->n = 0;
}

/* ---- text ---- */

char *osb_shell_quote(const char *s)
{
	struct buf b = { 0 };
	int rc = buf_append(&b, "'", 1);
	for (const char *p = s; !rc && *p; p++) {
		if (*p == '\'')
			rc = buf_append(&b, "'\\''", 4);
		else
			rc = buf_append(&b, p, 1);
	}
	if (!rc)
		rc = buf_append(&b, "'", 1);
	if (rc) {
		buf_release(&b);
		return NULL;
	}
	return b.data;
}

/* The length of the valid UTF-8 sequence at @s (@len bytes left), its
 * code point in *ret_cp; 0 when it is none (a stray or missing
 * continuation byte, an overlong form, a surrogate, past U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t len, unsigned *ret_cp)
{
	unsigned char c = s[0];
	size_t n;
	unsigned cp;

	if (c < 0x80) {
		*ret_cp = c;
		return 1;
	} else if ((c & 0xe0) == 0xc0) {
		n = 1;
		cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		n = 2;
		cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		n = 3;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (size_t k = 1; k <= n; k++) {
		if (k >= len || (s[k] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[k] & 0x3f);
	}
	if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
	    (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	*ret_cp = cp;
	return n + 1;
}

bool osb_utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned cp;

	for (size_t i = 0, n; i < len; i += n) {
		n = utf8_seq(s + i, len - i, &cp);
		if (!n)
			return false;
	}
	return true;
}

/* Whether code point @cp is kept as it is by osb_escape(): not a control
 * (C0, DEL, C1), nor one that moves or reorders what a terminal shows
 * after it (line and paragraph separators, bidirectional marks,
 * embeddings, overrides and isolates). */
static bool cp_shown(unsigned cp)
{
	return cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp < 0xa0) &&
	       cp != 0x61c && cp != 0x200e && cp != 0x200f &&
	       !(cp >= 0x2028 && cp <= 0x202e) &&
	       !(cp >= 0x2066 && cp <= 0x2069);
}

char *osb_escape(const char *str, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;
	size_t o = 0;
	unsigned cp;

	if (len > (SIZE_MAX - 1) / 4)
		return NULL;
	char *out = malloc(len * 4 + 1); /* "\xNN" at most, per byte */
	if (!out)
		return NULL;
	for (size_t i = 0, n; i < len; i += n) {
		n = utf8_seq(s + i, len - i, &cp);
		if (n && cp_shown(cp) && cp != '\\' && cp != 0xfffd) {
			memcpy(out + o, s + i, n);
			o += n;
			continue;
		}
		const char *named = n != 1     ? NULL :
				    cp == '\\' ? "\\\\" :
				    cp == '\n' ? "\\n" :
				    cp == '\r' ? "\\r" :
				    cp == '\t' ? "\\t" :
						 NULL;
		if (named) {
			memcpy(out + o, named, 2);
			o += 2;
			continue;
		}
		if (cp == 0xfffd && n == 3) {
			/* execd's stand-in for bytes of no UTF-8: shown
			 * as what it is, not as a name's own character */
			memcpy(out + o, "\\ufffd", 6);
			o += 6;
			continue;
		}
		/* each byte of it, so that the bytes can be told */
		if (!n)
			n = 1;
		for (size_t k = 0; k < n; k++) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[s[i + k] >> 4];
			out[o++] = hex[s[i + k] & 15];
		}
	}
	out[o] = '\0';
	return out;
}

bool osb_path_is_safe(const char *path)
{
	if (!path || path[0] != '/')
		return false;
	if (strchr(path, '$'))
		return false;
	return osb_utf8_valid(path, strlen(path));
}

/* ---- time ---- */

static int parse_digits(const char **p, int n, int *ret)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (**p < '0' || **p > '9')
			return -EINVAL;
		v = v * 10 + (**p - '0');
		(*p)++;
	}
	*ret = v;
	return 0;
}

int osb_time_parse(const char *s, struct timespec *ret)
{
	struct tm tm = { 0 };
	int y, mo, d, h, mi, sec;
	long nsec = 0;
	long offset = 0;
	const char *p = s;

	if (!s)
		return -EINVAL;
	if (parse_digits(&p, 4, &y) || *p++ != '-' ||
	    parse_digits(&p, 2, &mo) || *p++ != '-' ||
	    parse_digits(&p, 2, &d) || (*p != 'T' && *p != 't' && *p != ' '))
		return -EINVAL;
	p++;
	if (parse_digits(&p, 2, &h) || *p++ != ':' ||
	    parse_digits(&p, 2, &mi) || *p++ != ':' ||
	    parse_digits(&p, 2, &sec))
		return -EINVAL;
	if (*p == '.') {
		long scale = 100000000L;
		p++;
		while (*p >= '0' && *p <= '9') {
			nsec += (*p - '0') * scale;
			scale /= 10;
			p++;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1;
		int oh, om;
		p++;
		if (parse_digits(&p, 2, &oh))
			return -EINVAL;
		if (*p == ':')
			p++;
		if (parse_digits(&p, 2, &om))
			return -EINVAL;
		offset = sign * (oh * 3600L + om * 60L);
	} /* else: naive, taken as UTC like the lifecycle server does */
	if (*p)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	ret->tv_sec = timegm(&tm) - offset;
	ret->tv_nsec = nsec;
	return 0;
}

void osb_time_format(time_t t, char *buf, size_t size)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int osb_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

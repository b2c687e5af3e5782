/*
 * ctl_text.c - text helpers for the control tree (see ctl_text.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_text.h"
#include "osb.h"

void text_release(struct text *t)
{
	free(t->s);
	t->s = NULL;
	t->len = t->cap = 0;
}

void text_clear(struct text *t)
{
	t->len = 0;
	if (t->s)
		t->s[0] = '\0';
}

static int reserve(struct text *t, size_t need)
{
	if (need > TEXT_MAX)
		return -EFBIG;
	if (need + 1 <= t->cap)
		return 0;
	size_t cap = t->cap ? t->cap : 256;
	while (cap < need + 1)
		cap *= 2;
	char *s = realloc(t->s, cap);
	if (!s)
		return -ENOMEM;
	t->s = s;
	t->cap = cap;
	return 0;
}

int text_add(struct text *t, const void *data, size_t n)
{
	int rc = reserve(t, t->len + n);
	if (rc)
		return rc;
	if (n)
		memcpy(t->s + t->len, data, n);
	t->len += n;
	t->s[t->len] = '\0';
	return 0;
}

int text_sink(void *arg, const void *data, size_t len)
{
	return text_add(arg, data, len);
}

int text_adds(struct text *t, const char *s)
{
	return text_add(t, s, strlen(s));
}

int text_printf(struct text *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	int rc = reserve(t, t->len + (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
	return 0;
}

int text_put(struct text *t, uint64_t off, const void *data, size_t n)
{
	if (off > TEXT_MAX || n > TEXT_MAX - off)
		return -EFBIG;
	size_t end = (size_t)off + n;
	int rc = reserve(t, end > t->len ? end : t->len);
	if (rc)
		return rc;
	if (off > t->len)
		memset(t->s + t->len, 0, (size_t)off - t->len);
	memcpy(t->s + off, data, n);
	if (end > t->len)
		t->len = end;
	t->s[t->len] = '\0';
	return 0;
}

/* The length of the UTF-8 sequence its lead byte @c announces; 0 for a
 * byte that starts none. */
static size_t utf8_len(unsigned char c)
{
	return c < 0x80           ? 1 :
	       (c & 0xe0) == 0xc0 ? 2 :
	       (c & 0xf0) == 0xe0 ? 3 :
	       (c & 0xf8) == 0xf0 ? 4 :
				    0;
}

/* One character of a JSON string at @p: 1 to 4 bytes consumed. */
static int json_char(struct text *t, const unsigned char *p, size_t *used)
{
	size_t n = utf8_len(*p);
	*used = 1;
	switch (*p) {
	case '"':
		return text_adds(t, "\\\"");
	case '\\':
		return text_adds(t, "\\\\");
	case '\n':
		return text_adds(t, "\\n");
	case '\r':
		return text_adds(t, "\\r");
	case '\t':
		return text_adds(t, "\\t");
	}
	if (*p < 0x20 || *p == 0x7f)
		return text_printf(t, "\\u%04x", *p);
	if (n == 1)
		return text_add(t, p, 1);
	/* (a NUL ends a short sequence before osb_utf8_valid reads past) */
	if (!n || strnlen((const char *)p, n) < n ||
	    !osb_utf8_valid((const char *)p, n))
		return text_adds(t, "\\ufffd"); /* one byte of no UTF-8 */
	*used = n;
	/* C1 controls and line separators: escaped, so no terminal that
	 * shows the JSON takes them for controls */
	unsigned cp = n == 2 ? (unsigned)(p[0] & 0x1f) << 6 | (p[1] & 0x3f) :
		      n == 3 ? (unsigned)(p[0] & 0x0f) << 12 |
				       (unsigned)(p[1] & 0x3f) << 6 |
				       (p[2] & 0x3f) :
			       0;
	if ((cp >= 0x80 && cp < 0xa0) || cp == 0x2028 || cp == 0x2029)
		return text_printf(t, "\\u%04x", cp);
	return text_add(t, p, n);
}

int text_json_str(struct text *t, const char *s)
{
	if (!s)
		return text_adds(t, "null");
	int rc = text_add(t, "\"", 1);
	size_t used;
	for (const unsigned char *p = (const unsigned char *)s; !rc && *p;
	     p += used)
		rc = json_char(t, p, &used);
	return rc ? rc : text_add(t, "\"", 1);
}

void text_time_iso(struct timespec ts, char *buf, size_t size)
{
	struct tm tm;
	time_t sec = ts.tv_sec;
	char day[32];

	gmtime_r(&sec, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%03ldZ", day, ts.tv_nsec / 1000000);
}

int text_json_time(struct text *t, struct timespec ts)
{
	char buf[48];
	if (!ts.tv_sec && !ts.tv_nsec)
		return text_adds(t, "null");
	text_time_iso(ts, buf, sizeof(buf));
	return text_json_str(t, buf);
}

/* Length of the UTF-8 sequence a lead byte starts, 0 if not a lead. */
static size_t utf8_seq_len(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

int text_check_command(const char *s, size_t len, bool partial)
{
	if (memchr(s, '\0', len))
		return -EINVAL;
	if (partial) {
		/* a sequence cut at the end by the write's boundary */
		for (size_t back = 1; back <= 3 && back <= len; back++) {
			unsigned char c = (unsigned char)s[len - back];
			if ((c & 0xc0) == 0x80)
				continue;
			if (utf8_seq_len(c) > back)
				len -= back;
			break;
		}
	}
	return osb_utf8_valid(s, len) ? 0 : -EINVAL;
}

bool text_blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!s[i] || !strchr(" \t\r\n\v\f", s[i]))
			return false;
	return true;
}

/*
 * ctl_text.h - small text helpers for the control tree: a growable
 * buffer with a hard cap, JSON string escaping, RFC 3339 times, and the
 * checks a written command must pass (no NUL, valid UTF-8).
 *
 * A struct text is owned by whoever embeds it; text_release() frees it.
 * Nothing here logs or takes locks.
 */
#ifndef OSBFS_CTL_TEXT_H
#define OSBFS_CTL_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The most any one control file holds (a command, a read snapshot). */
#define TEXT_MAX (16u << 20)

struct text {
	char *s; /* NUL-terminated when not NULL */
	size_t len;
	size_t cap;
};

void text_release(struct text *t);
/* Empties @t, keeping its memory. */
void text_clear(struct text *t);
/* Appends @n bytes. -ENOMEM, or -EFBIG past TEXT_MAX. */
int text_add(struct text *t, const void *data, size_t n);
int text_adds(struct text *t, const char *s);
int text_printf(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Writes @n bytes at @off (pwrite-like: a gap is zero-filled). */
int text_put(struct text *t, uint64_t off, const void *data, size_t n);
/* Appends @s as a JSON string ("..." with escapes); NULL gives null.
 * Always valid JSON, whatever @s holds: controls (C0, DEL, C1) and line
 * separators as \u escapes, a byte of no UTF-8 as \ufffd. */
int text_json_str(struct text *t, const char *s);
/* Appends @ts as a JSON string "2026-11-29T08:57:00.123Z", or null for
 * a zero time. */
int text_json_time(struct text *t, struct timespec ts);

/* A download sink (osb_sink_fn) appending to the struct text @arg. */
int text_sink(void *arg, const void *data, size_t len);

/* "2026-11-29T08:57:00.123Z" into @buf (at least 32 bytes). */
void text_time_iso(struct timespec ts, char *buf, size_t size);

/*
 * text_check_command() - whether @len bytes at @s can be a command:
 * 0; -EINVAL for a NUL byte or bytes that are not UTF-8. With @partial,
 * an incomplete UTF-8 sequence at the very end is allowed (more bytes
 * may follow).
 */
int text_check_command(const char *s, size_t len, bool partial);
/* true when @s (of @len bytes) holds only white space. */
bool text_blank(const char *s, size_t len);

#endif /* OSBFS_CTL_TEXT_H */

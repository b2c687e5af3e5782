/*
 * log.c - one place where the daemon reports: a line per event, with the
 * time, to stderr (foreground) or syslog (daemon), to the log file if
 * there is one (log_file=, or where the daemon has no syslog), and into a
 * ring of recent lines that `.osb/log` shows. Thread-safe.
 *
 * Every message is escaped here, where it is made, whatever it holds: a
 * name or an error text from the sandbox can forge no line and send no
 * escape sequence to a terminal (osb_escape(): controls, invalid UTF-8
 * and backslashes as \n, \x1b, \\...; no message of ours needs a raw
 * control byte). So are the lines of the ring, the file, stderr, syslog
 * and last_error.
 *
 * A line is kept whole up to LOG_LINE_MAX bytes (a 4 KiB path and the
 * reason after it). A message identical to the one before (same level,
 * same text) is not written again: it is counted, and written once as
 * "TEXT (repeated N times)" when another message comes, every
 * REPEAT_EVERY_S seconds while the repetition lasts, and at log_flush().
 * So a failure in a tight loop costs a few lines, not the whole ring.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "osb.h"

#define RING 256
/* while a message repeats, its count is written out this often */
#define REPEAT_EVERY_S 10
#define STAMP_MAX 32 /* "2024-01-02T03:04:05Z error: " */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* all below */
static char *ring[RING]; /* malloc'd lines, NULL when empty */
static size_t ring_next, ring_count;
static char *last_error; /* malloc'd, NULL if none */
static long long last_error_when;
static int debug_on;
static int use_syslog;
static int no_stderr;    /* daemonized: stderr is /dev/null */
static int file_fd = -1; /* log_file=, or none */

/* the last message written out, and how often it came since */
static struct {
	char *text; /* malloc'd, NULL if none */
	enum log_level lvl;
	unsigned long long repeats;
	time_t written_at; /* when it or its count was written out */
} prev;

void log_init(int debug)
{
	debug_on = debug;
}

void log_to_syslog(void)
{
	openlog("osbfs", LOG_PID, LOG_DAEMON);
	use_syslog = 1;
}

/* The @i-th oldest line of the ring (i < ring_count). Locked. */
static char *ring_line(size_t i)
{
	return ring[(ring_next + RING - ring_count + i) % RING];
}

/* @line and its newline to the log file, in one write: lines of several
 * daemons appending to one file interleave whole. Locked. */
static void file_line(char *line)
{
	size_t n = strlen(line);
	line[n] = '\n';
	ssize_t w = write(file_fd, line, n + 1);
	line[n] = '\0';
	(void)w;
}

int log_to_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&lock);
	if (file_fd >= 0)
		close(file_fd);
	file_fd = fd;
	/* the lines before it, so the file tells the mount from its start */
	for (size_t i = 0; i < ring_count; i++)
		file_line(ring_line(i));
	pthread_mutex_unlock(&lock);
	return 0;
}

void log_quiet_stderr(void)
{
	pthread_mutex_lock(&lock);
	no_stderr = 1;
	pthread_mutex_unlock(&lock);
}

static const char *const names[] = { "debug", "info", "warning", "error" };
static const int prios[] = { LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR };

/* Where to cut @esc (osb_escape()'s output) to keep it within @max
 * bytes: never inside an escape or a UTF-8 sequence. */
static size_t cut_at(const char *esc, size_t max)
{
	size_t at = 0;
	while (esc[at]) {
		size_t n = 1;
		if (esc[at] == '\\')
			n = esc[at + 1] == 'x' ? 4 : esc[at + 1] == 'u' ? 6 : 2;
		else
			while ((esc[at + n] & 0xc0) == 0x80)
				n++;
		if (at + n > max)
			break;
		at += n;
	}
	return at;
}

/* The message of @fmt, escaped, malloc'd, cut to LOG_LINE_MAX bytes. */
static char *format(const char *fmt, va_list ap)
{
	char *raw = NULL;
	va_list aq;
	va_copy(aq, ap);
	int n = vasprintf(&raw, fmt, aq);
	va_end(aq);
	if (n < 0)
		return NULL;
	char *text = osb_escape(raw, (size_t)n);
	free(raw);
	if (text && strlen(text) > LOG_LINE_MAX)
		memcpy(text + cut_at(text, LOG_LINE_MAX - 3), "...", 4);
	return text;
}

/* What a line starts with: "2024-01-02T03:04:05Z error: ". */
static void stamp_make(char stamp[STAMP_MAX], enum log_level lvl, time_t now)
{
	struct tm tm;
	gmtime_r(&now, &tm);
	size_t n = strftime(stamp, STAMP_MAX, "%Y-%m-%dT%H:%M:%SZ ", &tm);
	snprintf(stamp + n, STAMP_MAX - n, "%s: ", names[lvl]);
}

/* Writes one line out: the ring, and stderr or syslog. Locked. @suffix
 * follows @text (the repeat count), or is "". */
static void put_line(enum log_level lvl, const char *text, const char *suffix,
		     time_t now)
{
	char stamp[STAMP_MAX];
	stamp_make(stamp, lvl, now);

	char *line = NULL;
	if (asprintf(&line, "%s%s%s", stamp, text, suffix) >= 0) {
		free(ring[ring_next]);
		ring[ring_next] = line;
		ring_next = (ring_next + 1) % RING;
		if (ring_count < RING)
			ring_count++;
	}
	if (use_syslog)
		syslog(prios[lvl], "%s%s", text, suffix);
	else if (!no_stderr)
		fprintf(stderr, "osbfs: %s%s%s\n", stamp, text, suffix);
	if (file_fd >= 0 && line)
		file_line(line);
}

/* " (repeated N times)" for the previous message. */
static void repeat_suffix(char *buf, size_t size)
{
	snprintf(buf, size, " (repeated %llu time%s)", prev.repeats,
		 prev.repeats == 1 ? "" : "s");
}

/* Writes out the previous message's count, if it came again. Locked. */
static void put_repeats(time_t now)
{
	char suffix[64];
	if (!prev.repeats)
		return;
	repeat_suffix(suffix, sizeof(suffix));
	put_line(prev.lvl, prev.text, suffix, now);
	prev.repeats = 0;
	prev.written_at = now;
}

static void emit(enum log_level lvl, const char *fmt, va_list ap, bool error)
{
	time_t now = time(NULL);

	if (lvl == LOG_LVL_DEBUG && !debug_on)
		return;
	char *text = format(fmt, ap);
	if (!text)
		return;

	pthread_mutex_lock(&lock);
	if (error) {
		if (!last_error || strcmp(last_error, text) != 0) {
			free(last_error);
			last_error = strdup(text);
		}
		last_error_when = (long long)now;
	}
	if (prev.text && prev.lvl == lvl && strcmp(prev.text, text) == 0) {
		prev.repeats++;
		if (now - prev.written_at >= REPEAT_EVERY_S)
			put_repeats(now);
		free(text);
	} else {
		put_repeats(now);
		put_line(lvl, text, "", now);
		free(prev.text);
		prev.text = text;
		prev.lvl = lvl;
		prev.written_at = now;
	}
	pthread_mutex_unlock(&lock);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(lvl, fmt, ap, false);
	va_end(ap);
}

void log_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(LOG_LVL_ERROR, fmt, ap, true);
	va_end(ap);
}

void log_stderr(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *text = format(fmt, ap);
	va_end(ap);
	if (text)
		fprintf(stderr, "%s\n", text);
	free(text);
}

void log_flush(void)
{
	pthread_mutex_lock(&lock);
	put_repeats(time(NULL));
	pthread_mutex_unlock(&lock);
}

char *log_last_error(long long *ret_when)
{
	pthread_mutex_lock(&lock);
	char *s = strdup(last_error ? last_error : "");
	if (ret_when)
		*ret_when = last_error_when;
	pthread_mutex_unlock(&lock);
	return s;
}

char *log_recent(void)
{
	char pending[64] = "";

	pthread_mutex_lock(&lock);
	/* a count not written out yet shows as the last line */
	size_t extra = 0;
	if (prev.repeats) {
		repeat_suffix(pending, sizeof(pending));
		extra = STAMP_MAX + strlen(prev.text) + strlen(pending) + 1;
	}
	size_t cap = extra + 1, len = 0;
	for (size_t i = 0; i < ring_count; i++)
		cap += strlen(ring_line(i)) + 1;
	char *out = malloc(cap);
	if (out) {
		for (size_t i = 0; i < ring_count; i++) {
			const char *l = ring_line(i);
			size_t n = strlen(l);
			memcpy(out + len, l, n);
			len += n;
			out[len++] = '\n';
		}
		out[len] = '\0';
		if (extra) {
			char stamp[STAMP_MAX];
			stamp_make(stamp, prev.lvl, time(NULL));
			snprintf(out + len, cap - len, "%s%s%s\n", stamp,
				 prev.text, pending);
		}
	}
	pthread_mutex_unlock(&lock);
	return out;
}

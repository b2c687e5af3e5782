/*
 * log.c - one place where the daemon reports: a line per event, with the
 * time, to stderr (foreground) or syslog (daemon), and into a ring of
 * recent lines that `.osb/log` shows. Thread-safe.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "log.h"

#define RING 256
#define LINE 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* all below */
static char ring[RING][LINE + 64];
static size_t ring_next, ring_count;
static char last_error[LINE];
static long long last_error_when;
static int debug_on;
static int use_syslog;

void log_init(int debug)
{
	debug_on = debug;
}

void log_to_syslog(void)
{
	openlog("osbfs", LOG_PID, LOG_DAEMON);
	use_syslog = 1;
}

static const char *const names[] = { "debug", "info", "warning", "error" };
static const int prios[] = { LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR };

static void emit(enum log_level lvl, const char *fmt, va_list ap, bool error)
{
	char text[LINE], line[LINE + 64];
	struct tm tm;
	time_t now = time(NULL);

	if (lvl == LOG_LVL_DEBUG && !debug_on)
		return;
	vsnprintf(text, sizeof(text), fmt, ap);
	gmtime_r(&now, &tm);
	int n = (int)strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%SZ ", &tm);
	snprintf(line + n, sizeof(line) - (size_t)n, "%s: %s", names[lvl],
		 text);

	pthread_mutex_lock(&lock);
	snprintf(ring[ring_next], sizeof(ring[0]), "%s", line);
	ring_next = (ring_next + 1) % RING;
	if (ring_count < RING)
		ring_count++;
	if (error) {
		snprintf(last_error, sizeof(last_error), "%s", text);
		last_error_when = (long long)now;
	}
	if (use_syslog)
		syslog(prios[lvl], "%s", text);
	else
		fprintf(stderr, "osbfs: %s\n", line);
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

void log_last_error(char *buf, size_t size, long long *ret_when)
{
	pthread_mutex_lock(&lock);
	snprintf(buf, size, "%s", last_error);
	if (ret_when)
		*ret_when = last_error_when;
	pthread_mutex_unlock(&lock);
}

char *log_recent(void)
{
	pthread_mutex_lock(&lock);
	size_t cap = ring_count * (LINE + 65) + 1, len = 0;
	char *out = malloc(cap);
	if (out) {
		size_t start = (ring_next + RING - ring_count) % RING;
		for (size_t i = 0; i < ring_count; i++) {
			const char *l = ring[(start + i) % RING];
			size_t n = strlen(l);
			memcpy(out + len, l, n);
			len += n;
			out[len++] = '\n';
		}
		out[len] = '\0';
	}
	pthread_mutex_unlock(&lock);
	return out;
}

/*
 * log.h - the daemon's log: stderr in the foreground, syslog once
 * daemonized, a file if asked (log_file=) or if there is no syslog, and
 * the last lines kept for `.osb/log`. The last error is
 * kept for `.osb/info`'s last_error. A message repeated back to back is
 * written once, then as "... (repeated N times)" (log.c).
 */
#ifndef OSBFS_LOG_H
#define OSBFS_LOG_H

#include <stddef.h>

enum log_level { LOG_LVL_DEBUG, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR };

/* The longest message kept whole: a 4 KiB path and what befell it. */
#define LOG_LINE_MAX 12288

void log_init(int debug);
/* After daemonizing: lines go to syslog instead of stderr. */
void log_to_syslog(void);
/* Lines go to the file @path as well (appended; made 0600 if missing).
 * 0 or -errno. */
int log_to_file(const char *path);
/* After daemonizing without syslog: nothing more to stderr. */
void log_quiet_stderr(void);
void log_msg(enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Logs at ERROR and remembers it as the last error. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)

/* One line on stderr, not in the log (a command's own report: a failed
 * mount, osbfs -u): @fmt's text escaped as the log's lines are, and a
 * newline. */
void log_stderr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes out the count of a message still repeating (at exit). */
void log_flush(void);

/* The last error ("" if none), malloc'd (NULL when out of memory), and
 * its Unix time. */
char *log_last_error(long long *ret_when);
/* The recent lines, oldest first, as one malloc'd text. */
char *log_recent(void);

#endif /* OSBFS_LOG_H */

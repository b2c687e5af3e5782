/*
 * xattr_log.h - the on-disk log of the extended attributes table
 * (xattr_log.c), used by xattr.c only.
 */
#ifndef OSBFS_XATTR_LOG_H
#define OSBFS_XATTR_LOG_H

#include <stddef.h>
#include <sys/types.h>

/* A record: an op letter and up to three fields of any bytes. */
#define XLOG_SET 'S'    /* path, name, value */
#define XLOG_REMOVE 'R' /* path, name */
#define XLOG_DROP 'D'   /* path: it and what is below it */
#define XLOG_MOVE 'M'   /* from, to */

struct xlog_rec {
	char op;
	int n;
	const char *f[3];
	size_t len[3];
};

struct xlog {
	int dir_fd;
	int fd; /* the log, O_APPEND; -1 until xlog_rewrite() or xlog_keep() */
	off_t bytes;
};

/* Opens directory @dir. 0 or -errno. */
int xlog_open(struct xlog *l, const char *dir);
void xlog_close(struct xlog *l);
/* Calls @fn for each whole record of the log, in order (the fields are
 * the callee's to keep: malloc'd, NUL-terminated past their length).
 * The count of lines skipped (torn, damaged), or -errno. */
int xlog_replay(struct xlog *l, void (*fn)(void *arg, struct xlog_rec *r),
		void *arg);
/* Appends @r with one write(2). 0 or -errno. */
int xlog_append(struct xlog *l, const struct xlog_rec *r);
/* Appends to the log as it is (when it cannot be rewritten): 0 or
 * -errno. */
int xlog_keep(struct xlog *l);
/* Rewrites the log as the records @next gives (until it returns 0):
 * written to a temporary file, synced, renamed over the log. 0 or
 * -errno (the old log stays). */
int xlog_rewrite(struct xlog *l, int (*next)(void *arg, struct xlog_rec *r),
		 void *arg);

#endif /* OSBFS_XATTR_LOG_H */

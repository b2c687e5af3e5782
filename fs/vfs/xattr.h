/*
 * xattr.h - the user.* extended attributes the mount keeps: a table in
 * memory, by sandbox path, persisted as an append-only log in the cache
 * slot (CACHE/ID/SLOT/xattrs) beside the write-back journal, so that it
 * survives a crash and a remount of the same sandbox.
 *
 * The sandbox's file API has no extended attributes: the mount's record
 * is the only one, and reading it never costs a request. Names here are
 * whole ("user.x"); the namespace checks are the ops' (ops_xattr.c).
 * Entries follow the names: a rename moves a path and everything below
 * it, an unlink or rmdir drops them, and so does a name the sandbox says
 * is gone (a listing without it, a stat that finds nothing).
 *
 * Locking: one mutex, a leaf of the lock order (osbfs.h, 7; only the log's
 * is taken under it, and it writes the log file under it): the calls
 * may be made with the nodes lock held, and take no other lock. The
 * callback of xattrs_keep_listed() runs under it.
 */
#ifndef OSBFS_XATTR_H
#define OSBFS_XATTR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Linux's limits (XATTR_NAME_MAX, XATTR_SIZE_MAX, XATTR_LIST_MAX): a
 * name, a value, and the names of one file listed together. */
#define XATTR_NAME_LEN_MAX 255
#define XATTR_VALUE_MAX 65536
#define XATTR_NAMES_MAX 65536

struct xattrs;

/*
 * xattrs_open() - the table of slot directory @dir, replayed from its log
 * (a torn or damaged line is skipped, and said), then the log rewritten
 * with what is live (temp file, fsync, rename). @max_bytes caps the total
 * of names, values and paths kept. 0 or -errno, with @msg filled.
 */
int xattrs_open(struct xattrs **ret, const char *dir, int64_t max_bytes,
		char *msg, size_t msg_size);
/* NULL-safe. */
void xattrs_close(struct xattrs *x);

/* Whether the table holds nothing (a cheap check before a path is made);
 * true for a NULL table, as xattrs_drop() and xattrs_move() do nothing on
 * one. */
bool xattrs_empty(struct xattrs *x);

/*
 * xattrs_get() - the value of @name of @path: its size, copied into @buf
 * if @size is big enough (@size 0: the size only). -ENODATA if none,
 * -ERANGE if @size is too small.
 */
ssize_t xattrs_get(struct xattrs *x, const char *path, const char *name,
		   void *buf, size_t size);
/* The names of @path, each NUL-terminated, as listxattr(2) gives them:
 * the total size, copied if @size allows; -ERANGE if too small. */
ssize_t xattrs_list(struct xattrs *x, const char *path, char *buf, size_t size);
/*
 * xattrs_set() - sets @name of @path to @value. @flags: XATTR_CREATE
 * (-EEXIST if it has one), XATTR_REPLACE (-ENODATA if not). -ENOSPC when
 * the file's names would pass XATTR_NAMES_MAX or the table its cap (said
 * in the log), -EIO when the log cannot be written (said too).
 */
int xattrs_set(struct xattrs *x, const char *path, const char *name,
	       const void *value, size_t size, int flags);
/* Removes @name of @path: 0, -ENODATA, -EIO. */
int xattrs_remove(struct xattrs *x, const char *path, const char *name);
/* @path and everything below it are gone. */
void xattrs_drop(struct xattrs *x, const char *path);
/* @from (and what is below it) is now @to; what @to had goes. */
void xattrs_move(struct xattrs *x, const char *from, const char *to);
/*
 * xattrs_keep_listed() - a complete listing of directory @dir came: its
 * children with entries that @listed(name, @arg) says are not in it are
 * gone. Costs nothing when no entry is a child of @dir (a hash of the
 * parent paths says so).
 */
void xattrs_keep_listed(struct xattrs *x, const char *dir,
			bool (*listed)(const char *name, void *arg), void *arg);

#endif /* OSBFS_XATTR_H */

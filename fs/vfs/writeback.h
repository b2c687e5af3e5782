/*
 * writeback.h - uploads of dirty files: after the last close and
 * writeback_delay, at once on fsync and sync, retried with backoff while
 * the sandbox cannot take them. Nothing is dropped: a file stays dirty
 * (and journaled, see cache.h) until the sandbox has its bytes.
 */
#ifndef OSBFS_WRITEBACK_H
#define OSBFS_WRITEBACK_H

#include <time.h>

#include "osbfs.h"

struct node;
struct rtimes;

int wb_start(struct osbfs *fs);
/* Stops the workers (after wb_flush_all, at unmount). */
void wb_stop(struct osbfs *fs);

/* Where the sandbox's version of @path goes when it conflicts with ours,
 * at @when: PATH.conflict-<UTC time>, the name shortened to fit 255 bytes
 * (cut between characters, with a hash of the whole name). malloc'd, NULL
 * when out of memory. */
char *wb_conflict_path(const char *path, time_t when);

/* The server answers again: files whose uploads failed are tried now,
 * not after their backoff. */
void wb_retry_now(struct osbfs *fs);
/* A file was closed (or recovered): upload it after @delay_ms. */
void wb_schedule(struct osbfs *fs, struct cfile *cf, long delay_ms);
/*
 * wb_flush() - upload @cf's changes made so far now and wait: 0 when the
 * sandbox has them, -EIO when the attempt failed (the data stays dirty
 * and is retried in the background).
 */
int wb_flush(struct osbfs *fs, struct cfile *cf);
/* wb_flush() of the bytes only (fsync): the times may follow later. */
int wb_flush_bytes(struct osbfs *fs, struct cfile *cf);
/* The same for every dirty file (and the times of directories that wait
 * for them, and the removal of copies left behind); @timeout_ms < 0
 * waits as long as it takes. -EIO if something could not be stored,
 * -ETIMEDOUT. */
int wb_flush_all(struct osbfs *fs, long timeout_ms);
/*
 * wb_dir_times() - the user sets times @t of directory @n (its path and
 * times; the node is held). While a change made here below it is still
 * to reach the sandbox (an upload, a directory to make, a copy left by a
 * save to remove), they wait for it, set later by the write-back, shown
 * meanwhile: returns 1. Else they are set now, after any setting of
 * older ones on its way: 0 or -errno, and *ret_seq is @n's times_seq
 * they are of (a name that came or went since moved them again).
 */
int wb_dir_times(struct osbfs *fs, struct node *n, struct rtimes *t,
		 uint64_t *ret_seq);
/* A copy was left behind: a worker is to wake when it is due. */
void wb_lefts_added(struct osbfs *fs);
/* Removes the copies left behind by resent files (cache.h) at or below
 * @below, or if it is NULL those due by @now, in as few requests as the
 * paths allow. The caller holds fs->path_lock for writing. 0 or -errno
 * (they are tried again later). */
int wb_lefts_remove(struct osbfs *fs, const char *below, long long now);
/* wb_flush() of @n files at once (in as few batches as they fit), or
 * wb_flush_bytes() if @bytes. */
int wb_flush_list(struct osbfs *fs, struct cfile *const *cfs, size_t n,
		  bool bytes);
/* The files whose last upload failed, for a message: "PATH (reason), ..."
 * (at most three named) into @buf. Returns their count. */
size_t wb_describe_failures(struct osbfs *fs, char *buf, size_t size);

struct wb_stats {
	size_t dirty_files;
	size_t dirty_dirs; /* directories made or given a mode here */
	int64_t dirty_bytes;
	size_t inflight;
	uint64_t uploaded_files;
	uint64_t uploaded_bytes;
	uint64_t failed_uploads;
	uint64_t conflicts;
};
void wb_get_stats(struct osbfs *fs, struct wb_stats *ret);
/* "N file(s)", with " and M directory(ies)" when some wait too. */
void wb_describe_count(const struct wb_stats *st, char *buf, size_t size);

#endif /* OSBFS_WRITEBACK_H */

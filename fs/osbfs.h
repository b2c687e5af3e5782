/*
 * osbfs.h - the daemon's shared state: what main() builds and every
 * module reaches through the FUSE userdata.
 *
 * Locks, and the one order they are taken in. Each is declared beside
 * what it guards; a thread holding one takes only locks further down
 * this list, never one above it:
 *
 *   1. a control file handle's lock (ctl_i.h): held across a whole
 *      read or write of that handle, sandbox requests included
 *   2. libfuse's request lock (an interrupt callback), then the jobs
 *      table's js->lock (jobs_i.h), then libfuse's session lock
 *      (fuse_req_interrupted): the waits of jobs_wait.c
 *      The code contexts' cd->lock (code_i.h) is taken under 1 too
 *      (a close of input waits on its condition), never with 2 to 6.
 *      So is the setup's s->lock (setup.c: a start waits on its
 *      condition for the setup to end); only the log's is taken under it.
 *   3. fs->path_lock (below): held for writing by a rename, unlink or
 *      rmdir across its sandbox request, for reading by an upload batch; or
 *      pull.c's pull_lock, held across a pull's requests (the two are
 *      never held together); then the write-back's times_lock
 *      (writeback.c), held across a command setting directory times,
 *      taken under path_lock or alone
 *      The owners' learn_lock (owners.c), held across the command that
 *      reads the sandbox's user and group tables, is taken with none of
 *      4 to 6 held, and takes only 7 under it.
 *   4. cf->fetch_lock (cache_i.h): one download into a file at a time;
 *      taken with neither 5 nor 6 held
 *   5. the node table's lock (node.h)
 *   6. the cache's lock (cache_i.h), with its condition variables
 *   7. leaves, under which nothing else is taken: fs->statfs_lock, the
 *      lifecycle's (life.c), the server watch's (watch.c), the kernel
 *      notifier's queue (notify.c), the background puller's (pull.c),
 *      the change feed's (feed.c), the extended attributes' table's
 *      (xattr.c: only the log's is taken under it), the owners' tables'
 *      (owners.c) and the log's (log.c)
 *
 * js->lock and the locks 3 to 6 are never held together. Apart from 1
 * and 3, no lock is held across a request to the sandbox.
 */
#ifndef OSBFS_H
#define OSBFS_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "cache.h"
#include "node.h"
#include "options.h"
#include "osb.h"

struct writeback;
struct ctl;
struct lifecycle;
struct notifier;
struct watch;
struct xattrs;
struct feed;

struct osbfs {
	struct osbfs_options *opt;
	struct osb_client *client;
	struct osb_sandbox *sb;
	/* the sandbox mounted: moved by a restore (restore.c), read by any
	 * thread; every id it held stays valid until the unmount */
	const char *_Atomic sandbox_id;
	const char *root; /* DIR in the sandbox */
	struct fuse_session *se;
	struct node_table nodes;
	struct cache *cache; /* file content (cache.h) */
	struct writeback *wb;
	struct ctl *ctl;
	struct lifecycle *life;
	struct notifier *notifier;
	struct watch *watch;
	/* the user.* extended attributes the mount keeps (xattr.h) */
	struct xattrs *xattrs;
	struct feed *feed;
	/* the sandbox's owners as local numbers (owners.h) */
	struct owners *owners;
	uid_t uid; /* the mount's user: the sandbox's root (owners.h) */
	gid_t gid;

	/* held for reading by an upload batch (its paths must not move),
	 * for writing by a rename, unlink or rmdir of what may be
	 * uploading */
	pthread_rwlock_t path_lock;

	/* statfs, cached */
	pthread_mutex_t statfs_lock; /* guards the two below */
	struct statvfs statfs;
	long long statfs_expiry;

	unsigned pending_dir_times; /* dirs with times_pending (nodes lock) */
	atomic_uint_fast64_t ops;   /* FUSE requests served */
	atomic_llong last_activity; /* monotonic ms of the last use */
};

/* The errno a FUSE op returns for a client error: network trouble is
 * EIO, the rest passes through. */
int fs_errno(int client_rc);

#endif /* OSBFS_H */

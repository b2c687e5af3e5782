/*
 * osbfs.h - the daemon's shared state: what main() builds and every
 * module reaches through the FUSE userdata.
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

struct osbfs {
	struct osbfs_options *opt;
	struct osb_client *client;
	struct osb_sandbox *sb;
	const char *sandbox_id;
	const char *root;            /* DIR in the sandbox */
	struct fuse_session *se;
	struct node_table nodes;
	struct cache cache;
	struct writeback *wb;
	struct ctl *ctl;
	struct lifecycle *life;
	struct notifier *notifier;
	struct watch *watch;
	uid_t uid;                   /* owner shown for every file */
	gid_t gid;

	/* held for reading by an upload batch (its paths must not move),
	 * for writing by a rename or unlink of what may be uploading */
	pthread_rwlock_t path_lock;

	/* statfs, cached */
	pthread_mutex_t statfs_lock; /* guards the two below */
	struct statvfs statfs;
	long long statfs_expiry;

	unsigned pending_dir_times;  /* dirs with times_pending (nodes lock) */
	atomic_uint_fast64_t ops;    /* FUSE requests served */
	atomic_llong last_activity;  /* monotonic ms of the last use */
};

/* The errno a FUSE op returns for a client error: network trouble is
 * EIO, the rest passes through. */
int fs_errno(int client_rc);

#endif /* OSBFS_H */

/*
 * snaps_i.h - what snaps.c (the table, listings, info, wait) and
 * snaps_make.c (mkdir and rmdir) share.
 */
#ifndef OSBFS_SNAPS_I_H
#define OSBFS_SNAPS_I_H

#include <pthread.h>
#include <stdatomic.h>

#include "osb.h"
#include "snaps.h"

/* the sandboxes left by restores whose snapshots are listed, at most */
#define SNAPS_LINEAGE_MAX 8

struct snap {
	uint64_t serial;
	char id[SNAP_DIR_MAX];
	char dir[SNAP_DIR_MAX]; /* its name here */
	char *name;             /* the server's, may be NULL */
	char state[32];
	char *reason, *message; /* may be NULL */
	struct timespec created;
	uint64_t added; /* s->gen when this mount made it, else 0 */
};

struct snaps {
	struct osbfs *fs;
	pthread_mutex_t lock; /* a leaf: the fields below */
	struct snap *v;       /* newest first */
	size_t n, cap;
	uint64_t next_serial;
	uint64_t gen;        /* counts the snapshots this mount made */
	long long listed_ms; /* mono_ms() of the last listing; 0: never */
	/* the sandboxes this mount was on before a restore, the latest
	 * last: their snapshots are listed too */
	char lineage[SNAPS_LINEAGE_MAX][SNAP_DIR_MAX];
	size_t nlineage;
	atomic_bool stop;
};

/* One listing of the sandbox's snapshots (of @name only, unless NULL),
 * every page: *ret (to release) newest first. Not logged. */
int snaps_fetch(struct snaps *s, const char *name,
		struct osb_snapshot_list *ret, struct osb_error *err);
/* Adds what the server said of a snapshot this mount made (its fields
 * move to the table) and gives its serial. */
int snaps_add(struct snaps *s, struct osb_snapshot *o, uint64_t *ret_serial);
/* Drops @id from the table. */
void snaps_drop(struct snaps *s, const char *id);
/* The id of the one shown as @dir into @id (SNAP_DIR_MAX). */
int snaps_id_of(struct snaps *s, const char *dir, char *id);
/* Whether @name is the name (or the directory) of one of them. */
bool snaps_taken(struct snaps *s, const char *name);

#endif /* OSBFS_SNAPS_I_H */

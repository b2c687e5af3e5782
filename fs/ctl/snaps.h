/*
 * snaps.h - the control tree's snapshots/ (README.md, "Checkpoints
 * through files"): the mounted sandbox's snapshots on the lifecycle
 * server (docs/SERVER.md §2.10), one directory each, named by the
 * snapshot's name (its id when it has none, or a name the tree cannot
 * show), with info and wait inside.
 *
 * The table is what the last listing said, plus what this mount made or
 * removed since; a listing is one request (a page of 200) and serves
 * every name, so `ls -l` costs one. Each snapshot keeps its serial (its
 * inode group) while it is listed.
 *
 * Every function is safe from any thread; none holds the table's lock
 * (a leaf) across a request.
 */
#ifndef OSBFS_SNAPS_H
#define OSBFS_SNAPS_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "ctl_text.h"

/* a name the mount gives: 1 to 63 bytes */
#define SNAP_NAME_MAX 63
/* what a directory here may be called: a name, or an id */
#define SNAP_DIR_MAX 256

struct osbfs;
struct snaps;

int snaps_new(struct osbfs *fs, struct snaps **ret);
void snaps_free(struct snaps *s); /* NULL-safe */
/* The waits answer EINTR from now on (at unmount). */
void snaps_stop(struct snaps *s);

/* The mount moved off sandbox @old_id (a restore): its snapshots stay
 * listed (the last SNAPS_LINEAGE_MAX sandboxes left), beside the new
 * sandbox's, at a request each; the next refresh lists them all. */
void snaps_restored(struct snaps *s, const char *old_id);
/* Lists them again if the last listing is older than @max_age_ms.
 * Errors are logged; the table stays as it was. */
void snaps_refresh(struct snaps *s, long long max_age_ms);
/* The next refresh lists them whatever their age (ctl's invalidate). */
void snaps_forget_age(struct snaps *s);

struct snap_entry {
	char dir[SNAP_DIR_MAX]; /* its name here */
	uint64_t serial;
	struct timespec created;
};
/* Every one, newest first; *ret malloc'd (NULL when empty). */
int snaps_list(struct snaps *s, struct snap_entry **ret, size_t *ret_n);
/* The serial of the one shown as @dir: 0 or -ENOENT. */
int snaps_find(struct snaps *s, const char *dir, uint64_t *ret_serial);
bool snaps_exists(struct snaps *s, uint64_t serial);
/* Its creation time (zero if unknown). */
struct timespec snaps_created(struct snaps *s, uint64_t serial);

/*
 * snaps_name_valid() - whether mkdir may give @name: 1 to SNAP_NAME_MAX
 * of A-Z a-z 0-9 . _ -, a letter or digit at both ends. The API takes any
 * string; this is what every runtime keeps as it is (a Kubernetes label
 * value's rule) and what a directory here can be called.
 */
bool snaps_name_valid(const char *name);

/*
 * snaps_make() - mkdir snapshots/@name: sends everything written
 * through the mount (as ctl's sync), then asks for a snapshot of the
 * sandbox named @name; returns once the server has accepted it (it is
 * Creating). An answer that was lost is settled by listing the
 * sandbox's snapshots of that name, never by asking again. -EINVAL
 * (name), -EEXIST (taken), -EOPNOTSUPP (the server has no snapshots),
 * -EBUSY (the sandbox is not running), -EIO; each logged. *ret_serial
 * is the new one's.
 */
int snaps_make(struct snaps *s, const char *name, uint64_t *ret_serial);
/* rmdir snapshots/@dir: deletes the snapshot. -ENOENT, -EBUSY (still
 * Creating), -EIO; logged. */
int snaps_remove(struct snaps *s, const char *dir);

/* info: JSON id, name, state, reason, message, created_at, size (null:
 * the API gives none). From the table, listed again when older than a
 * second. */
int snaps_info_json(struct snaps *s, uint64_t serial, struct text *out);
/*
 * snaps_wait() - answers the read @req of wait once the snapshot has left
 * Creating: "Ready\n", or "Failed: WHY\n" (another state: its name).
 * Blocks the calling thread, asking for the snapshot with growing pauses
 * (a request each); an interrupt (Ctrl-C) or snaps_stop() answers EINTR,
 * a snapshot that is gone ENOENT.
 */
void snaps_wait(struct snaps *s, uint64_t serial, fuse_req_t req, size_t size,
		off_t off);

#endif /* OSBFS_SNAPS_H */

/*
 * special.h - setuid, setgid and sticky: the special mode bits, which
 * execd's listings and stats never report (docs/SERVER.md §5.1).
 *
 * A node knows its special bits in one of three ways. KNOWN: learned
 * from the sandbox (a command's stat, a scan: one command that finds the
 * entries of a listed subtree that have any, or the command that sets
 * times after an upload, which prints each file's ctime and mode), and
 * true while the sandbox's ctime of the file is the one they came with;
 * every change of mode (and of owner, and a write that clears setuid)
 * moves the ctime. OURS: this mount has just set them (a chmod) or
 * changed the file otherwise, and does not know the ctime that left
 * (the same moment the cache's validator does not: ops.h
 * node_changed_here); the next report asked after that gives it, if it
 * comes within attr_timeout (the staleness the mount may show anyway) and
 * no command ran meanwhile (a job's end drops every cache, and makes OURS
 * UNKNOWN: node_invalidate). UNKNOWN: never learned, or the ctime moved
 * since: the bits last known are still shown, and a listing that brings
 * such entries asks one command for all of them (special_ask_run), a lone
 * stat asks by command instead of the file API (ops.c node_attr).
 *
 * So a listing of what the mount knows costs no command; one that brings
 * new entries, or entries someone else changed, costs one more.
 *
 * Everything here but special_ask_run() runs with the nodes lock held.
 */
#ifndef OSBFS_SPECIAL_H
#define OSBFS_SPECIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node.h"

struct osbfs;
struct held;

/* Whether report @a of @n (asked at change_seq @asked), with what @n
 * knows, tells its special bits: what special_take() would return. */
bool special_known(const struct node *n, const struct fattr *a, uint64_t asked);
/*
 * special_take() - report @a of @n, asked when the table's change_seq
 * was @asked, gets the special bits @n knows in its mode (a report that
 * says them teaches them). False when they are not known: @n is then
 * UNKNOWN and @a has the bits last known.
 */
bool special_take(struct node *n, struct fattr *a, uint64_t asked);
/* This mount has just given @n the mode @mode in the sandbox: its bits
 * are known, since when node_changed_here() (or special_changed()) says
 * next. */
void special_set(struct node *n, mode_t mode);
/*
 * special_changed() - node_changed_here()'s part: a change of this mount
 * moved @n's ctime to @ctime ({0, 0} or NULL: not known). Bits known
 * before stay known: with @ctime, or with the ctime of the first report
 * asked after the change (n->change_gen), if it comes within
 * attr_timeout.
 */
void special_changed(struct osbfs *fs, struct node *n,
		     const struct timespec *ctime);
/* A command of this mount saw @n with the mode @mode (all twelve bits)
 * and @ctime, after its change (remote_times): its bits are known. */
void special_seen(struct node *n, mode_t mode, const struct timespec *ctime);
/* A change of this mount moved @n's ctime in the sandbox and nothing
 * else (an entry made or removed in the directory, its times set, a
 * rename), its change_gen or not: the bits known stay, as above. */
void special_touched(struct osbfs *fs, struct node *n);

/* The same for the directory the sandbox path @path is in (takes the
 * nodes lock). */
void special_touched_dir_of(struct osbfs *fs, const char *path);

/* The root's bits as the last mount in this cache slot knew them, with
 * the ctime they go with (at start); and saving them, after a report of
 * the root (neither with the nodes lock held). */
void special_root_load(struct osbfs *fs);
void special_root_save(struct osbfs *fs);

/* The entries of one listing whose special bits a command is to ask. */
struct special_ask {
	uint64_t id;
	struct node **n;
	size_t count, cap;
};
/* Adds @n, just taken from report @a (a reference is held until
 * special_ask_run). -ENOMEM. */
int special_ask_add(struct node_table *nt, struct special_ask *sa,
		    struct node *n, const struct fattr *a);
/*
 * special_ask_run() - one command finds the entries below @h (a listed
 * directory), down to @depth levels, that have special bits, and @sa's
 * nodes learn theirs (those it does not name have none). Then releases
 * @sa. Takes the nodes lock; a failure leaves them UNKNOWN.
 */
void special_ask_run(struct osbfs *fs, struct held *h, int depth,
		     struct special_ask *sa);

#endif /* OSBFS_SPECIAL_H */

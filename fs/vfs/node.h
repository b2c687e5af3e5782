/*
 * node.h - the inode table: one node per name of the sandbox tree seen
 * through the mount, with its cached attributes and (for a directory) its
 * cached listing.
 *
 * A node's inode number is given once and kept for as long as the mount
 * lives and the name exists (git compares inode numbers), also when the
 * kernel forgets it. Nodes form a tree by parent pointer and name, so a
 * rename moves a whole subtree by relinking one node.
 *
 * Locking: every field of every node, and the tables, are guarded by
 * nt->lock (one mutex: critical sections are short and never do I/O;
 * its place in the lock order is in osbfs.h).
 * A node stays allocated while it has kernel lookups, open handles, or
 * in-flight references (node_ref/node_unref), or while it still has a
 * name in the tree.
 */
#ifndef OSBFS_NODE_H
#define OSBFS_NODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "osb.h"

#define NODE_ROOT_INO 1

/* What the sandbox says of one name. */
struct fattr {
	enum osb_ftype type;
	int64_t size;
	mode_t mode;    /* permission bits (and special bits) */
	bool mode_full; /* the report says the special bits too (a
			   command's stat): the file API never does */
	struct timespec mtime;
	struct timespec ctime;
	char owner[64]; /* names in the sandbox */
	char group[64];
};

struct cfile;

/* How a node knows its special mode bits (special.h). */
enum special_state {
	SPECIAL_UNKNOWN,
	SPECIAL_OURS,
	SPECIAL_KNOWN,
};

struct node {
	uint64_t ino;
	struct node *parent; /* NULL for the root and for unlinked nodes */
	char *name;
	uint64_t nlookup; /* the kernel's references */
	unsigned refs;    /* ours: handles, in-flight operations */
	bool unlinked;    /* no longer in the tree */

	/* attribute cache */
	bool attr_valid;
	long long attr_expiry; /* monotonic ms */
	struct fattr attr;     /* attr.ctime is the sandbox's, as asked after
				  our last change of it, or {0, 0} */
	/* our latest change of it: the ctime shown for it ({0, 0}: none),
	 * and the sandbox's ctime that change left ({0, 0} until the first
	 * answer asked after it says it); shown while the sandbox's ctime
	 * is that one (ARCHITECTURE.md "A file's ctime holds") */
	struct timespec ctime_here;
	struct timespec ctime_ours;
	/* negative entry: the name is known not to exist until neg_expiry */
	long long neg_expiry;
	/* monotonic ms when the change feed last said it changed: what was
	 * asked before that is not held by the feed (feed.h) */
	long long feed_mark;

	/* directory listing cache: children listed at list_gen */
	bool list_valid;
	long long list_expiry;
	uint64_t list_gen;   /* bumped when the listing is refetched */
	uint64_t listed_gen; /* the parent's list_gen when we were in it */
	uint64_t change_gen; /* the table's change_seq at our last change
				under this dir, or of this node (an
				upload landed, times were set): an answer
				asked for before it is older than what we
				know */
	uint64_t own_gen;    /* the same, for a change of its own
				attributes only (node_changed_here) */
	bool listing;        /* a listing is being fetched (dir_load) */
	long long listed_at; /* monotonic ms when the last listing that
				made list_valid was asked for */
	size_t list_count;   /* children at the last listing, give or
				take our own changes since */
	bool walk_cut;       /* its subtree is too big for one listing
				(listing.c) */
	bool list_ours;      /* the listing is what we made (a new
				directory), not an answer of the sandbox */

	char *link_target; /* cached readlink */

	/* hard links made through the mount (ARCHITECTURE.md "Hard
	 * links"): a second name of a file is a node of its own in the
	 * tree, with link_to its file's node, which every op and the kernel
	 * see (this node's ino is never given out); that node chains its
	 * other names from links, by link_next */
	struct node *link_to;
	struct node *links;
	struct node *link_next;
	/* a second name of a file not in the sandbox yet: the link is made
	 * there after the file's upload (writeback.c), and link_id is its
	 * journal record's (cache.h cache_link_add; 0: none) */
	bool link_later;
	uint64_t link_id;
	/* another name of a file that the sandbox linked itself, as a scan
	 * found it (special.c): a change reported there has the next
	 * listing's scan say whether it still is */
	bool link_seen;

	/* setuid, setgid and sticky, which the file API never reports
	 * (special.h): the bits last known, shown in attr.mode */
	mode_t special;
	unsigned char special_state;   /* enum special_state */
	struct timespec special_ctime; /* KNOWN: they hold while the
					  sandbox's ctime is this one */
	uint64_t special_gen;          /* OURS: the table's change_seq when set;
					  UNKNOWN: the scan that asks (special.h),
					  numbered from change_seq too */
	long long special_until;       /* OURS: a report asked after this
					  (monotonic ms) is not taken as ours */

	/* times set on a directory whose files are still uploading: the
	 * uploads would change its mtime again, so they are applied after
	 * (writeback.c), and shown meanwhile */
	bool times_pending;
	struct timespec pending_mtime;
	struct timespec pending_atime;
	uint64_t times_seq; /* bumped when the user sets its times or a
			       name comes or goes in it: a setting of its
			       times begun before is not what it shows */
	/* a directory: when a name last came or went in it here, {0, 0}
	 * once the user set its times since; shown as its mtime while the
	 * sandbox says it has not changed since (node_set_attr) */
	struct timespec changed_here;
	/* a command setting its times is on its way (writeback.c, under its
	 * times_lock), and the sandbox's ctime the last one left ({0, 0}:
	 * not known): a ctime they moved is no change after changed_here */
	bool times_going;
	struct timespec times_ctime;
	uint64_t dirty_mark; /* == the table's mark_seq: a dirty file is
				at or below it (writeback.c) */

	struct cfile *cf; /* local content (cache.h), or NULL */

	/* the kernel's cache of this directory's entries (ops_dir.c) */
	uint64_t rd_sig;  /* what it was last reset to hold */
	unsigned rd_open; /* handles open that may fill it */
	bool rd_mixed;    /* one of them may hold other entries */

	/* reads of a directory's files, to see a walk (pull.c) */
	long long cold_at;   /* monotonic ms of the last cold read */
	unsigned cold_reads; /* in a row, each soon after the last */
	long long pulled_at; /* its files were last pulled (0: never) */
	bool pulling;        /* in a pull under way: a read waits */
	bool lossy_told;     /* the log said why its name is refused */

	/* hash chains */
	struct node *ino_next;
	struct node *name_next;
	/* children list (for subtree walks) */
	struct node *child_first;
	struct node *sib_next, *sib_prev;
};

struct node_table {
	pthread_mutex_t lock;
	pthread_cond_t listed; /* with lock: a node's listing is done */
	uint64_t next_ino;
	uint64_t change_seq; /* counts our changes (change_gen) */
	uint64_t mark_seq;   /* for dirty_mark */
	struct node **by_ino;
	size_t ino_buckets;
	struct node **by_name;
	size_t name_buckets;
	size_t count;
	struct node *root;
	/* The sandbox's change feed (fs/mount/feed.c): while it is live,
	 * what was asked after it began holds past its timeout, until the
	 * feed says it changed (node_feed_holds) */
	long long feed_since; /* monotonic ms it went live; 0: it is not */
	long long feed_seen;  /* its last sign of life */
	long feed_grace_ms;   /* silence after which it is not trusted */
	long attr_ms, neg_ms, list_ms; /* the timeouts knowledge is kept for */
	/* called when a node is freed (with the lock held) */
	void (*on_free)(struct node *n, void *arg);
	void *on_free_arg;
	/* called when a name still to link in the sandbox (link_later)
	 * stops being one of its file's (the lock held): removed, moved
	 * over, or taken by the file itself; with on_free_arg */
	void (*on_link_gone)(struct node *alias, void *arg);
};

int node_table_init(struct node_table *nt, const char *root_path);
void node_table_release(struct node_table *nt);

/* All below: caller holds nt->lock. */

struct node *node_by_ino(struct node_table *nt, uint64_t ino);
struct node *node_child(struct node_table *nt, struct node *parent,
			const char *name);
/* The child @name of @parent, made if missing (no attributes yet). NULL
 * on ENOMEM. */
struct node *node_child_get(struct node_table *nt, struct node *parent,
			    const char *name);
/* Detaches @n from the tree (it keeps its inode until forgotten). A
 * file with other names (links) is not detached: it takes the place of
 * one of them instead, which goes. */
void node_unlink(struct node_table *nt, struct node *n);
/* The node of @n's file: @n, or the one it is another name of. */
struct node *node_file(struct node *n);
/* Makes @alias (a name in the tree, of no file yet) another name of
 * @n's file. */
void node_link_add(struct node *n, struct node *alias);
/* @alias is no longer another name of its file: a node of its own
 * again (the sandbox says they are two files now). */
void node_link_break(struct node_table *nt, struct node *alias);
/* The name @n's file takes when its own goes (node_unlink), NULL when
 * it has no other. */
struct node *node_link_heir(const struct node *n);
/* Moves @n to (@parent, @name); an existing node there is unlinked
 * first. 0 or -ENOMEM. */
int node_move(struct node_table *nt, struct node *n, struct node *parent,
	      const char *name);
/* Frees @n if nothing holds it any more. */
void node_maybe_free(struct node_table *nt, struct node *n);
void node_ref(struct node *n);
void node_unref(struct node_table *nt, struct node *n);
/* The full sandbox path of @n (malloc'd), NULL if unlinked or ENOMEM. */
char *node_path(struct node_table *nt, const struct node *n);
/* The sandbox path of child @name of @parent (malloc'd). */
char *node_child_path(struct node_table *nt, const struct node *parent,
		      const char *name);
/* Whether @n is @anc or below it. */
bool node_is_below(const struct node *n, const struct node *anc);

/* Cache state helpers. */
void node_set_attr(struct node *n, const struct fattr *a, long long expiry);
/* @n was changed in the sandbox by us, now, which left its ctime at
 * @ctime ({0, 0}: not known until the sandbox is next asked): the ctime
 * shown is now's, or just after the one shown before if that is later. */
void node_ctime_set(struct node *n, const struct timespec *ctime);
/* The ctime shown for @n: that of our latest change while the sandbox's
 * is the one it left, else the sandbox's (its mtime if not known). */
struct timespec node_ctime(const struct node *n);
/* The ctime shown for @n with local changes made at @local: the later. */
struct timespec node_ctime_local(const struct node *n,
				 const struct timespec *local);
/* Local changes made at @local (shown since) landed and left the
 * sandbox's ctime at @ctime ({0, 0}: not known): what is shown stays. */
void node_ctime_landed(struct node *n, const struct timespec *local,
		       const struct timespec *ctime);
/* A command setting directory @n's times is sent; then it is done,
 * leaving the sandbox's ctime at @ctime ({0, 0} or NULL: not known). */
void node_times_sent(struct node *n);
void node_times_done(struct node *n, const struct timespec *ctime);
void node_set_negative(struct node *n, long long expiry);
/* Whether what is known of @n is still good at @now: its attributes,
 * that it does not exist, its listing. Each is until its timeout, or for
 * as long as the change feed is live and has not said @n changed, when
 * it was asked after the feed went live. */
bool node_attr_fresh(const struct node_table *nt, const struct node *n,
		     long long now);
bool node_negative(const struct node_table *nt, const struct node *n,
		   long long now);
bool node_list_fresh(const struct node_table *nt, const struct node *n,
		     long long now);
/* Whether the change feed is live at @now. */
bool node_feed_live(const struct node_table *nt, long long now);
/* Drops cached attributes and listing of @n, and what it took as its
 * special bits from our own change (special.h). */
void node_invalidate(struct node *n);
/* Drops every cached attribute, listing and negative entry. */
void node_invalidate_all(struct node_table *nt);
/* Calls @fn for each node; @fn may not free nodes. */
void node_for_each(struct node_table *nt, void (*fn)(struct node *n, void *arg),
		   void *arg);

/* CLOCK_MONOTONIC in milliseconds. */
long long mono_ms(void);
/* The CLOCK_REALTIME time @ms from now, for pthread_cond_timedwait() on
 * a condition variable with the default clock. */
void cond_deadline(struct timespec *ts, long long ms);
/* Sleeps @ms milliseconds (signals do not cut it short). */
void mono_sleep_ms(long ms);

#endif /* OSBFS_NODE_H */

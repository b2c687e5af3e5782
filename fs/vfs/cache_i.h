/*
 * cache_i.h - the cache layer's own view of its state: struct cfile and
 * struct cache, for the files that make up the layer (cache.c,
 * cache_file.c, cache_room.c, journal.c, writeback.c, recover.c) and the
 * unit tests.
 * Everything else goes through cache.h.
 *
 * Locking: every cfile field and the cache's lists are guarded by
 * cache->lock (the lock order is in osbfs.h).
 */
#ifndef OSBFS_CACHE_I_H
#define OSBFS_CACHE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "cache.h"
#include "node.h"

struct node;
struct node_table;

struct extent {
	int64_t start, end; /* [start, end) */
};

enum base_state {
	BASE_UNKNOWN, /* not known what the sandbox has */
	BASE_ABSENT,  /* made here; the sandbox had no such file */
	BASE_KNOWN,   /* the sandbox had base_size/base_mtime/base_ctime */
};

/*
 * What a file's bytes travel with: the attributes the sandbox is to get
 * (authoritative locally while the file is dirty) and the validator of
 * the sandbox version the local copy derives from. Kept in each cfile,
 * in its journal record, and in each upload.
 */
struct fmeta {
	mode_t mode;
	struct timespec mtime;
	struct timespec atime;
	struct timespec ctime; /* of the latest change made here ({0, 0}:
				  not known, after a restart: the mtime) */
	bool times_set;        /* mtime (and atime) must be set remotely */
	bool chmod_needed;     /* mode needs a chmod after the upload */
	bool dir;              /* of a directory: made (base absent) or
				  given a mode here; no data (cache.h) */
	char owner[64], group[64];
	enum base_state base;
	int64_t base_size;
	struct timespec base_mtime;
	/* its ctime, which a rewrite moves even when it keeps the size and
	 * sets the mtime back; {0, 0}: not known, after a change of ours
	 * whose outcome was not seen (a move, a mode), until the sandbox is
	 * next asked (fmeta_base_take) */
	struct timespec base_ctime;
	/* bytes of ours sent to the sandbox with no answer yet, or none
	 * (an answer lost, osbfs killed): a copy there of this size and
	 * fingerprint (fprint.h) is ours, not someone else's change */
	bool sent;
	int64_t sent_size;
	uint64_t sent_print;
};

/* Whether the sandbox version @m derives from is the one the sandbox
 * says @a is: a known base of the same size, mtime and ctime to the
 * nanosecond. A ctime not known (ours, or @a's: attributes made here) is
 * not compared. */
bool fmeta_base_is(const struct fmeta *m, const struct fattr *a);
/* fmeta_base_is(), and when it holds, a ctime @m does not know yet is
 * taken from @a. Only for @a asked of the sandbox after our last change
 * of the file (what a node's attributes are: ops.c node_changed_here). */
bool fmeta_base_take(struct fmeta *m, const struct fattr *a);
/* The time of the latest change made here (the ctime a dirty file shows
 * and keeps once it landed, node_ctime_landed). */
struct timespec fmeta_ctime(const struct fmeta *m);

struct cfile {
	uint64_t id;
	struct node *node; /* back pointer; guarded by the node lock */
	unsigned refs;     /* node + handles + writeback */
	pthread_mutex_t fetch_lock;
	bool ahead;       /* a read-ahead is fetching (cache_ahead_claim) */
	unsigned fills;   /* cache_fill()s under way: its content stays */
	uint64_t cut_gen; /* bumped when ranges of it are let go for room
			     (cache_room.c): a read checks its bytes are
			     still here after it */
	bool forget;      /* its clean content goes at the last close
			     (cache_drop_clean) */
	bool stale_disk;  /* its cache file still holds bytes that
			     cache_drop_clean let go: emptied by the
			     next cache_fd() or by the sweep
			     (cache_stale.c); under stale_lock */

	int fd;           /* open while opens > 0, else -1 */
	unsigned opens;   /* open handles */
	unsigned writers; /* handles open for writing */

	int64_t size;       /* local size (meaningful when complete) */
	bool complete;      /* every byte [0, size) is present */
	struct extent *ext; /* ranges present when not complete */
	size_t next, ext_cap;
	int64_t cached_bytes; /* bytes held locally: the ranges, or the
				 size once complete (cache_account) */

	struct fmeta m;        /* local attributes and validator */
	uint64_t version;      /* bumped when the content gives way to
				  another sandbox version: a handle reads
				  only the one it opened (ops_file.c) */
	uint64_t open_version; /* the version when the open handles began:
				  older handles may be open if it differs */
	uint64_t mixed_at;     /* the mark (cache_mark) of the last download
				  added to clean bytes of others, 0 if none
				  since the content last went */
	uint64_t confirmed_at; /* the latest mark at which the sandbox's
				  attributes, asked then, said its version */

	/* dirty state */
	bool dirty;
	uint64_t wgen;          /* bumped by every change */
	uint64_t uploaded_gen;  /* the last generation the sandbox has */
	uint64_t flush_gen;     /* upload up to here now (fsync, sync) */
	uint64_t full_gen;      /* ... with its times too (sync, not fsync) */
	uint64_t data_gen;      /* the sandbox has this generation's bytes,
				   but its times or mode could not be set:
				   only those are retried */
	long long due_ms;       /* when the upload may start */
	long long absent_until; /* made where the sandbox was known to have
				   nothing, as fresh as that (cache_created) */
	long long base_seen;    /* monotonic ms when the sandbox was last
				   seen holding the base version (its upload
				   landed, or the change feed reported it so),
				   0 when a report since said otherwise */
	bool inflight;
	bool solo;         /* upload alone (a batch with it failed) */
	unsigned failures; /* consecutive failed uploads */
	uint64_t fail_seq; /* bumped by every failed upload */
	int last_err;
	char *record_path; /* the path in the dirty record */

	long long last_used;         /* for eviction, monotonic ms */
	struct cfile *dnext, *dprev; /* the dirty list */
};

/* A copy the sandbox still has of a file resent under a new name
 * (cache_resend), to be removed (cache_left.c). */
struct left {
	uint64_t id; /* of its journal record */
	char *path;
	long long due_ms;
	unsigned failures;
};

/* A link made here to a file the sandbox does not have yet (node.h
 * link_later), in the journal until the sandbox has it (cache_link.c). */
struct plink {
	uint64_t id;   /* of its journal record */
	uint64_t file; /* the id of its file's cfile */
	char *path;    /* the new name, a sandbox path */
};

struct cache {
	/* both moved by cache_move() (a restore), read without the lock;
	 * the paths they held are kept in @old_paths until the release */
	char *_Atomic base; /* CACHE_DIR/<sandbox id> */
	char *_Atomic dir;  /* this mount's slot of it (holder.h) */
	char **old_paths;   /* under @lock */
	size_t n_old_paths;
	struct node_table *nt; /* the nodes the cfiles belong to */
	int dir_fd;            /* @dir */
	int files_fd;          /* .../files */
	int journal_fd;        /* .../journal, O_APPEND (journal.c) */
	int64_t journal_bytes;
	int64_t journal_reserved; /* allocated up to here (journal.c) */
	pthread_mutex_t lock;
	pthread_cond_t changed; /* uploads done, dirty state changed */
	uint64_t epoch;         /* marks (cache_mark): the order of downloads,
				   opens and the askings of attributes */
	int64_t max_size;
	int64_t total_bytes;       /* bytes cached, all files */
	struct cfile *dirty_first; /* oldest first */
	struct cfile *dirty_last;
	size_t ndirty;
	unsigned unsynced; /* journal lines since syncfs */
	int64_t dirty_bytes;
	size_t nfiles;
	struct cfile **all; /* every live cfile (for eviction) */
	size_t nall, all_cap;
	struct left lefts[CACHE_LEFT_MAX]; /* copies to remove (cache_left.c) */
	size_t nlefts;
	/* cache_stale.c: every stale_disk, and the emptying of a cache
	 * file it marks (a leaf, taken after @lock when both are) */
	pthread_mutex_t stale_lock;
	pthread_t sweeper;    /* empties stale cache files; under @lock: */
	bool sweeping;        /* it runs */
	bool sweep_again;     /* a drop came while it ran: another pass */
	bool sweeper_joined;  /* no thread to join */
	bool sweep_stop;      /* the release asks it to end */
	struct plink *plinks; /* links still to make (cache_link.c) */
	size_t nplinks, plinks_cap;
};

/* An fd on the cache file for the caller (close it); a stale one is
 * emptied first (cache_stale.c). */
int cache_fd(struct cache *c, struct cfile *cf);
/* Under c->lock, by a caller that opened @fd on @cf's cache file before
 * it took the lock and is about to add bytes: a cache file marked stale
 * meanwhile is emptied now (cache_stale.c). */
int cache_unstale(struct cache *c, struct cfile *cf, int fd);
/* The release: the sweep ends (cache_stale.c). */
void cache_sweep_stop(struct cache *c);
/* Under c->lock: whether [off, off+len) is present (clipped to size). */
bool cache_has(const struct cfile *cf, int64_t off, int64_t len);
/* Adds a range present (c->lock held). */
int cache_add_range(struct cache *c, struct cfile *cf, int64_t start,
		    int64_t end);
/* Forgets the content (the sandbox's copy changed). c->lock held. */
void cache_drop_content(struct cache *c, struct cfile *cf);
/* The same in memory only: the cache file keeps the bytes (c->lock
 * held; the caller marks it stale_disk, cache_stale.c). */
void cache_forget_content(struct cache *c, struct cfile *cf);
/* Before @need bytes are fetched into @cf (its cache file @fd, its
 * fetch_lock held) for a read of [@off, @off + @len): room within
 * cache_max_size, made by dropping clean content of files nobody has
 * open, then ranges of @cf itself outside that window (cache_room.c). */
void cache_fill_room(struct cache *c, struct cfile *cf, int fd, int64_t off,
		     int64_t len, int64_t need);
/* Sets the validator to the sandbox's @a (c->lock held). */
void cache_set_base(struct cfile *cf, const struct fattr *a);
/* After the size of a complete file changed: counts its bytes towards
 * the cache's total (c->lock held). */
void cache_account(struct cache *c, struct cfile *cf);

/* Marks @cf dirty at sandbox path @path and writes its record if it was
 * clean or the path changed (@rewrite: always). Takes c->lock. */
int cache_mark_dirty(struct cache *c, struct cfile *cf, const char *path,
		     bool rewrite);
/* Rewrites the record of a dirty cfile as it is now (c->lock held). */
int cache_record_refresh(struct cache *c, struct cfile *cf);
/* The upload of generation @gen is in the sandbox: clean if nothing
 * changed since. c->lock held. */
void cache_uploaded(struct cache *c, struct cfile *cf, uint64_t gen);
/* Forgets the changes (the file was deleted). c->lock held. */
void cache_discard(struct cache *c, struct cfile *cf);

/* After a write to the cache dir failed with @err (an errno, of either
 * sign): on a full disk, clean cached data makes room. True when some
 * was freed, so the write is worth trying once more. */
bool cache_room_made(struct cache *c, int err);

/* A cfile of id @id for recovery (c->lock held); NULL on ENOMEM. */
struct cfile *cache_cfile_new(struct cache *c, uint64_t id);
/* Puts @cf on the dirty list (c->lock held; the list takes a ref). */
void cache_dirty_list_add(struct cache *c, struct cfile *cf);
/* Removes content files that no live cfile owns (c->lock held). */
void cache_sweep(struct cache *c);
/* The name of @id's content file under files/ (16 hex digits). */
void cache_id_name(uint64_t id, char out[17]);

/* A new id for a cfile or a record. */
uint64_t cache_new_id(void);
/* Adds a copy left at @path, removed from @due_ms on, and journals it
 * (c->lock held). -ENOSPC when the list is full, or -errno. */
int cache_left_add(struct cache *c, uint64_t id, const char *path,
		   long long due_ms);
/* Forgets the copy at @path, never removed (c->lock held). */
void cache_left_forget(struct cache *c, const char *path);
/* cache_lefts_below() with c->lock held. */
bool cache_lefts_below_locked(struct cache *c, const char *dir);
/* Frees the list (at release). */
void cache_lefts_free(struct cache *c);
/* Takes up link @id of file @file at @path, whose record is in the
 * journal already (recovery; takes c->lock). 0 or -ENOMEM. */
int cache_link_keep(struct cache *c, uint64_t id, uint64_t file,
		    const char *path);
/* Frees the list of links still to make (at release). */
void cache_links_free(struct cache *c);

/* Dirty records left by an earlier run: @fn is called for each, with
 * its sandbox path, a new cfile holding the data (refs 1, dirty) and the
 * links still to make to it (@nlinks of @links: the callback takes up
 * those it keeps with cache_link_keep(), the others are dropped); then
 * clean leftovers go and the journal is compacted. The count of records,
 * or -errno (recover.c). */
typedef void (*cache_recover_fn)(void *arg, const char *path, struct cfile *cf,
				 const struct plink *links, size_t nlinks);
int cache_recover(struct cache *c, cache_recover_fn fn, void *arg);

#endif /* OSBFS_CACHE_I_H */

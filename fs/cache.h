/*
 * cache.h - file content on local disk: the read cache and the dirty
 * data waiting for upload, with its journal.
 *
 * Each file the mount has read or written has a struct cfile: a cache
 * file under CACHE/files/ holding the bytes known locally (a sparse file
 * plus a list of the ranges present), the remote version those bytes
 * came from (size and mtime: the validator), and, when it has changes
 * the sandbox does not have yet, a record in CACHE/journal (journal.c)
 * naming the file's sandbox path. The journal is what makes written data
 * survive a crash: a new mount of the same sandbox with the same cache
 * dir replays it and uploads the files (cache_recover).
 *
 * Locking: every cfile field and the cache's lists are guarded by
 * cache->lock. Data is read and written with pread/pwrite outside it.
 * Downloads into one cfile are serialized by cf->fetch_lock. Lock order:
 * node table lock, then cache->lock; fetch_lock is taken with neither.
 */
#ifndef OSBFS_CACHE_H
#define OSBFS_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct node;

struct extent {
	int64_t start, end; /* [start, end) */
};

enum base_state {
	BASE_UNKNOWN, /* not known what the sandbox has */
	BASE_ABSENT,  /* made here; the sandbox had no such file */
	BASE_KNOWN,   /* the sandbox had base_size/base_mtime */
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
	bool times_set;         /* mtime (and atime) must be set remotely */
	bool chmod_needed;      /* mode needs a chmod after the upload */
	char owner[64], group[64];
	enum base_state base;
	int64_t base_size;
	struct timespec base_mtime;
};

/* Whether the sandbox version @m derives from is the one of @size and
 * @mtime (a known base, same size, same mtime to the nanosecond). */
bool fmeta_base_is(const struct fmeta *m, int64_t size,
		   const struct timespec *mtime);

struct cfile {
	uint64_t id;
	struct node *node;      /* back pointer; guarded by the node lock */
	unsigned refs;          /* node + handles + writeback */
	pthread_mutex_t fetch_lock;

	int fd;                 /* open while opens > 0, else -1 */
	unsigned opens;         /* open handles */
	unsigned writers;       /* handles open for writing */

	int64_t size;           /* local size (meaningful when complete) */
	bool complete;          /* every byte [0, size) is present */
	struct extent *ext;     /* ranges present when not complete */
	size_t next, ext_cap;
	int64_t cached_bytes;   /* bytes held locally: the ranges, or the
				   size once complete (cache_account) */

	struct fmeta m;         /* local attributes and validator */
	uint64_t version;       /* bumped when the content gives way to
				   another sandbox version: a handle reads
				   only the one it opened (ops_file.c) */
	uint64_t open_version;  /* the version when the open handles began:
				   older handles may be open if it differs */

	/* dirty state */
	bool dirty;
	uint64_t wgen;          /* bumped by every change */
	uint64_t uploaded_gen;  /* the last generation the sandbox has */
	uint64_t flush_gen;     /* upload up to here now (fsync, sync) */
	uint64_t data_gen;      /* the sandbox has this generation's bytes,
				   but its times or mode could not be set:
				   only those are retried */
	long long due_ms;       /* when the upload may start */
	bool inflight;
	bool solo;              /* upload alone (a batch with it failed) */
	unsigned failures;      /* consecutive failed uploads */
	uint64_t fail_seq;      /* bumped by every failed upload */
	int last_err;
	char *record_path;      /* the path in the dirty record */

	long long last_used;    /* for eviction, monotonic ms */
	struct cfile *dnext, *dprev; /* the dirty list */
};

struct cache {
	char *dir;              /* CACHE_DIR/<sandbox id> */
	int dir_fd;             /* CACHE_DIR/<sandbox id> */
	int files_fd;           /* .../files */
	int journal_fd;         /* .../journal, O_APPEND (journal.c) */
	int64_t journal_bytes;
	int64_t journal_reserved; /* allocated up to here (journal.c) */
	pthread_mutex_t lock;
	pthread_cond_t changed; /* uploads done, dirty state changed */
	int64_t max_size;
	int64_t total_bytes;    /* bytes cached, all files */
	struct cfile *dirty_first;    /* oldest first */
	struct cfile *dirty_last;
	size_t ndirty;
	unsigned unsynced;            /* journal lines since syncfs */
	int64_t dirty_bytes;
	size_t nfiles;
	struct cfile **all;     /* every live cfile (for eviction) */
	size_t nall, all_cap;
};

/* Makes CACHE_DIR/<id>/{files,dirty}; removes clean leftovers. Takes
 * the dir's lock with @h first (holder_take(): it may wait for a daemon
 * finishing its uploads; -EBUSY if another mount uses the dir); the
 * caller lets it go with holder_release() after cache_release(). */
struct holder;
int cache_init(struct cache *c, const char *cache_dir,
	       const char *sandbox_id, int64_t max_size, struct holder *h,
	       char *msg, size_t msg_size);
void cache_release(struct cache *c);

/* n->cf, made if missing. Caller holds the node lock. NULL on ENOMEM. */
struct cfile *cache_attach(struct cache *c, struct node *n);
/* Called when a node is freed (node lock held): a node_table on_free. */
void cache_detach(struct node *n, void *cache);

void cache_ref(struct cache *c, struct cfile *cf);
void cache_unref(struct cache *c, struct cfile *cf);

/* An open handle: opens the cache file. 0 or -errno. */
int cache_open(struct cache *c, struct cfile *cf, bool writer);
void cache_close(struct cache *c, struct cfile *cf, bool writer);
/* An fd on the cache file for the caller (close it). */
int cache_fd(struct cache *c, const struct cfile *cf);

/* Under c->lock: whether [off, off+len) is present (clipped to size). */
bool cache_has(const struct cfile *cf, int64_t off, int64_t len);
/* Adds a range present (c->lock held). */
int cache_add_range(struct cache *c, struct cfile *cf, int64_t start,
		    int64_t end);
/* Forgets the content (the sandbox's copy changed). c->lock held. */
void cache_drop_content(struct cache *c, struct cfile *cf);
/* Sets the validator after a fetch or a stat (c->lock held). */
void cache_set_base(struct cfile *cf, int64_t size,
		    const struct timespec *mtime);

/*
 * cache_dirty() - a change was made at sandbox path @path: bumps wgen,
 * marks dirty and writes the dirty record if it was clean (or if the path
 * changed). Takes c->lock.
 */
int cache_dirty(struct cache *c, struct cfile *cf, const char *path);
/* The same for a change of mode or times, which the record carries:
 * the record is always rewritten. */
int cache_dirty_meta(struct cache *c, struct cfile *cf, const char *path);
/* Rewrites the record of a dirty cfile under its new path (a rename). */
int cache_record_update(struct cache *c, struct cfile *cf, const char *path);
/* Rewrites the record of a dirty cfile as it is now (c->lock held). */
int cache_record_refresh(struct cache *c, struct cfile *cf);
/* The upload of generation @gen is in the sandbox: clean if nothing
 * changed since. c->lock held. */
void cache_uploaded(struct cache *c, struct cfile *cf, uint64_t gen);
/* Forgets the changes (the file was deleted). c->lock held. */
void cache_discard(struct cache *c, struct cfile *cf);

/* After the size of a complete file changed: counts its bytes towards
 * the cache's total (c->lock held). */
void cache_account(struct cache *c, struct cfile *cf);

/* Drops clean content nobody has open, least recently used first, until
 * the total fits max_size and at least @need bytes were freed (a full
 * disk asks for everything: INT64_MAX). Unsaved data is never dropped.
 * Returns the bytes freed. Takes the node lock then c->lock. */
struct node_table;
int64_t cache_evict(struct cache *c, struct node_table *nt, int64_t need);
/* After a write to the cache dir failed with @err (an errno, of either
 * sign): on a full disk, clean cached data makes room. True when some
 * was freed, so the write is worth trying once more. */
bool cache_room_made(struct cache *c, struct node_table *nt, int err);

/* Dirty records left by an earlier run: @fn is called for each, with
 * its sandbox path and a new cfile holding the data (refs 1, dirty). */
typedef void (*cache_recover_fn)(void *arg, const char *path,
				 struct cfile *cf);
int cache_recover(struct cache *c, cache_recover_fn fn, void *arg);

#endif /* OSBFS_CACHE_H */

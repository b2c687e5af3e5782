/*
 * cache.h - file content on local disk: the read cache and the dirty
 * data waiting for upload, with its journal. The one interface the FUSE
 * ops, the control tree and main() have to file content.
 *
 * Each file the mount has read or written has a struct cfile: a cache
 * file under CACHE/files/ holding the bytes known locally (a sparse file
 * plus a list of the ranges present), the remote version those bytes
 * came from (size, mtime and ctime: the validator), and, when it has changes
 * the sandbox does not have yet, a record in CACHE/journal (journal.c)
 * naming the file's sandbox path. The journal is what makes written data
 * survive a crash: a new mount of the same sandbox with the same cache
 * dir replays it and uploads the files (recover.c). The uploads
 * themselves are writeback.c, the other half of this layer.
 *
 * struct cache and struct cfile are opaque outside the layer
 * (cache_i.h): every call here takes the locks it needs.
 *
 * Calls that say so take the node table's lock, then the cache's: the
 * caller holds neither, or only the node table's (the order of all the
 * daemon's locks is in osbfs.h).
 */
#ifndef OSBFS_CACHE_H
#define OSBFS_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "osb.h"

struct cache;
struct cfile;
struct fattr;
struct holder;
struct node;
struct node_table;
struct pending;

/* Whether @cache_dir can be the cache dir (made if missing, writable):
 * 0, or a negative errno with the reason in @msg. */
int cache_dir_check(const char *cache_dir, char *msg, size_t msg_size);
/* Makes CACHE_DIR/<id>/{files,journal} for the nodes of @nt. Takes the
 * dir's lock with @h first (holder_take(): it may wait for a daemon
 * finishing its uploads; -EBUSY if another mount uses the dir); the
 * caller lets it go with holder_release() after cache_release(). On
 * failure *ret is NULL and @msg says why. */
int cache_init(struct cache **ret, const char *cache_dir,
	       const char *sandbox_id, int64_t max_size, struct node_table *nt,
	       struct holder *h, char *msg, size_t msg_size);
/* Frees the cache; dirty data and its records stay on disk. */
void cache_release(struct cache *c);
/* CACHE_DIR/<sandbox id>, for messages. */
const char *cache_dir(const struct cache *c);
/*
 * cache_move() - after a restore moved the mount to sandbox @sandbox_id:
 * this mount's slot, as it is, becomes CACHE_DIR/<sandbox_id> (a rename:
 * open files, the journal and the lock go with it), so that a mount of
 * that sandbox after a crash finds what was still to upload. Other
 * mounts' slots stay under the old id. 0, or a negative errno with the
 * reason in @msg (the cache then stays where it was).
 */
int cache_move(struct cache *c, const char *sandbox_id, char *msg,
	       size_t msg_size);

/* n->cf, made if missing. Caller holds the node lock. NULL on ENOMEM. */
struct cfile *cache_attach(struct cache *c, struct node *n);
/* Called when a node is freed (node lock held): a node_table on_free. */
void cache_detach(struct node *n, void *cache);

void cache_ref(struct cache *c, struct cfile *cf);
void cache_unref(struct cache *c, struct cfile *cf);

/* ---- state, each asked under the cache lock ---- */

/* Changes the sandbox does not have yet. */
bool cache_is_dirty(struct cache *c, struct cfile *cf);
/* Made here and never uploaded: the sandbox has no such file. */
bool cache_only_local(struct cache *c, struct cfile *cf);
/* Open handles. */
bool cache_is_open(struct cache *c, struct cfile *cf);
/* Dirty with no handle open for writing: its upload may be scheduled. */
bool cache_upload_due(struct cache *c, struct cfile *cf);
/* Whether a file or directory at or below node @d (strictly below it
 * if @strict) waits for its upload (takes the node lock, then the cache
 * lock). */
bool cache_dirty_below(struct cache *c, const struct node *d, bool strict);
/* Of a directory (cache_dir_changed()). */
bool cache_is_dir(struct cache *c, struct cfile *cf);

/* What a file with local changes shows (they win over the sandbox's). */
struct cache_attr {
	bool dir; /* a directory: its size is not ours */
	int64_t size;
	mode_t mode;
	struct timespec mtime;
	struct timespec atime;
	struct timespec ctime;     /* of the latest change made here */
	char owner[64], group[64]; /* as execd names them (owners.h) */
};
void cache_local_attr(struct cache *c, struct cfile *cf,
		      struct cache_attr *ret);

/* The dirty files' sandbox paths, the first @max of them (struct
 * pending is holder.h's: the lock file and `.osb/info` name them).
 * 0 or -ENOMEM. */
int cache_pending(struct cache *c, size_t max, struct pending *ret);

/* ---- content ---- */

/*
 * Confirming a version. A file's clean bytes may come from several
 * downloads, each checked against the attributes as cached then, which
 * may be older than the download: a file rewritten in between (its size
 * and mtime kept) would leave bytes of two versions under one validator.
 * So a file whose bytes come from more than one download is "mixed"
 * until the sandbox's attributes, asked after the last of them, say its
 * version. Marks order downloads, opens and askings: an asking of
 * attributes takes cache_mark() just before it is sent.
 */
/* The current mark. */
uint64_t cache_mark(struct cache *c);
/* A new mark, later than every mark taken so far. */
uint64_t cache_mark_new(struct cache *c);
/* The sandbox has @a for clean @cf, asked at @mark: if that is the
 * version cached, it is confirmed as of @mark. */
void cache_confirm(struct cache *c, struct cfile *cf, const struct fattr *a,
		   uint64_t mark);
/* The change feed reported @a for @cf at @now: whether it is the base
 * version (cfile.base_seen, for the write-back's check). */
void cache_base_report(struct cache *c, struct cfile *cf, const struct fattr *a,
		       long long now);
/* Whether attributes asked at or after @mark said @cf's version. */
bool cache_confirmed(struct cache *c, struct cfile *cf, uint64_t mark);
/* Whether clean @cf is mixed and not confirmed since, and @a (NULL: any
 * attributes) are of the version it holds: then the sandbox is to be
 * asked before its bytes are shown to a new open. */
bool cache_mixed(struct cache *c, struct cfile *cf, const struct fattr *a);
/* The sandbox has @a for a clean file, asked at @mark: content cached
 * for another version is dropped, unless a handle has it open and the
 * size is the same; the version cached is confirmed. True when handles
 * open on the old version now fail (ESTALE): the size changed under
 * them. */
bool cache_check_version(struct cache *c, struct cfile *cf,
			 const struct fattr *a, uint64_t mark);

/* What cache_prepare() tells an open. */
struct cache_prep {
	bool keep;        /* cached content is still good (the kernel may
			     keep its pages) */
	bool reopened;    /* handles open on an older version now fail */
	bool direct;      /* handles of an older version are open: bypass
			     the kernel's page cache */
	uint64_t version; /* the content version a new handle reads */
};
/*
 * cache_prepare() - node @n's cfile (made if missing), ready for use:
 * unless it has local changes (or is an orphan), its validator, size and
 * mode become the sandbox's (@a) and content of another version is
 * dropped. Takes the node lock, then the cache lock. NULL on ENOMEM.
 */
struct cfile *cache_prepare(struct cache *c, struct node *n,
			    const struct fattr *a, struct cache_prep *ret);
/*
 * cache_created() - node @n is created (open with O_CREAT): @existed is
 * what the sandbox has there, or NULL if nothing; @mode the mode asked
 * for a new file; @absent_until, for a new file, until when the answer
 * that the sandbox has no such file stays fresh (monotonic ms; 0 when
 * unknown): its upload trusts it as a create trusts a negative entry.
 * Sets the local attributes and validator; returns the cfile (NULL on
 * ENOMEM). Caller holds the node lock.
 */
struct cfile *cache_created(struct cache *c, struct node *n,
			    const struct fattr *existed, mode_t mode,
			    long long absent_until);

/*
 * cache_dir_changed() - directory @n was made here (@existed NULL) or
 * given mode @mode (@existed: its attributes in the sandbox). Like a
 * file's change, it goes to the sandbox with the write-back (many
 * directories in one request) and its record is journaled: the caller
 * marks the returned cfile dirty (cache_dirty_meta) and schedules it. A
 * directory's cfile holds no data. Caller holds the node lock. NULL on
 * ENOMEM.
 */
struct cfile *cache_dir_changed(struct cache *c, struct node *n,
				const struct fattr *existed, mode_t mode);

/* An open handle: opens the cache file. 0 or -errno. */
int cache_open(struct cache *c, struct cfile *cf, bool writer);
void cache_close(struct cache *c, struct cfile *cf, bool writer);

/* Cuts the whole-or-local file to @size (the bytes below @size must be
 * local already: cache_whole()) and sets its mtime to now (@touch).
 * *ret_version: the content version after. 0 or -errno. */
int cache_truncate(struct cache *c, struct cfile *cf, int64_t size, bool touch,
		   uint64_t *ret_version);

/* Fetches @len bytes at @off of the sandbox's file of @size bytes (its
 * validator's, or OSB_SIZE_FIRST when not known), passing them to @sink.
 * 0, -errno; -ESTALE or -ENOENT when the sandbox has another version. */
typedef int (*cache_fetch_fn)(void *arg, int64_t off, int64_t len, int64_t size,
			      osb_sink_fn sink, void *sink_arg);
/* cache_fill() returns this when the file changed in the sandbox: the
 * caller settles it with cache_went_stale(*ret_version). */
#define CACHE_CHANGED 1
/*
 * cache_fill() - downloads whatever of [off, off+len) the cache file
 * lacks, with @fetch, one download into @cf at a time. Nothing to do for
 * a complete or dirty file. 0, -errno, -ESTALE (another reader saw the
 * change first), or CACHE_CHANGED.
 */
int cache_fill(struct cache *c, struct cfile *cf, int64_t off, int64_t len,
	       cache_fetch_fn fetch, void *arg, uint64_t *ret_version);
/*
 * cache_went_stale() - the sandbox's file is no longer the version
 * @version the handles read: unless local changes hold the file
 * (*ret_local; they win), its content and validator go and its version
 * moves on. True if this call did it (the first to see the change): the
 * caller drops the node's attributes and the kernel's pages.
 */
bool cache_went_stale(struct cache *c, struct cfile *cf, uint64_t version,
		      bool *ret_local);
/* Whether nothing of @cf is here and it has no changes: a candidate for
 * cache_fill_new(). Takes the cache lock. */
bool cache_fill_wanted(struct cache *c, struct cfile *cf);
/* Whether anything of clean @cf is here: bytes fetched before, which
 * bytes fetched now must be checked to be of the same version as (a
 * stat asked after the fetch: ops_file.c). Takes the cache lock. */
bool cache_has_clean(struct cache *c, struct cfile *cf);
/*
 * cache_fill_new() - node @n's file, of which nothing is here, gets the
 * sandbox version @a (its size and mtime) whole from @fetch, as an open
 * and a read would: nothing is done (0) if anything of it is here or
 * changed here, or if handles have another version open. Takes the node
 * lock and the cache lock (the caller holds neither). 0 or -errno.
 */
int cache_fill_new(struct cache *c, struct node *n, const struct fattr *a,
		   cache_fetch_fn fetch, void *arg);
/* Whether every byte is local (complete or dirty); an empty file
 * becomes complete. *ret_size, *ret_version as they are now. */
bool cache_whole(struct cache *c, struct cfile *cf, int64_t *ret_size,
		 uint64_t *ret_version);
/* Whether @cf is dirty, or still content version @version of the
 * sandbox's file whose attributes are @a (asked after our last change of
 * it: a ctime not known yet is taken from them). */
bool cache_is_version(struct cache *c, struct cfile *cf, uint64_t version,
		      const struct fattr *a);

/* A handle's read-ahead: the offset a sequential read goes on from, and
 * the window, which doubles while the reads are sequential. */
struct cache_window {
	int64_t next_off;
	int64_t window;
};
#define CACHE_WINDOW_MIN (1ll << 20)
#define CACHE_WINDOW_MAX (16ll << 20)
/*
 * cache_read_begin() - a read of @size bytes at @off by a handle of
 * content @version: -ESTALE if the content moved on. *ret_len: the bytes
 * to read (0 at or past the end); *ret_want: 0 if they are all here,
 * else how much to fetch from @off (the window).
 */
int cache_read_begin(struct cache *c, struct cfile *cf, uint64_t version,
		     struct cache_window *w, int64_t off, size_t size,
		     int64_t *ret_len, int64_t *ret_want);
/*
 * cache_ahead_claim() - after a read that ended at @from by a handle of
 * @version whose reads are sequential (its window grew): whether the
 * next window has a gap no fetch is filling. If so, grows the window and
 * claims the gap for the caller, who fetches [*ret_off, *ret_off +
 * *ret_len) and then calls cache_ahead_done().
 */
bool cache_ahead_claim(struct cache *c, struct cfile *cf, uint64_t version,
		       struct cache_window *w, int64_t from, int64_t *ret_off,
		       int64_t *ret_len);
void cache_ahead_done(struct cache *c, struct cfile *cf);
/* Reads @len bytes at @off for a handle of @version: the count, or
 * -errno (-ESTALE if the content moved on meanwhile; -EAGAIN if bytes of
 * it were let go for room since cache_read_begin(): begin again). */
ssize_t cache_pread(struct cache *c, struct cfile *cf, uint64_t version,
		    void *buf, size_t len, int64_t off);
/*
 * cache_write() - writes through an open handle (@append: at the end).
 * Makes room on a full disk. The count, or -errno: -EFBIG when it would
 * take the file past cache_max_size (a file is held here whole until
 * it is uploaded). *ret_record: the file
 * has no journal record under its current path yet; the caller marks it
 * with cache_dirty().
 */
ssize_t cache_write(struct cache *c, struct cfile *cf, const void *buf,
		    size_t size, int64_t off, bool append, bool *ret_record);

/* Local changes of mode and times (the caller then calls
 * cache_dirty_meta()). */
void cache_set_mode(struct cache *c, struct cfile *cf, mode_t mode);
/* The owner and group (names or numbers, owners.h) the file is to have in
 * the sandbox: sent with its next upload. @changed: a change here (its
 * ctime moves; the caller then calls cache_dirty_meta()), else what the
 * sandbox was just given. */
void cache_set_owner(struct cache *c, struct cfile *cf, const char *owner,
		     const char *group, bool changed);
void cache_set_times(struct cache *c, struct cfile *cf,
		     const struct timespec *mtime,
		     const struct timespec *atime);
/* The sandbox file's mtime was set to @mtime by us, which left its
 * ctime at @ctime ({0, 0}: not known): the validator follows, so the
 * content cached stays good. */
void cache_times_done(struct cache *c, struct cfile *cf,
		      const struct timespec *mtime,
		      const struct timespec *ctime);
/* The sandbox's file of @cf was changed by us in a way that moves its
 * ctime to a value not known (a mode, a move): the validator's ctime is
 * taken from the next answer of the sandbox (fmeta_base_take), so our
 * own change is not taken for someone else's. */
void cache_changed_here(struct cache *c, struct cfile *cf);

/*
 * cache_moved_over() - a file @scf never uploaded moves over a name
 * whose file is @dcf (may be NULL) and whose attributes the sandbox had
 * as @da: its upload replaces that version, so it inherits the
 * validator (the conflict check compares against it).
 */
void cache_moved_over(struct cache *c, struct cfile *scf, struct cfile *dcf,
		      const struct fattr *da);

/*
 * cache_sent_here() - whether @cf's copy in the sandbox is one this
 * mount uploaded a moment ago, whose times have yet to follow (an
 * editor's fsync before its rename), with its bytes whole here and at
 * most @max of them: a rename may then upload it again under the new
 * name rather than run a command in the sandbox.
 * cache_resend() - such a file moves from @old to @path, over @dcf and
 * @da (what the sandbox has there; both NULL when nothing): it is to go
 * whole to the new name, as one never uploaded (cache_only_local()).
 * *ret_left says the sandbox's copy at @old is left for a later batch
 * to remove (cache_left_replace()), once the cache dir is on disk;
 * else its bytes and record are on disk when this returns 0, and the
 * caller removes the copy now. If it cannot go, or on an error, the
 * file stays where it was (cache_base_lost()).
 */
bool cache_sent_here(struct cache *c, struct cfile *cf, int64_t max);
int cache_resend(struct cache *c, struct cfile *cf, struct cfile *dcf,
		 const struct fattr *da, const char *old, const char *path,
		 bool *ret_left);
/* What the sandbox has at @cf's name is not known (a resent file that
 * stays where it was): its next upload replaces it without a check. */
void cache_base_lost(struct cache *c, struct cfile *cf);

/* ---- copies left behind (cache_left.c) ---- */

/* A copy left by a resent file is removed this long after the rename,
 * unless a save writes the name again first. */
#define CACHE_LEFT_DELAY_MS 1000
/* At most this many copies wait; past that, a rename removes its copy
 * at once. */
#define CACHE_LEFT_MAX 64

/* Whether the sandbox's file at @path is a copy left behind, which the
 * mount does not show. */
bool cache_left_at(struct cache *c, const char *path);
/* Whether one is at or below directory @dir. */
bool cache_lefts_below(struct cache *c, const char *dir);
/* How many there are. */
size_t cache_lefts_count(struct cache *c);
/*
 * cache_left_replace() - new file @cf, dirty at @path, is made or moved
 * there here: a copy left at @path is no longer to be removed, as @cf's
 * upload replaces it (without a check: it is ours). True if there was
 * one. Anything else made at such a name (a directory, a symlink, a file
 * moved by a request) removes the copy first (wb_lefts_remove()).
 */
bool cache_left_replace(struct cache *c, const char *path, struct cfile *cf);

/* Everything written to the cache dir is on disk (before a copy left
 * is removed: the file resent may exist nowhere else). 0 or -errno. */
int cache_sync(struct cache *c);
/* The copies to remove now: those at or below @below, or if it is NULL
 * those due by @now. */
struct left_take {
	size_t n;
	uint64_t id[CACHE_LEFT_MAX];
	char *path[CACHE_LEFT_MAX];
};
size_t cache_lefts_take(struct cache *c, const char *below, long long now,
			struct left_take *ret);
/* After the removal of @t: gone if @rc is 0, else tried again later.
 * Frees @t's paths. */
void cache_lefts_done(struct cache *c, struct left_take *t, int rc);
/* Frees @t's paths (a take only looked at: what a listing on its way
 * may still show, remote.c). */
void cache_lefts_release(struct left_take *t);
/* When the next copy is due (monotonic ms), 0 if none (c->lock held). */
long long cache_lefts_next(struct cache *c);

/* ---- links still to make (cache_link.c) ---- */

/*
 * A link made here to a file the sandbox does not have yet is made there
 * after the file's upload (node.h link_later); meanwhile its record is in
 * the journal, naming the file (by its cfile) and the new name, so that a
 * crash does not lose it: the next mount makes it after the upload.
 */
/* Journals the link of @path to @cf's file; *ret_id is its record's.
 * 0 or -errno. */
int cache_link_add(struct cache *c, const struct cfile *cf, const char *path,
		   uint64_t *ret_id);
/* Link @id is now to be made at @path (a rename). 0 or -errno. */
int cache_link_move(struct cache *c, uint64_t id, const char *path);
/* After directory @from moved to @to: the links below it follow. */
void cache_links_follow(struct cache *c, const char *from, const char *to);
/* Link @id is in the sandbox, or no longer to be made: its record goes
 * (takes c->lock; the nodes lock may be held). */
void cache_link_done(struct cache *c, uint64_t id);
/* node_table's on_link_gone: alias @n, a link still to make, is gone. */
void cache_link_gone(struct node *n, void *cache);
/* Whether a link still to make is at or below directory @dir. */
bool cache_links_below(struct cache *c, const char *dir);

/* ---- the journal ---- */

/*
 * cache_dirty() - a change was made at sandbox path @path: bumps the
 * change count, marks dirty and writes the dirty record if it was clean
 * (or if the path changed).
 */
int cache_dirty(struct cache *c, struct cfile *cf, const char *path);
/* The same for a change of mode or times, which the record carries:
 * the record is always rewritten. */
int cache_dirty_meta(struct cache *c, struct cfile *cf, const char *path);
/* Rewrites the record of a dirty cfile under its new path (a rename).
 * On a full disk, clean cached data makes room first. */
int cache_record_update(struct cache *c, struct cfile *cf, const char *path);
/* After a directory moved: the records of the dirty files at or below
 * node @moved name their new paths. */
void cache_records_follow(struct cache *c, struct node *moved);
/* Forgets the changes (the file was deleted or replaced). */
void cache_forget(struct cache *c, struct cfile *cf);

/* ---- room (cache_room.c) ---- */

/* The cap on the bytes cached (cache_max_size). */
int64_t cache_max_size(const struct cache *c);
/*
 * cache_room_whole() - before clean @cf is made whole here (opened for
 * writing, truncated): room for the bytes it lacks, within the cap (clean
 * content of files nobody has open makes room) and on the disk. 0;
 * -EFBIG when the file is bigger than the cap; -ENOSPC when the cache,
 * full of open or unsaved files, or the disk cannot take it. @msg says
 * why (without the file's path).
 */
int cache_room_whole(struct cache *c, struct cfile *cf, char *msg,
		     size_t msg_size);

/* Drops clean content nobody has open, least recently used first, until
 * the total fits max_size and at least @need bytes were freed (a full
 * disk asks for everything: INT64_MAX). Unsaved data is never dropped.
 * Returns the bytes freed. Takes the node lock then the cache lock. */
int64_t cache_evict(struct cache *c, int64_t need);
/* Drops the content of every file that has no local changes (`.osb/ctl
 * invalidate`, a restore): at once, or at the last close of one that is
 * open; in memory, their cache files emptied after by a thread
 * (cache_stale.c). Unsaved data is never dropped. */
void cache_drop_clean(struct cache *c);
/* Returns once the cache files of content cache_drop_clean() let go are
 * emptied (`invalidate`, whose user looks at the disk after); holds no
 * lock meanwhile. */
void cache_sweep_wait(struct cache *c);
#endif /* OSBFS_CACHE_H */

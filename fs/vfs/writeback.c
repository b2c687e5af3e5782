/*
 * writeback.c - the upload workers (see writeback.h).
 *
 * Workers take due dirty files from the cache's dirty list, oldest
 * first, in batches (many small files go in one multipart request; a
 * big file goes alone), and for each batch:
 *   1. check that the sandbox's copy is still the one the local data
 *      derives from (size, mtime, ctime); if someone else changed it, their
 *      version is kept beside ours as NAME.conflict-<time> (never
 *      silently clobbered);
 *   2. upload;
 *   3. set the mtimes the user saw (and any mode the API cannot carry)
 *      with one command, so an upload does not change a file's mtime;
 *      the command says the ctime each file is left with, the base of
 *      the next check;
 *   4. mark clean what did not change meanwhile (a write generation
 *      counter per file; a file written during its upload stays dirty).
 * A failed batch is retried with exponential backoff; a batch that
 * failed for a reason other than the network is retried file by file.
 * A syncer thread flushes new dirty records to disk once a second, so
 * dirty data survives a power loss, not only a crash of osbfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache_i.h"
#include "fprint.h"
#include "journal.h"
#include "log.h"
#include "remote.h"
#include "special.h"
#include "writeback.h"

#define WB_THREADS 2
#define BATCH_FILES 256
#define BATCH_BYTES (32ll << 20)
#define SOLO_BYTES (8ll << 20)
#define BACKOFF_MAX_MS 60000
/* A batch is checked with one listing of the directory its files share
 * while that takes at most this many entries; after a bigger one, one
 * directory at a time for a while. */
#define CHECK_WALK_MAX 10000
#define CHECK_WALK_DEPTH 32
#define CHECK_WALK_PAUSE_MS 60000
#define DIR_TIMES_EVERY_MS 1000
/* After an fsync's upload, the times follow this long after (or with
 * the file's next upload, or a sync): an editor's save is one request. */
#define TIMES_LATER_MS 1000
/* ... for files up to this size: a bigger one's times go with its bytes,
 * since until they do its copy here is dirty and cannot make room in a
 * full cache. */
#define TIMES_LATER_MAX (1 << 20)
/* the longest name a file system takes (NAME_MAX on Linux) */
#define CONFLICT_NAME_MAX 255
/* At least this many new files of a batch, each at most PACK_FILE_MAX,
 * go as one tar archive unpacked by one command (which sets their modes
 * and times too): what each costs the server is then the bytes only. */
#define PACK_MIN 8
/* The bytes of an upload up to this size are fingerprinted before they
 * go (fmeta.sent); a bigger file whose upload landed unanswered is
 * compared with the local copy only. */
#define SENT_PRINT_MAX (64ll << 20)
#define PACK_FILE_MAX (256 << 10)

struct writeback {
	pthread_cond_t kick; /* with cache.lock: work may be due */
	pthread_t threads[WB_THREADS];
	pthread_t syncer;
	int nthreads;
	bool syncer_started;
	bool stop;
	/* statistics, under cache.lock */
	uint64_t uploaded_files, uploaded_bytes, failed, conflicts;
	size_t inflight;
	atomic_llong walk_after; /* no batch walks before (monotonic ms) */
	atomic_bool no_pack;     /* the sandbox has no tar */
	/* under cache.lock, so that a file closed is no reason to wake the
	 * workers (each wake looks through every dirty file) unless none
	 * would look before it is due: */
	unsigned busy;         /* workers sending a batch */
	long long sleep_until; /* a worker wakes by itself then (0: none) */
	unsigned flushing;     /* wb_flush_all() calls waiting */
	/* one setting of directory times at a time: two would send the same
	 * directories twice */
	pthread_mutex_t times_lock;
};

struct item {
	struct cfile *cf;
	char *path;
	int fd;
	uint64_t gen;
	int64_t size;
	struct fmeta m;
	bool skip;              /* deleted meanwhile */
	bool times_only;        /* the bytes are there, its times are not */
	bool hurry;             /* an fsync waits for its bytes */
	bool full;              /* a sync waits for all of it */
	bool times_later;       /* the times go after (an fsync waits) */
	bool fresh;             /* new: the sandbox had no such file */
	long long absent_until; /* cfile's, for known_absent() */
	long long base_seen;    /* cfile's, for known_base() */
	struct timespec ctime;  /* the sandbox's copy's after its times were
				   set, {0, 0} if not known (remote_times) */
	mode_t seen_mode;       /* and its mode then, 0 if not known */
};

/* Someone waits for its bytes only (fsync), and they are not there. */
static bool bytes_wanted(const struct cfile *cf)
{
	return cf->flush_gen > cf->uploaded_gen &&
	       cf->flush_gen > cf->data_gen && cf->full_gen < cf->flush_gen;
}

/* Someone waits for it: its bytes (fsync), or all of it (sync). */
static bool wanted(const struct cfile *cf)
{
	return cf->full_gen > cf->uploaded_gen || bytes_wanted(cf);
}

/* Whether a file due at @due needs a worker woken (cache.lock held): not
 * when one sends a batch (it looks again when done) or sleeps until before
 * then. */
static bool kick_needed(const struct writeback *wb, long long due)
{
	if (due <= mono_ms())
		return true;
	if (wb->busy)
		return false;
	return !wb->sleep_until || due < wb->sleep_until;
}

static bool eligible(const struct cfile *cf, long long now)
{
	if (cf->inflight)
		return false;
	if (wanted(cf))
		return true;
	return cf->writers == 0 && cf->due_ms && cf->due_ms <= now;
}

/* Once a batch goes, files closed a little later join it: a burst of
 * small files (tar x, a build) makes few requests, not one per file. */
static bool joins(const struct cfile *cf, long long now, long slack)
{
	return !cf->inflight && cf->writers == 0 && cf->due_ms &&
	       cf->due_ms <= now + slack;
}

/* Picks a batch (cache.lock held). Returns the count; *ret_wait is how
 * long to sleep when nothing is due. */
static size_t pick(struct cache *c, struct item *items, long long *ret_wait,
		   long slack)
{
	long long now = mono_ms(), next = -1;
	int64_t bytes = 0;
	size_t n = 0;

	for (struct cfile *cf = c->dirty_first; cf; cf = cf->dnext) {
		if (!eligible(cf, now) && !(n && joins(cf, now, slack))) {
			if (!cf->inflight && cf->due_ms && cf->writers == 0 &&
			    (next < 0 || cf->due_ms - now < next))
				next = cf->due_ms - now;
			continue;
		}
		bool alone = cf->solo || cf->size >= SOLO_BYTES;
		if (alone && n)
			continue;
		items[n].cf = cf;
		cf->inflight = true;
		cf->refs++;
		n++;
		bytes += cf->size;
		if (alone || n == BATCH_FILES || bytes >= BATCH_BYTES)
			break;
	}
	*ret_wait = next < 0 ? 1000 : next < 1 ? 1 : next;
	return n;
}

/* Copies what the upload needs, under the locks; opens the data. */
static void snapshot(struct osbfs *fs, struct item *it)
{
	struct cfile *cf = it->cf;
	struct cache *c = fs->cache;

	pthread_mutex_lock(&fs->nodes.lock);
	it->path = cf->node ? node_path(&fs->nodes, cf->node) : NULL;
	pthread_mutex_unlock(&fs->nodes.lock);
	pthread_mutex_lock(&c->lock);
	it->gen = cf->wgen;
	it->size = cf->size;
	it->m = cf->m;
	it->times_only = cf->data_gen == cf->wgen;
	it->fresh = cf->m.base == BASE_ABSENT;
	it->hurry = bytes_wanted(cf);
	it->absent_until = cf->absent_until;
	it->base_seen = cf->base_seen;
	it->full = cf->full_gen >= cf->wgen;
	bool gone = !cf->dirty;
	if (!gone && !it->path) {
		/* its name went away without the change being dropped (every
		 * unlink and replace drops it): nothing can take these bytes;
		 * never retry them in a loop */
		log_warn("changes to %s are dropped: the file no longer has "
			 "a name in the mount",
			 cf->record_path ? cf->record_path : "a file");
		cache_discard(c, cf);
		gone = true;
	}
	pthread_mutex_unlock(&c->lock);
	it->fd = -1;
	if (!it->path || gone) {
		it->skip = true;
		return;
	}
	if (it->m.dir) {
		/* no data, nothing to clobber: mkdir -p gives it its mode */
		it->m.base = BASE_UNKNOWN;
		return;
	}
	it->fd = cache_fd(c, cf);
	if (it->fd < 0)
		log_error("cache file for %s: %s", it->path, strerror(-it->fd));
}

char *wb_conflict_path(const char *path, time_t when)
{
	char suffix[48], *out = NULL;
	struct tm tm;
	gmtime_r(&when, &tm);
	strftime(suffix, sizeof(suffix), ".conflict-%Y%m%dT%H%M%SZ", &tm);
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t dir_len = (size_t)(base - path), len = strlen(base);
	if (len + strlen(suffix) <= CONFLICT_NAME_MAX) {
		if (asprintf(&out, "%s%s", path, suffix) < 0)
			return NULL;
		return out;
	}
	/* too long: as much of the name as fits, cut where a character
	 * begins (the name stays UTF-8), then ~ and a hash of the whole
	 * name, so two long names that begin alike keep apart */
	struct fprint f;
	fprint_init(&f);
	fprint_add(&f, base, len);
	size_t keep = CONFLICT_NAME_MAX - strlen(suffix) - 9;
	while (keep && ((unsigned char)base[keep] & 0xc0) == 0x80)
		keep--;
	if (asprintf(&out, "%.*s%.*s~%08x%s", (int)dir_len, path, (int)keep,
		     base, (unsigned)(fprint_end(&f) & 0xffffffffu),
		     suffix) < 0)
		return NULL;
	return out;
}

/* Whether @it's file has other names in the sandbox (hard links made
 * here). */
static bool item_linked(struct osbfs *fs, const struct item *it)
{
	bool linked = false;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *n = it->cf->node;
	for (struct node *a = n ? n->links : NULL; a; a = a->link_next)
		linked |= !a->link_later;
	pthread_mutex_unlock(&fs->nodes.lock);
	return linked;
}

/* The sandbox's copy (@remote) changed since ours was taken from it:
 * keep theirs as NAME.conflict-<time>. Moved there, unless the file has
 * other names there: then copied, and ours goes into the same inode
 * (an upload writes in place), so that every name keeps the file as it
 * is shown here; their version is the base until it lands. */
static int resolve_conflict(struct osbfs *fs, struct writeback *wb,
			    struct item *it, const struct fattr *remote)
{
	char *aside = wb_conflict_path(it->path, time(NULL));
	if (!aside)
		return -ENOMEM;
	bool linked = item_linked(fs, it);
	int rc = linked ? remote_copy(fs, it->path, aside) :
			  remote_rename(fs, it->path, aside, false, false);
	if (!rc && linked) {
		pthread_mutex_lock(&fs->cache->lock);
		cache_set_base(it->cf, remote);
		pthread_mutex_unlock(&fs->cache->lock);
	}
	if (!rc) {
		log_error("%s was changed in the sandbox while it had local "
			  "changes: their version kept as %s",
			  it->path, aside);
		pthread_mutex_lock(&fs->cache->lock);
		wb->conflicts++;
		pthread_mutex_unlock(&fs->cache->lock);
	}
	free(aside);
	return rc == -ENOENT ? 0 : rc;
}

/* Where a copy in the sandbox is compared with ours as it downloads:
 * byte for byte with the local file, and by fingerprint with the bytes
 * last sent (fmeta.sent). */
struct same_bytes {
	int fd;
	int64_t off;
	bool local;   /* still the same as the local file */
	bool by_sent; /* its fingerprint is being taken */
	struct fprint print;
	char buf[65536];
};

/* A sink that stops (1) once the copy can match neither. */
static int same_sink(void *arg, const void *data, size_t len)
{
	struct same_bytes *s = arg;
	if (s->by_sent)
		fprint_add(&s->print, data, len);
	const char *p = data;
	while (s->local && len) {
		size_t k = len < sizeof(s->buf) ? len : sizeof(s->buf);
		ssize_t r = pread(s->fd, s->buf, k, s->off);
		if (r != (ssize_t)k || memcmp(s->buf, p, k) != 0)
			s->local = false;
		s->off += (int64_t)k;
		p += k;
		len -= k;
	}
	return s->local || s->by_sent ? 0 : 1;
}

/* Whether the sandbox's copy, @size bytes, is ours: byte for byte the
 * local file, or the bytes last sent (an upload that landed without our
 * knowing: its answer was lost, or osbfs was killed before it could
 * record it). */
static bool copy_is_ours(struct osbfs *fs, const struct item *it, int64_t size)
{
	bool local = it->fd >= 0 && size == it->size;
	bool by_sent =
		it->m.sent && size == it->m.sent_size && size <= SENT_PRINT_MAX;
	if (!local && !by_sent)
		return false;
	struct same_bytes *s = malloc(sizeof(*s));
	if (!s)
		return false;
	s->fd = it->fd;
	s->off = 0;
	s->local = local;
	s->by_sent = by_sent;
	fprint_init(&s->print);
	int rc =
		size ? remote_fetch(fs, it->path, 0, size, size, same_sink, s) :
		       0;
	bool ours = rc == 0 && ((s->local && s->off == size) ||
				(by_sent && s->print.len == (uint64_t)size &&
				 fprint_end(&s->print) == it->m.sent_print));
	free(s);
	return ours;
}

static int check_one(struct osbfs *fs, struct writeback *wb, struct item *it,
		     const struct fattr *remote, bool exists)
{
	if (it->m.base == BASE_UNKNOWN || !exists)
		return 0;
	if (remote->type == OSB_DIR)
		return -EISDIR;
	if (fmeta_base_is(&it->m, remote))
		return 0;
	if (remote->type == OSB_FILE && copy_is_ours(fs, it, remote->size)) {
		/* the sandbox's copy is now the base: should this upload
		 * not land either, the next check finds it so */
		pthread_mutex_lock(&fs->cache->lock);
		cache_set_base(it->cf, remote);
		pthread_mutex_unlock(&fs->cache->lock);
		return 0;
	}
	return resolve_conflict(fs, wb, it, remote);
}

static char *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* Whether two paths are in the same directory (no allocation: this
 * runs for every pair of a batch of up to BATCH_FILES). */
static bool same_dir(const char *a, const char *b)
{
	size_t na = (size_t)(strrchr(a, '/') - a);
	size_t nb = (size_t)(strrchr(b, '/') - b);
	return na == nb && strncmp(a, b, na) == 0;
}

/* Whether directory @top is directory @dir or above it. */
static bool dir_holds(const char *top, const char *dir)
{
	return strcmp(top, dir) == 0 || path_below(top, dir);
}

/* The levels of @path below directory @top, which holds it. */
static int levels_below(const char *top, const char *path)
{
	int n = 1;
	for (const char *rel = path_below(top, path); *rel; rel++)
		n += *rel == '/';
	return n;
}

/*
 * Step 1 for a batch of files in several places: one listing of the
 * directory they all are below, with its subtree (an untar, git's
 * objects). 0 when every file was checked, -EAGAIN to check them one
 * directory at a time (one file, a directory the file API cannot take,
 * or a subtree too big), or an error.
 */
static int check_by_walk(struct osbfs *fs, struct writeback *wb,
			 struct item *items, size_t n)
{
	char *top = NULL;
	size_t need = 0;
	int rc = 0, depth = 0;

	if (mono_ms() < atomic_load(&wb->walk_after))
		return -EAGAIN;
	for (size_t i = 0; !rc && i < n; i++) {
		struct item *it = &items[i];
		if (it->skip || it->m.base == BASE_UNKNOWN)
			continue;
		need++;
		char *dir = parent_of(it->path);
		if (!dir) {
			rc = -ENOMEM;
		} else if (!top) {
			top = dir;
			dir = NULL;
		}
		while (!rc && dir && !dir_holds(top, dir)) {
			char *up = parent_of(top);
			free(top);
			top = up;
			rc = top ? 0 : -ENOMEM;
		}
		free(dir);
	}
	for (size_t i = 0; !rc && top && i < n; i++) {
		if (items[i].skip || items[i].m.base == BASE_UNKNOWN)
			continue; /* a skipped item may have no path */
		int l = levels_below(top, items[i].path);
		if (l > depth)
			depth = l;
	}
	if (rc || need < 2 || depth > CHECK_WALK_DEPTH) {
		free(top);
		return rc ? rc : -EAGAIN;
	}

	struct rdent *ents = NULL;
	size_t ne = 0;
	bool cut = false;
	int got = 0;
	rc = remote_walk(fs, top, depth, CHECK_WALK_MAX, &ents, &ne, &cut,
			 &got);
	if (rc == -ENOENT) {
		rc = 0; /* no directory: nothing to clobber */
		got = depth;
	} else if (!rc && (cut || got < depth)) {
		if (cut)
			atomic_store(&wb->walk_after,
				     mono_ms() + CHECK_WALK_PAUSE_MS);
		rc = -EAGAIN;
	}
	for (size_t i = 0; !rc && i < n; i++) {
		struct item *it = &items[i];
		if (it->skip || it->m.base == BASE_UNKNOWN)
			continue;
		const struct fattr *ra = NULL;
		for (size_t e = 0; !ra && e < ne; e++)
			if (strcmp(ents[e].name, path_below(top, it->path)) ==
			    0)
				ra = &ents[e].attr;
		rc = check_one(fs, wb, it, ra, ra != NULL);
		it->m.base = BASE_UNKNOWN; /* checked */
	}
	rdent_array_free(ents, ne);
	free(top);
	return rc;
}

/*
 * Whether the sandbox is known to have had no file at new file @it's
 * path a moment ago, without asking: a listing of its directory, fresh
 * by dir_timeout, did not have it (the file is ours since: it was made
 * after that listing said the name was free). As fresh as a negative
 * entry, which a create trusts too. A directory made here counts as
 * listed when it was made, empty, once it is in the sandbox: what the
 * sandbox puts in it after ends that listing as any other (the change
 * feed, or dir_timeout). Not before: the sandbox may make one of that
 * name meanwhile, whose files the mount's mkdir would not clear.
 */
static bool known_absent(struct osbfs *fs, const struct item *it)
{
	if (it->m.base != BASE_ABSENT)
		return false;
	if (mono_ms() < it->absent_until)
		return true;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *n = it->cf->node, *p = n ? n->parent : NULL;
	bool known =
		p && node_list_fresh(&fs->nodes, p, mono_ms()) &&
		!(p->list_ours && p->cf && cache_only_local(fs->cache, p->cf));
	pthread_mutex_unlock(&fs->nodes.lock);
	return known;
}

/*
 * Whether the sandbox is known to hold changed file @it's base version,
 * without asking: the change feed has been live since it was last seen
 * so (its upload landed, or a report said so), and has said nothing else
 * of it since. As fresh as what the feed holds for a stat: nothing with
 * attr_timeout=0, which asks for every save to look first.
 */
static bool known_base(struct osbfs *fs, const struct item *it)
{
	if (it->m.base != BASE_KNOWN || !it->base_seen)
		return false;
	long long now = mono_ms();
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *n = it->cf->node;
	bool known = fs->nodes.attr_ms > 0 && n &&
		     node_feed_live(&fs->nodes, now) &&
		     it->base_seen >= fs->nodes.feed_since &&
		     it->base_seen >= n->feed_mark;
	pthread_mutex_unlock(&fs->nodes.lock);
	return known;
}

/* Step 1 for a batch: one listing for files in several places when it
 * is cheap, else one listing per directory holding several files; one
 * stat for a lone file. Not for new files whose names are known free,
 * nor for changed files the change feed vouches for. */
static int check_batch(struct osbfs *fs, struct writeback *wb,
		       struct item *items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!items[i].skip &&
		    (known_absent(fs, &items[i]) || known_base(fs, &items[i])))
			items[i].m.base = BASE_UNKNOWN; /* nothing to check */
	int wrc = check_by_walk(fs, wb, items, n);
	if (wrc != -EAGAIN)
		return wrc;
	for (size_t i = 0; i < n; i++) {
		struct item *it = &items[i];
		if (it->skip || it->m.base == BASE_UNKNOWN)
			continue;
		size_t same = 0;
		for (size_t k = i; k < n; k++)
			if (!items[k].skip && same_dir(items[k].path, it->path))
				same++;
		int rc;
		if (same >= 2 && it->m.base == BASE_ABSENT) {
			struct rdent *ents = NULL;
			size_t ne = 0;
			char *dir = parent_of(it->path);
			rc = dir ? remote_list(fs, dir, &ents, &ne) : -ENOMEM;
			free(dir);
			if (rc == -ENOENT)
				rc = 0; /* no directory: nothing to clobber */
			for (size_t k = i; !rc && k < n; k++) {
				struct item *o = &items[k];
				if (o->skip || !same_dir(o->path, it->path) ||
				    o->m.base == BASE_UNKNOWN)
					continue;
				const char *base = strrchr(o->path, '/') + 1;
				const struct fattr *ra = NULL;
				for (size_t e = 0; e < ne; e++)
					if (strcmp(ents[e].name, base) == 0)
						ra = &ents[e].attr;
				rc = check_one(fs, wb, o, ra, ra != NULL);
				o->m.base = BASE_UNKNOWN; /* checked */
			}
			rdent_array_free(ents, ne);
		} else {
			struct fattr ra;
			rc = remote_stat(fs, it->path, &ra);
			if (rc == -ENOENT)
				rc = check_one(fs, wb, it, &ra, false);
			else if (!rc)
				rc = check_one(fs, wb, it, &ra, true);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* A failed attempt (c->lock held): told to whoever waits for it, then
 * retried after a backoff that grows with each failure in a row. */
static void failed(struct writeback *wb, struct cfile *cf, int rc, size_t n,
		   long long now)
{
	cf->failures++;
	cf->fail_seq++;
	cf->last_err = rc;
	long backoff = 1000L << (cf->failures < 7 ? cf->failures - 1 : 6);
	if (backoff > BACKOFF_MAX_MS)
		backoff = BACKOFF_MAX_MS;
	cf->due_ms = now + backoff;
	/* whoever asked for it now (fsync, sync) has been told (fail_seq):
	 * the retries wait out the backoff, never in a loop */
	cf->flush_gen = cf->uploaded_gen;
	cf->full_gen = cf->uploaded_gen;
	if (n > 1 && rc != -EIO)
		cf->solo = true;
	wb->failed++;
}

/* Rewrites @cf's journal record, if it is dirty, with what it now is
 * (c->lock held); a failure is logged: the record in memory is right. */
static void refresh_record(struct cache *c, struct cfile *cf)
{
	if (cache_record_refresh(c, cf))
		log_error("cannot update the journal in %s", c->dir);
}

/* @it's bytes are in the sandbox, its times (or mode) not yet (c->lock
 * held): only they are still to go, and the sandbox's mtime is no longer
 * the one the data derives from. */
static void bytes_in(struct cache *c, struct cfile *cf, const struct item *it)
{
	cf->data_gen = it->gen;
	cf->m.base = BASE_UNKNOWN;
	cf->m.sent = false;
	refresh_record(c, cf);
}

/*
 * Before the bytes of a batch go: the fingerprint of each file's bytes,
 * in its record (the journal too), so that a copy the sandbox holds after
 * an upload whose answer never came is known to be ours, even by the next
 * mount after a kill.
 */
static void mark_sent(struct osbfs *fs, struct item *items, size_t n)
{
	struct cache *c = fs->cache;
	for (size_t i = 0; i < n; i++) {
		struct item *it = &items[i];
		if (it->skip || it->m.dir || it->times_only || it->fd < 0)
			continue;
		uint64_t print = 0;
		bool ok = it->size <= SENT_PRINT_MAX &&
			  fprint_fd(it->fd, it->size, &print) == 0;
		pthread_mutex_lock(&c->lock);
		struct cfile *cf = it->cf;
		/* written since the snapshot: this upload is retried anyway
		 * (EAGAIN), and its bytes match no fingerprint taken now */
		ok = ok && cf->wgen == it->gen;
		if (ok || cf->m.sent) {
			cf->m.sent = ok;
			cf->m.sent_size = it->size;
			cf->m.sent_print = print;
			refresh_record(c, cf);
		}
		pthread_mutex_unlock(&c->lock);
	}
}

/* A file or directory of a batch landed (the nodes lock held): its
 * special bits are the ones it was given, or those the times command saw
 * after, and the directory it is in has a new ctime, of our doing
 * (special.h). */
static void ours_landed(struct osbfs *fs, struct node *n, const struct item *it)
{
	special_set(n, it->m.mode);
	special_changed(fs, n, &it->ctime);
	if (it->seen_mode)
		special_seen(n, it->seen_mode, &it->ctime);
	if (n->parent)
		special_touched(fs, n->parent);
}

/* The end of a batch: @rc is how its files went, @drc its directories. */
static void finish(struct osbfs *fs, struct writeback *wb, struct item *items,
		   size_t n, int files_rc, int drc, bool times_ok)
{
	struct cache *c = fs->cache;
	long long now = mono_ms();

	pthread_mutex_lock(&fs->nodes.lock);
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < n; i++) {
		struct item *it = &items[i];
		struct cfile *cf = it->cf;
		int rc = it->m.dir ? drc : files_rc;
		cf->inflight = false;
		if (it->skip)
			continue;
		if (rc == -EAGAIN) {
			/* changed while it was sent: send the new content */
			cf->due_ms = now + 50;
			continue;
		}
		if (rc) {
			failed(wb, cf, rc, n, now);
			continue;
		}
		if (it->times_later && !it->m.dir) {
			/* the bytes are in, for the fsync that waits; the
			 * times follow a little later, in one command with
			 * others */
			wb->uploaded_files++;
			wb->uploaded_bytes += (uint64_t)it->size;
			bytes_in(c, cf, it);
			cf->failures = 0;
			cf->due_ms = now + TIMES_LATER_MS;
			if (cf->node)
				cf->node->change_gen = ++fs->nodes.change_seq;
			continue;
		}
		if (!times_ok && !it->m.dir) {
			/* the times (or mode) the user set could not be
			 * set: the file stays dirty and only they are
			 * retried */
			if (!it->times_only)
				wb->uploaded_files++;
			bytes_in(c, cf, it);
			failed(wb, cf, -EIO, n, now);
			continue;
		}
		/* the ctime is the one the times command saw, or not known
		 * (packed: the unpack command does not say) */
		cf->m.base = BASE_KNOWN;
		cf->m.base_size = it->size;
		cf->m.base_mtime = it->m.mtime;
		cf->m.base_ctime = it->ctime;
		cf->m.sent = false;
		cf->base_seen = now;
		if (cf->wgen == it->gen) {
			cf->m.times_set = false;
			cf->m.chmod_needed = false;
		}
		cache_uploaded(c, cf, it->gen);
		/* written during the upload: its record gets the new base,
		 * or a kill now would leave the old one for the next mount to
		 * find changed */
		refresh_record(c, cf);
		/* what the sandbox now has is what we show, and an answer
		 * asked for before this (a listing, a stat) is older */
		if (cf->node) {
			struct timespec local = fmeta_ctime(&it->m);
			cf->node->change_gen = ++fs->nodes.change_seq;
			/* the ctime shown stays that of the change (node.h);
			 * a directory's mode does not say the ctime it left:
			 * the next answer does */
			node_ctime_landed(cf->node, &local, &it->ctime);
		}
		if (it->m.dir) {
			if (cf->node) {
				cf->node->attr.mode = it->m.mode & 07777;
				ours_landed(fs, cf->node, it);
			}
			continue;
		}
		if (!it->times_only) {
			wb->uploaded_files++;
			wb->uploaded_bytes += (uint64_t)it->size;
		}
		if (cf->node && !cf->dirty && cf->node->attr_valid) {
			cf->node->attr.size = it->size;
			cf->node->attr.mtime = it->m.mtime;
			cf->node->attr.mode = it->m.mode & 07777;
			cf->node->attr.ctime = it->ctime;
		}
		if (cf->node)
			ours_landed(fs, cf->node, it);
	}
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&fs->nodes.lock);
}

/*
 * The files of a batch marked in @pk (uploads @ups, @nu of them; @tix
 * the index of each one's times in @times) go as one archive when there
 * are enough of them; those sent are taken out of @ups and @times.
 */
static void try_pack(struct osbfs *fs, struct writeback *wb,
		     struct rupload *ups, size_t *nu, struct rtimes *times,
		     size_t *nt, const bool *pk, const size_t *tix)
{
	size_t np = 0;
	for (size_t i = 0; i < *nu; i++)
		np += pk[i];
	if (np < PACK_MIN || atomic_load(&wb->no_pack))
		return;
	struct rupload *pu = calloc(np, sizeof(*pu));
	struct rtimes *pt = calloc(np, sizeof(*pt));
	bool *tdrop = calloc(*nt, sizeof(*tdrop));
	int fd = openat(fs->cache->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC,
			0600);
	int rc = pu && pt && tdrop && fd >= 0 ? 0 : -ENOMEM;
	for (size_t i = 0, k = 0; !rc && i < *nu; i++) {
		if (!pk[i])
			continue;
		pu[k] = ups[i];
		pt[k++] = times[tix[i]];
		tdrop[tix[i]] = true;
	}
	if (!rc)
		rc = remote_unpack(fs, pu, pt, np, fd);
	if (rc == -ENOTSUP && !atomic_exchange(&wb->no_pack, true))
		log_warn("the sandbox has no tar: new files go in multipart "
			 "uploads");
	if (!rc) {
		size_t w = 0;
		for (size_t i = 0; i < *nu; i++)
			if (!pk[i])
				ups[w++] = ups[i];
		*nu = w;
		w = 0;
		for (size_t i = 0; i < *nt; i++)
			if (!tdrop[i])
				times[w++] = times[i];
		*nt = w;
	}
	if (fd >= 0)
		close(fd);
	free(pu);
	free(pt);
	free(tdrop);
}

/*
 * The links made here to files of a batch before the sandbox had them
 * (node.h link_later), made now that it has them: one command for all,
 * before the times command, so that the ctime it prints is the one the
 * links left. 0 or -errno (the batch is then retried, and so are they).
 */
static int links_later(struct osbfs *fs, struct item *items, size_t n)
{
	char **srcs = NULL, **dsts = NULL;
	struct node **al = NULL;
	size_t k = 0, cap = 0;
	int rc = 0;

	pthread_mutex_lock(&fs->nodes.lock);
	for (size_t i = 0; !rc && i < n; i++) {
		struct item *it = &items[i];
		struct node *f = it->skip || it->m.dir ? NULL : it->cf->node;
		for (struct node *a = f ? f->links : NULL; !rc && a;
		     a = a->link_next) {
			if (!a->link_later)
				continue;
			if (k == cap) {
				cap = cap ? cap * 2 : 8;
				char **s = realloc(srcs, cap * sizeof(*s));
				srcs = s ? s : srcs;
				char **d = realloc(dsts, cap * sizeof(*d));
				dsts = d ? d : dsts;
				struct node **l = realloc(al, cap * sizeof(*l));
				al = l ? l : al;
				if (!s || !d || !l) {
					rc = -ENOMEM;
					break;
				}
			}
			srcs[k] = strdup(it->path);
			dsts[k] = node_path(&fs->nodes, a);
			if (!srcs[k] || !dsts[k]) {
				free(srcs[k]);
				free(dsts[k]);
				rc = -ENOMEM;
				break;
			}
			al[k++] = a;
			node_ref(a);
		}
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!rc && k)
		rc = remote_links_later(fs, srcs, dsts, k);
	if (rc && k)
		log_error("%zu link(s) to files just uploaded, first %s, could "
			  "not be made in the sandbox (%s): retried",
			  k, dsts[0], strerror(-rc));
	pthread_mutex_lock(&fs->nodes.lock);
	for (size_t j = 0; j < k; j++) {
		/* in the sandbox: its record goes (one moved or removed
		 * meanwhile went with its name) */
		if (!rc && al[j]->link_later) {
			cache_link_gone(al[j], fs->cache);
			al[j]->link_later = false;
		}
		node_unref(&fs->nodes, al[j]);
		free(srcs[j]);
		free(dsts[j]);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	free(srcs);
	free(dsts);
	free(al);
	return rc;
}

static void run_batch(struct osbfs *fs, struct writeback *wb,
		      struct item *items, size_t n)
{
	struct rupload *ups = calloc(n, sizeof(*ups));
	struct rtimes *times = calloc(n, sizeof(*times));
	struct rdir *dirs = calloc(n, sizeof(*dirs));
	size_t nu = 0, nd = 0;
	int rc = ups && times && dirs ? 0 : -ENOMEM;
	bool times_ok = true;

	size_t nfiles = 0;
	const char *first = NULL; /* file, for the messages */
	for (size_t i = 0; i < n; i++) {
		struct item *it = &items[i];
		snapshot(fs, it);
		if (it->skip)
			continue;
		if (it->m.dir && dirs)
			dirs[nd++] = (struct rdir){
				.path = it->path,
				.mode = it->m.mode,
				.owner = it->m.owner,
				.group = it->m.group,
			};
		else if (!it->m.dir && nfiles++ == 0)
			first = it->path;
	}
	for (size_t i = 0; !rc && i < n; i++)
		if (!items[i].skip && !items[i].m.dir && items[i].fd < 0)
			rc = -EIO;
	/* an fsync waits for this batch's bytes: the times of what nobody
	 * syncs go a little later, so the fsync does not wait for them */
	bool hurry = false;
	for (size_t i = 0; i < n; i++)
		hurry |= !items[i].skip && items[i].hurry;
	for (size_t i = 0; hurry && i < n; i++) {
		struct item *it = &items[i];
		it->times_later = !it->skip && !it->m.dir && !it->times_only &&
				  !it->full && it->size <= TIMES_LATER_MAX;
	}
	if (!rc)
		rc = check_batch(fs, wb, items, n);
	if (!rc)
		mark_sent(fs, items, n);
	/* directories first, so that the files in them find their modes
	 * (an upload would make a missing one with execd's default) */
	int drc = rc;
	if (!rc && nd)
		drc = remote_dirs(fs, dirs, nd);
	if (nd && drc)
		log_error("making %zu directory(ies) failed, first %s (%s); "
			  "kept locally and retried",
			  nd, dirs[0].path, strerror(-drc));
	size_t nt = 0;
	bool *pk = calloc(n, sizeof(*pk));
	size_t *tix = calloc(n, sizeof(*tix));
	if (!pk || !tix)
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++) {
		struct item *it = &items[i];
		if (it->skip || it->m.dir)
			continue;
		if (!it->times_only && !it->times_later && it->fresh &&
		    it->size <= PACK_FILE_MAX) {
			pk[nu] = true;
			tix[nu] = nt;
		}
		if (!it->times_later) {
			times[nt] = (struct rtimes){
				.path = it->path,
				.mtime = it->m.mtime,
				.atime = it->m.atime,
				.chmod = it->m.mode,
				/* an upload chowns, which clears setuid
				 * and setgid: they go again each time */
				.do_chmod = it->m.chmod_needed ||
					    (it->m.mode & 0777) == 0 ||
					    (it->m.mode & 07000),
				.ret_ctime = &it->ctime,
				.ret_mode = &it->seen_mode,
			};
			if (!it->m.times_set)
				times[nt].atime.tv_nsec = UTIME_OMIT;
			nt++;
		}
		if (it->times_only)
			continue;
		ups[nu] = (struct rupload){
			.path = it->path,
			.fd = it->fd,
			.size = it->size,
			.mode = it->m.mode & 0777,
			.owner = it->m.owner,
			.group = it->m.group,
		};
		nu++;
	}
	if (!rc && !hurry)
		try_pack(fs, wb, ups, &nu, times, &nt, pk, tix);
	free(pk);
	free(tix);
	if (!rc && nu)
		rc = remote_upload(fs, ups, nu);
	if (!rc)
		rc = links_later(fs, items, n);
	if (!rc && nt && remote_times(fs, times, nt) != 0) {
		/* the data is there; only the times are off */
		log_error("could not set the times of %zu uploaded file(s), "
			  "first %s: retried",
			  nt, times[0].path);
		times_ok = false;
	}
	if (rc && rc != -EAGAIN && nfiles)
		log_error("upload of %zu file(s) failed, first %s (%s); "
			  "kept locally and retried",
			  nfiles, first, strerror(-rc));
	finish(fs, wb, items, n, rc, drc, times_ok);
	for (size_t i = 0; i < n; i++) {
		if (items[i].fd >= 0)
			close(items[i].fd);
		free(items[i].path);
		cache_unref(fs->cache, items[i].cf);
	}
	free(ups);
	free(times);
	free(dirs);
}

/* Directory times set while files below were still uploading (ops.c
 * do_times) go to the sandbox once those uploads are done, so the
 * uploads do not move them again. */
struct pending_dir {
	struct node *n;
	char *path;
	struct timespec mtime, atime;
	uint64_t seq;          /* its times_seq then */
	struct timespec ctime; /* and what the command saw after */
	mode_t mode;
};

struct pending_scan {
	struct osbfs *fs;
	struct pending_dir *d;
	size_t n, cap;
};

static void scan_pending(struct node *n, void *arg)
{
	struct pending_scan *ps = arg;
	if (!n->times_pending || n->dirty_mark == ps->fs->nodes.mark_seq)
		return;
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 16;
		struct pending_dir *d = realloc(ps->d, cap * sizeof(*d));
		if (!d)
			return;
		ps->d = d;
		ps->cap = cap;
	}
	char *path = node_path(&ps->fs->nodes, n);
	if (path && cache_lefts_below_locked(ps->fs->cache, path)) {
		/* a copy left by a save is still to go: its removal would
		 * move the mtime again */
		free(path);
		path = NULL;
	}
	if (!path)
		return;
	ps->d[ps->n] = (struct pending_dir){ .n = n,
					     .path = path,
					     .mtime = n->pending_mtime,
					     .atime = n->pending_atime,
					     .seq = n->times_seq };
	node_times_sent(n);
	node_ref(n);
	ps->n++;
}

static int apply_dir_times_locked(struct osbfs *fs);

static int apply_dir_times(struct osbfs *fs)
{
	pthread_mutex_lock(&fs->wb->times_lock);
	int rc = apply_dir_times_locked(fs);
	pthread_mutex_unlock(&fs->wb->times_lock);
	return rc;
}

static int apply_dir_times_locked(struct osbfs *fs)
{
	struct pending_scan ps = { .fs = fs };

	pthread_mutex_lock(&fs->nodes.lock);
	if (fs->pending_dir_times) {
		pthread_mutex_lock(&fs->cache->lock);
		/* every directory with a dirty file below, in one walk up
		 * from each dirty file */
		uint64_t mark = ++fs->nodes.mark_seq;
		for (struct cfile *cf = fs->cache->dirty_first; cf;
		     cf = cf->dnext)
			for (struct node *x = cf->node;
			     x && x->dirty_mark != mark; x = x->parent)
				x->dirty_mark = mark;
		node_for_each(&fs->nodes, scan_pending, &ps);
		pthread_mutex_unlock(&fs->cache->lock);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!ps.n)
		return 0;
	struct rtimes *t = calloc(ps.n, sizeof(*t));
	int rc = t ? 0 : -ENOMEM;
	for (size_t i = 0; t && i < ps.n; i++)
		t[i] = (struct rtimes){ .path = ps.d[i].path,
					.mtime = ps.d[i].mtime,
					.atime = ps.d[i].atime,
					.ret_ctime = &ps.d[i].ctime,
					.ret_mode = &ps.d[i].mode };
	if (!rc)
		rc = remote_times(fs, t, ps.n);
	pthread_mutex_lock(&fs->nodes.lock);
	for (size_t i = 0; i < ps.n; i++) {
		struct node *n = ps.d[i].n;
		/* not when the user set them again, or a name came or went
		 * in it, while the command went */
		bool same = n->times_pending && n->times_seq == ps.d[i].seq;
		node_times_done(n, &ps.d[i].ctime);
		if (!rc && same) {
			n->times_pending = false;
			fs->pending_dir_times--;
			n->attr.mtime = ps.d[i].mtime;
			n->change_gen = ++fs->nodes.change_seq;
			special_changed(fs, n, &ps.d[i].ctime);
			if (ps.d[i].mode)
				special_seen(n, ps.d[i].mode, &ps.d[i].ctime);
		}
		node_unref(&fs->nodes, n);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (rc)
		log_error("could not set the times of %zu directories, first "
			  "%s: %s; retried",
			  ps.n, ps.d[0].path, strerror(-rc));
	for (size_t i = 0; i < ps.n; i++)
		free(ps.d[i].path);
	free(t);
	free(ps.d);
	return rc;
}

int wb_dir_times(struct osbfs *fs, struct node *n, struct rtimes *t,
		 uint64_t *ret_seq)
{
	pthread_mutex_lock(&fs->nodes.lock);
	uint64_t seq = ++n->times_seq;
	n->changed_here = (struct timespec){ 0, 0 };
	pthread_mutex_unlock(&fs->nodes.lock);
	bool wait = cache_dirty_below(fs->cache, n, false) ||
		    cache_lefts_below(fs->cache, t->path);
	pthread_mutex_lock(&fs->nodes.lock);
	if (wait && !n->times_pending)
		fs->pending_dir_times++;
	else if (!wait && n->times_pending)
		fs->pending_dir_times--;
	n->times_pending = wait;
	if (wait) {
		n->pending_mtime = t->mtime;
		n->pending_atime =
			t->atime.tv_nsec == UTIME_OMIT ? t->mtime : t->atime;
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (wait)
		return 1;
	/* after a setting of older times that is on its way */
	pthread_mutex_lock(&fs->wb->times_lock);
	pthread_mutex_lock(&fs->nodes.lock);
	node_times_sent(n);
	pthread_mutex_unlock(&fs->nodes.lock);
	int rc = remote_times(fs, t, 1);
	pthread_mutex_lock(&fs->nodes.lock);
	node_times_done(n, t->ret_ctime);
	pthread_mutex_unlock(&fs->nodes.lock);
	pthread_mutex_unlock(&fs->wb->times_lock);
	*ret_seq = seq;
	return rc;
}

int wb_lefts_remove(struct osbfs *fs, const char *below, long long now)
{
	struct left_take t;
	if (!cache_lefts_take(fs->cache, below, now, &t))
		return 0;
	/* the files resent from there may exist nowhere else but here */
	int rc = cache_sync(fs->cache);
	if (!rc)
		rc = remote_unlink_many(fs, t.path, t.n);
	for (size_t i = 0; !rc && i < t.n; i++)
		special_touched_dir_of(fs, t.path[i]);
	if (rc)
		log_error("could not remove %zu cop%s left in the sandbox by "
			  "saves, first %s: %s; retried",
			  t.n, t.n == 1 ? "y" : "ies", t.path[0],
			  strerror(-rc));
	cache_lefts_done(fs->cache, &t, rc);
	return rc;
}

/* Hands freed memory back to the system. Not under a sanitizer: its own
 * allocator holds the memory, so glibc's trim has nothing to give back;
 * there a trim from a worker once crashed in glibc (a read of address 8
 * in mtrim) while other workers ran. */
static void trim_memory(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return;
#else
	malloc_trim(0);
#endif
}

static void *worker(void *arg)
{
	struct osbfs *fs = arg;
	struct writeback *wb = fs->wb;
	struct cache *c = fs->cache;
	struct item items[BATCH_FILES];

	/* directory times whose files are in go at most once a second, so
	 * that an untar's many batches set them in a few commands */
	long long times_at = 0;
	bool times_waiting = false;
	bool trim = false;

	pthread_mutex_lock(&c->lock);
	while (!wb->stop) {
		long long wait, now = mono_ms();
		long long left_due = cache_lefts_next(c);
		if (left_due && left_due <= now) {
			/* copies left by saves: one request for all */
			pthread_mutex_unlock(&c->lock);
			pthread_rwlock_wrlock(&fs->path_lock);
			wb_lefts_remove(fs, NULL, now);
			pthread_rwlock_unlock(&fs->path_lock);
			pthread_mutex_lock(&c->lock);
			times_waiting = true; /* those of their directories */
			continue;
		}
		memset(items, 0, sizeof(items));
		size_t n =
			pick(c, items, &wait, fs->opt->writeback_delay_ms / 2);
		if (!n && times_waiting && now >= times_at && !wb->flushing) {
			times_waiting = false;
			times_at = now + DIR_TIMES_EVERY_MS;
			pthread_mutex_unlock(&c->lock);
			pthread_rwlock_rdlock(&fs->path_lock);
			apply_dir_times(fs);
			pthread_rwlock_unlock(&fs->path_lock);
			pthread_mutex_lock(&c->lock);
			continue;
		}
		if (!n) {
			struct timespec ts;
			if (trim) {
				/* the memory of big batches and listings goes
				 * back to the system once the work is done */
				trim = false;
				pthread_mutex_unlock(&c->lock);
				trim_memory();
				pthread_mutex_lock(&c->lock);
				continue;
			}
			if (times_waiting && times_at - now < wait)
				wait = times_at - now;
			if (left_due && left_due - now < wait)
				wait = left_due - now;
			if (!wb->sleep_until || now + wait < wb->sleep_until ||
			    wb->sleep_until <= now)
				wb->sleep_until = now + wait;
			cond_deadline(&ts, wait);
			pthread_cond_timedwait(&wb->kick, &c->lock, &ts);
			wb->sleep_until = 0; /* the others' times are lost:
						a kick wakes them again */
			continue;
		}
		wb->busy++;
		wb->inflight += n;
		trim = true;
		pthread_mutex_unlock(&c->lock);
		pthread_rwlock_rdlock(&fs->path_lock);
		run_batch(fs, wb, items, n);
		now = mono_ms();
		/* a sync sets them all once its files are in: as many
		 * commands however long it takes */
		pthread_mutex_lock(&c->lock);
		bool flushing = wb->flushing;
		pthread_mutex_unlock(&c->lock);
		if (now >= times_at && !flushing) {
			apply_dir_times(fs);
			times_at = now + DIR_TIMES_EVERY_MS;
			times_waiting = false;
		} else {
			times_waiting = true;
		}
		pthread_rwlock_unlock(&fs->path_lock);
		pthread_mutex_lock(&c->lock);
		wb->busy--;
		wb->inflight -= n;
		bool over = c->total_bytes > c->max_size;
		if (over) {
			pthread_mutex_unlock(&c->lock);
			cache_evict(c, 0);
			pthread_mutex_lock(&c->lock);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static void *syncer(void *arg)
{
	struct osbfs *fs = arg;
	struct writeback *wb = fs->wb;
	struct cache *c = fs->cache;

	pthread_mutex_lock(&c->lock);
	while (!wb->stop) {
		/* once a second, not at every kick of the workers */
		struct timespec ts;
		cond_deadline(&ts, 1000);
		while (!wb->stop && pthread_cond_timedwait(&wb->kick, &c->lock,
							   &ts) != ETIMEDOUT)
			;
		if (wb->stop || !c->unsynced)
			continue;
		c->unsynced = 0;
		pthread_mutex_unlock(&c->lock);
		syncfs(c->files_fd);
		pthread_mutex_lock(&c->lock);
		if (journal_wants_compaction(c) && journal_compact(c) != 0)
			log_error("cannot rewrite the journal in %s", c->dir);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int wb_start(struct osbfs *fs)
{
	struct writeback *wb = calloc(1, sizeof(*wb));
	if (!wb)
		return -ENOMEM;
	pthread_cond_init(&wb->kick, NULL);
	pthread_mutex_init(&wb->times_lock, NULL);
	fs->wb = wb;
	for (int i = 0; i < WB_THREADS; i++) {
		int rc = pthread_create(&wb->threads[i], NULL, worker, fs);
		if (rc)
			return -rc;
		wb->nthreads++;
	}
	int rc = pthread_create(&wb->syncer, NULL, syncer, fs);
	if (rc)
		return -rc;
	wb->syncer_started = true;
	return 0;
}

void wb_stop(struct osbfs *fs)
{
	struct writeback *wb = fs->wb;
	if (!wb)
		return;
	pthread_mutex_lock(&fs->cache->lock);
	wb->stop = true;
	pthread_cond_broadcast(&wb->kick);
	pthread_cond_broadcast(&fs->cache->changed);
	pthread_mutex_unlock(&fs->cache->lock);
	for (int i = 0; i < wb->nthreads; i++)
		pthread_join(wb->threads[i], NULL);
	if (wb->syncer_started)
		pthread_join(wb->syncer, NULL);
	if (fs->cache->files_fd >= 0)
		syncfs(fs->cache->files_fd);
	pthread_cond_destroy(&wb->kick);
	pthread_mutex_destroy(&wb->times_lock);
	free(wb);
	fs->wb = NULL;
}

void wb_schedule(struct osbfs *fs, struct cfile *cf, long delay_ms)
{
	struct cache *c = fs->cache;
	pthread_mutex_lock(&c->lock);
	if (cf->dirty) {
		cf->due_ms = mono_ms() + (delay_ms > 0 ? delay_ms : 0);
		if (fs->wb && kick_needed(fs->wb, cf->due_ms))
			pthread_cond_broadcast(&fs->wb->kick);
	}
	pthread_mutex_unlock(&c->lock);
}

void wb_lefts_added(struct osbfs *fs)
{
	struct cache *c = fs->cache;
	pthread_mutex_lock(&c->lock);
	long long due = cache_lefts_next(c);
	if (fs->wb && due && kick_needed(fs->wb, due))
		pthread_cond_broadcast(&fs->wb->kick);
	pthread_mutex_unlock(&c->lock);
}

void wb_retry_now(struct osbfs *fs)
{
	struct cache *c = fs->cache;
	long long now = mono_ms();
	pthread_mutex_lock(&c->lock);
	for (struct cfile *cf = c->dirty_first; cf; cf = cf->dnext)
		if (cf->failures && cf->due_ms > now)
			cf->due_ms = now;
	if (fs->wb)
		pthread_cond_broadcast(&fs->wb->kick);
	pthread_mutex_unlock(&c->lock);
}

/* Asks for @cf to be uploaded up to its current generation, with its
 * times unless @bytes (c->lock held). */
static uint64_t request(struct osbfs *fs, struct cfile *cf, bool bytes)
{
	uint64_t target = cf->wgen;
	if (cf->flush_gen < target)
		cf->flush_gen = target;
	if (!bytes && cf->full_gen < target)
		cf->full_gen = target;
	cf->due_ms = mono_ms();
	if (fs->wb)
		pthread_cond_broadcast(&fs->wb->kick);
	return target;
}

/* Whether the sandbox has @cf up to @target: all of it, or its bytes. */
static bool has(const struct cfile *cf, uint64_t target, bool bytes)
{
	return !cf->dirty || cf->uploaded_gen >= target ||
	       (bytes && cf->data_gen >= target);
}

/* After request(): waits for @cf's upload up to @target, or for the
 * attempt to fail (c->lock held). 0 or -EIO. */
static int flush_wait(struct osbfs *fs, struct cfile *cf, uint64_t target,
		      uint64_t seq, bool bytes)
{
	struct cache *c = fs->cache;
	while (!has(cf, target, bytes) && cf->fail_seq == seq && !fs->wb->stop)
		pthread_cond_wait(&c->changed, &c->lock);
	return has(cf, target, bytes) ? 0 : -EIO;
}

int wb_flush_list(struct osbfs *fs, struct cfile *const *cfs, size_t n,
		  bool bytes)
{
	struct cache *c = fs->cache;
	uint64_t *target = calloc(n ? n : 1, sizeof(*target));
	uint64_t *seq = calloc(n ? n : 1, sizeof(*seq));
	int rc = target && seq ? 0 : -ENOMEM;

	pthread_mutex_lock(&c->lock);
	/* asked all at once: they go in one batch */
	for (size_t i = 0; !rc && i < n; i++) {
		if (!cfs[i]->dirty || !fs->wb)
			continue;
		seq[i] = cfs[i]->fail_seq;
		target[i] = request(fs, cfs[i], bytes);
	}
	for (size_t i = 0; !rc && i < n; i++)
		if (target[i])
			rc = flush_wait(fs, cfs[i], target[i], seq[i], bytes);
	pthread_mutex_unlock(&c->lock);
	free(target);
	free(seq);
	return rc;
}

int wb_flush(struct osbfs *fs, struct cfile *cf)
{
	return wb_flush_list(fs, &cf, 1, false);
}

int wb_flush_bytes(struct osbfs *fs, struct cfile *cf)
{
	return wb_flush_list(fs, &cf, 1, true);
}

int wb_flush_all(struct osbfs *fs, long timeout_ms)
{
	struct cache *c = fs->cache;
	struct want {
		struct cfile *cf;
		uint64_t target, seq;
	} *w = NULL;
	size_t n = 0;
	int rc = 0;
	struct timespec deadline;

	if (timeout_ms >= 0)
		cond_deadline(&deadline, timeout_ms);
	pthread_mutex_lock(&c->lock);
	struct writeback *wb = fs->wb;
	if (wb)
		wb->flushing++;
	if (c->ndirty)
		w = calloc(c->ndirty, sizeof(*w));
	for (struct cfile *cf = c->dirty_first; w && cf; cf = cf->dnext) {
		w[n].cf = cf;
		w[n].seq = cf->fail_seq;
		w[n].target = request(fs, cf, false);
		cf->refs++;
		n++;
	}
	if (c->ndirty && !w)
		rc = -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		while (!rc && !has(w[i].cf, w[i].target, false) &&
		       w[i].cf->fail_seq == w[i].seq && fs->wb &&
		       !fs->wb->stop) {
			if (timeout_ms < 0)
				pthread_cond_wait(&c->changed, &c->lock);
			else if (pthread_cond_timedwait(&c->changed, &c->lock,
							&deadline) == ETIMEDOUT)
				rc = -ETIMEDOUT;
		}
		if (!rc && w[i].cf->dirty &&
		    w[i].cf->uploaded_gen < w[i].target)
			rc = -EIO;
	}
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < n; i++)
		cache_unref(c, w[i].cf);
	free(w);
	/* the copies left go before the directories' times: their removal
	 * moves the mtimes */
	if (!rc) {
		pthread_rwlock_wrlock(&fs->path_lock);
		if (wb_lefts_remove(fs, NULL, LLONG_MAX))
			rc = -EIO;
		pthread_rwlock_unlock(&fs->path_lock);
	}
	if (!rc) {
		pthread_rwlock_rdlock(&fs->path_lock);
		if (apply_dir_times(fs))
			rc = -EIO;
		pthread_rwlock_unlock(&fs->path_lock);
	}
	if (wb) {
		pthread_mutex_lock(&c->lock);
		wb->flushing--;
		pthread_cond_broadcast(&wb->kick); /* times may wait for us */
		pthread_mutex_unlock(&c->lock);
	}
	return rc;
}

size_t wb_describe_failures(struct osbfs *fs, char *buf, size_t size)
{
	struct cache *c = fs->cache;
	size_t n = 0, len = 0;
	buf[0] = '\0';
	pthread_mutex_lock(&c->lock);
	for (struct cfile *cf = c->dirty_first; cf; cf = cf->dnext) {
		if (!cf->failures)
			continue;
		if (n++ < 3 && len < size)
			len += (size_t)snprintf(
				buf + len, size - len, "%s%s (%s)",
				n > 1 ? ", " : "",
				cf->record_path ? cf->record_path : "?",
				strerror(-cf->last_err));
	}
	pthread_mutex_unlock(&c->lock);
	if (n > 3 && len < size)
		snprintf(buf + len, size - len, " and %zu more", n - 3);
	return n;
}

void wb_get_stats(struct osbfs *fs, struct wb_stats *ret)
{
	struct cache *c = fs->cache;
	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&c->lock);
	for (struct cfile *cf = c->dirty_first; cf; cf = cf->dnext) {
		if (cf->m.dir)
			ret->dirty_dirs++;
		else
			ret->dirty_files++;
		ret->dirty_bytes += cf->size;
	}
	if (fs->wb) {
		ret->inflight = fs->wb->inflight;
		ret->uploaded_files = fs->wb->uploaded_files;
		ret->uploaded_bytes = fs->wb->uploaded_bytes;
		ret->failed_uploads = fs->wb->failed;
		ret->conflicts = fs->wb->conflicts;
	}
	pthread_mutex_unlock(&c->lock);
}

void wb_describe_count(const struct wb_stats *st, char *buf, size_t size)
{
	if (st->dirty_dirs)
		snprintf(buf, size, "%zu file(s) and %zu directory(ies)",
			 st->dirty_files, st->dirty_dirs);
	else
		snprintf(buf, size, "%zu file(s)", st->dirty_files);
}

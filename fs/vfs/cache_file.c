/*
 * cache_file.c - one file's content as the FUSE ops use it (cache.h):
 * which sandbox version it holds, filling its gaps, reads and writes
 * through open handles, truncation, and the mode and times it shows
 * while it has local changes.
 *
 * A reader never gets bytes of two sandbox versions of a file: the bytes
 * cached for a clean file are all of the version its validator names,
 * and cf->version moves on whenever the content gives way to another
 * version; a handle reads only the version it was opened on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_i.h"
#include "log.h"
#include "node.h"

bool cache_is_dirty(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	bool dirty = cf->dirty;
	pthread_mutex_unlock(&c->lock);
	return dirty;
}

bool cache_only_local(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	bool only = cf->dirty && cf->m.base == BASE_ABSENT;
	pthread_mutex_unlock(&c->lock);
	return only;
}

bool cache_is_open(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	bool open = cf->opens > 0;
	pthread_mutex_unlock(&c->lock);
	return open;
}

bool cache_upload_due(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	bool due = cf->dirty && cf->writers == 0;
	pthread_mutex_unlock(&c->lock);
	return due;
}

void cache_local_attr(struct cache *c, struct cfile *cf, struct cache_attr *ret)
{
	pthread_mutex_lock(&c->lock);
	ret->dir = cf->m.dir;
	ret->size = cf->size;
	ret->mode = cf->m.mode;
	ret->mtime = cf->m.mtime;
	ret->atime = cf->m.times_set ? cf->m.atime : cf->m.mtime;
	ret->ctime = fmeta_ctime(&cf->m);
	memcpy(ret->owner, cf->m.owner, sizeof(ret->owner));
	memcpy(ret->group, cf->m.group, sizeof(ret->group));
	pthread_mutex_unlock(&c->lock);
}

uint64_t cache_mark(struct cache *c)
{
	pthread_mutex_lock(&c->lock);
	uint64_t mark = c->epoch;
	pthread_mutex_unlock(&c->lock);
	return mark;
}

uint64_t cache_mark_new(struct cache *c)
{
	pthread_mutex_lock(&c->lock);
	uint64_t mark = ++c->epoch;
	pthread_mutex_unlock(&c->lock);
	return mark;
}

/* c->lock held: whether @a is the version clean @cf holds. */
static bool confirm(struct cfile *cf, const struct fattr *a, uint64_t mark)
{
	bool same = cf->m.base == BASE_KNOWN && fmeta_base_take(&cf->m, a);
	if (same && mark > cf->confirmed_at)
		cf->confirmed_at = mark;
	return same;
}

void cache_confirm(struct cache *c, struct cfile *cf, const struct fattr *a,
		   uint64_t mark)
{
	pthread_mutex_lock(&c->lock);
	if (!cf->dirty)
		confirm(cf, a, mark);
	pthread_mutex_unlock(&c->lock);
}

void cache_base_report(struct cache *c, struct cfile *cf, const struct fattr *a,
		       long long now)
{
	pthread_mutex_lock(&c->lock);
	cf->base_seen = fmeta_base_is(&cf->m, a) ? now : 0;
	pthread_mutex_unlock(&c->lock);
}

bool cache_confirmed(struct cache *c, struct cfile *cf, uint64_t mark)
{
	pthread_mutex_lock(&c->lock);
	bool done = cf->confirmed_at >= mark;
	pthread_mutex_unlock(&c->lock);
	return done;
}

bool cache_mixed(struct cache *c, struct cfile *cf, const struct fattr *a)
{
	pthread_mutex_lock(&c->lock);
	bool mixed = !cf->dirty && cf->mixed_at > cf->confirmed_at &&
		     (!a || fmeta_base_is(&cf->m, a));
	pthread_mutex_unlock(&c->lock);
	return mixed;
}

bool cache_check_version(struct cache *c, struct cfile *cf,
			 const struct fattr *a, uint64_t mark)
{
	bool stale = false;
	pthread_mutex_lock(&c->lock);
	if (!cf->dirty && cf->m.base == BASE_KNOWN && !confirm(cf, a, mark)) {
		/* the kernel learns the new size for every handle: one open
		 * on the old version would read its bytes cut short, or
		 * joined to the new ones, without an error */
		stale = cf->opens && a->size != cf->size;
		if (!cf->opens || stale)
			cache_drop_content(c, cf);
		if (stale) {
			cf->m.base = BASE_UNKNOWN;
			cf->version++;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return stale;
}

/*
 * The kernel keeps one page cache per inode, for every handle: while
 * handles of an older version are open, pages of the new one must not go
 * there, or those handles would read them; so a new handle then bypasses
 * it (direct). A new open with keep_cache off has the kernel drop the
 * inode's pages, and the first open once they are all closed too.
 */
struct cfile *cache_prepare(struct cache *c, struct node *n,
			    const struct fattr *a, struct cache_prep *ret)
{
	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&c->nt->lock);
	struct cfile *cf = cache_attach(c, n);
	if (!cf) {
		pthread_mutex_unlock(&c->nt->lock);
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	if (!n->unlinked && !cf->dirty) {
		bool same = fmeta_base_take(&cf->m, a);
		if (!same && (cf->cached_bytes || cf->complete))
			cache_drop_content(c, cf);
		if (!same) {
			/* handles open on the old version fail */
			ret->reopened = cf->opens && cf->m.base == BASE_KNOWN;
			cf->version++;
		}
		ret->keep = same && (cf->cached_bytes || cf->complete);
		if (!same)
			cache_set_base(cf, a);
		cf->size = a->size;
		cf->m.mode = a->mode;
		cf->m.mtime = a->mtime;
		memcpy(cf->m.owner, a->owner, sizeof(cf->m.owner));
		memcpy(cf->m.group, a->group, sizeof(cf->m.group));
	} else {
		ret->keep = true;
	}
	if (!cf->opens) {
		if (cf->open_version != cf->version)
			ret->keep = false; /* old pages may linger */
		cf->open_version = cf->version;
	}
	ret->version = cf->version;
	ret->direct = cf->open_version != cf->version;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->nt->lock);
	return cf;
}

static void base_from(struct fmeta *m, const struct fattr *a)
{
	m->base = BASE_KNOWN;
	m->base_size = a->size;
	m->base_mtime = a->mtime;
	m->base_ctime = a->ctime;
	memcpy(m->owner, a->owner, sizeof(m->owner));
	memcpy(m->group, a->group, sizeof(m->group));
}

bool cache_is_dir(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	bool dir = cf->m.dir;
	pthread_mutex_unlock(&c->lock);
	return dir;
}

struct cfile *cache_dir_changed(struct cache *c, struct node *n,
				const struct fattr *existed, mode_t mode)
{
	struct cfile *cf = cache_attach(c, n);
	if (!cf)
		return NULL;
	pthread_mutex_lock(&c->lock);
	cf->m.dir = true;
	cf->m.mode = mode & 07777;
	cf->complete = true;
	if (!cf->dirty) {
		/* made here, or the sandbox's to be given a mode */
		cf->m.base = existed ? BASE_KNOWN : BASE_ABSENT;
		if (existed) {
			memcpy(cf->m.owner, existed->owner,
			       sizeof(cf->m.owner));
			memcpy(cf->m.group, existed->group,
			       sizeof(cf->m.group));
		}
	}
	clock_gettime(CLOCK_REALTIME, &cf->m.mtime);
	cf->m.atime = cf->m.mtime;
	cf->m.ctime = cf->m.mtime;
	pthread_mutex_unlock(&c->lock);
	return cf;
}

struct cfile *cache_created(struct cache *c, struct node *n,
			    const struct fattr *existed, mode_t mode,
			    long long absent_until)
{
	struct cfile *cf = cache_attach(c, n);
	if (!cf)
		return NULL;
	pthread_mutex_lock(&c->lock);
	if (!cf->dirty) {
		if (existed) {
			cache_set_base(cf, existed);
			base_from(&cf->m, existed);
		} else {
			cf->m.base = BASE_ABSENT;
			cf->absent_until = absent_until;
		}
	}
	cf->m.mode = existed ? existed->mode : (mode & 07777);
	if (!existed && (cf->m.mode & 07000))
		cf->m.chmod_needed = true;
	clock_gettime(CLOCK_REALTIME, &cf->m.mtime);
	cf->m.atime = cf->m.mtime;
	cf->m.ctime = cf->m.mtime;
	pthread_mutex_unlock(&c->lock);
	return cf;
}

int cache_truncate(struct cache *c, struct cfile *cf, int64_t size, bool touch,
		   uint64_t *ret_version)
{
	int fd = cache_fd(c, cf);
	if (fd < 0)
		return fd;
	int rc = ftruncate(fd, size) < 0 ? -errno : 0;
	close(fd);
	pthread_mutex_lock(&c->lock);
	if (!rc) {
		cf->size = size;
		cf->complete = true;
		cf->next = 0;
		cache_account(c, cf);
		if (touch) {
			clock_gettime(CLOCK_REALTIME, &cf->m.mtime);
			cf->m.ctime = cf->m.mtime;
		}
	}
	if (ret_version)
		*ret_version = cf->version;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- filling the gaps ---- */

/*
 * Where a download goes: the cache file, from pos on. Blocks of zeros
 * (a sparse file's holes) are punched rather than written, so they take
 * no room on the disk; the file is made long enough after (fill_end).
 */
#define FILL_BLOCK 4096

struct fill_sink {
	struct cache *c;
	int fd;
	int64_t pos;
	int64_t got;
	int64_t hole_end; /* the end of the last hole punched, or 0 */
	bool made_room;
	bool no_holes; /* the filesystem cannot punch them */
};

static bool zero_block(const char *p)
{
	static const char zeros[FILL_BLOCK];
	return memcmp(p, zeros, FILL_BLOCK) == 0;
}

static int fill_put(struct fill_sink *s, const char *p, size_t len)
{
	while (len) {
		ssize_t n = pwrite(s->fd, p, len, s->pos);
		if (n < 0) {
			int e = errno;
			if (e == EINTR)
				continue;
			/* a full disk: clean cached data makes room, once */
			if (!s->made_room) {
				s->made_room = true;
				if (cache_room_made(s->c, e))
					continue;
			}
			return -e;
		}
		p += n;
		len -= (size_t)n;
		s->pos += n;
		s->got += n;
	}
	return 0;
}

/* Zeros at pos (whole blocks): a hole. False if none can be punched. */
static bool fill_hole(struct fill_sink *s, size_t len)
{
	if (s->no_holes ||
	    fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)s->pos, (off_t)len) < 0) {
		s->no_holes = true;
		return false;
	}
	s->pos += (int64_t)len;
	s->got += (int64_t)len;
	s->hole_end = s->pos;
	return true;
}

static int fill_write(void *arg, const void *data, size_t len)
{
	struct fill_sink *s = arg;
	const char *p = data;
	while (len) {
		/* up to the next block of zeros (or the end) goes written */
		size_t head = (size_t)((FILL_BLOCK - s->pos % FILL_BLOCK) %
				       FILL_BLOCK);
		size_t w = head < len ? head : len;
		while (w + FILL_BLOCK <= len && !zero_block(p + w))
			w += FILL_BLOCK;
		if (w + FILL_BLOCK > len || s->no_holes)
			w = len;
		if (!w) {
			size_t z = FILL_BLOCK;
			while (z + FILL_BLOCK <= len && zero_block(p + z))
				z += FILL_BLOCK;
			if (fill_hole(s, z)) {
				p += z;
				len -= z;
				continue;
			}
			w = z;
		}
		int rc = fill_put(s, p, w);
		if (rc)
			return rc;
		p += w;
		len -= w;
	}
	return 0;
}

/* After a download: a hole punched at its end leaves the file short. */
static void fill_end(struct fill_sink *s)
{
	struct stat st;
	if (s->hole_end && fstat(s->fd, &st) == 0 && st.st_size < s->hole_end)
		(void)ftruncate(s->fd, s->hole_end);
}

/* The first gap in [off, off + len) as [*gs, *ge) (c->lock held);
 * false when there is none, or nothing to fill. */
static bool first_gap(const struct cfile *cf, int64_t off, int64_t len,
		      int64_t *ret_gs, int64_t *ret_ge)
{
	int64_t end = off + len, gs = off, ge = end;
	if (end > cf->size)
		end = ge = cf->size;
	for (size_t i = 0; i < cf->next; i++) {
		if (cf->ext[i].end <= gs)
			continue;
		if (cf->ext[i].start <= gs) {
			gs = cf->ext[i].end;
			continue;
		}
		ge = cf->ext[i].start < end ? cf->ext[i].start : end;
		break;
	}
	if (ge > end)
		ge = end;
	*ret_gs = gs;
	*ret_ge = ge;
	return gs < ge;
}

int cache_fill(struct cache *c, struct cfile *cf, int64_t off, int64_t len,
	       cache_fetch_fn fetch, void *arg, uint64_t *ret_version)
{
	int rc = 0;
	int fd = cache_fd(c, cf);
	if (fd < 0)
		return -EIO;
	pthread_mutex_lock(&cf->fetch_lock);
	pthread_mutex_lock(&c->lock);
	cf->fills++; /* not to be evicted meanwhile */
	/* every range must be of the version the cached bytes are of */
	uint64_t version = cf->version;
	int64_t size =
		cf->m.base == BASE_KNOWN ? cf->m.base_size : OSB_SIZE_FIRST;
	pthread_mutex_unlock(&c->lock);
	*ret_version = version;
	for (;;) {
		int64_t gs, ge;
		pthread_mutex_lock(&c->lock);
		if (cf->complete || cf->dirty) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		if (cf->version != version) {
			pthread_mutex_unlock(&c->lock);
			rc = -ESTALE; /* seen and handled by another read */
			break;
		}
		bool gap = first_gap(cf, off, len, &gs, &ge);
		pthread_mutex_unlock(&c->lock);
		if (!gap)
			break;
		cache_fill_room(c, cf, fd, off, len, ge - gs);

		struct fill_sink s = { .c = c, .fd = fd, .pos = gs };
		rc = fetch(arg, gs, ge - gs, size, fill_write, &s);
		fill_end(&s);
		/* gone, another size, or shorter than its size said */
		bool changed = rc == -ESTALE || rc == -ENOENT ||
			       (!rc && s.got < ge - gs);
		pthread_mutex_lock(&c->lock);
		if (s.got && !changed && cf->version == version) {
			/* joins bytes of other downloads: a mix until
			 * confirmed */
			if (cf->cached_bytes)
				cf->mixed_at = ++c->epoch;
			cache_add_range(c, cf, gs, gs + s.got);
		}
		pthread_mutex_unlock(&c->lock);
		if (changed)
			rc = CACHE_CHANGED;
		if (rc)
			break;
	}
	pthread_mutex_lock(&c->lock);
	cf->fills--;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&cf->fetch_lock);
	close(fd);
	return rc;
}

static bool fill_wanted(const struct cfile *cf)
{
	return !cf->dirty && !cf->complete && !cf->cached_bytes;
}

bool cache_fill_wanted(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	bool wanted = fill_wanted(cf);
	pthread_mutex_unlock(&c->lock);
	return wanted;
}

bool cache_has_clean(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	bool has = !cf->dirty && (cf->complete || cf->cached_bytes);
	pthread_mutex_unlock(&c->lock);
	return has;
}

int cache_fill_new(struct cache *c, struct node *n, const struct fattr *a,
		   cache_fetch_fn fetch, void *arg)
{
	pthread_mutex_lock(&c->nt->lock);
	struct cfile *cf = n->unlinked ? NULL : n->cf;
	bool fill = !n->unlinked;
	if (cf) {
		pthread_mutex_lock(&c->lock);
		fill = fill_wanted(cf) &&
		       (!cf->opens || fmeta_base_is(&cf->m, a));
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&c->nt->lock);
	if (!fill)
		return 0;
	struct cache_prep p;
	cf = cache_prepare(c, n, a, &p);
	if (!cf)
		return -ENOMEM;
	cache_ref(c, cf);
	uint64_t version;
	int rc = cache_fill(c, cf, 0, a->size, fetch, arg, &version);
	cache_unref(c, cf);
	/* another version in the archive: the next read fetches it */
	return rc == CACHE_CHANGED || rc == -ESTALE ? 0 : rc;
}

bool cache_went_stale(struct cache *c, struct cfile *cf, uint64_t version,
		      bool *ret_local)
{
	pthread_mutex_lock(&c->lock);
	bool local = cf->dirty;
	bool first = !local && cf->version == version;
	if (first) {
		cache_drop_content(c, cf);
		cf->m.base = BASE_UNKNOWN;
		cf->version++;
	}
	pthread_mutex_unlock(&c->lock);
	*ret_local = local;
	return first;
}

bool cache_whole(struct cache *c, struct cfile *cf, int64_t *ret_size,
		 uint64_t *ret_version)
{
	pthread_mutex_lock(&c->lock);
	bool whole = cf->complete || cf->dirty;
	if (ret_size) {
		/* asked before a fill: an empty file is whole as it is */
		if (!whole && cf->size == 0) {
			cf->complete = true;
			whole = true;
		}
		*ret_size = cf->size;
	}
	if (ret_version)
		*ret_version = cf->version;
	pthread_mutex_unlock(&c->lock);
	return whole;
}

bool cache_is_version(struct cache *c, struct cfile *cf, uint64_t version,
		      const struct fattr *a)
{
	pthread_mutex_lock(&c->lock);
	bool same = cf->dirty ||
		    (cf->version == version && fmeta_base_take(&cf->m, a));
	pthread_mutex_unlock(&c->lock);
	return same;
}

/* ---- reads and writes through handles ---- */

/* A sequential reader's window doubles, up to CACHE_WINDOW_MAX. */
static void window_grow(struct cache_window *w)
{
	w->window = w->window * 2 > CACHE_WINDOW_MAX ? CACHE_WINDOW_MAX :
						       w->window * 2;
}

int cache_read_begin(struct cache *c, struct cfile *cf, uint64_t version,
		     struct cache_window *w, int64_t off, size_t size,
		     int64_t *ret_len, int64_t *ret_want)
{
	pthread_mutex_lock(&c->lock);
	bool stale = version != cf->version;
	int64_t fsize = cf->size;
	int64_t len = off >= fsize ? 0 : (int64_t)size;
	if (off + len > fsize)
		len = fsize - off;
	bool have = len <= 0 || cache_has(cf, off, len);
	int64_t want = 0;
	if (!have) {
		/* a window that grows while the reads are sequential */
		if (off == w->next_off)
			window_grow(w);
		else
			w->window = CACHE_WINDOW_MIN;
		want = len > w->window ? len : w->window;
	}
	if (len > 0)
		w->next_off = off + len;
	pthread_mutex_unlock(&c->lock);
	if (stale)
		return -ESTALE;
	*ret_len = len > 0 ? len : 0;
	*ret_want = want;
	return 0;
}

bool cache_ahead_claim(struct cache *c, struct cfile *cf, uint64_t version,
		       struct cache_window *w, int64_t from, int64_t *ret_off,
		       int64_t *ret_len)
{
	int64_t gs, ge;
	pthread_mutex_lock(&c->lock);
	bool go = version == cf->version && !cf->ahead && !cf->complete &&
		  !cf->dirty && w->window > CACHE_WINDOW_MIN &&
		  first_gap(cf, from, w->window, &gs, &ge);
	if (go) {
		/* the reader that never waits grows its window all the same */
		window_grow(w);
		cf->ahead = true;
		*ret_off = gs;
		*ret_len = w->window;
	}
	pthread_mutex_unlock(&c->lock);
	return go;
}

void cache_ahead_done(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	cf->ahead = false;
	pthread_mutex_unlock(&c->lock);
}

ssize_t cache_pread(struct cache *c, struct cfile *cf, uint64_t version,
		    void *buf, size_t len, int64_t off)
{
	pthread_mutex_lock(&c->lock);
	bool stale = version != cf->version;
	bool here = cache_has(cf, off, (int64_t)len);
	uint64_t cut = cf->cut_gen;
	pthread_mutex_unlock(&c->lock);
	if (stale)
		return -ESTALE;
	if (!here)
		return -EAGAIN; /* let go for room since the caller looked */
	/* cf->fd stays while a handle is open: the caller's */
	ssize_t n = pread(cf->fd, buf, len, off);
	int e = n < 0 ? errno : 0;
	pthread_mutex_lock(&c->lock);
	/* the content may have given way to another version meanwhile, or
	 * bytes of it to room for others (they may be what was read) */
	if (version != cf->version)
		e = ESTALE;
	else if (!e && cut != cf->cut_gen)
		e = EAGAIN;
	pthread_mutex_unlock(&c->lock);
	return e ? -e : n;
}

ssize_t cache_write(struct cache *c, struct cfile *cf, const void *buf,
		    size_t size, int64_t off, bool append, bool *ret_record)
{
	if (append) {
		pthread_mutex_lock(&c->lock);
		off = cf->size;
		pthread_mutex_unlock(&c->lock);
	}
	/* a file is held here whole until its upload: the cap is its
	 * limit (a sparse write far out would be uploaded whole too) */
	pthread_mutex_lock(&c->lock);
	bool big = off + (int64_t)size > c->max_size &&
		   off + (int64_t)size > cf->size;
	pthread_mutex_unlock(&c->lock);
	if (big)
		return -EFBIG;
	ssize_t n = pwrite(cf->fd, buf, size, off);
	int e = n < 0 ? errno : 0;
	if (n < 0 && cache_room_made(c, e)) {
		n = pwrite(cf->fd, buf, size, off);
		e = n < 0 ? errno : 0;
	}
	if (n < 0) {
		log_error("write to the local cache %s failed: %s", c->dir,
			  strerror(e));
		return -e;
	}
	pthread_mutex_lock(&c->lock);
	if (off + n > cf->size)
		cf->size = off + n;
	cache_account(c, cf);
	clock_gettime(CLOCK_REALTIME, &cf->m.mtime);
	cf->m.ctime = cf->m.mtime;
	cf->m.times_set = false;
	/* dirty with its record in place: counting the change is all */
	bool quick = cf->dirty && cf->record_path;
	if (quick)
		cf->wgen++;
	pthread_mutex_unlock(&c->lock);
	*ret_record = !quick;
	return n;
}

/* ---- mode, times, moves ---- */

void cache_set_mode(struct cache *c, struct cfile *cf, mode_t mode)
{
	pthread_mutex_lock(&c->lock);
	cf->m.mode = mode;
	clock_gettime(CLOCK_REALTIME, &cf->m.ctime);
	if (mode & 07000 || !(mode & 0777))
		cf->m.chmod_needed = true;
	pthread_mutex_unlock(&c->lock);
}

void cache_set_owner(struct cache *c, struct cfile *cf, const char *owner,
		     const char *group, bool changed)
{
	pthread_mutex_lock(&c->lock);
	snprintf(cf->m.owner, sizeof(cf->m.owner), "%s", owner);
	snprintf(cf->m.group, sizeof(cf->m.group), "%s", group);
	if (changed)
		clock_gettime(CLOCK_REALTIME, &cf->m.ctime);
	pthread_mutex_unlock(&c->lock);
}

void cache_set_times(struct cache *c, struct cfile *cf,
		     const struct timespec *mtime, const struct timespec *atime)
{
	pthread_mutex_lock(&c->lock);
	cf->m.mtime = *mtime;
	cf->m.atime = *atime;
	clock_gettime(CLOCK_REALTIME, &cf->m.ctime);
	cf->m.times_set = true;
	pthread_mutex_unlock(&c->lock);
}

void cache_times_done(struct cache *c, struct cfile *cf,
		      const struct timespec *mtime,
		      const struct timespec *ctime)
{
	pthread_mutex_lock(&c->lock);
	if (cf->m.base == BASE_KNOWN) {
		cf->m.base_mtime = *mtime;
		cf->m.base_ctime = *ctime;
	}
	pthread_mutex_unlock(&c->lock);
}

void cache_changed_here(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	cf->m.base_ctime = (struct timespec){ 0, 0 };
	/* a dirty file's record keeps the base its upload is checked by */
	if (cache_record_refresh(c, cf))
		log_error("cannot update the journal in %s", c->dir);
	pthread_mutex_unlock(&c->lock);
}

void cache_moved_over(struct cache *c, struct cfile *scf, struct cfile *dcf,
		      const struct fattr *da)
{
	pthread_mutex_lock(&c->lock);
	/* dst's own cache entry knows the version its upload replaces best
	 * (an upload of dst that finished meanwhile has just updated it);
	 * its cached attributes are only the fallback */
	if (dcf && dcf->m.base != BASE_UNKNOWN) {
		scf->m.base = dcf->m.base;
		scf->m.base_size = dcf->m.base_size;
		scf->m.base_mtime = dcf->m.base_mtime;
		scf->m.base_ctime = dcf->m.base_ctime;
		memcpy(scf->m.owner, dcf->m.owner, sizeof(scf->m.owner));
		memcpy(scf->m.group, dcf->m.group, sizeof(scf->m.group));
	} else if (dcf && dcf->dirty) {
		scf->m.base = BASE_UNKNOWN;
	} else {
		base_from(&scf->m, da);
	}
	/* the journal's record (moved already) gets the base too: after a
	 * crash, the next mount's upload checks against it, and the base of
	 * a new file says the sandbox had nothing there */
	if (cache_record_refresh(c, scf))
		log_error("cannot update the journal in %s", c->dir);
	pthread_mutex_unlock(&c->lock);
}

bool cache_sent_here(struct cache *c, struct cfile *cf, int64_t max)
{
	pthread_mutex_lock(&c->lock);
	/* dirty: its bytes are whole here (cache_whole()) */
	bool sent = cf->dirty && cf->data_gen && !cf->m.dir && cf->size <= max;
	pthread_mutex_unlock(&c->lock);
	return sent;
}

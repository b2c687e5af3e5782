/*
 * ops_file.c - FUSE ops on open files: open, create, read, write, flush,
 * release, fsync.
 *
 * Reads fetch missing ranges into the cache file (a window that doubles
 * on sequential access); a file opened for writing is made whole locally
 * first, since the API only takes whole files; writes go to the cache
 * file at local-disk speed and mark it dirty; the last close schedules
 * the upload; fsync uploads now and says whether it worked.
 *
 * A reader never gets bytes of two sandbox versions of a file. The bytes
 * cached for a clean file are all of the version its validator names
 * (cf->m: size and mtime). Each range fetched must come from a file of
 * that size (every answer states the size; checked before its bytes are
 * written), and after a fetch the attributes are compared with the
 * validator, asked of the sandbox at most once per attr_timeout: a
 * replacement of the same size shows only there. A handle reads only the
 * content version it was opened on (cf->version). When a change is seen,
 * the content, the attributes and the kernel's pages of the file go, its
 * open handles fail with ESTALE, and the next open reads the new version.
 * ESTALE, not EIO: the open file is what is out of date, not the link to
 * the sandbox (EIO here means that), and the cure is to open it again.
 * A file with local changes is not checked: local data wins, and the
 * write-back's conflict check deals with the sandbox's version.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "log.h"
#include "notify.h"
#include "ops.h"
#include "writeback.h"

#define WINDOW_MIN (1ll << 20)
#define WINDOW_MAX (16ll << 20)

struct fh {
	struct node *n;
	struct cfile *cf;
	bool writer;
	bool append;
	uint64_t version;       /* of cf's content when opened */
	int64_t next_off;       /* where a sequential read goes on */
	int64_t window;         /* next_off and window: under cache->lock */
};

struct dl_sink {
	struct osbfs *fs;
	int fd;
	int64_t pos;
	int64_t got;
	bool made_room;
};

static int dl_write(void *arg, const void *data, size_t len)
{
	struct dl_sink *s = arg;
	const char *p = data;
	while (len) {
		ssize_t n = pwrite(s->fd, p, len, s->pos);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* a full disk: clean cached data makes room, once */
			if (!s->made_room) {
				s->made_room = true;
				if (cache_room_made(&s->fs->cache,
						    &s->fs->nodes, errno))
					continue;
			}
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		s->pos += n;
		s->got += n;
	}
	return 0;
}

/* Says that @h changed in the sandbox while open, and has the kernel
 * forget its pages. */
static void tell_changed(struct osbfs *fs, struct held *h)
{
	notify_inode(fs, h->n->ino);
	log_error("%s changed in the sandbox while being read: the files "
		  "opened before fail (ESTALE), a new open reads the new "
		  "version",
		  h->path);
}

/*
 * A change in the sandbox was seen while @h was being read by handles of
 * content @version. Unless the file has local changes (they win), its
 * content and validator go, its attributes and the kernel's pages too: the
 * handles of @version fail from now on, and the next open reads the new
 * version whole. Returns -ESTALE, or 0 if local changes hold the file.
 */
static int file_went_stale(struct osbfs *fs, struct held *h,
			   struct cfile *cf, uint64_t version)
{
	struct cache *c = &fs->cache;

	pthread_mutex_lock(&fs->nodes.lock);
	pthread_mutex_lock(&c->lock);
	bool local = cf->dirty;
	bool first = !local && cf->version == version;
	if (first) {
		cache_drop_content(c, cf);
		cf->m.base = BASE_UNKNOWN;
		cf->version++;
		node_invalidate(h->n);
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&fs->nodes.lock);
	if (first)
		tell_changed(fs, h);
	return local ? 0 : -ESTALE;
}

int file_fetch(struct osbfs *fs, struct held *h, struct cfile *cf,
	       int64_t off, int64_t len)
{
	struct cache *c = &fs->cache;
	int rc = 0;

	int fd = cache_fd(c, cf);
	if (fd < 0)
		return -EIO;
	pthread_mutex_lock(&cf->fetch_lock);
	pthread_mutex_lock(&c->lock);
	/* every range must be of the version the cached bytes are of */
	uint64_t version = cf->version;
	int64_t size = cf->m.base == BASE_KNOWN ? cf->m.base_size :
						  OSB_SIZE_FIRST;
	pthread_mutex_unlock(&c->lock);
	for (;;) {
		/* the first gap in [off, off + len) */
		pthread_mutex_lock(&c->lock);
		int64_t end = off + len, gs = off, ge = end;
		if (cf->complete || cf->dirty) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		if (cf->version != version) {
			pthread_mutex_unlock(&c->lock);
			rc = -ESTALE; /* seen and handled by another read */
			break;
		}
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
		pthread_mutex_unlock(&c->lock);
		if (gs >= ge)
			break;

		struct dl_sink s = { .fs = fs, .fd = fd, .pos = gs };
		rc = remote_fetch(fs, h->path, gs, ge - gs, size, dl_write, &s);
		/* gone, another size, or shorter than its size said */
		bool changed = rc == -ESTALE || rc == -ENOENT ||
			       (!rc && s.got < ge - gs);
		pthread_mutex_lock(&c->lock);
		if (s.got && !changed && cf->version == version)
			cache_add_range(c, cf, gs, gs + s.got);
		pthread_mutex_unlock(&c->lock);
		if (changed)
			rc = file_went_stale(fs, h, cf, version);
		if (rc || changed)
			break;
	}
	pthread_mutex_unlock(&cf->fetch_lock);
	close(fd);
	return rc;
}

int file_make_complete(struct osbfs *fs, struct held *h, struct cfile *cf)
{
	struct cache *c = &fs->cache;
	pthread_mutex_lock(&c->lock);
	int64_t size = cf->size;
	uint64_t version = cf->version;
	bool done = cf->complete || cf->dirty;
	if (!done && size == 0) {
		cf->complete = true;
		done = true;
	}
	pthread_mutex_unlock(&c->lock);
	if (done)
		return 0;
	if (!h->path)
		return -EIO; /* an orphan whose content was never all here */
	int rc = file_fetch(fs, h, cf, 0, size);
	pthread_mutex_lock(&c->lock);
	bool whole = cf->complete || cf->dirty;
	pthread_mutex_unlock(&c->lock);
	if (!rc && !whole)
		rc = file_went_stale(fs, h, cf, version);
	return rc;
}

/*
 * After a fetch for a handle of content @version: whether the file is
 * still the version the cache holds. The attributes are asked of the
 * sandbox at most once per attr_timeout (node_attr answers from the
 * attribute cache while it is fresh): a same-size replacement shows only
 * here, since a ranged answer states the size alone. Asked after the
 * fetch, so a change made before it, or during it, is seen.
 */
static int read_revalidate(struct osbfs *fs, struct held *h,
			   struct cfile *cf, uint64_t version)
{
	struct fattr a;
	int rc = node_attr(fs, h, &a);
	if (rc && rc != -ENOENT)
		return rc;
	pthread_mutex_lock(&fs->cache.lock);
	bool same = cf->dirty ||
		    (!rc && cf->version == version && a.type == OSB_FILE &&
		     fmeta_base_is(&cf->m, a.size, &a.mtime));
	pthread_mutex_unlock(&fs->cache.lock);
	return same ? 0 : file_went_stale(fs, h, cf, version);
}

/*
 * file_prepare() for a new handle: also the content version it reads, and
 * whether it must bypass the kernel's page cache. The kernel keeps one
 * page cache per inode, for every handle: while handles of an older
 * version are open, pages of the new one must not go there, or those
 * handles would read them. (A new open with keep_cache off has the kernel
 * drop the inode's pages, and the first open once they are all closed
 * too.)
 */
static struct cfile *prepare(struct osbfs *fs, struct held *h,
			     const struct fattr *a, bool *ret_keep,
			     uint64_t *ret_version, bool *ret_direct)
{
	struct cache *c = &fs->cache;
	bool reopened = false;
	pthread_mutex_lock(&fs->nodes.lock);
	struct cfile *cf = cache_attach(c, h->n);
	if (cf) {
		pthread_mutex_lock(&c->lock);
		if (!node_has_local(h->n)) {
			bool same = fmeta_base_is(&cf->m, a->size, &a->mtime);
			if (!same && (cf->cached_bytes || cf->complete))
				cache_drop_content(c, cf);
			if (!same) {
				/* handles open on the old version fail */
				reopened = cf->opens && cf->m.base == BASE_KNOWN;
				cf->version++;
			}
			*ret_keep = same && (cf->cached_bytes || cf->complete);
			cache_set_base(cf, a->size, &a->mtime);
			cf->size = a->size;
			cf->m.mode = a->mode;
			cf->m.mtime = a->mtime;
			memcpy(cf->m.owner, a->owner, sizeof(cf->m.owner));
			memcpy(cf->m.group, a->group, sizeof(cf->m.group));
		} else {
			*ret_keep = true;
		}
		if (!cf->opens) {
			if (cf->open_version != cf->version)
				*ret_keep = false; /* old pages may linger */
			cf->open_version = cf->version;
		}
		if (ret_version)
			*ret_version = cf->version;
		if (ret_direct)
			*ret_direct = cf->open_version != cf->version;
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (reopened)
		tell_changed(fs, h);
	return cf;
}

struct cfile *file_prepare(struct osbfs *fs, struct held *h,
			   const struct fattr *a, bool *ret_keep)
{
	return prepare(fs, h, a, ret_keep, NULL, NULL);
}

void file_keep_for_readers(struct osbfs *fs, struct held *h)
{
	pthread_mutex_lock(&fs->nodes.lock);
	struct cfile *cf = h->n->cf;
	if (cf)
		cache_ref(&fs->cache, cf);
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!cf)
		return;
	pthread_mutex_lock(&fs->cache.lock);
	bool open = cf->opens > 0;
	pthread_mutex_unlock(&fs->cache.lock);
	if (open && file_make_complete(fs, h, cf))
		log_warn("%s is open but could not be read whole before its "
			 "name went away: its readers get EIO for what is "
			 "missing",
			 h->path);
	cache_unref(&fs->cache, cf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;
	bool keep = false, direct = false;
	uint64_t version = 0;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(ino)) {
		ctl_open(req, ino, fi);
		return;
	}
	int rc = held_inode(fs, ino, &h);
	if (rc) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	bool writer = (fi->flags & O_ACCMODE) != O_RDONLY;
	bool trunc = writer && (fi->flags & O_TRUNC);
	struct cfile *cf = NULL;
	struct fh *f = NULL;

	rc = node_attr(fs, &h, &a);
	if (!rc && a.type == OSB_DIR)
		rc = -EISDIR;
	if (!rc && a.type == OSB_OTHER)
		rc = -ENXIO; /* a fifo or socket in the sandbox */
	if (!rc && !h.path && !h.n->cf)
		rc = -ENOENT; /* gone, and nothing of it kept here */
	if (!rc) {
		cf = prepare(fs, &h, &a, &keep, &version, &direct);
		f = calloc(1, sizeof(*f));
		if (!cf || !f)
			rc = -ENOMEM;
	}
	if (!rc)
		rc = cache_open(&fs->cache, cf, writer);
	if (!rc && trunc) {
		pthread_mutex_lock(&fs->cache.lock);
		if (ftruncate(cf->fd, 0) < 0)
			rc = -errno;
		cache_drop_content(&fs->cache, cf);
		cf->complete = true;
		cf->size = 0;
		clock_gettime(CLOCK_REALTIME, &cf->m.mtime);
		pthread_mutex_unlock(&fs->cache.lock);
		if (!rc)
			rc = file_changed(fs, &h, cf, false);
		keep = false;
	} else if (!rc && writer) {
		rc = file_make_complete(fs, &h, cf);
	}
	if (rc) {
		if (cf && f)
			cache_close(&fs->cache, cf, writer);
		free(f);
		fuse_reply_err(req, -rc);
		held_put(fs, &h);
		return;
	}
	f->n = h.n; /* the held ref moves to the handle */
	f->cf = cf;
	f->version = version;
	f->writer = writer;
	f->append = fi->flags & O_APPEND;
	f->window = WINDOW_MIN;
	free(h.path);
	fi->fh = (uint64_t)(uintptr_t)f;
	fi->keep_cache = keep && !writer;
	fi->direct_io = direct;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		cache_close(&fs->cache, cf, writer);
		struct held back = { f->n, NULL };
		held_put(fs, &back);
		free(f);
	}
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(parent)) {
		ctl_create(req, parent, name, mode, fi);
		return;
	}
	int rc = name_check(name);
	if (!rc && parent == NODE_ROOT_INO &&
	    strcmp(name, fs->opt->control_dir) == 0)
		rc = -EEXIST;
	if (!rc)
		rc = held_child(fs, parent, name, &h);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	int arc = node_attr(fs, &h, &a);
	bool existed = arc == 0;
	struct fh *f = calloc(1, sizeof(*f));
	struct cfile *cf = NULL;
	if (arc && arc != -ENOENT)
		rc = arc;
	else if (existed && (fi->flags & O_EXCL))
		rc = -EEXIST;
	else if (existed && a.type == OSB_DIR)
		rc = -EISDIR;
	else if (!f)
		rc = -ENOMEM;
	if (!rc) {
		pthread_mutex_lock(&fs->nodes.lock);
		cf = cache_attach(&fs->cache, h.n);
		if (cf) {
			pthread_mutex_lock(&fs->cache.lock);
			if (!cf->dirty) {
				if (existed) {
					cache_set_base(cf, a.size, &a.mtime);
					memcpy(cf->m.owner, a.owner,
					       sizeof(cf->m.owner));
					memcpy(cf->m.group, a.group,
					       sizeof(cf->m.group));
				} else {
					cf->m.base = BASE_ABSENT;
				}
			}
			cf->m.mode = existed ? a.mode : (mode & 07777);
			if (!existed && (cf->m.mode & 07000))
				cf->m.chmod_needed = true;
			clock_gettime(CLOCK_REALTIME, &cf->m.mtime);
			cf->m.atime = cf->m.mtime;
			pthread_mutex_unlock(&fs->cache.lock);
			memset(&h.n->attr, 0, sizeof(h.n->attr));
			h.n->attr.type = OSB_FILE;
			h.n->attr.mode = cf->m.mode;
			h.n->attr.mtime = h.n->attr.ctime = cf->m.mtime;
			h.n->attr_valid = true;
			h.n->attr_expiry = mono_ms() + fs->opt->attr_timeout_ms;
			h.n->neg_expiry = 0;
			if (h.n->parent)
				dir_changed(fs, h.n->parent, h.n);
		}
		pthread_mutex_unlock(&fs->nodes.lock);
		if (!cf)
			rc = -ENOMEM;
	}
	if (!rc)
		rc = cache_open(&fs->cache, cf, true);
	if (!rc) {
		pthread_mutex_lock(&fs->cache.lock);
		if (ftruncate(cf->fd, 0) < 0)
			rc = -errno;
		cache_drop_content(&fs->cache, cf);
		cf->complete = true;
		cf->size = 0;
		f->version = cf->version;
		pthread_mutex_unlock(&fs->cache.lock);
		int drc = cache_dirty(&fs->cache, cf, h.path);
		if (!rc)
			rc = drc;
		if (rc)
			cache_close(&fs->cache, cf, true);
	}
	if (rc) {
		free(f);
		fuse_reply_err(req, -rc);
		held_put(fs, &h);
		return;
	}
	f->n = h.n;
	f->cf = cf;
	f->writer = true;
	f->append = fi->flags & O_APPEND;
	f->window = WINDOW_MIN;
	free(h.path);
	fi->fh = (uint64_t)(uintptr_t)f;

	struct fuse_entry_param e;
	pthread_mutex_lock(&fs->nodes.lock);
	memset(&e, 0, sizeof(e));
	e.ino = f->n->ino;
	e.attr_timeout = e.entry_timeout = fs->opt->attr_timeout_ms / 1000.0;
	node_stat(fs, f->n, &e.attr);
	f->n->nlookup++;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		pthread_mutex_lock(&fs->nodes.lock);
		f->n->nlookup--;
		pthread_mutex_unlock(&fs->nodes.lock);
		cache_close(&fs->cache, cf, true);
		struct held back = { f->n, NULL };
		held_put(fs, &back);
		free(f);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	struct cache *c = &fs->cache;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(ino)) {
		ctl_read(req, ino, size, off, fi);
		return;
	}
	struct fh *f = (struct fh *)(uintptr_t)fi->fh;
	struct cfile *cf = f->cf;

	pthread_mutex_lock(&c->lock);
	bool stale = f->version != cf->version;
	int64_t fsize = cf->size;
	int64_t len = off >= fsize ? 0 : (int64_t)size;
	if (off + len > fsize)
		len = fsize - off;
	bool have = len <= 0 || cache_has(cf, off, len);
	int64_t want = len;
	if (!have) {
		/* a window that grows while the reads are sequential */
		if (off == f->next_off)
			f->window = f->window * 2 > WINDOW_MAX ? WINDOW_MAX :
								 f->window * 2;
		else
			f->window = WINDOW_MIN;
		want = len > f->window ? len : f->window;
	}
	if (len > 0)
		f->next_off = off + len;
	pthread_mutex_unlock(&c->lock);

	if (stale) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (len <= 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (!have) {
		struct held h = { 0 };
		int rc = 0;
		pthread_mutex_lock(&fs->nodes.lock);
		h.path = node_path(&fs->nodes, f->n);
		pthread_mutex_unlock(&fs->nodes.lock);
		if (!h.path)
			rc = -ENOENT;
		h.n = f->n;
		if (!rc)
			rc = file_fetch(fs, &h, cf, off, want);
		if (!rc)
			rc = read_revalidate(fs, &h, cf, f->version);
		free(h.path);
		if (rc) {
			fuse_reply_err(req, -rc);
			return;
		}
	}

	char *buf = malloc((size_t)len);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = pread(cf->fd, buf, (size_t)len, off);
	int e = n < 0 ? errno : 0;
	/* the content may have given way to another version meanwhile */
	pthread_mutex_lock(&c->lock);
	if (f->version != cf->version)
		e = ESTALE;
	pthread_mutex_unlock(&c->lock);
	if (e)
		fuse_reply_err(req, e);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	struct cache *c = &fs->cache;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(ino)) {
		ctl_write(req, ino, buf, size, off, fi);
		return;
	}
	struct fh *f = (struct fh *)(uintptr_t)fi->fh;
	struct cfile *cf = f->cf;

	if (f->append) {
		pthread_mutex_lock(&c->lock);
		off = cf->size;
		pthread_mutex_unlock(&c->lock);
	}
	ssize_t n = pwrite(cf->fd, buf, size, off);
	if (n < 0 && cache_room_made(c, &fs->nodes, errno))
		n = pwrite(cf->fd, buf, size, off);
	if (n < 0) {
		int e = errno;
		log_error("write to the local cache %s failed: %s", c->dir,
			  strerror(e));
		fuse_reply_err(req, e);
		return;
	}
	pthread_mutex_lock(&c->lock);
	if (off + n > cf->size)
		cf->size = off + n;
	cache_account(c, cf);
	clock_gettime(CLOCK_REALTIME, &cf->m.mtime);
	cf->m.times_set = false;
	bool quick = cf->dirty && cf->record_path;
	if (quick)
		cf->wgen++;
	pthread_mutex_unlock(&c->lock);
	if (!quick) {
		pthread_mutex_lock(&fs->nodes.lock);
		char *path = node_path(&fs->nodes, f->n);
		pthread_mutex_unlock(&fs->nodes.lock);
		int rc = path ? cache_dirty(c, cf, path) : 0;
		free(path);
		if (rc) {
			/* not journaled, so not safe from a crash: say so
			 * (the bytes stay in the cache file, dirty) */
			fuse_reply_err(req, -rc);
			return;
		}
	}
	fuse_reply_write(req, (size_t)n);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	if (ctl_is_ino(ino)) {
		ctl_flush(req, ino, fi);
		return;
	}
	/* close means "safe on local disk and queued": nothing to do */
	fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	if (ctl_is_ino(ino)) {
		ctl_release(req, ino, fi);
		return;
	}
	struct fh *f = (struct fh *)(uintptr_t)fi->fh;
	struct cfile *cf = f->cf;
	/* the node we hold keeps cf alive past cache_close */
	cache_close(&fs->cache, cf, f->writer);
	/* what was read into the cache may have taken it past its cap */
	cache_evict(&fs->cache, &fs->nodes, 0);
	if (f->writer) {
		pthread_mutex_lock(&fs->cache.lock);
		bool schedule = cf->dirty && cf->writers == 0;
		pthread_mutex_unlock(&fs->cache.lock);
		if (schedule)
			wb_schedule(fs, cf, fs->opt->writeback_delay_ms);
	}
	struct held back = { f->n, NULL };
	held_put(fs, &back);
	free(f);
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	(void)datasync;
	if (ctl_is_ino(ino)) {
		fuse_reply_err(req, 0);
		return;
	}
	struct fh *f = (struct fh *)(uintptr_t)fi->fh;
	int rc = wb_flush(fs, f->cf);
	fuse_reply_err(req, -rc);
}

void op_file_register(struct fuse_lowlevel_ops *ops)
{
	ops->open = op_open;
	ops->create = op_create;
	ops->read = op_read;
	ops->write = op_write;
	ops->flush = op_flush;
	ops->release = op_release;
	ops->fsync = op_fsync;
}

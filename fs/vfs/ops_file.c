/*
 * ops_file.c - FUSE ops on open files: open, create, read, write, flush,
 * release, fsync; and mknod, which makes regular files as create does.
 *
 * Reads fetch missing ranges into the cache file (a window that doubles
 * on sequential access); a file opened for writing is made whole locally
 * first, since the API only takes whole files; writes go to the cache
 * file at local-disk speed and mark it dirty; the last close schedules
 * the upload; fsync uploads now and says whether it worked.
 *
 * A reader never gets bytes of two sandbox versions of a file. The bytes
 * cached for a clean file are all of the version its validator names
 * (its size, mtime and ctime). Each range fetched must come from a file
 * of that size (every answer states the size; checked before its bytes
 * are written), and after a fetch the attributes are compared with the
 * validator, asked of the sandbox at most once per attr_timeout: a
 * replacement of the same size shows only there. The first fetch of a
 * handle that found bytes of the file cached when it opened asks at once,
 * so a new open never joins them to bytes of another version. A handle reads
 * only the content version it was opened on (cache_prepare()). When a change is
 * seen, the content, the attributes and the kernel's pages of the file go, its
 * open handles fail with ESTALE, and the next open reads the new version.
 * ESTALE, not EIO: the open file is what is out of date, not the link to
 * the sandbox (EIO here means that), and the cure is to open it again.
 * A file with local changes is not checked: local data wins, and the
 * write-back's conflict check deals with the sandbox's version.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "log.h"
#include "notify.h"
#include "ops.h"
#include "pull.h"
#include "writeback.h"

struct fh {
	struct node *n;
	struct cfile *cf;
	bool writer;
	bool append;
	uint64_t version;      /* of cf's content when opened */
	struct cache_window w; /* read-ahead (under the cache's lock) */
	uint64_t joined_at;    /* opened with bytes of the file here: the
				  open's mark (cache_mark_new), else 0; what
				  it fetches is checked by attributes asked
				  after it */
};

void tell_changed(struct osbfs *fs, fuse_ino_t ino, const char *path)
{
	notify_inode(fs, ino);
	log_error("%s changed in the sandbox while being read: the files "
		  "opened before fail (ESTALE), a new open reads the new "
		  "version",
		  path);
}

/*
 * A change in the sandbox was seen while @h was being read by handles of
 * content @version. Unless the file has local changes (they win), its
 * content and validator go, its attributes and the kernel's pages too: the
 * handles of @version fail from now on, and the next open reads the new
 * version whole. Returns -ESTALE, or 0 if local changes hold the file.
 */
static int file_went_stale(struct osbfs *fs, struct held *h, struct cfile *cf,
			   uint64_t version)
{
	bool local;
	pthread_mutex_lock(&fs->nodes.lock);
	bool first = cache_went_stale(fs->cache, cf, version, &local);
	if (first)
		node_invalidate(h->n);
	pthread_mutex_unlock(&fs->nodes.lock);
	if (first)
		tell_changed(fs, h->n->ino, h->path);
	return local ? 0 : -ESTALE;
}

struct fetch_arg {
	struct osbfs *fs;
	const char *path;
};

static int fetch_remote(void *arg, int64_t off, int64_t len, int64_t size,
			osb_sink_fn sink, void *sink_arg)
{
	struct fetch_arg *fa = arg;
	return remote_fetch(fa->fs, fa->path, off, len, size, sink, sink_arg);
}

int file_fetch(struct osbfs *fs, struct held *h, struct cfile *cf, int64_t off,
	       int64_t len)
{
	struct fetch_arg fa = { fs, h->path };
	uint64_t version;
	int rc = cache_fill(fs->cache, cf, off, len, fetch_remote, &fa,
			    &version);
	if (rc == CACHE_CHANGED)
		rc = file_went_stale(fs, h, cf, version);
	return rc;
}

/* cache_prepare() for @h, telling of a change it found. */
static struct cfile *prepare(struct osbfs *fs, struct held *h,
			     const struct fattr *a, struct cache_prep *ret)
{
	struct cfile *cf = cache_prepare(fs->cache, h->n, a, ret);
	if (cf && ret->reopened)
		tell_changed(fs, h->n->ino, h->path);
	return cf;
}

/* Has the next node_attr() of @h ask the sandbox: always, or (@late)
 * only once its attributes are older than attr_timeout. The change feed
 * holds them past it, but reports a change a round after it was made:
 * too late to vouch for the version of bytes fetched now. */
static void attr_expire(struct osbfs *fs, struct held *h, bool late)
{
	pthread_mutex_lock(&fs->nodes.lock);
	if (!late || mono_ms() >= h->n->attr_expiry)
		h->n->attr_expiry = 0;
	pthread_mutex_unlock(&fs->nodes.lock);
}

/*
 * After a fetch for a handle of content @version: whether the file is
 * still the version @cf holds: 0 if so (or @cf is dirty: local changes
 * win), 1 if not, or -errno. The attributes are asked of the sandbox at
 * most once per attr_timeout (node_attr answers from the attribute cache
 * within it, never from what only the change feed holds), or, with
 * @since, asked at or after that mark
 * (cache_mark): a same-size replacement shows only in them, since a
 * ranged answer states the size alone. Asked after the fetch, so a change
 * made before it, or during it, is seen.
 */
static int version_check(struct osbfs *fs, struct held *h, struct cfile *cf,
			 uint64_t version, uint64_t since)
{
	for (int tries = 0;; tries++) {
		attr_expire(fs, h, !since);
		struct fattr a;
		int rc = node_attr(fs, h, &a);
		if (rc && rc != -ENOENT)
			return rc;
		bool same =
			!rc && a.type == OSB_FILE ?
				cache_is_version(fs->cache, cf, version, &a) :
				cache_is_dirty(fs->cache, cf);
		if (!same)
			return 1;
		/* an answer asked before @since (another thread's, which
		 * filled the attribute cache meanwhile), or one a change of
		 * ours raced, confirms nothing: asked again, twice at most */
		if (!since || tries == 2 || cache_is_dirty(fs->cache, cf) ||
		    cache_confirmed(fs->cache, cf, since))
			return 0;
	}
}

/* version_check(), telling of a change it finds: 0 or -errno. */
static int read_revalidate(struct osbfs *fs, struct held *h, struct cfile *cf,
			   uint64_t version, uint64_t since)
{
	int rc = version_check(fs, h, cf, version, since);
	return rc == 1 ? file_went_stale(fs, h, cf, version) : rc;
}

/* The mark a fetch for a handle opened at @joined_at (fh.joined_at) is
 * to be checked since: none once attributes asked after the open said
 * the version (a change after that is one made while it is open). */
static uint64_t check_since(struct osbfs *fs, struct cfile *cf,
			    uint64_t joined_at)
{
	return joined_at && !cache_confirmed(fs->cache, cf, joined_at) ?
		       joined_at :
		       0;
}

/*
 * Fetches what @cf lacks. The bytes that were here already and those
 * fetched now must be of one version, or a write would send a mix back:
 * so when both are there, the sandbox is asked after the fetch (one
 * stat) whether the file is still the version cached; if not, the file
 * is fetched again, whole, as an open of the new version would.
 */
int file_make_complete(struct osbfs *fs, struct held *h, struct cfile *cf)
{
	for (int tries = 0;; tries++) {
		int64_t size;
		uint64_t version;
		if (cache_whole(fs->cache, cf, &size, &version))
			return 0;
		if (!h->path)
			return -EIO; /* an orphan whose content was never
					all here */
		char why[512];
		int rc = cache_room_whole(fs->cache, cf, why, sizeof(why));
		if (rc) {
			log_error("%s cannot be written here: %s", h->path,
				  why);
			return rc;
		}
		bool joined = cache_has_clean(fs->cache, cf);
		rc = file_fetch(fs, h, cf, 0, size);
		if (!rc && !cache_whole(fs->cache, cf, NULL, NULL))
			rc = file_went_stale(fs, h, cf, version);
		if (!rc && joined)
			rc = read_revalidate(fs, h, cf, version,
					     cache_mark_new(fs->cache));
		if (rc != -ESTALE || tries)
			return rc;
		struct fattr a;
		struct cache_prep p;
		rc = node_attr(fs, h, &a);
		if (!rc && a.type != OSB_FILE)
			rc = -ESTALE;
		if (!rc && !prepare(fs, h, &a, &p))
			rc = -ENOMEM;
		if (rc)
			return rc;
	}
}

struct cfile *file_prepare(struct osbfs *fs, struct held *h,
			   const struct fattr *a, bool *ret_keep)
{
	struct cache_prep p;
	struct cfile *cf = prepare(fs, h, a, &p);
	*ret_keep = p.keep;
	return cf;
}

void file_keep_for_readers(struct osbfs *fs, struct held *h)
{
	pthread_mutex_lock(&fs->nodes.lock);
	struct cfile *cf = h->n->cf;
	if (cf)
		cache_ref(fs->cache, cf);
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!cf)
		return;
	if (cache_is_open(fs->cache, cf) && file_make_complete(fs, h, cf))
		log_warn("%s is open but could not be read whole before its "
			 "name went away: its readers get EIO for what is "
			 "missing",
			 h->path);
	cache_unref(fs->cache, cf);
}

/*
 * @h's attributes for an open, into @a (with the special bits for a
 * @writer). When the bytes here come from more than one download and no
 * answer asked since said their version (cache_mixed), the sandbox is
 * asked now: an open never finds bytes of two versions. 0 or -errno.
 */
static int open_attr(struct osbfs *fs, struct held *h, bool writer,
		     struct fattr *a)
{
	for (int tries = 0;; tries++) {
		pthread_mutex_lock(&fs->nodes.lock);
		bool mixed = h->n->cf && cache_mixed(fs->cache, h->n->cf, NULL);
		if (mixed)
			h->n->attr_expiry = 0;
		pthread_mutex_unlock(&fs->nodes.lock);
		int rc =
			writer ? node_attr_bits(fs, h, a) : node_attr(fs, h, a);
		if (rc || !mixed || tries == 2)
			return rc;
		/* an answer asked before the last download (another
		 * thread's) confirms nothing: asked again, twice at most */
		pthread_mutex_lock(&fs->nodes.lock);
		mixed = h->n->cf && cache_mixed(fs->cache, h->n->cf, a);
		pthread_mutex_unlock(&fs->nodes.lock);
		if (!mixed)
			return 0;
	}
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;
	struct cache_prep p = { 0 };

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

	/* before the attributes: an answer asked for this open says the
	 * version for its fetches too (fh.joined_at) */
	uint64_t opened_at = cache_mark_new(fs->cache);
	/* a writer sends the mode back with the upload: it must have the
	 * special bits the sandbox has */
	rc = open_attr(fs, &h, writer, &a);
	if (!rc && a.type == OSB_DIR)
		rc = -EISDIR;
	if (!rc && a.type == OSB_OTHER)
		rc = -ENXIO; /* a fifo or socket in the sandbox */
	if (!rc && !h.path && !h.n->cf)
		rc = -ENOENT; /* gone, and nothing of it kept here */
	if (!rc) {
		cf = prepare(fs, &h, &a, &p);
		f = calloc(1, sizeof(*f));
		if (!cf || !f)
			rc = -ENOMEM;
	}
	if (!rc)
		rc = cache_open(fs->cache, cf, writer);
	if (!rc && trunc) {
		rc = cache_truncate(fs->cache, cf, 0, true, NULL);
		if (!rc)
			rc = file_changed(fs, &h, cf, false);
		p.keep = false;
	} else if (!rc && writer) {
		rc = file_make_complete(fs, &h, cf);
		/* it may have found a new version, and fetched that */
		cache_whole(fs->cache, cf, NULL, &p.version);
	}
	if (rc) {
		if (cf && f)
			cache_close(fs->cache, cf, writer);
		free(f);
		fuse_reply_err(req, -rc);
		held_put(fs, &h);
		return;
	}
	f->n = h.n; /* the held ref moves to the handle */
	f->cf = cf;
	f->version = p.version;
	f->writer = writer;
	f->append = fi->flags & O_APPEND;
	f->w.window = CACHE_WINDOW_MIN;
	f->joined_at = cache_has_clean(fs->cache, cf) ? opened_at : 0;
	free(h.path);
	fi->fh = (uint64_t)(uintptr_t)f;
	fi->keep_cache = p.keep && !writer;
	fi->direct_io = p.direct;
	fi->noflush = 1; /* op_flush has nothing to do for a file */
	if (fuse_reply_open(req, fi) == -ENOENT) {
		cache_close(fs->cache, cf, writer);
		struct held back = { f->n, NULL };
		held_put(fs, &back);
		free(f);
	}
}

/*
 * A new empty file @name in @parent (or, without O_EXCL in @flags, the
 * existing one, cut to nothing), open for writing in the cache and
 * journaled: what create(2) and mknod(2) of a regular file make. @h is
 * held when it returns, whatever it returns (held_put() takes a failed
 * one too); on success *ret_cf is open for writing.
 */
static int create_here(fuse_req_t req, struct osbfs *fs, fuse_ino_t parent,
		       const char *name, mode_t mode, int flags, struct held *h,
		       struct cfile **ret_cf, uint64_t *ret_version)
{
	struct fattr a;
	h->n = NULL;
	h->path = NULL;
	int rc = name_check(name);
	if (!rc && parent == NODE_ROOT_INO &&
	    strcmp(name, fs->opt->control_dir) == 0)
		rc = -EEXIST;
	if (!rc)
		rc = held_child(fs, parent, name, h);
	if (rc)
		return rc;
	int arc = node_attr(fs, h, &a);
	/* cut to nothing, it keeps its mode, special bits too */
	if (arc == 0 && a.type == OSB_FILE)
		arc = node_attr_bits(fs, h, &a);
	bool existed = arc == 0;
	struct cfile *cf = NULL;
	if (arc && arc != -ENOENT)
		return arc;
	if (existed && (flags & O_EXCL))
		return -EEXIST;
	if (existed && a.type == OSB_DIR)
		return -EISDIR;
	/* a new file is its maker's; one there keeps its owner */
	char owner[OWNERS_NAME_MAX], group[OWNERS_NAME_MAX];
	if (existed)
		owner[0] = group[0] = '\0';
	else
		ops_maker(req, fs, h->n, owner, group);
	pthread_mutex_lock(&fs->nodes.lock);
	/* a missing name known without asking: a negative entry (a stat, or
	 * a removal from here, just now) */
	long long now = mono_ms(), absent = 0;
	if (!existed && node_negative(&fs->nodes, h->n, now))
		/* held by the change feed past its timeout: as if asked now */
		absent = h->n->neg_expiry > now ?
				 h->n->neg_expiry :
				 now + fs->opt->negative_timeout_ms;
	cf = cache_created(fs->cache, h->n, existed ? &a : NULL, mode, absent);
	if (cf && (owner[0] || group[0]))
		cache_set_owner(fs->cache, cf, owner, group, false);
	if (cf) {
		struct cache_attr la;
		cache_local_attr(fs->cache, cf, &la);
		memset(&h->n->attr, 0, sizeof(h->n->attr));
		memcpy(h->n->attr.owner, la.owner, sizeof(h->n->attr.owner));
		memcpy(h->n->attr.group, la.group, sizeof(h->n->attr.group));
		h->n->attr.type = OSB_FILE;
		h->n->attr.mode = la.mode;
		h->n->attr.mtime = la.mtime;
		node_ctime_set(h->n, &(struct timespec){ 0, 0 });
		h->n->attr_valid = true;
		h->n->attr_expiry = mono_ms() + fs->opt->attr_timeout_ms;
		h->n->neg_expiry = 0;
		if (h->n->parent)
			dir_changed(fs, h->n->parent, h->n);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!cf)
		return -ENOMEM;
	rc = cache_open(fs->cache, cf, true);
	if (rc)
		return rc;
	rc = cache_truncate(fs->cache, cf, 0, false, ret_version);
	int drc = cache_dirty(fs->cache, cf, h->path);
	if (!rc)
		rc = drc;
	/* a copy an earlier save left here is replaced by this file */
	if (!rc && !existed)
		cache_left_replace(fs->cache, h->path, cf);
	if (rc) {
		cache_close(fs->cache, cf, true);
		return rc;
	}
	*ret_cf = cf;
	return 0;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	struct held h = { NULL, NULL };
	struct cfile *cf = NULL;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(parent)) {
		ctl_create(req, parent, name, mode, fi);
		return;
	}
	struct fh *f = calloc(1, sizeof(*f));
	int rc = f ? create_here(req, fs, parent, name, mode, fi->flags, &h,
				 &cf, &f->version) :
		     -ENOMEM;
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
	f->w.window = CACHE_WINDOW_MIN;
	free(h.path);
	fi->fh = (uint64_t)(uintptr_t)f;
	fi->noflush = 1;

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
		cache_close(fs->cache, cf, true);
		struct held back = { f->n, NULL };
		held_put(fs, &back);
		free(f);
	}
}

/* What mknod(2) cannot make here, for the log. */
static const char *mknod_kind(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO:
		return "a fifo";
	case S_IFSOCK:
		return "a socket";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	default:
		return "a file of an unknown type";
	}
}

/*
 * mknod(2): a regular file is made as create() makes one (GNU tar's
 * --xattrs extraction makes every file with mknodat first), then closed:
 * new, empty, journaled and uploaded with the write-back. Fifos, sockets
 * and devices are refused: the sandbox's API cannot make them, and one
 * made by a command would connect nothing across the two machines.
 */
static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct osbfs *fs = req_fs(req);
	struct held h = { NULL, NULL };
	struct cfile *cf = NULL;
	uint64_t version;
	(void)rdev;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(parent) || !S_ISREG(mode)) {
		if (!ctl_is_ino(parent))
			log_warn("mknod %s: cannot make %s in the sandbox, "
				 "only regular files (EPERM)",
				 name, mknod_kind(mode));
		fuse_reply_err(req, EPERM);
		return;
	}
	int rc = create_here(req, fs, parent, name, mode & 07777,
			     O_CREAT | O_EXCL | O_WRONLY, &h, &cf, &version);
	if (!rc) {
		cache_close(fs->cache, cf, true);
		if (cache_upload_due(fs->cache, cf))
			wb_schedule(fs, cf, fs->opt->writeback_delay_ms);
		reply_node_entry(req, fs, h.n);
	} else {
		fuse_reply_err(req, -rc);
	}
	held_put(fs, &h);
}

/*
 * Read-ahead: when a sequential reader's next window is not all here,
 * the thread that has just answered it fetches that window, so the
 * download runs while the reader reads what is here (libfuse gives the
 * next request to another thread). A read that needs those bytes
 * meanwhile waits for them (cache_fill), as it waits for any fetch of
 * its range. The bytes are checked against the file's attributes, as a
 * reader's own fetch is, but before they are added: a reader may take
 * them at once. A change seen here is left for the reader's own fetch to
 * find and tell, so the reader fails (ESTALE) rather than seeing the new
 * version's size.
 */
struct ahead {
	struct osbfs *fs;
	struct held h;
	struct cfile *cf;
	uint64_t version;
	int64_t off, len;
	uint64_t joined_at; /* the handle's (fh.joined_at) */
};

static int fetch_ahead(void *arg, int64_t off, int64_t len, int64_t size,
		       osb_sink_fn sink, void *sink_arg)
{
	struct ahead *a = arg;
	int rc = remote_fetch(a->fs, a->h.path, off, len, size, sink, sink_arg);
	if (!rc)
		rc = version_check(a->fs, &a->h, a->cf, a->version,
				   check_since(a->fs, a->cf, a->joined_at));
	return rc == 1 ? -ESTALE : rc;
}

static void ahead_claim(struct osbfs *fs, fuse_ino_t ino, struct fh *f,
			int64_t from, struct ahead *a)
{
	if (!cache_ahead_claim(fs->cache, f->cf, f->version, &f->w, from,
			       &a->off, &a->len))
		return;
	if (held_get(fs, ino, &a->h)) {
		cache_ahead_done(fs->cache, f->cf);
		return;
	}
	a->fs = fs;
	a->cf = f->cf;
	a->version = f->version;
	a->joined_at = f->joined_at;
	cache_ref(fs->cache, a->cf);
}

static void ahead_fetch(struct osbfs *fs, struct ahead *a)
{
	if (!a->cf)
		return;
	uint64_t version;
	(void)cache_fill(fs->cache, a->cf, a->off, a->len, fetch_ahead, a,
			 &version);
	cache_ahead_done(fs->cache, a->cf);
	cache_unref(fs->cache, a->cf);
	held_put(fs, &a->h);
}

/* Fetches [off, off + want) for handle @f, and checks the version. */
static int read_fetch(struct osbfs *fs, struct fh *f, int64_t off, int64_t want)
{
	struct held h = { .n = f->n };
	pthread_mutex_lock(&fs->nodes.lock);
	h.path = node_path(&fs->nodes, f->n);
	pthread_mutex_unlock(&fs->nodes.lock);
	/* no path: the name went (the sandbox lost it, as a read-ahead's
	 * check may have just found): what is not here is nowhere, and the
	 * open file is what is out of date */
	int rc = h.path ? file_fetch(fs, &h, f->cf, off, want) : -ESTALE;
	/* a handle opened with bytes of the file here asks the sandbox
	 * after its fetches until the sandbox's answer, asked after the
	 * open, says the version: a new open never shows a mix of the
	 * bytes it found and those it fetched */
	if (!rc)
		rc = read_revalidate(fs, &h, f->cf, f->version,
				     check_since(fs, f->cf, f->joined_at));
	free(h.path);
	return rc;
}

/* Reads up to @size bytes at @off for handle @f into *@buf (made to
 * measure): the count, or -errno; -EAGAIN when bytes went for room
 * between the fetch and the read (cache_pread), to be tried again. */
static ssize_t read_some(struct osbfs *fs, struct fh *f, size_t size, off_t off,
			 char **buf)
{
	struct cfile *cf = f->cf;
	int64_t len, want;
	int rc = cache_read_begin(fs->cache, cf, f->version, &f->w, off, size,
				  &len, &want);
	if (!rc && len && want && off == 0 &&
	    cache_fill_wanted(fs->cache, cf) && pull_for_read(fs, f->n))
		/* a walk: this file may have come with its neighbours */
		rc = cache_read_begin(fs->cache, cf, f->version, &f->w, off,
				      size, &len, &want);
	if (!rc && len && want)
		rc = read_fetch(fs, f, off, want);
	if (rc || !len)
		return rc;
	if (!*buf)
		*buf = malloc(size);
	if (!*buf)
		return -ENOMEM;
	return cache_pread(fs->cache, cf, f->version, *buf, (size_t)len, off);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(ino)) {
		ctl_read(req, ino, size, off, fi);
		return;
	}
	struct fh *f = (struct fh *)(uintptr_t)fi->fh;
	char *buf = NULL;
	ssize_t n = -EAGAIN;
	/* a reader of a file bigger than the cache may find bytes it was
	 * to read let go meanwhile for another's room: it fetches them
	 * again, a few times at most */
	for (int tries = 0; n == -EAGAIN && tries < 8; tries++)
		n = read_some(fs, f, size, off, &buf);
	/* claimed before the reply: the handle may go once it is sent */
	struct ahead a = { 0 };
	if (n > 0)
		ahead_claim(fs, ino, f, off + n, &a);
	if (n < 0)
		fuse_reply_err(req, n == -EAGAIN ? EIO : (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
	ahead_fetch(fs, &a);
}

void log_too_big(struct osbfs *fs, struct node *n, const char *what,
		 int64_t size)
{
	pthread_mutex_lock(&fs->nodes.lock);
	char *path = node_path(&fs->nodes, n);
	pthread_mutex_unlock(&fs->nodes.lock);
	log_error("%s %s would make it %lld bytes or more, more than "
		  "cache_max_size (%lld bytes) allows: a file is held whole "
		  "in the cache until it is uploaded",
		  what, path ? path : "a file gone", (long long)size,
		  (long long)cache_max_size(fs->cache));
	free(path);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(ino)) {
		ctl_write(req, ino, buf, size, off, fi);
		return;
	}
	struct fh *f = (struct fh *)(uintptr_t)fi->fh;
	bool record;
	ssize_t n = cache_write(fs->cache, f->cf, buf, size, off, f->append,
				&record);
	if (n == -EFBIG)
		log_too_big(fs, f->n, "a write to", off + (int64_t)size);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	if (record) {
		pthread_mutex_lock(&fs->nodes.lock);
		char *path = node_path(&fs->nodes, f->n);
		pthread_mutex_unlock(&fs->nodes.lock);
		int rc = path ? cache_dirty(fs->cache, f->cf, path) : 0;
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
	cache_close(fs->cache, cf, f->writer);
	/* what was read into the cache may have taken it past its cap */
	cache_evict(fs->cache, 0);
	if (f->writer && cache_upload_due(fs->cache, cf))
		wb_schedule(fs, cf, fs->opt->writeback_delay_ms);
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
	/* the bytes are in the sandbox when it returns; the mtime follows */
	int rc = wb_flush_bytes(fs, f->cf);
	fuse_reply_err(req, -rc);
}

void op_file_register(struct fuse_lowlevel_ops *ops)
{
	ops->open = op_open;
	ops->create = op_create;
	ops->mknod = op_mknod;
	ops->read = op_read;
	ops->write = op_write;
	ops->flush = op_flush;
	ops->release = op_release;
	ops->fsync = op_fsync;
}

/*
 * ops.c - FUSE ops on inodes: lookup, getattr, setattr, forget, access,
 * statfs, init; and the helpers every op shares (held nodes, attribute
 * fetching, entries).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "linkmap.h"
#include "log.h"
#include "ops.h"
#include "special.h"
#include "watch.h"
#include "writeback.h"

#define STATFS_CACHE_MS 30000

int held_get(struct osbfs *fs, fuse_ino_t ino, struct held *ret)
{
	ret->n = NULL;
	ret->path = NULL;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *n = node_by_ino(&fs->nodes, ino);
	char *path = n ? node_path(&fs->nodes, n) : NULL;
	if (path)
		node_ref(n);
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!path)
		return n ? -ENOENT : -ESTALE;
	ret->n = n;
	ret->path = path;
	return 0;
}

int held_child(struct osbfs *fs, fuse_ino_t parent, const char *name,
	       struct held *ret)
{
	int rc = 0;
	ret->n = NULL;
	ret->path = NULL;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *p = node_by_ino(&fs->nodes, parent);
	struct node *n =
		p && !p->unlinked ? node_child_get(&fs->nodes, p, name) : NULL;
	char *path = n ? node_path(&fs->nodes, n) : NULL;
	if (path)
		node_ref(n);
	else
		rc = !p || p->unlinked ? -ENOENT : -ENOMEM;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (rc)
		return rc;
	ret->n = n;
	ret->path = path;
	return 0;
}

int held_inode(struct osbfs *fs, fuse_ino_t ino, struct held *ret)
{
	ret->n = NULL;
	ret->path = NULL;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *n = node_by_ino(&fs->nodes, ino);
	char *path = n && !n->unlinked ? node_path(&fs->nodes, n) : NULL;
	int rc = !n ? -ESTALE : !path && !n->unlinked ? -ENOENT : 0;
	if (!rc) {
		node_ref(n);
		ret->n = n;
		ret->path = path;
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	return rc;
}

void held_put(struct osbfs *fs, struct held *h)
{
	if (!h->n)
		return;
	pthread_mutex_lock(&fs->nodes.lock);
	node_unref(&fs->nodes, h->n);
	pthread_mutex_unlock(&fs->nodes.lock);
	free(h->path);
	h->n = NULL;
	h->path = NULL;
}

int name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n > 255)
		return -ENAMETOOLONG;
	if (!n || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	if (!osb_utf8_valid(name, n))
		return -EILSEQ;
	return 0;
}

bool name_lossy(const char *name)
{
	return strstr(name, "\xef\xbf\xbd") != NULL;
}

int name_check(const char *name)
{
	int rc = name_valid(name);
	return rc ? rc : name_lossy(name) ? -EILSEQ : 0;
}

/* A lookup of a lossy name (name_lossy()) fails with EILSEQ; the log
 * says why, once for each such name a listing showed. */
static void lossy_refused(struct osbfs *fs, fuse_ino_t parent, const char *name)
{
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *p = node_by_ino(&fs->nodes, parent);
	struct node *c = p ? node_child(&fs->nodes, p, name) : NULL;
	bool tell = !c || !c->lossy_told;
	if (c)
		c->lossy_told = true;
	char *dir = tell && p ? node_path(&fs->nodes, p) : NULL;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!tell)
		return;
	/* the log shows each U+FFFD of @name as \ufffd (osb_escape()) */
	if (c)
		log_error(
			"%s/%s: the sandbox has a name here that is not "
			"valid UTF-8 (execd sends U+FFFD in place of its "
			"bytes): it cannot be reached "
			"through the mount (EILSEQ); rename it in the sandbox",
			dir ? dir : "?", name);
	else
		log_error("%s/%s: a name holding U+FFFD is "
			  "refused (EILSEQ): execd sends it in place of the "
			  "bytes of a name that is not UTF-8, so such a name "
			  "cannot be told from another",
			  dir ? dir : "?", name);
	free(dir);
}

static mode_t type_bits(enum osb_ftype t)
{
	switch (t) {
	case OSB_DIR:
		return S_IFDIR;
	case OSB_SYMLINK:
		return S_IFLNK;
	case OSB_OTHER:
		return S_IFIFO;
	default:
		return S_IFREG;
	}
}

void node_stat(struct osbfs *fs, const struct node *n, struct stat *st)
{
	const struct fattr *a = &n->attr;

	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = type_bits(a->type) | (a->mode & 07777);
	/* a directory's count of subdirectories is not known: 1 means
	 * "unknown" to find and fts, as on sshfs and btrfs; an orphan has
	 * no name left */
	st->st_nlink = n->unlinked ? 0 : 1;
	/* and its other names made here (hard links) */
	for (const struct node *l = n->links; l; l = l->link_next)
		st->st_nlink += !node_negative(&fs->nodes, l, mono_ms());
	owners_show(fs, a->owner, a->group, &st->st_uid, &st->st_gid);
	st->st_size = a->size;
	st->st_mtim = a->mtime;
	st->st_atim = a->mtime;
	st->st_ctim = node_ctime(n);
	if (node_has_local(fs, n)) {
		/* local changes the sandbox has not seen yet, or an orphan */
		struct cache_attr la;
		cache_local_attr(fs->cache, n->cf, &la);
		st->st_ctim = node_ctime_local(n, &la.ctime);
		owners_show(fs, la.owner, la.group, &st->st_uid, &st->st_gid);
		if (la.dir) {
			/* made or given a mode here: the mode is ours, the
			 * times follow its entries (dir_changed) */
			st->st_mode = S_IFDIR | (la.mode & 07777);
		} else {
			st->st_size = la.size;
			st->st_mtim = la.mtime;
			st->st_atim = la.atime;
			st->st_mode = S_IFREG | (la.mode & 07777);
		}
	}
	if (n->times_pending) {
		st->st_mtim = n->pending_mtime;
		st->st_atim = n->pending_atime;
	}
	if (a->type == OSB_SYMLINK && n->link_target &&
	    !fs->opt->symlinks_raw &&
	    a->size == (int64_t)strlen(n->link_target)) {
		/* the length readlink shows (linkmap.h), once it is known */
		char *path = node_path(&fs->nodes, n), *shown = NULL;
		if (path && link_map(n->link_target, path, fs->root,
				     fs->opt->control_dir, &shown) == 0)
			st->st_size = (off_t)strlen(shown);
		free(shown);
		free(path);
	}
	st->st_blksize = (blksize_t)128 * 1024;
	st->st_blocks = (st->st_size + 511) / 512;
}

double attr_timeout_of(struct osbfs *fs, const struct node *n)
{
	return node_bits_unknown(fs, n) ? 0 : fs->opt->attr_timeout_ms / 1000.0;
}

static void fill_entry(struct osbfs *fs, struct node *n,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = n->ino;
	e->attr_timeout = attr_timeout_of(fs, n);
	e->entry_timeout = fs->opt->attr_timeout_ms / 1000.0;
	node_stat(fs, n, &e->attr);
}

void reply_node_entry(fuse_req_t req, struct osbfs *fs, struct node *n)
{
	struct fuse_entry_param e;
	pthread_mutex_lock(&fs->nodes.lock);
	if (n->link_to) {
		/* another name of a file: the kernel gets the file, with
		 * what the sandbox just said of this name if it knows no
		 * better (the names share one inode there too) */
		struct node *f = n->link_to;
		if (!f->attr_valid && n->attr_valid) {
			f->attr = n->attr;
			f->attr_valid = true;
			f->attr_expiry = n->attr_expiry;
		}
		n = f;
	}
	fill_entry(fs, n, &e);
	n->nlookup++;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (fuse_reply_entry(req, &e) == -ENOENT) {
		/* the request was interrupted: the kernel took no ref */
		pthread_mutex_lock(&fs->nodes.lock);
		n->nlookup--;
		node_maybe_free(&fs->nodes, n);
		pthread_mutex_unlock(&fs->nodes.lock);
	}
}

void reply_negative(fuse_req_t req, struct osbfs *fs)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.entry_timeout = fs->opt->negative_timeout_ms / 1000.0;
	fuse_reply_entry(req, &e);
}

/* The most entries a directory may have for its listing to be asked
 * for in place of one child's attributes. */
#define LIST_FOR_ATTR_MAX 2048

/*
 * Whether a listing of @p (nodes lock held) is the cheaper way to learn
 * the attributes of a child of it: one request then answers for every
 * child, which is what tools that go through a directory they have seen
 * (git, make, an untar into a directory of ours) need next. Not for a
 * directory never listed (its size is not known) or a big one, nor when
 * the options turn attribute or listing caching off.
 */
static bool listing_answers(struct osbfs *fs, const struct node *p)
{
	return fs->opt->attr_timeout_ms > 0 && fs->opt->dir_timeout_ms > 0 &&
	       p->list_gen && !p->unlinked &&
	       p->list_count <= LIST_FOR_ATTR_MAX;
}

/*
 * @h's attributes from a listing of its parent @ph asked for at or after
 * @since: 0 (in *ret), -ENOENT (not in it), or 1 when the listing does
 * not say (it failed, raced a change, or the node moved).
 */
static int attr_from_listing(struct osbfs *fs, struct held *h, struct held *ph,
			     long long since, struct fattr *ret)
{
	if (dir_refresh(fs, ph, since))
		return 1;
	int rc = 1;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *p = ph->n, *n = h->n;
	if (n->parent == p && p->list_valid && p->listed_at >= since) {
		if (node_has_local(fs, n) ||
		    node_attr_fresh(&fs->nodes, n, mono_ms())) {
			if (ret)
				*ret = n->attr;
			rc = 0;
		} else if (n->listed_gen != p->list_gen) {
			rc = -ENOENT;
		}
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	return rc;
}

bool node_bits_unknown(struct osbfs *fs, const struct node *n)
{
	return n->special_state == SPECIAL_UNKNOWN && n->attr_valid &&
	       (n->attr.type == OSB_FILE || n->attr.type == OSB_DIR) &&
	       !node_has_local(fs, n);
}

/*
 * @h's attributes from the sandbox, into @a: a stat by the file API, or,
 * when @bits asks for the special bits and @h does not know them, by a
 * command, which says them too. A second request only when the first
 * shows that they may have changed since they were learned.
 */
static int attr_fetch(struct osbfs *fs, struct held *h, bool bits,
		      uint64_t asked, struct fattr *a)
{
	pthread_mutex_lock(&fs->nodes.lock);
	bool full = bits && h->n->special_state == SPECIAL_UNKNOWN;
	pthread_mutex_unlock(&fs->nodes.lock);
	int rc = full ? remote_stat_full(fs, h->path, a) :
			remote_stat(fs, h->path, a);
	if (rc || full || !bits)
		return rc;
	pthread_mutex_lock(&fs->nodes.lock);
	full = !special_known(h->n, a, asked);
	pthread_mutex_unlock(&fs->nodes.lock);
	return full ? remote_stat_full(fs, h->path, a) : 0;
}

static int attr_get(struct osbfs *fs, struct held *h, struct fattr *ret,
		    bool bits)
{
	long long now = mono_ms();
	struct fattr a;

	pthread_mutex_lock(&fs->nodes.lock);
	if (!h->path) {
		/* an orphan: what we last knew is all there is */
		if (ret)
			*ret = h->n->attr;
		pthread_mutex_unlock(&fs->nodes.lock);
		return 0;
	}
	if (node_negative(&fs->nodes, h->n, now)) {
		pthread_mutex_unlock(&fs->nodes.lock);
		return -ENOENT;
	}
	/* a link still to make in the sandbox is known here only */
	if (node_has_local(fs, h->n) || h->n->link_later ||
	    (node_attr_fresh(&fs->nodes, h->n, now) &&
	     !(bits && node_bits_unknown(fs, h->n)))) {
		if (ret)
			*ret = h->n->attr;
		pthread_mutex_unlock(&fs->nodes.lock);
		return 0;
	}
	struct node *p = h->n->parent;
	if (p && node_list_fresh(&fs->nodes, p, now) &&
	    h->n->listed_gen != p->list_gen) {
		/* a fresh listing of the parent does not have it */
		pthread_mutex_unlock(&fs->nodes.lock);
		return -ENOENT;
	}
	if (p && listing_answers(fs, p)) {
		struct held ph = { p, node_path(&fs->nodes, p) };
		if (ph.path) {
			node_ref(p);
			pthread_mutex_unlock(&fs->nodes.lock);
			int rc = attr_from_listing(fs, h, &ph, now, ret);
			held_put(fs, &ph);
			if (rc <= 0)
				return rc;
			pthread_mutex_lock(&fs->nodes.lock);
		}
	}
	uint64_t gen = h->n->parent ? h->n->parent->change_gen : 0;
	uint64_t own = h->n->change_gen;
	uint64_t asked = fs->nodes.change_seq;
	pthread_mutex_unlock(&fs->nodes.lock);

	uint64_t mark = cache_mark(fs->cache);
	int rc = attr_fetch(fs, h, bits, asked, &a);
	bool fetched = rc == 0;

	pthread_mutex_lock(&fs->nodes.lock);
	/* a change we made meanwhile wins over what was fetched */
	bool raced = (h->n->parent && h->n->parent->change_gen != gen) ||
		     h->n->change_gen != own;
	if (rc == -ENOENT && !raced && !node_has_local(fs, h->n)) {
		node_set_negative(h->n, now + fs->opt->negative_timeout_ms);
		xattr_name_gone(fs, h->n);
	} else if (!rc && !raced && !node_has_local(fs, h->n)) {
		special_take(h->n, &a, asked);
		node_set_attr(h->n, &a, now + fs->opt->attr_timeout_ms);
	}
	if (!rc && ret)
		*ret = node_has_local(fs, h->n) || raced ? h->n->attr : a;
	/* a change of ours, local data, or a server that is away: what we
	 * know is the best answer there is */
	if (rc && (raced || node_has_local(fs, h->n) || watch_away(fs)) &&
	    h->n->attr_valid) {
		rc = 0;
		if (ret)
			*ret = h->n->attr;
	}
	/* the sandbox's version may not be the one cached: it goes */
	bool stale = h->n->cf && fetched && !raced &&
		     !node_has_local(fs, h->n) &&
		     cache_check_version(fs->cache, h->n->cf, &a, mark);
	bool root = fetched && h->n == fs->nodes.root;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (stale)
		tell_changed(fs, h->n->ino, h->path);
	if (root)
		special_root_save(fs);
	return rc;
}

int node_attr(struct osbfs *fs, struct held *h, struct fattr *ret)
{
	return attr_get(fs, h, ret, false);
}

int node_attr_bits(struct osbfs *fs, struct held *h, struct fattr *ret)
{
	return attr_get(fs, h, ret, true);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct osbfs *fs = userdata;
	(void)fs;
	/* the kernel's writeback cache stays off: unsafe for a network
	 * filesystem (sshfs removed it after data loss on append) */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* no remote locks: the kernel's local locking applies */
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	conn->max_write = 1024 * 1024;
	conn->max_readahead = 1024 * 1024;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	long long now = mono_ms();
	int rc;

	atomic_store(&fs->last_activity, now);
	if (ctl_is_ino(parent)) {
		ctl_lookup(req, parent, name);
		return;
	}
	if (parent == NODE_ROOT_INO &&
	    strcmp(name, fs->opt->control_dir) == 0) {
		ctl_lookup_root(req);
		return;
	}
	if (strlen(name) > 255) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	if (!osb_utf8_valid(name, strlen(name))) {
		/* no such name can exist in the sandbox */
		reply_negative(req, fs);
		return;
	}
	if (name_lossy(name)) {
		lossy_refused(fs, parent, name);
		fuse_reply_err(req, EILSEQ);
		return;
	}

	/* answered from the caches? */
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *p = node_by_ino(&fs->nodes, parent);
	if (!p || p->unlinked) {
		pthread_mutex_unlock(&fs->nodes.lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct node *c = node_child(&fs->nodes, p, name);
	bool listed = node_list_fresh(&fs->nodes, p, now);
	if (c && (node_has_local(fs, c) || c->link_later ||
		  node_attr_fresh(&fs->nodes, c, now))) {
		pthread_mutex_unlock(&fs->nodes.lock);
		reply_node_entry(req, fs, c);
		return;
	}
	if ((c && node_negative(&fs->nodes, c, now)) ||
	    (listed && (!c || c->listed_gen != p->list_gen))) {
		pthread_mutex_unlock(&fs->nodes.lock);
		reply_negative(req, fs);
		return;
	}
	pthread_mutex_unlock(&fs->nodes.lock);

	rc = held_child(fs, parent, name, &h);
	if (!rc)
		rc = node_attr(fs, &h, NULL);
	if (rc == -ENOENT)
		reply_negative(req, fs);
	else if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_node_entry(req, fs, h.n);
	held_put(fs, &h);
}

static void forget_one(struct osbfs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct node *n = node_by_ino(&fs->nodes, ino);
	if (!n)
		return;
	n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
	node_maybe_free(&fs->nodes, n);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct osbfs *fs = req_fs(req);
	if (ctl_is_ino(ino)) {
		ctl_forget(ino, nlookup);
	} else {
		pthread_mutex_lock(&fs->nodes.lock);
		forget_one(fs, ino, nlookup);
		pthread_mutex_unlock(&fs->nodes.lock);
	}
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct osbfs *fs = req_fs(req);
	pthread_mutex_lock(&fs->nodes.lock);
	for (size_t i = 0; i < count; i++)
		if (!ctl_is_ino(forgets[i].ino))
			forget_one(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&fs->nodes.lock);
	for (size_t i = 0; i < count; i++)
		if (ctl_is_ino(forgets[i].ino))
			ctl_forget(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void reply_attr_of(fuse_req_t req, struct osbfs *fs, struct node *n)
{
	struct stat st;
	pthread_mutex_lock(&fs->nodes.lock);
	node_stat(fs, n, &st);
	double timeout = attr_timeout_of(fs, n);
	pthread_mutex_unlock(&fs->nodes.lock);
	fuse_reply_attr(req, &st, timeout);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	struct held h;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(ino)) {
		ctl_getattr(req, ino);
		return;
	}
	int rc = held_inode(fs, ino, &h);
	if (!rc)
		rc = node_attr_bits(fs, &h, NULL);
	/* asked by a name: the name is gone (ENOENT); through an open file
	 * (fstat, or the kernel before a read past the size it knows)
	 * whose name the sandbox lost: the open file is out of date, as its
	 * reads say (ESTALE) */
	int e = rc == -ESTALE ? ENOENT : -rc;
	if (fi && (rc == -ENOENT || rc == -ESTALE))
		e = ESTALE;
	if (rc)
		fuse_reply_err(req, e);
	else
		reply_attr_of(req, fs, h.n);
	held_put(fs, &h);
}

int file_changed(struct osbfs *fs, struct held *h, struct cfile *cf, bool meta)
{
	if (!h->path)
		return 0;
	return meta ? cache_dirty_meta(fs->cache, cf, h->path) :
		      cache_dirty(fs->cache, cf, h->path);
}

void node_changed_here(struct osbfs *fs, struct node *n,
		       const struct timespec *ctime)
{
	static const struct timespec unknown = { 0, 0 };
	n->change_gen = ++fs->nodes.change_seq;
	n->own_gen = n->change_gen;
	node_ctime_set(n, ctime ? ctime : &unknown);
	if (n->cf && !ctime)
		cache_changed_here(fs->cache, n->cf);
	special_changed(fs, n, ctime);
}

/* truncate(2)/ftruncate(2): the file is made whole locally, cut, and
 * uploaded later like any write. */
static int do_truncate(struct osbfs *fs, struct held *h, off_t size)
{
	struct fattr a;
	int rc = node_attr_bits(fs, h, &a);
	if (rc)
		return rc;
	if (a.type == OSB_DIR)
		return -EISDIR;
	if (a.type != OSB_FILE)
		return -EINVAL;

	if (size > cache_max_size(fs->cache)) {
		log_too_big(fs, h->n, "a truncate of", size);
		return -EFBIG;
	}
	bool keep;
	struct cfile *cf = file_prepare(fs, h, &a, &keep);
	if (!cf)
		return -ENOMEM;
	cache_ref(fs->cache, cf);
	if (size > 0)
		rc = file_make_complete(fs, h, cf);
	if (!rc)
		rc = cache_truncate(fs->cache, cf, size, true, NULL);
	if (!rc) {
		rc = file_changed(fs, h, cf, false);
		if (cache_upload_due(fs->cache, cf))
			wb_schedule(fs, cf, fs->opt->writeback_delay_ms);
	}
	cache_unref(fs->cache, cf);
	return rc;
}

static int do_chmod(struct osbfs *fs, struct held *h, mode_t mode)
{
	struct fattr a;
	int rc = node_attr_bits(fs, h, &a);
	if (rc)
		return rc;
	mode &= 07777;
	pthread_mutex_lock(&fs->nodes.lock);
	struct cfile *cf = h->n->cf;
	bool local = node_has_local(fs, h->n);
	if (!h->path && !local) {
		/* an orphan without content: only what is shown changes */
		h->n->attr.mode = mode;
		pthread_mutex_unlock(&fs->nodes.lock);
		return 0;
	}
	if (!local && a.mode == mode && a.type != OSB_SYMLINK) {
		/* already so (tar and cp -p chmod what they just made) */
		pthread_mutex_unlock(&fs->nodes.lock);
		return 0;
	}
	if (local)
		cache_set_mode(fs->cache, cf, mode);
	else if (a.type == OSB_DIR)
		cf = cache_dir_changed(fs->cache, h->n, &a, mode);
	pthread_mutex_unlock(&fs->nodes.lock);
	if (local)
		rc = file_changed(fs, h, cf, true);
	else if (a.type == OSB_DIR)
		rc = cf ? file_changed(fs, h, cf, true) : -ENOMEM;
	if (local || a.type == OSB_DIR) {
		/* a directory's mode goes with the write-back, many in one
		 * request (tar gives every directory its mode at the end) */
		if (!rc && cache_is_dir(fs->cache, cf))
			wb_schedule(fs, cf, fs->opt->writeback_delay_ms);
		return rc;
	}
	if (a.type == OSB_SYMLINK)
		return 0; /* Linux has no mode on symlinks */
	rc = remote_chmod(fs, h->path, mode, a.owner, a.group);
	if (!rc) {
		pthread_mutex_lock(&fs->nodes.lock);
		h->n->attr.mode = mode;
		special_set(h->n, mode);
		node_changed_here(fs, h->n, NULL);
		pthread_mutex_unlock(&fs->nodes.lock);
	}
	return rc;
}

static void now_or(const struct timespec *t, bool now, struct timespec *out)
{
	if (now)
		clock_gettime(CLOCK_REALTIME, out);
	else
		*out = *t;
}

static int do_times(struct osbfs *fs, struct held *h, const struct stat *attr,
		    int to_set)
{
	struct fattr a;
	int rc = node_attr(fs, h, &a);
	if (rc)
		return rc;
	struct timespec mt = a.mtime, at = { 0, UTIME_OMIT };
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
		now_or(&attr->st_mtim, to_set & FUSE_SET_ATTR_MTIME_NOW, &mt);
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW))
		now_or(&attr->st_atim, to_set & FUSE_SET_ATTR_ATIME_NOW, &at);

	pthread_mutex_lock(&fs->nodes.lock);
	struct cfile *cf = h->n->cf;
	bool local = node_has_local(fs, h->n);
	if (!h->path && !local) {
		h->n->attr.mtime = mt;
		pthread_mutex_unlock(&fs->nodes.lock);
		return 0;
	}
	/* a directory's times wait for it and its entries to be uploaded */
	if (a.type == OSB_DIR)
		local = false;
	if (local)
		cache_set_times(fs->cache, cf, &mt,
				at.tv_nsec == UTIME_OMIT ? &mt : &at);
	pthread_mutex_unlock(&fs->nodes.lock);
	if (local)
		return file_changed(fs, h, cf, true);

	struct timespec ctime;
	mode_t mode;
	struct rtimes t = { .path = h->path,
			    .mtime = mt,
			    .atime = at,
			    .nofollow = a.type == OSB_SYMLINK,
			    .ret_ctime = &ctime,
			    .ret_mode = &mode };
	uint64_t seq = 0;
	/* a directory's wait for the changes below it (writeback.h) */
	rc = a.type == OSB_DIR ? wb_dir_times(fs, h->n, &t, &seq) :
				 remote_times(fs, &t, 1);
	if (rc > 0)
		return 0;
	if (!rc) {
		pthread_mutex_lock(&fs->nodes.lock);
		if (a.type == OSB_DIR && h->n->times_seq != seq) {
			/* a name came or went meanwhile: that is later */
			pthread_mutex_unlock(&fs->nodes.lock);
			return 0;
		}
		h->n->attr.mtime = mt;
		node_changed_here(fs, h->n, &ctime);
		if (mode) /* the command saw the special bits too */
			special_seen(h->n, mode, &ctime);
		if (h->n->cf) /* our own change */
			cache_times_done(fs->cache, h->n->cf, &mt, &ctime);
		pthread_mutex_unlock(&fs->nodes.lock);
	}
	return rc;
}

void ops_maker(fuse_req_t req, struct osbfs *fs, struct node *n, char *owner,
	       char *group)
{
	owner[0] = group[0] = '\0';
	if (!owners_on(fs))
		return;
	const struct fuse_ctx *who = fuse_req_ctx(req);
	uid_t uid = who->uid;
	gid_t gid = who->gid;
	pthread_mutex_lock(&fs->nodes.lock);
	if (n->parent) {
		struct stat dir;
		node_stat(fs, n->parent, &dir);
		if (dir.st_mode & S_ISGID)
			gid = dir.st_gid;
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (uid != fs->uid || gid != fs->gid)
		owners_names(fs, uid, gid, owner, group);
}

/*
 * chown(2). Where the owners shown are the sandbox's (owners.h), the
 * sandbox's file gets the owner asked: with the upload of what is not
 * there yet, else by a command. The kernel checked who may (allow_other
 * implies default_permissions); without allow_other only the mount's
 * user reaches here, who is root then. Elsewhere every file is the
 * mount's user's, and that is all it may be given.
 */
static int do_chown(struct osbfs *fs, fuse_req_t req, struct held *h,
		    const struct stat *attr, int to_set)
{
	bool set_uid = to_set & FUSE_SET_ATTR_UID,
	     set_gid = to_set & FUSE_SET_ATTR_GID;
	if (!owners_on(fs))
		return (set_uid && attr->st_uid != fs->uid) ||
				       (set_gid && attr->st_gid != fs->gid) ?
			       -EPERM :
			       0;
	struct fattr a;
	int rc = node_attr_bits(fs, h, &a);
	if (rc)
		return rc;
	struct stat now;
	pthread_mutex_lock(&fs->nodes.lock);
	node_stat(fs, h->n, &now);
	pthread_mutex_unlock(&fs->nodes.lock);
	uid_t uid = set_uid ? attr->st_uid : now.st_uid;
	gid_t gid = set_gid ? attr->st_gid : now.st_gid;
	if (uid == now.st_uid && gid == now.st_gid)
		return 0;
	if (uid != now.st_uid && fuse_req_ctx(req)->uid != 0)
		return -EPERM; /* what the kernel says too */
	char owner[OWNERS_NAME_MAX], group[OWNERS_NAME_MAX];
	owners_names(fs, uid, gid, owner, group);

	pthread_mutex_lock(&fs->nodes.lock);
	struct cfile *cf = h->n->cf;
	bool local = node_has_local(fs, h->n);
	if (local || !h->path) {
		if (cf)
			cache_set_owner(fs->cache, cf, owner, group, true);
		snprintf(h->n->attr.owner, sizeof(h->n->attr.owner), "%s",
			 owner);
		snprintf(h->n->attr.group, sizeof(h->n->attr.group), "%s",
			 group);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!h->path)
		return 0; /* an orphan: only what is shown */
	if (local) {
		rc = file_changed(fs, h, cf, true);
		if (!rc && cache_is_dir(fs->cache, cf))
			wb_schedule(fs, cf, fs->opt->writeback_delay_ms);
		return rc;
	}
	rc = remote_chown(fs, h->path, owner, group, a.type == OSB_SYMLINK);
	if (rc)
		return rc;
	pthread_mutex_lock(&fs->nodes.lock);
	snprintf(h->n->attr.owner, sizeof(h->n->attr.owner), "%s", owner);
	snprintf(h->n->attr.group, sizeof(h->n->attr.group), "%s", group);
	if (h->n->cf)
		cache_set_owner(fs->cache, h->n->cf, owner, group, false);
	/* Linux clears setuid, and setgid with group execute, of a file
	 * given another owner, root's chown too */
	mode_t m = h->n->attr.mode;
	if (a.type == OSB_FILE) {
		m &= ~(mode_t)S_ISUID;
		if (m & S_IXGRP)
			m &= ~(mode_t)S_ISGID;
	}
	if (m != h->n->attr.mode) {
		h->n->attr.mode = m;
		special_set(h->n, m);
	}
	node_changed_here(fs, h->n, NULL);
	pthread_mutex_unlock(&fs->nodes.lock);
	return 0;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	int rc;
	(void)fi;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(ino)) {
		ctl_setattr(req, ino, attr, to_set);
		return;
	}
	rc = held_inode(fs, ino, &h);
	if (rc) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* the owner first: a mode the kernel sends with it (setuid
	 * cleared) is set after it */
	if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
		rc = do_chown(fs, req, &h, attr, to_set);
	if (!rc && (to_set & FUSE_SET_ATTR_SIZE))
		rc = do_truncate(fs, &h, attr->st_size);
	if (!rc && (to_set & FUSE_SET_ATTR_MODE))
		rc = do_chmod(fs, &h, attr->st_mode);
	if (!rc &&
	    (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
		       FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)))
		rc = do_times(fs, &h, attr, to_set);
	if (!rc)
		rc = node_attr(fs, &h, NULL);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_attr_of(req, fs, h.n);
	held_put(fs, &h);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;

	if (ctl_is_ino(ino)) {
		ctl_access(req, ino, mask);
		return;
	}
	int rc = held_inode(fs, ino, &h);
	if (!rc)
		rc = node_attr(fs, &h, &a);
	if (!rc && (mask & X_OK) && a.type == OSB_FILE) {
		pthread_mutex_lock(&fs->nodes.lock);
		mode_t m = a.mode;
		if (node_has_local(fs, h.n)) {
			struct cache_attr la;
			cache_local_attr(fs->cache, h.n->cf, &la);
			m = la.mode;
		}
		pthread_mutex_unlock(&fs->nodes.lock);
		if (!(m & 0111))
			rc = -EACCES;
	}
	fuse_reply_err(req, rc ? (rc == -ESTALE ? ENOENT : -rc) : 0);
	held_put(fs, &h);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct osbfs *fs = req_fs(req);
	struct statvfs st;
	long long now = mono_ms();
	(void)ino;

	pthread_mutex_lock(&fs->statfs_lock);
	bool fresh = now < fs->statfs_expiry;
	st = fs->statfs;
	pthread_mutex_unlock(&fs->statfs_lock);
	if (!fresh && remote_statfs(fs, fs->root, &st) == 0) {
		pthread_mutex_lock(&fs->statfs_lock);
		fs->statfs = st;
		fs->statfs_expiry = now + STATFS_CACHE_MS;
		pthread_mutex_unlock(&fs->statfs_lock);
	}
	if (!st.f_bsize) {
		/* never fail df: plausible numbers until the sandbox says */
		memset(&st, 0, sizeof(st));
		st.f_bsize = st.f_frsize = 4096;
		st.f_blocks = st.f_bfree = st.f_bavail = 1ull << 28;
		st.f_files = st.f_ffree = st.f_favail = 1ull << 24;
	}
	st.f_namemax = 255;
	fuse_reply_statfs(req, &st);
}

static struct fuse_lowlevel_ops make_ops(void)
{
	struct fuse_lowlevel_ops ops = {
		.init = op_init,
		.lookup = op_lookup,
		.forget = op_forget,
		.forget_multi = op_forget_multi,
		.getattr = op_getattr,
		.setattr = op_setattr,
		.access = op_access,
		.statfs = op_statfs,
	};
	return ops;
}

struct fuse_lowlevel_ops osbfs_make_ops(void)
{
	struct fuse_lowlevel_ops ops = make_ops();
	op_dir_register(&ops);
	op_file_register(&ops);
	op_xattr_register(&ops);
	return ops;
}

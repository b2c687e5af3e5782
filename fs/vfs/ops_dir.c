/*
 * ops_dir.c - FUSE ops on names: listings (readdirplus, filled from one
 * listing call that also answers every child's getattr: listing.c),
 * mkdir, rmdir, unlink, rename, symlink, readlink, link.
 */
#include <errno.h>
#include <stdio.h> /* RENAME_* */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "linkmap.h"
#include "log.h"
#include "ops.h"
#include "special.h"
#include "watch.h"
#include "writeback.h"
#include "xattr.h"

/* A file sent from here a moment ago and renamed over another goes again
 * under its new name up to this size (a command in the sandbox costs
 * more than sending this again); a bigger one is moved by command. */
#define RESEND_MAX (1 << 20)

/* ---- listings ---- */

struct dent {
	char *name;
	struct node *node; /* NULL for . and .. and the control dir */
	fuse_ino_t ino;
	mode_t type;
};

struct dirh {
	struct dent *e;
	size_t n, cap;
	struct node *dir; /* counted in its rd_open */
	uint64_t gen;     /* the dir's change_gen when the entries were
			     taken */
};

static int dent_cmp(const void *a, const void *b)
{
	const struct dent *x = a, *y = b;
	return strcmp(x->name, y->name);
}

/* Lets go of @dh's entries (nodes lock held). */
static void dirh_clear(struct osbfs *fs, struct dirh *dh)
{
	for (size_t i = 0; i < dh->n; i++) {
		if (dh->e[i].node)
			node_unref(&fs->nodes, dh->e[i].node);
		free(dh->e[i].name);
	}
	dh->n = 0;
}

static void dirh_free(struct osbfs *fs, struct dirh *dh)
{
	if (!dh)
		return;
	pthread_mutex_lock(&fs->nodes.lock);
	dirh_clear(fs, dh);
	if (dh->dir) {
		dh->dir->rd_open--;
		node_unref(&fs->nodes, dh->dir);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	free(dh->e);
	free(dh);
}

static int dirh_add(struct dirh *dh, const char *name, struct node *node,
		    fuse_ino_t ino, mode_t type)
{
	if (dh->n == dh->cap) {
		size_t nc = dh->cap ? dh->cap * 2 : 32;
		struct dent *e = realloc(dh->e, nc * sizeof(*e));
		if (!e)
			return -ENOMEM;
		dh->e = e;
		dh->cap = nc;
	}
	dh->e[dh->n].name = strdup(name);
	if (!dh->e[dh->n].name)
		return -ENOMEM;
	dh->e[dh->n].node = node;
	dh->e[dh->n].ino = ino;
	dh->e[dh->n].type = type;
	if (node)
		node_ref(node);
	dh->n++;
	return 0;
}

/* FNV-1a over what the kernel's cache keeps of an entry. */
static uint64_t dirh_sig(const struct dirh *dh)
{
	uint64_t h = 14695981039346656037ULL;
	for (size_t i = 0; i < dh->n; i++) {
		const struct dent *d = &dh->e[i];
		const unsigned char *p = (const unsigned char *)d->name;
		size_t len = strlen(d->name) + 1;
		for (size_t k = 0; k < len; k++)
			h = (h ^ p[k]) * 1099511628211ULL;
		uint64_t f[2] = { d->ino, d->type };
		for (size_t k = 0; k < 16; k++)
			h = (h ^ ((f[k / 8] >> (k % 8 * 8)) & 0xff)) *
			    1099511628211ULL;
	}
	return h ? h : 1;
}

/*
 * The kernel may keep a directory's entries between opens
 * (cache_readdir), so a walk that comes again reads them without asking
 * us. It keeps them (keep_cache) only when they are what this open
 * would give: the same entries as at the last reset, and no handle open
 * since then that may have filled the cache from older entries. Changes
 * made through the mount reset the kernel's cache by themselves. @sig
 * is dirh_sig(@dh). Called with the node table locked.
 */
static void dirh_cache(struct dirh *dh, struct node *d, uint64_t sig,
		       struct fuse_file_info *fi)
{
	fi->cache_readdir = 1;
	fi->keep_cache = d->rd_sig == sig && !d->rd_mixed;
	if (!fi->keep_cache) {
		d->rd_sig = sig;
		d->rd_mixed = d->rd_open > 0;
	}
	d->rd_open++;
	dh->dir = d;
	node_ref(d);
}

/* Takes the entries of @d, as its listing and our changes since have
 * them, into empty @dh (nodes lock held); dirh_sort() then. The control
 * dir is not listed, only found by name (ctl.h). */
static int dirh_take(struct osbfs *fs, struct dirh *dh, struct node *d)
{
	fuse_ino_t up = d->parent ? d->parent->ino : d->ino;
	int rc = dirh_add(dh, ".", NULL, d->ino, S_IFDIR);
	if (!rc)
		rc = dirh_add(dh, "..", NULL, up, S_IFDIR);
	long long now = mono_ms();
	for (struct node *c = d->child_first; !rc && c; c = c->sib_next) {
		if (c->listed_gen != d->list_gen ||
		    node_negative(&fs->nodes, c, now))
			continue;
		mode_t t = c->attr.type == OSB_DIR     ? S_IFDIR :
			   c->attr.type == OSB_SYMLINK ? S_IFLNK :
							 S_IFREG;
		/* a lossy name is listed, but without its attributes: the
		 * kernel asks a lookup, which refuses it */
		/* a second name of a file goes as a bare name with the
		 * file's inode: the kernel's lookup of it finds the file */
		if (c->link_to)
			rc = dirh_add(dh, c->name, NULL, c->link_to->ino, t);
		else
			rc = dirh_add(dh, c->name,
				      name_lossy(c->name) ? NULL : c, c->ino,
				      t);
	}
	dh->gen = d->change_gen;
	return rc;
}

/* The entries by name, after "." and "..". */
static void dirh_sort(struct dirh *dh)
{
	qsort(dh->e + 2, dh->n - 2, sizeof(*dh->e), dent_cmp);
}

/*
 * A read from the start of a handle opened before a change made through
 * the mount in its directory takes the entries again (POSIX lets a
 * rewound stream show changes). The kernel fills its cache of a
 * directory's entries from whichever handle reads from the start first,
 * and takes that copy as current from then on: an older handle's
 * entries would be what the next opens read.
 */
static int dirh_retake(struct osbfs *fs, struct dirh *dh)
{
	int rc = 0;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *d = dh->dir;
	bool again = d && d->change_gen != dh->gen;
	if (again) {
		dirh_clear(fs, dh);
		rc = dirh_take(fs, dh, d);
		/* not what the handle was opened with: the next open
		 * resets the kernel's copy */
		d->rd_mixed = true;
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (again && !rc)
		dirh_sort(dh);
	return rc;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(ino)) {
		ctl_opendir(req, ino, fi);
		return;
	}
	int rc = held_get(fs, ino, &h);
	if (rc) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = node_attr(fs, &h, &a);
	if (!rc && a.type != OSB_DIR && h.n != fs->nodes.root)
		rc = -ENOTDIR;
	if (!rc)
		rc = dir_load(fs, &h);
	struct dirh *dh = rc ? NULL : calloc(1, sizeof(*dh));
	if (!rc && !dh)
		rc = -ENOMEM;
	if (!rc) {
		pthread_mutex_lock(&fs->nodes.lock);
		rc = dirh_take(fs, dh, h.n);
		pthread_mutex_unlock(&fs->nodes.lock);
		if (!rc) {
			dirh_sort(dh);
			uint64_t sig = dirh_sig(dh);
			pthread_mutex_lock(&fs->nodes.lock);
			dirh_cache(dh, h.n, sig, fi);
			pthread_mutex_unlock(&fs->nodes.lock);
		}
	}
	held_put(fs, &h);
	if (rc) {
		dirh_free(fs, dh);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)dh;
	if (fuse_reply_open(req, fi) == -ENOENT)
		dirh_free(fs, dh);
}

/*
 * Whether entry @d of a snapshot of @dir is still what the name is
 * (nodes lock held): not removed or moved since, nor replaced (a save's
 * rename), and with attributes to show. Only then does readdirplus give
 * the kernel the node with it; else the kernel would keep, for the entry
 * timeout, a name that is gone or the file a save replaced. The kernel
 * reads a directory and changes its names under one lock, so what is
 * checked here holds until it has the answer.
 */
static bool dent_still(struct osbfs *fs, const struct node *dir,
		       const struct dent *d)
{
	const struct node *n = d->node;
	return n->parent == dir && strcmp(n->name, d->name) == 0 &&
	       !node_negative(&fs->nodes, n, mono_ms()) &&
	       (n->attr_valid || node_has_local(fs, n));
}

static void do_readdir(fuse_req_t req, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct osbfs *fs = req_fs(req);
	struct dirh *dh = (struct dirh *)(uintptr_t)fi->fh;
	char *buf = calloc(1, size);
	size_t used = 0;

	int rc = buf ? 0 : -ENOMEM;
	if (!rc && off == 0)
		rc = dirh_retake(fs, dh);
	if (rc) {
		free(buf);
		fuse_reply_err(req, -rc);
		return;
	}
	for (size_t i = (size_t)off; i < dh->n; i++) {
		struct dent *d = &dh->e[i];
		size_t need;
		if (!plus) {
			struct stat st = { .st_ino = d->ino,
					   .st_mode = d->type };
			need = fuse_add_direntry(req, buf + used, size - used,
						 d->name, &st, (off_t)(i + 1));
		} else {
			struct fuse_entry_param e;
			memset(&e, 0, sizeof(e));
			pthread_mutex_lock(&fs->nodes.lock);
			bool still = d->node && dent_still(fs, dh->dir, d);
			if (still) {
				e.ino = d->node->ino;
				e.attr_timeout = attr_timeout_of(fs, d->node);
				e.entry_timeout =
					fs->opt->attr_timeout_ms / 1000.0;
				node_stat(fs, d->node, &e.attr);
			}
			pthread_mutex_unlock(&fs->nodes.lock);
			if (!still) {
				e.attr.st_ino = d->ino;
				e.attr.st_mode = d->type;
			}
			need = fuse_add_direntry_plus(req, buf + used,
						      size - used, d->name, &e,
						      (off_t)(i + 1));
			if (need <= size - used) {
				/* the kernel now holds a lookup reference */
				if (still) {
					pthread_mutex_lock(&fs->nodes.lock);
					d->node->nlookup++;
					pthread_mutex_unlock(&fs->nodes.lock);
				}
			}
		}
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	if (ctl_is_ino(ino)) {
		ctl_readdir(req, ino, size, off, fi, false);
		return;
	}
	do_readdir(req, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	if (ctl_is_ino(ino)) {
		ctl_readdir(req, ino, size, off, fi, true);
		return;
	}
	do_readdir(req, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	if (ctl_is_ino(ino)) {
		ctl_releasedir(req, ino, fi);
		return;
	}
	dirh_free(req_fs(req), (struct dirh *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* Before a directory or symlink is made at @path, a directory there is
 * removed or fsynced: copies left at or below it by saves go (a cheap
 * check first). */
static int lefts_clear(struct osbfs *fs, const char *path)
{
	if (!cache_lefts_count(fs->cache))
		return 0;
	pthread_rwlock_wrlock(&fs->path_lock);
	int rc = wb_lefts_remove(fs, path, 0);
	pthread_rwlock_unlock(&fs->path_lock);
	return rc;
}

/*
 * fsync of a directory: its entries are in the sandbox when it returns.
 * Names change there at once, except directories made here, which go
 * with the write-back: the directory's own and its subdirectories' are
 * sent now.
 */
static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	struct osbfs *fs = req_fs(req);
	(void)datasync;
	(void)fi;
	if (ctl_is_ino(ino)) {
		fuse_reply_err(req, 0);
		return;
	}
	struct cfile **cfs = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *d = node_by_ino(&fs->nodes, ino);
	struct node *c = d ? d->child_first : NULL;
	for (struct node *x = d; x && !rc; x = x == d ? c : x->sib_next) {
		/* the directory, and what is in it that the sandbox lacks
		 * (a file renamed here goes under its new name) */
		if (!x->cf || !cache_is_dirty(fs->cache, x->cf))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct cfile **m = realloc(cfs, ncap * sizeof(*m));
			if (!m) {
				rc = -ENOMEM;
				break;
			}
			cfs = m;
			cap = ncap;
		}
		cache_ref(fs->cache, x->cf);
		cfs[n++] = x->cf;
	}
	char *path = d && cache_lefts_count(fs->cache) ?
			     node_path(&fs->nodes, d) :
			     NULL;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!rc)
		rc = wb_flush_list(fs, cfs, n, true);
	for (size_t i = 0; i < n; i++)
		cache_unref(fs->cache, cfs[i]);
	free(cfs);
	/* and the copies saves left in it are gone: what it lists is so */
	if (!rc && path)
		rc = lefts_clear(fs, path);
	free(path);
	fuse_reply_err(req, -rc);
}

/* ---- changes ---- */

static int parent_ok(struct osbfs *fs, fuse_ino_t parent, const char *name)
{
	if (ctl_is_ino(parent))
		return -EPERM;
	if (parent == NODE_ROOT_INO && strcmp(name, fs->opt->control_dir) == 0)
		return -EEXIST;
	return name_check(name);
}

/*
 * Directory @d (held), if made here and not in the sandbox yet, is made
 * there now: for the calls that need it there (a symlink in it, a move
 * into it by command). Its parents come with it (mkdir -p).
 */
static int dir_made(struct osbfs *fs, struct node *d)
{
	pthread_mutex_lock(&fs->nodes.lock);
	struct cfile *cf = d ? d->cf : NULL;
	if (cf)
		cache_ref(fs->cache, cf);
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!cf)
		return 0;
	int rc = cache_only_local(fs->cache, cf) ? wb_flush(fs, cf) : 0;
	cache_unref(fs->cache, cf);
	return rc;
}

/* dir_made() for the directory @h is in. */
static int parent_made(struct osbfs *fs, struct held *h)
{
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *p = h->n->parent;
	if (p)
		node_ref(p);
	pthread_mutex_unlock(&fs->nodes.lock);
	int rc = dir_made(fs, p);
	if (p) {
		struct held ph = { p, NULL };
		held_put(fs, &ph);
	}
	return rc;
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(parent)) {
		ctl_mkdir(req, parent, name, mode);
		return;
	}
	int rc = parent_ok(fs, parent, name);
	if (!rc)
		rc = held_child(fs, parent, name, &h);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	rc = node_attr(fs, &h, &a);
	if (!rc)
		rc = -EEXIST;
	else if (rc == -ENOENT)
		rc = lefts_clear(fs, h.path);
	struct cfile *cf = NULL;
	if (!rc) {
		/* made here now, in the sandbox with the write-back: many
		 * directories go in one request (an untar makes hundreds) */
		memset(&a, 0, sizeof(a));
		a.type = OSB_DIR;
		a.size = 4096;
		a.mode = mode & 07777;
		clock_gettime(CLOCK_REALTIME, &a.mtime);
		a.ctime = a.mtime;
		ops_maker(req, fs, h.n, a.owner, a.group);
		pthread_mutex_lock(&fs->nodes.lock);
		cf = cache_dir_changed(fs->cache, h.n, NULL, mode);
		if (cf && (a.owner[0] || a.group[0]))
			cache_set_owner(fs->cache, cf, a.owner, a.group, false);
		if (cf) {
			node_set_attr(h.n, &a,
				      mono_ms() + fs->opt->attr_timeout_ms);
			h.n->list_valid = true; /* new and empty */
			h.n->list_ours = true;
			h.n->list_gen++;
			h.n->listed_at = mono_ms();
			h.n->list_count = 0;
			h.n->list_expiry =
				h.n->listed_at + fs->opt->dir_timeout_ms;
			if (h.n->parent)
				dir_changed(fs, h.n->parent, h.n);
		}
		pthread_mutex_unlock(&fs->nodes.lock);
		rc = cf ? cache_dirty_meta(fs->cache, cf, h.path) : -ENOMEM;
	}
	if (!rc) {
		wb_schedule(fs, cf, fs->opt->writeback_delay_ms);
		reply_node_entry(req, fs, h.n);
	} else {
		fuse_reply_err(req, -rc);
	}
	held_put(fs, &h);
}

/*
 * The removal of empty directory @h (@name in its parent), and its node
 * after it. path_lock keeps upload batches out meanwhile: one that took
 * the directory (made here, or given a mode) before would make it again
 * after the removal (mkdir -p), and no later one sends it (forgotten).
 */
static int rmdir_send(struct osbfs *fs, struct held *h, const char *name,
		      bool local_only)
{
	pthread_rwlock_wrlock(&fs->path_lock);
	int rc = cache_lefts_count(fs->cache) ?
			 wb_lefts_remove(fs, h->path, 0) :
			 0;
	if (!rc)
		rc = remote_rmdir(fs, h->path);
	/* the API's delete takes a missing directory as done; `rmdir`, the
	 * route of a path execd would expand ($), does not */
	if (rc == -ENOENT && local_only)
		rc = 0;
	if (!rc) {
		pthread_mutex_lock(&fs->nodes.lock);
		if (h->n->cf)
			cache_forget(fs->cache, h->n->cf);
		struct node *p = h->n->parent;
		node_unlink(&fs->nodes, h->n);
		if (p) {
			dir_changed(fs, p, NULL);
			dir_name_gone(fs, p, name);
		}
		pthread_mutex_unlock(&fs->nodes.lock);
		xattrs_drop(fs->xattrs, h->path);
	}
	pthread_rwlock_unlock(&fs->path_lock);
	return rc;
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;
	struct rdent *ents = NULL;
	size_t n = 0;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(parent)) {
		ctl_rmdir(req, parent, name);
		return;
	}
	if (parent == NODE_ROOT_INO &&
	    strcmp(name, fs->opt->control_dir) == 0) {
		fuse_reply_err(req, EPERM);
		return;
	}
	int rc = held_child(fs, parent, name, &h);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	rc = node_attr(fs, &h, &a);
	if (!rc && a.type != OSB_DIR)
		rc = -ENOTDIR;
	/* the API deletes recursively: look first (a fresh listing) */
	if (!rc)
		rc = remote_list(fs, h.path, &ents, &n);
	bool local_only = false;
	if (rc == -ENOENT && h.n->cf && cache_only_local(fs->cache, h.n->cf)) {
		rc = 0; /* made here, not in the sandbox yet */
		local_only = true;
	}
	if (!rc && (n || cache_dirty_below(fs->cache, h.n, true) ||
		    cache_links_below(fs->cache, h.path)))
		rc = -ENOTEMPTY;
	if (!rc)
		rc = rmdir_send(fs, &h, name, local_only);
	rdent_array_free(ents, n);
	fuse_reply_err(req, -rc);
	held_put(fs, &h);
}

/*
 * The journal record of @cf, if dirty, names @path: written before a file
 * moves there, so a crash after the move uploads it under its new name.
 * On a full disk, clean cached data makes room first.
 */
static int record_move(struct osbfs *fs, struct cfile *cf, const char *path)
{
	if (!cf)
		return 0;
	int rc = cache_record_update(fs->cache, cf, path);
	if (rc)
		log_error("rename of %s: cannot journal its new name in %s: %s",
			  path, cache_dir(fs->cache), strerror(-rc));
	return rc;
}

/* Whether @h is a second name of a file (a hard link made here). */
static bool link_alias(struct osbfs *fs, const struct held *h)
{
	pthread_mutex_lock(&fs->nodes.lock);
	bool alias = h->n->link_to != NULL;
	pthread_mutex_unlock(&fs->nodes.lock);
	return alias;
}

/*
 * Before @h's name goes (unlink, a rename over it): when its file has
 * other names, *ret_heir is the one it keeps (malloc'd), and the file's
 * journal record names it, so that its upload goes there. Else NULL.
 * 0 or -errno.
 */
static int link_heir_path(struct osbfs *fs, const struct held *h,
			  char **ret_heir)
{
	*ret_heir = NULL;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *heir = h->n->link_to ? NULL : node_link_heir(h->n);
	char *path = heir ? node_path(&fs->nodes, heir) : NULL;
	struct cfile *cf = h->n->cf;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (heir && !path)
		return -ENOMEM;
	int rc = path ? record_move(fs, cf, path) : 0;
	if (rc)
		free(path);
	else
		*ret_heir = path;
	return rc;
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(parent)) {
		ctl_unlink(req, parent, name);
		return;
	}
	int rc = held_child(fs, parent, name, &h);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	rc = node_attr(fs, &h, &a);
	if (!rc && a.type == OSB_DIR &&
	    (!node_has_local(fs, h.n) || cache_is_dir(fs->cache, h.n->cf)))
		rc = -EISDIR;
	char *heir = NULL; /* the name the file keeps, if it has others */
	if (!rc)
		rc = link_heir_path(fs, &h, &heir);
	if (!rc && a.type == OSB_FILE && !heir && !link_alias(fs, &h))
		file_keep_for_readers(fs, &h);
	if (!rc) {
		pthread_rwlock_wrlock(&fs->path_lock);
		pthread_mutex_lock(&fs->nodes.lock);
		bool only_local =
			(h.n->cf && cache_only_local(fs->cache, h.n->cf)) ||
			h.n->link_later;
		pthread_mutex_unlock(&fs->nodes.lock);
		/* made here and never uploaded: nothing to delete there */
		if (!only_local)
			rc = remote_unlink(fs, h.path, a.type == OSB_SYMLINK);
		if (rc == -ENOENT) {
			pthread_mutex_lock(&fs->nodes.lock);
			if (node_has_local(fs, h.n))
				rc = 0; /* the sandbox never had it */
			pthread_mutex_unlock(&fs->nodes.lock);
		}
		if (!rc) {
			pthread_mutex_lock(&fs->nodes.lock);
			struct node *f = node_file(h.n);
			if (h.n->cf && !heir)
				cache_forget(fs->cache, h.n->cf);
			struct node *p = h.n->parent;
			node_unlink(&fs->nodes, h.n);
			if (p) {
				dir_changed(fs, p, NULL);
				dir_name_gone(fs, p, name);
			}
			/* the file's link count moved in the sandbox */
			if (f != h.n || heir)
				node_changed_here(fs, f, NULL);
			pthread_mutex_unlock(&fs->nodes.lock);
			if (heir)
				xattrs_move(fs->xattrs, h.path, heir);
			else
				xattrs_drop(fs->xattrs, h.path);
		} else if (heir) {
			pthread_mutex_lock(&fs->nodes.lock);
			struct cfile *cf = h.n->cf;
			pthread_mutex_unlock(&fs->nodes.lock);
			record_move(fs, cf, h.path); /* it keeps its name */
		}
		pthread_rwlock_unlock(&fs->path_lock);
	}
	free(heir);
	fuse_reply_err(req, -rc);
	held_put(fs, &h);
}

/*
 * How a rename reaches the sandbox (path_lock held for writing; @da NULL
 * when nothing is at the new name; @scf and @dcf the two names' files).
 * A file never uploaded moves here only: its upload goes to the new name,
 * over what the sandbox has there. A small file uploaded from here a
 * moment ago that moves over another (an editor's fsync, then its
 * rename) goes again, whole, under its new name with the next batch, and
 * the sandbox's copy goes now (once the bytes are safe on disk here):
 * cheaper than a command. Anything else is moved there: *ret_moved
 * then says so (the file's ctime moved in the sandbox).
 */
static int rename_send(struct osbfs *fs, const struct held *src,
		       const struct held *dst, const struct fattr *sa,
		       const struct fattr *da, struct cfile *scf,
		       struct cfile *dcf, bool *ret_moved)
{
	*ret_moved = false;
	/* a file with other names is one inode in the sandbox too: an
	 * upload to a name of it writes into that inode, so no upload goes
	 * to a name moved over it, and one of it goes to no new name */
	pthread_mutex_lock(&fs->nodes.lock);
	bool src_linked = src->n->links || src->n->link_to;
	bool dst_linked = dst->n->links || dst->n->link_to;
	bool src_later = src->n->link_later;
	pthread_mutex_unlock(&fs->nodes.lock);
	/* a link still to make goes to the new name, over what is there */
	if (src_later)
		return 0;
	bool src_local = scf && cache_only_local(fs->cache, scf);
	bool dst_local = dcf && cache_only_local(fs->cache, dcf);
	bool over = da && !dst_local; /* what the sandbox has there goes */
	bool over_file = !da || dst_local || da->type == OSB_FILE;

	if (sa->type == OSB_FILE && scf && !src_local && da && over_file &&
	    !src_linked && !dst_linked &&
	    cache_sent_here(fs->cache, scf, RESEND_MAX)) {
		bool left = false;
		int rc = cache_resend(fs->cache, scf, over ? dcf : NULL,
				      over ? da : NULL, src->path, dst->path,
				      &left);
		if (!rc && !left)
			rc = remote_unlink(fs, src->path, false);
		else if (!rc)
			wb_lefts_added(fs);
		if (rc && rc != -ENOENT)
			cache_base_lost(fs->cache, scf); /* stays there */
		return rc == -ENOENT ? 0 : rc;
	}
	if (src_local && sa->type != OSB_DIR && over_file && !dst_linked) {
		if (over)
			cache_moved_over(fs->cache, scf, dcf, da);
		else
			cache_left_replace(fs->cache, dst->path, scf);
		return 0;
	}
	if (src_local && sa->type != OSB_DIR && da &&
	    (da->type == OSB_SYMLINK || dst_linked)) {
		/* over a symlink the sandbox has, or a name of a file that
		 * has others, with a file it has not seen (an editor's save
		 * over a link): the name goes now (an upload would write
		 * through it), the file with its upload */
		int rc = remote_unlink(fs, dst->path, da->type == OSB_SYMLINK);
		if (rc && rc != -ENOENT)
			return rc;
		cache_left_replace(fs->cache, dst->path, scf);
		return 0;
	}
	/* copies left by saves go first: below a directory that moves (they
	 * would move with it), or where the file goes */
	int rc = sa->type == OSB_DIR ? wb_lefts_remove(fs, src->path, 0) : 0;
	if (!rc)
		rc = wb_lefts_remove(fs, dst->path, 0);
	if (!rc)
		rc = remote_rename(fs, src->path, dst->path, da != NULL,
				   sa->type == OSB_SYMLINK);
	*ret_moved = true; /* or may have been */
	return rc;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct osbfs *fs = req_fs(req);
	struct held src = { 0 }, dst = { 0 };
	struct fattr sa, da;
	bool dst_exists = false;
	char *heir = NULL; /* the name a file replaced here keeps */

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(parent) && ctl_is_ino(newparent)) {
		ctl_rename(req, parent, name, newparent, newname, flags);
		return;
	}
	if (ctl_is_ino(parent) || ctl_is_ino(newparent)) {
		/* mv falls back to a copy: a control file is written so */
		fuse_reply_err(req, EXDEV);
		return;
	}
	if (flags & RENAME_EXCHANGE) {
		/* no atomic exchange with the API or coreutils' mv */
		fuse_reply_err(req, EINVAL);
		return;
	}
	int rc = parent_ok(fs, newparent, newname);
	if (parent == NODE_ROOT_INO && strcmp(name, fs->opt->control_dir) == 0)
		rc = -EPERM;
	if (!rc)
		rc = held_child(fs, parent, name, &src);
	if (!rc)
		rc = held_child(fs, newparent, newname, &dst);
	if (!rc)
		rc = node_attr(fs, &src, &sa);
	if (!rc) {
		int drc = node_attr(fs, &dst, &da);
		if (drc && drc != -ENOENT)
			rc = drc;
		dst_exists = drc == 0;
	}
	if (!rc) {
		pthread_mutex_lock(&fs->nodes.lock);
		bool same = node_file(src.n) == node_file(dst.n);
		pthread_mutex_unlock(&fs->nodes.lock);
		if (src.n == dst.n || (same && dst_exists))
			goto out; /* to itself, or to another name of it */
	}
	if (!rc && dst_exists && (flags & RENAME_NOREPLACE))
		rc = -EEXIST;
	if (!rc && dst_exists && sa.type == OSB_DIR && da.type != OSB_DIR)
		rc = -ENOTDIR;
	if (!rc && dst_exists && sa.type != OSB_DIR && da.type == OSB_DIR)
		rc = -EISDIR;
	if (!rc && sa.type == OSB_DIR) {
		pthread_mutex_lock(&fs->nodes.lock);
		if (node_is_below(dst.n, src.n))
			rc = -EINVAL; /* into itself */
		pthread_mutex_unlock(&fs->nodes.lock);
	}
	/* a directory is replaced only when empty: files below it that the
	 * sandbox has not seen yet count (the sandbox's mv would not know) */
	if (!rc && dst_exists && da.type == OSB_DIR &&
	    (cache_dirty_below(fs->cache, dst.n, true) ||
	     cache_links_below(fs->cache, dst.path)))
		rc = -ENOTEMPTY;
	if (rc)
		goto out;
	rc = dst_exists ? link_heir_path(fs, &dst, &heir) : 0;
	if (rc)
		goto out;
	if (dst_exists && da.type == OSB_FILE && !heir && !link_alias(fs, &dst))
		file_keep_for_readers(fs, &dst);
	/* a directory made here goes to the sandbox first, so that the
	 * sandbox's mv has it to move, and so does the one it goes into */
	if (sa.type == OSB_DIR)
		rc = dir_made(fs, src.n);
	pthread_mutex_lock(&fs->nodes.lock);
	bool only_here = (sa.type != OSB_DIR && src.n->cf &&
			  cache_only_local(fs->cache, src.n->cf)) ||
			 src.n->link_later;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (!rc && !only_here)
		rc = parent_made(fs, &dst);
	if (rc)
		goto out;
	if (sa.type == OSB_FILE) {
		pthread_mutex_lock(&fs->nodes.lock);
		struct cfile *cf = src.n->cf;
		pthread_mutex_unlock(&fs->nodes.lock);
		rc = record_move(fs, cf, dst.path);
		if (rc)
			goto out;
	}
	/* a link still to make is made at the new name */
	pthread_mutex_lock(&fs->nodes.lock);
	uint64_t lid = src.n->link_later ? src.n->link_id : 0;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (lid) {
		/* (a name of another's file: no record of its own moved) */
		rc = cache_link_move(fs->cache, lid, dst.path);
		if (rc)
			goto out;
	}

	pthread_rwlock_wrlock(&fs->path_lock);
	pthread_mutex_lock(&fs->nodes.lock);
	/* a file keeping another name is not replaced */
	struct cfile *scf = src.n->cf, *dcf = heir ? NULL : dst.n->cf;
	pthread_mutex_unlock(&fs->nodes.lock);

	bool moved;
	rc = rename_send(fs, &src, &dst, &sa, dst_exists ? &da : NULL, scf, dcf,
			 &moved);
	if (!rc) {
		pthread_mutex_lock(&fs->nodes.lock);
		if (dcf && dst.n->cf == dcf)
			cache_forget(fs->cache, dcf); /* replaced */
		struct node *oldp = src.n->parent, *newp = dst.n->parent;
		rc = newp ? node_move(&fs->nodes, src.n, newp, newname) :
			    -ENOENT;
		if (oldp)
			dir_changed(fs, oldp, NULL);
		if (!rc && oldp)
			dir_name_gone(fs, oldp, name);
		if (newp)
			dir_changed(fs, newp, src.n);
		/* rename(2) in the sandbox moves the ctime of what it
		 * moves, a directory's too (its contents keep theirs); the
		 * cache's validator has none for a directory */
		if (!rc && moved && sa.type != OSB_DIR)
			node_changed_here(fs, node_file(src.n), NULL);
		else if (!rc && moved)
			special_touched(fs, src.n);
		pthread_mutex_unlock(&fs->nodes.lock);
		if (sa.type == OSB_DIR) {
			cache_records_follow(fs->cache, src.n);
			cache_links_follow(fs->cache, src.path, dst.path);
		}
		if (heir)
			xattrs_move(fs->xattrs, dst.path, heir);
		xattrs_move(fs->xattrs, src.path, dst.path);
	} else if (sa.type == OSB_FILE) {
		record_move(fs, scf, src.path); /* it stays where it was */
		if (lid)
			cache_link_move(fs->cache, lid, src.path);
	}
	if (heir && rc) {
		pthread_mutex_lock(&fs->nodes.lock);
		struct cfile *hcf = dst.n->cf;
		pthread_mutex_unlock(&fs->nodes.lock);
		record_move(fs, hcf, dst.path); /* it keeps its name */
	}
	pthread_rwlock_unlock(&fs->path_lock);
out:
	free(heir);
	fuse_reply_err(req, -rc);
	held_put(fs, &src);
	held_put(fs, &dst);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;

	atomic_store(&fs->last_activity, mono_ms());
	int rc = parent_ok(fs, parent, name);
	if (!rc && !osb_utf8_valid(link, strlen(link)))
		rc = -EILSEQ;
	if (!rc)
		rc = held_child(fs, parent, name, &h);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	rc = node_attr(fs, &h, &a);
	if (!rc)
		rc = -EEXIST;
	else if (rc == -ENOENT)
		rc = parent_made(fs, &h);
	if (!rc)
		rc = lefts_clear(fs, h.path);
	char owner[OWNERS_NAME_MAX], group[OWNERS_NAME_MAX];
	if (!rc)
		ops_maker(req, fs, h.n, owner, group);
	if (!rc)
		rc = remote_symlink(fs, link, h.path);
	/* the command made it root's: its maker's it is */
	if (!rc && (owner[0] || group[0]))
		rc = remote_chown(fs, h.path, owner, group, true);
	if (!rc) {
		memset(&a, 0, sizeof(a));
		memcpy(a.owner, owner, sizeof(a.owner));
		memcpy(a.group, group, sizeof(a.group));
		a.type = OSB_SYMLINK;
		a.size = (int64_t)strlen(link);
		a.mode = 0777;
		clock_gettime(CLOCK_REALTIME, &a.mtime);
		a.ctime = a.mtime;
		pthread_mutex_lock(&fs->nodes.lock);
		node_set_attr(h.n, &a, mono_ms() + fs->opt->attr_timeout_ms);
		free(h.n->link_target);
		h.n->link_target = strdup(link);
		if (h.n->parent)
			dir_changed(fs, h.n->parent, h.n);
		pthread_mutex_unlock(&fs->nodes.lock);
		reply_node_entry(req, fs, h.n);
	} else {
		fuse_reply_err(req, -rc);
	}
	held_put(fs, &h);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct osbfs *fs = req_fs(req);
	struct held h;
	struct fattr a;
	char *target = NULL, *shown = NULL;

	if (ctl_is_ino(ino)) {
		ctl_readlink(req, ino);
		return;
	}
	int rc = held_get(fs, ino, &h);
	if (rc) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = node_attr(fs, &h, &a);
	if (!rc && a.type != OSB_SYMLINK)
		rc = -EINVAL;
	if (!rc) {
		pthread_mutex_lock(&fs->nodes.lock);
		if (h.n->link_target &&
		    node_attr_fresh(&fs->nodes, h.n, mono_ms()))
			target = strdup(h.n->link_target);
		pthread_mutex_unlock(&fs->nodes.lock);
	}
	if (!rc && !target) {
		rc = remote_readlink(fs, h.path, &target);
		if (!rc) {
			pthread_mutex_lock(&fs->nodes.lock);
			free(h.n->link_target);
			h.n->link_target = strdup(target);
			if (h.n->attr.type == OSB_SYMLINK)
				h.n->attr.size = (int64_t)strlen(target);
			pthread_mutex_unlock(&fs->nodes.lock);
		}
	}
	/* the host's kernel follows what we answer: only a target that
	 * stays in the mount (linkmap.h), unless the sandbox is trusted */
	if (!rc && fs->opt->symlinks_raw) {
		shown = target;
		target = NULL;
	} else if (!rc) {
		rc = link_map(target, h.path, fs->root, fs->opt->control_dir,
			      &shown);
		if (rc)
			log_error("readlink %s: cannot show its target (%s)",
				  h.path, strerror(-rc));
	}
	/* lstat's size is now the length shown (node_stat); the kernel asks
	 * for it again, as after a readlink it holds the atime for stale */
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, shown);
	free(shown);
	free(target);
	held_put(fs, &h);
}

/*
 * Before a link to @cf's file (NULL: one the cache has no content of) at
 * @dst: *ret_later says whether it is made after the file's upload, and
 * path_lock is held for writing on success. A file the sandbox has not
 * seen yet gets the link after its upload: git links each new object to
 * its name, then removes the first name, which then costs nothing; else
 * the bytes written so far go first, and the directory it goes in. An
 * upload that took the file while it waited for the lock makes it one
 * the sandbox has. 0 or -errno.
 */
static int link_prepare(struct osbfs *fs, struct held *dst, struct cfile *cf,
			bool *ret_later)
{
	for (int tries = 0;; tries++) {
		bool later = cf && cache_only_local(fs->cache, cf);
		int rc = 0;
		if (!later && cf && cache_is_dirty(fs->cache, cf))
			rc = wb_flush_bytes(fs, cf);
		if (!rc && !later)
			rc = parent_made(fs, dst);
		if (!rc)
			rc = lefts_clear(fs, dst->path);
		if (rc)
			return rc;
		pthread_rwlock_wrlock(&fs->path_lock);
		if (!later || cache_only_local(fs->cache, cf)) {
			*ret_later = later;
			return 0;
		}
		pthread_rwlock_unlock(&fs->path_lock);
		if (tries == 2)
			return -EAGAIN; /* never seen: each upload waits */
	}
}

/*
 * link(2): made in the sandbox by a command run at most once, after the
 * file's pending upload (ARCHITECTURE.md "Hard links"); here the new
 * name is another name of the same node, so both show one inode.
 */
static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct osbfs *fs = req_fs(req);
	struct held src = { 0 }, dst = { 0 };
	struct fattr sa, da;

	atomic_store(&fs->last_activity, mono_ms());
	if (ctl_is_ino(ino) || ctl_is_ino(newparent)) {
		/* the control tree is another filesystem, as for rename */
		fuse_reply_err(req, EXDEV);
		return;
	}
	int rc = parent_ok(fs, newparent, newname);
	if (!rc)
		rc = held_get(fs, ino, &src);
	if (!rc)
		rc = node_attr(fs, &src, &sa);
	/* a directory never; nor a symlink, whose relative target would
	 * lead elsewhere from the other name (linkmap.h) */
	if (!rc && sa.type != OSB_FILE)
		rc = -EPERM;
	if (!rc)
		rc = held_child(fs, newparent, newname, &dst);
	if (!rc) {
		int drc = node_attr(fs, &dst, &da);
		rc = drc == 0 ? -EEXIST : drc == -ENOENT ? 0 : drc;
	}
	pthread_mutex_lock(&fs->nodes.lock);
	struct cfile *cf = src.n ? src.n->cf : NULL;
	if (cf)
		cache_ref(fs->cache, cf);
	pthread_mutex_unlock(&fs->nodes.lock);
	bool later = false;
	uint64_t lid = 0;
	if (!rc)
		rc = link_prepare(fs, &dst, cf, &later);
	/* its record first: a crash before the upload loses no name */
	if (!rc && later) {
		rc = cache_link_add(fs->cache, cf, dst.path, &lid);
		if (rc)
			pthread_rwlock_unlock(&fs->path_lock);
	}
	if (cf)
		cache_unref(fs->cache, cf);
	if (!rc) {
		rc = later ? 0 : remote_link(fs, src.path, dst.path);
		if (!rc) {
			pthread_mutex_lock(&fs->nodes.lock);
			struct node *f = node_file(src.n);
			node_link_add(f, dst.n);
			dst.n->link_later = later;
			dst.n->link_id = lid;
			node_set_attr(dst.n, &f->attr,
				      mono_ms() + fs->opt->attr_timeout_ms);
			if (dst.n->parent)
				dir_changed(fs, dst.n->parent, dst.n);
			/* the link moved the file's ctime there */
			if (!later)
				node_changed_here(fs, f, NULL);
			pthread_mutex_unlock(&fs->nodes.lock);
		}
		pthread_rwlock_unlock(&fs->path_lock);
	}
	if (!rc)
		reply_node_entry(req, fs, src.n);
	else
		fuse_reply_err(req, -rc);
	held_put(fs, &src);
	held_put(fs, &dst);
}

void op_dir_register(struct fuse_lowlevel_ops *ops)
{
	ops->opendir = op_opendir;
	ops->readdir = op_readdir;
	ops->readdirplus = op_readdirplus;
	ops->releasedir = op_releasedir;
	ops->fsyncdir = op_fsyncdir;
	ops->mkdir = op_mkdir;
	ops->rmdir = op_rmdir;
	ops->unlink = op_unlink;
	ops->rename = op_rename;
	ops->symlink = op_symlink;
	ops->readlink = op_readlink;
	ops->link = op_link;
}

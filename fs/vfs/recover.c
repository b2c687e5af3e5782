/*
 * recover.c - files a crashed or killed mount left dirty: their journal
 * records are replayed into new cfiles (cache_recover), each is put back
 * into the tree where this mount shows it, and the write-back uploads it
 * at once; one outside this mount's DIR is uploaded right here. The
 * journals of the cache dir's other slots that no mount holds (another
 * mount of the sandbox that crashed, or exited with files it could not
 * upload) are taken up too: their data is linked into this slot, their
 * records replayed here, and once this slot's journal has them, theirs
 * is removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_i.h"
#include "holder.h"
#include "journal.h"
#include "log.h"
#include "osbfs.h"
#include "recover.h"
#include "remote.h"

/* Another slot, whose journal is being taken up. */
struct other {
	char dir[PATH_MAX];
	int lock_fd; /* its lock, held meanwhile */
	int dir_fd;
	int files_fd;
	int count; /* records taken up */
};

/* A dirty file taken up, given to the callback once every journal is
 * read (the links to it may come in any order). */
struct rfile {
	struct cfile *cf;
	char *path;
};

struct replay {
	struct cache *c;
	cache_recover_fn fn;
	void *arg;
	struct other *from; /* NULL for this slot's own journal */
	struct rfile *files;
	size_t nfiles, files_cap;
	struct plink *links; /* links still to make */
	size_t nlinks, links_cap;
};

/* Appends @size bytes at *@v (of *@n, room for *@cap). -ENOMEM. */
static int grow(void **v, size_t *n, size_t *cap, size_t size)
{
	if (*n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	void *g = realloc(*v, c * size);
	if (!g)
		return -ENOMEM;
	*v = g;
	*cap = c;
	return 0;
}

/* Link record @id, to make at @r->path: kept for its file's callback. */
static void link_found(struct replay *rp, uint64_t id,
		       const struct journal_record *r)
{
	for (size_t i = 0; i < rp->nlinks; i++)
		if (rp->links[i].id == id)
			return; /* taken up already */
	char *path = strdup(r->path);
	if (!path || grow((void **)&rp->links, &rp->nlinks, &rp->links_cap,
			  sizeof(*rp->links))) {
		free(path);
		log_error("cannot take up the link %s made by an earlier run: "
			  "out of memory",
			  r->path);
		return;
	}
	rp->links[rp->nlinks++] =
		(struct plink){ .id = id, .file = r->file, .path = path };
}

static bool id_known(struct cache *c, uint64_t id)
{
	bool known = false;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nall && !known; i++)
		known = c->all[i]->id == id;
	pthread_mutex_unlock(&c->lock);
	return known;
}

/* Links the data of record @id from another slot into this one. False
 * when there is nothing to take: this slot has it already (an earlier
 * run took it up, and stopped before removing the other journal), or it
 * cannot be linked (said in the log; it stays there). */
static bool take_data(struct replay *rp, uint64_t id,
		      const struct journal_record *r, const char *name)
{
	struct cache *c = rp->c;
	struct other *o = rp->from;

	if (id_known(c, id))
		return false;
	if (r->m.dir)
		return true;
	/* an unknown file of that name here is a leftover: sweep fodder */
	if (linkat(o->files_fd, name, c->files_fd, name, 0) < 0 &&
	    (errno != EEXIST || unlinkat(c->files_fd, name, 0) < 0 ||
	     linkat(o->files_fd, name, c->files_fd, name, 0) < 0)) {
		log_error("cannot take up %s from %s: %s (it stays there)",
			  r->path, o->dir, strerror(errno));
		return false;
	}
	return true;
}

static void replay_one(void *arg, uint64_t id, const struct journal_record *r)
{
	struct replay *rp = arg;
	struct cache *c = rp->c;
	struct stat st;
	char name[17];

	cache_id_name(id, name);
	if (rp->from && !r->left && !r->link && !take_data(rp, id, r, name))
		return;
	if (rp->from)
		rp->from->count++;
	if (r->link) {
		link_found(rp, id, r);
		return;
	}
	if (r->left) {
		/* a copy to remove: due now */
		pthread_mutex_lock(&c->lock);
		int rc = cache_left_add(c, id, r->path, mono_ms());
		pthread_mutex_unlock(&c->lock);
		if (rc)
			log_error("cannot take up the removal of %s left by "
				  "an earlier run: %s",
				  r->path, strerror(-rc));
		return;
	}
	memset(&st, 0, sizeof(st));
	if (!r->m.dir && fstatat(c->files_fd, name, &st, 0) < 0) {
		log_error("the data of %s is missing from %s/files (%s); "
			  "cannot recover it",
			  r->path, c->dir, strerror(errno));
		return;
	}
	pthread_mutex_lock(&c->lock);
	struct cfile *cf = cache_cfile_new(c, id);
	if (!cf) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	cf->m = r->m;
	cf->size = st.st_size;
	cf->complete = true;
	cf->cached_bytes = st.st_size;
	c->total_bytes += st.st_size;
	cf->wgen = 1;
	cf->record_path = strdup(r->path);
	cache_dirty_list_add(c, cf);
	pthread_mutex_unlock(&c->lock);
	char *path = strdup(r->path);
	if (path && !grow((void **)&rp->files, &rp->nfiles, &rp->files_cap,
			  sizeof(*rp->files))) {
		rp->files[rp->nfiles++] = (struct rfile){ cf, path };
		return;
	}
	free(path);
	rp->fn(rp->arg, r->path, cf, NULL, 0); /* without its links */
}

/* Each dirty file taken up goes to the callback, with the links still
 * to make to it; a link whose file has no record left is dropped. */
static void replay_done(struct replay *rp)
{
	struct plink *mine = calloc(rp->nlinks ? rp->nlinks : 1, sizeof(*mine));
	for (size_t i = 0; i < rp->nfiles; i++) {
		struct rfile *f = &rp->files[i];
		size_t k = 0;
		for (size_t j = 0; mine && j < rp->nlinks; j++)
			if (rp->links[j].path &&
			    rp->links[j].file == f->cf->id) {
				mine[k++] = rp->links[j];
				rp->links[j].path = NULL; /* given */
			}
		rp->fn(rp->arg, f->path, f->cf, mine, k);
		for (size_t j = 0; j < k; j++)
			free(mine[j].path);
		free(f->path);
	}
	for (size_t j = 0; j < rp->nlinks; j++) {
		if (rp->links[j].path)
			log_error("the link %s made by an earlier run is not "
				  "made: its file has no unsaved record",
				  rp->links[j].path);
		free(rp->links[j].path);
	}
	free(mine);
	free(rp->files);
	free(rp->links);
}

/* Opens slot @i of the cache dir if nobody holds it and it has a
 * journal: 0, else -errno (-EBUSY: held; -ENOENT: no journal). */
static int other_open(struct cache *c, int i, struct other *o)
{
	holder_slot_dir(c->base, i, o->dir, sizeof(o->dir));
	o->dir_fd = o->files_fd = -1;
	o->count = 0;
	if (strcmp(o->dir, c->dir) == 0)
		return -EEXIST;
	o->lock_fd = holder_try(o->dir);
	if (o->lock_fd < 0)
		return o->lock_fd;
	o->dir_fd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dir_fd >= 0 && faccessat(o->dir_fd, "journal", F_OK, 0) == 0)
		o->files_fd = openat(o->dir_fd, "files",
				     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->files_fd >= 0)
		return 0;
	int rc = errno ? -errno : -ENOENT;
	if (o->dir_fd >= 0)
		close(o->dir_fd);
	close(o->lock_fd);
	return rc;
}

/* Once this slot's journal has what @o held: its journal and data go,
 * and its lock says nothing is pending there. */
static void other_clear(struct other *o)
{
	struct holder h = { .fd = o->lock_fd };
	struct dirent *de;

	if (unlinkat(o->dir_fd, "journal", 0) == 0)
		fsync(o->dir_fd);
	DIR *d = fdopendir(dup(o->files_fd));
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			unlinkat(o->files_fd, de->d_name, 0);
	if (d)
		closedir(d);
	holder_set(&h, HOLDER_EXITED, NULL);
}

static void other_close(struct other *o)
{
	close(o->files_fd);
	close(o->dir_fd);
	close(o->lock_fd);
}

int cache_recover(struct cache *c, cache_recover_fn fn, void *arg)
{
	struct replay rp = { .c = c, .fn = fn, .arg = arg };
	struct other others[HOLDER_SLOTS];
	int n = 0;

	int count = journal_replay(c, replay_one, &rp);
	for (int i = 0; i < HOLDER_SLOTS && count >= 0; i++) {
		if (other_open(c, i, &others[n]) != 0)
			continue;
		rp.from = &others[n];
		int got = journal_replay_at(others[n].dir_fd, others[n].dir,
					    replay_one, &rp);
		if (got > 0)
			count += got;
		if (others[n].count)
			log_info("took up %d unsaved changes left in %s by an "
				 "earlier mount of this sandbox",
				 others[n].count, others[n].dir);
		n++;
	}
	replay_done(&rp);
	pthread_mutex_lock(&c->lock);
	cache_sweep(c);
	int rc = journal_compact(c);
	pthread_mutex_unlock(&c->lock);
	if (rc)
		log_error("cannot rewrite the journal in %s: %s", c->dir,
			  strerror(-rc));
	/* the new journal's name is on disk before the others go */
	if (!rc && n && fsync(c->dir_fd) < 0)
		rc = -errno;
	for (int i = 0; i < n; i++) {
		if (!rc)
			other_clear(&others[i]);
		other_close(&others[i]);
	}
	return count;
}

/* The node at @rel ("a/b") below the root, made if missing (nodes lock
 * held); NULL on ENOMEM. */
static struct node *node_at(struct osbfs *fs, const char *rel)
{
	char *copy = strdup(rel);
	struct node *n = copy ? fs->nodes.root : NULL;
	char *save = NULL;
	for (char *tok = copy ? strtok_r(copy, "/", &save) : NULL; n && tok;
	     tok = strtok_r(NULL, "/", &save))
		n = node_child_get(&fs->nodes, n, tok);
	free(copy);
	return n == fs->nodes.root ? NULL : n;
}

/* The links still to make to file @f, placed in the tree: names of its
 * node, made in the sandbox after its upload (nodes lock held). */
static void place_links(struct osbfs *fs, struct node *f,
			const struct plink *links, size_t nlinks)
{
	for (size_t i = 0; i < nlinks; i++) {
		const struct plink *l = &links[i];
		const char *rel = path_below(fs->root, l->path);
		struct node *a = rel && *rel ? node_at(fs, rel) : NULL;
		if (!a || a == f || a->cf || a->link_to || a->links ||
		    cache_link_keep(fs->cache, l->id, l->file, l->path)) {
			log_error("could not place the link %s made by an "
				  "earlier run: it is not made",
				  l->path);
			continue;
		}
		node_link_add(f, a);
		a->link_later = true;
		a->link_id = l->id;
		a->attr = f->attr;
		a->attr_valid = true;
		log_info("the link %s from an earlier run is made after the "
			 "upload",
			 l->path);
	}
}

/* A dirty file outside what this mount shows, and the links still to
 * make to it: uploaded right here. */
static void recovered_outside(struct osbfs *fs, const char *path,
			      struct cfile *cf, const struct plink *links,
			      size_t nlinks)
{
	int rc;
	if (cf->m.dir) {
		struct rdir d = { .path = path,
				  .mode = cf->m.mode,
				  .owner = cf->m.owner,
				  .group = cf->m.group };
		rc = remote_dirs(fs, &d, 1);
	} else {
		struct rupload u = { .path = path,
				     .size = cf->size,
				     .mode = cf->m.mode,
				     .owner = cf->m.owner,
				     .group = cf->m.group };
		u.fd = cache_fd(fs->cache, cf);
		rc = u.fd < 0 ? u.fd : remote_upload(fs, &u, 1);
		if (u.fd >= 0)
			close(u.fd);
	}
	char **srcs = nlinks ? calloc(nlinks, sizeof(*srcs)) : NULL;
	char **dsts = nlinks ? calloc(nlinks, sizeof(*dsts)) : NULL;
	int lrc = nlinks && (!srcs || !dsts) ? -ENOMEM : 0;
	for (size_t i = 0; !rc && !lrc && i < nlinks; i++) {
		srcs[i] = (char *)path;
		dsts[i] = links[i].path;
	}
	if (!rc && !lrc && nlinks)
		lrc = remote_links_later(fs, srcs, dsts, nlinks);
	free(srcs);
	free(dsts);
	if (!rc && lrc)
		log_error("could not make %zu link(s) to %s left by an earlier "
			  "run, first %s: %s",
			  nlinks, path, links[0].path, strerror(-lrc));
	/* not uploaded: its links wait with it for the next mount */
	for (size_t i = 0; rc && i < nlinks; i++)
		cache_link_keep(fs->cache, links[i].id, links[i].file,
				links[i].path);
	pthread_mutex_lock(&fs->cache->lock);
	if (!rc)
		cache_uploaded(fs->cache, cf, cf->wgen);
	pthread_mutex_unlock(&fs->cache->lock);
	if (rc)
		log_error("could not upload %s left by an earlier run "
			  "(kept for the next mount)",
			  path);
	else
		log_info("uploaded %s left by an earlier run", path);
	cache_unref(fs->cache, cf);
}

/* A dirty file left by an earlier run: back into the tree, due now, with
 * the links still to make to it. */
static void recovered(void *arg, const char *path, struct cfile *cf,
		      const struct plink *links, size_t nlinks)
{
	struct osbfs *fs = arg;

	cf->due_ms = mono_ms();
	const char *rel = path_below(fs->root, path);
	if (!rel || !*rel) {
		/* outside what this mount shows: upload it right here */
		recovered_outside(fs, path, cf, links, nlinks);
		return;
	}
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *n = node_at(fs, rel);
	if (n && !n->cf && !n->link_to) {
		n->cf = cf; /* the node takes our reference */
		cf->node = n;
		n->attr.type = cf->m.dir ? OSB_DIR : OSB_FILE;
		n->attr.mode = cf->m.mode;
		n->attr.size = cf->m.dir ? 4096 : cf->size;
		n->attr.mtime = cf->m.mtime;
		n->attr_valid = true;
		if (!cf->m.dir)
			place_links(fs, n, links, nlinks);
		cf = NULL;
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	if (cf) {
		log_error("could not place %s left by an earlier run", path);
		cache_unref(fs->cache, cf);
	} else {
		log_info("found unsaved changes to %s from an earlier run; "
			 "uploading them",
			 path);
	}
}

void recover_journal(struct osbfs *fs)
{
	int rc = cache_recover(fs->cache, recovered, fs);
	if (rc < 0)
		log_error("cannot read the dirty records in %s: %s",
			  fs->cache->dir, strerror(-rc));
}

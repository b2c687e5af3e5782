/*
 * recover.c - files a crashed or killed mount left dirty: their journal
 * records are replayed into new cfiles (cache_recover), each is put back
 * into the tree where this mount shows it, and the write-back uploads it
 * at once; one outside this mount's DIR is uploaded right here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_i.h"
#include "journal.h"
#include "log.h"
#include "osbfs.h"
#include "recover.h"
#include "remote.h"

struct replay {
	struct cache *c;
	cache_recover_fn fn;
	void *arg;
};

static void replay_one(void *arg, uint64_t id, const struct journal_record *r)
{
	struct replay *rp = arg;
	struct cache *c = rp->c;
	struct stat st;
	char name[17];

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
	cache_id_name(id, name);
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
	rp->fn(rp->arg, r->path, cf);
}

int cache_recover(struct cache *c, cache_recover_fn fn, void *arg)
{
	struct replay rp = { c, fn, arg };
	int count = journal_replay(c, replay_one, &rp);
	pthread_mutex_lock(&c->lock);
	cache_sweep(c);
	int rc = journal_compact(c);
	pthread_mutex_unlock(&c->lock);
	if (rc)
		log_error("cannot rewrite the journal in %s: %s", c->dir,
			  strerror(-rc));
	return count;
}

/* A dirty file left by an earlier run: back into the tree, due now. */
static void recovered(void *arg, const char *path, struct cfile *cf)
{
	struct osbfs *fs = arg;

	cf->due_ms = mono_ms();
	const char *rel = path_below(fs->root, path);
	if (!rel || !*rel) {
		/* outside what this mount shows: upload it right here */
		int rc;
		if (cf->m.dir) {
			struct rdir d = { .path = path, .mode = cf->m.mode,
					  .owner = cf->m.owner,
					  .group = cf->m.group };
			rc = remote_dirs(fs, &d, 1);
		} else {
			struct rupload u = { .path = path, .size = cf->size,
					     .mode = cf->m.mode,
					     .owner = cf->m.owner,
					     .group = cf->m.group };
			u.fd = cache_fd(fs->cache, cf);
			rc = u.fd < 0 ? u.fd : remote_upload(fs, &u, 1);
			if (u.fd >= 0)
				close(u.fd);
		}
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
		return;
	}
	char *copy = strdup(rel);
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *n = fs->nodes.root;
	char *save = NULL;
	for (char *tok = copy ? strtok_r(copy, "/", &save) : NULL; n && tok;
	     tok = strtok_r(NULL, "/", &save))
		n = node_child_get(&fs->nodes, n, tok);
	if (n && !n->cf && n != fs->nodes.root) {
		n->cf = cf; /* the node takes our reference */
		cf->node = n;
		n->attr.type = cf->m.dir ? OSB_DIR : OSB_FILE;
		n->attr.mode = cf->m.mode;
		n->attr.size = cf->m.dir ? 4096 : cf->size;
		n->attr.mtime = cf->m.mtime;
		n->attr_valid = true;
		cf = NULL;
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	free(copy);
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

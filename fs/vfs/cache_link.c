/*
 * cache_link.c - hard links made here to files the sandbox does not have
 * yet, which the write-back makes after the file's upload (node.h
 * link_later): each has a "K" record in the journal until the sandbox
 * has it, so that a crash before the upload does not lose the second
 * name (recover.c makes it after the upload the next mount sends).
 *
 * The list follows the link's name (a rename of it or of a directory
 * above it) so that the journal's compaction can write it again; it is
 * short by nature (git makes one such link per object, and removes the
 * first name at once, which makes it a move: no record stays).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_i.h"
#include "journal.h"
#include "log.h"
#include "node.h"
#include "remote.h"

static struct plink *find(struct cache *c, uint64_t id)
{
	for (size_t i = 0; i < c->nplinks; i++)
		if (c->plinks[i].id == id)
			return &c->plinks[i];
	return NULL;
}

/* Adds link @id of @file at @path to the list (c->lock held). */
static int keep(struct cache *c, uint64_t id, uint64_t file, const char *path)
{
	if (c->nplinks == c->plinks_cap) {
		size_t cap = c->plinks_cap ? c->plinks_cap * 2 : 8;
		struct plink *g = realloc(c->plinks, cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
		c->plinks = g;
		c->plinks_cap = cap;
	}
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	c->plinks[c->nplinks++] =
		(struct plink){ .id = id, .file = file, .path = copy };
	return 0;
}

int cache_link_keep(struct cache *c, uint64_t id, uint64_t file,
		    const char *path)
{
	pthread_mutex_lock(&c->lock);
	int rc = find(c, id) ? 0 : keep(c, id, file, path);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int cache_link_add(struct cache *c, const struct cfile *cf, const char *path,
		   uint64_t *ret_id)
{
	uint64_t id = cache_new_id();
	pthread_mutex_lock(&c->lock);
	int rc = keep(c, id, cf->id, path);
	if (!rc) {
		rc = journal_put_link(c, id, cf->id, path);
		if (rc) {
			free(c->plinks[c->nplinks - 1].path);
			c->nplinks--;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (rc)
		log_error("link %s: cannot journal it in %s: %s", path, c->dir,
			  strerror(-rc));
	else
		*ret_id = id;
	return rc;
}

/* Link @l is now at @path (c->lock held). */
static int move(struct cache *c, struct plink *l, const char *path)
{
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	int rc = journal_put_link(c, l->id, l->file, path);
	if (rc) {
		free(copy);
		return rc;
	}
	free(l->path);
	l->path = copy;
	return 0;
}

int cache_link_move(struct cache *c, uint64_t id, const char *path)
{
	pthread_mutex_lock(&c->lock);
	struct plink *l = find(c, id);
	int rc = l ? move(c, l, path) : 0;
	pthread_mutex_unlock(&c->lock);
	if (rc)
		log_error("rename of %s: cannot journal the link's new name in "
			  "%s: %s",
			  path, c->dir, strerror(-rc));
	return rc;
}

void cache_links_follow(struct cache *c, const char *from, const char *to)
{
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nplinks; i++) {
		const char *rel = path_below(from, c->plinks[i].path);
		char *path = NULL;
		if (!rel)
			continue;
		if (asprintf(&path, "%s/%s", strcmp(to, "/") ? to : "", rel) <
			    0 ||
		    move(c, &c->plinks[i], path))
			log_error("could not record the new path of the link "
				  "%s/%s",
				  to, rel);
		free(path);
	}
	pthread_mutex_unlock(&c->lock);
}

void cache_link_done(struct cache *c, uint64_t id)
{
	pthread_mutex_lock(&c->lock);
	struct plink *l = find(c, id);
	if (l) {
		if (journal_del(c, id))
			log_error("cannot journal that the link %s is done in "
				  "%s",
				  l->path, c->dir);
		free(l->path);
		*l = c->plinks[--c->nplinks];
	}
	pthread_mutex_unlock(&c->lock);
}

void cache_link_gone(struct node *n, void *cache)
{
	if (n->link_id)
		cache_link_done(cache, n->link_id);
	n->link_id = 0;
}

bool cache_links_below(struct cache *c, const char *dir)
{
	bool found = false;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nplinks && !found; i++)
		found = path_below(dir, c->plinks[i].path) != NULL;
	pthread_mutex_unlock(&c->lock);
	return found;
}

void cache_links_free(struct cache *c)
{
	for (size_t i = 0; i < c->nplinks; i++)
		free(c->plinks[i].path);
	free(c->plinks);
	c->plinks = NULL;
	c->nplinks = c->plinks_cap = 0;
}

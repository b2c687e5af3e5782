/*
 * cache_left.c - copies a file leaves in the sandbox when it is resent
 * under a new name (cache_resend, an editor's save): each is to be
 * removed with a later batch rather than by a request of the rename's
 * own, and most never are, since the next save writes the same name
 * again and its upload replaces the copy (cache_left_replace).
 *
 * Until it goes, a copy is not shown (remote.c leaves it out of what
 * the sandbox answers) and its "L" record is in the journal, so a crash
 * leaves its removal to the next mount. The list is short by nature (a
 * name or two per editor); when it is full, a rename removes its copy
 * at once, as it did before the list existed.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cache_i.h"
#include "journal.h"
#include "log.h"
#include "node.h"
#include "remote.h"

#define LEFT_BACKOFF_MAX_MS 60000

static struct left *find(struct cache *c, const char *path)
{
	for (size_t i = 0; i < c->nlefts; i++)
		if (strcmp(c->lefts[i].path, path) == 0)
			return &c->lefts[i];
	return NULL;
}

/* Whether @path is @dir or below it. */
static bool at_or_below(const char *path, const char *dir)
{
	return strcmp(path, dir) == 0 || path_below(dir, path) != NULL;
}

/* Removes entry @l from the list and its record (c->lock held). */
static void drop(struct cache *c, struct left *l)
{
	if (journal_del(c, l->id))
		log_error("cannot journal the removal of %s in %s", l->path,
			  c->dir);
	free(l->path);
	*l = c->lefts[--c->nlefts];
}

int cache_left_add(struct cache *c, uint64_t id, const char *path,
		   long long due_ms)
{
	struct left *l = find(c, path);
	if (l) {
		/* the same copy again: one record is enough */
		if (due_ms < l->due_ms)
			l->due_ms = due_ms;
		return 0;
	}
	if (c->nlefts == CACHE_LEFT_MAX)
		return -ENOSPC;
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	int rc = journal_put_left(c, id, path);
	if (rc) {
		free(copy);
		return rc;
	}
	c->lefts[c->nlefts++] =
		(struct left){ .id = id, .path = copy, .due_ms = due_ms };
	return 0;
}

void cache_left_forget(struct cache *c, const char *path)
{
	struct left *l = find(c, path);
	if (l)
		drop(c, l);
}

void cache_lefts_free(struct cache *c)
{
	for (size_t i = 0; i < c->nlefts; i++)
		free(c->lefts[i].path);
	c->nlefts = 0;
}

bool cache_left_at(struct cache *c, const char *path)
{
	pthread_mutex_lock(&c->lock);
	bool at = c->nlefts && find(c, path);
	pthread_mutex_unlock(&c->lock);
	return at;
}

bool cache_lefts_below_locked(struct cache *c, const char *dir)
{
	for (size_t i = 0; i < c->nlefts; i++)
		if (at_or_below(c->lefts[i].path, dir))
			return true;
	return false;
}

bool cache_lefts_below(struct cache *c, const char *dir)
{
	pthread_mutex_lock(&c->lock);
	bool found = cache_lefts_below_locked(c, dir);
	pthread_mutex_unlock(&c->lock);
	return found;
}

size_t cache_lefts_count(struct cache *c)
{
	pthread_mutex_lock(&c->lock);
	size_t n = c->nlefts;
	pthread_mutex_unlock(&c->lock);
	return n;
}

bool cache_left_replace(struct cache *c, const char *path, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	struct left *l = c->nlefts ? find(c, path) : NULL;
	if (l) {
		drop(c, l);
		/* the copy is there until the upload replaces it: no check
		 * finds a stranger's file there, and an unlink removes it */
		cf->m.base = BASE_UNKNOWN;
		cf->absent_until = 0;
		if (cf->dirty && cf->record_path)
			cache_record_refresh(c, cf);
	}
	pthread_mutex_unlock(&c->lock);
	return l != NULL;
}

size_t cache_lefts_take(struct cache *c, const char *below, long long now,
			struct left_take *ret)
{
	ret->n = 0;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nlefts && ret->n < CACHE_LEFT_MAX; i++) {
		struct left *l = &c->lefts[i];
		if (below ? !at_or_below(l->path, below) : l->due_ms > now)
			continue;
		char *copy = strdup(l->path);
		if (!copy) {
			l->due_ms = mono_ms() + 1000; /* not in a loop */
			continue;
		}
		ret->id[ret->n] = l->id;
		ret->path[ret->n] = copy;
		ret->n++;
	}
	pthread_mutex_unlock(&c->lock);
	return ret->n;
}

void cache_lefts_release(struct left_take *t)
{
	for (size_t k = 0; k < t->n; k++)
		free(t->path[k]);
	t->n = 0;
}

void cache_lefts_done(struct cache *c, struct left_take *t, int rc)
{
	long long now = mono_ms();
	pthread_mutex_lock(&c->lock);
	for (size_t k = 0; k < t->n; k++) {
		struct left *l = NULL;
		for (size_t i = 0; !l && i < c->nlefts; i++)
			if (c->lefts[i].id == t->id[k])
				l = &c->lefts[i];
		if (l && !rc) {
			drop(c, l);
		} else if (l) {
			/* tried again later, never in a loop */
			l->failures++;
			long backoff = 1000L
				       << (l->failures < 7 ? l->failures : 6);
			l->due_ms = now + (backoff < LEFT_BACKOFF_MAX_MS ?
						   backoff :
						   LEFT_BACKOFF_MAX_MS);
		}
		free(t->path[k]);
		t->path[k] = NULL;
	}
	t->n = 0;
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
}

long long cache_lefts_next(struct cache *c)
{
	long long next = 0;
	for (size_t i = 0; i < c->nlefts; i++)
		if (!next || c->lefts[i].due_ms < next)
			next = c->lefts[i].due_ms;
	return next;
}

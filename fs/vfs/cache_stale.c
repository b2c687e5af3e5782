/*
 * cache_stale.c - the clean content a restore (or `invalidate`) lets go,
 * let go at once and emptied from the disk afterwards.
 *
 * cache_drop_clean() runs with the mount's path lock held for writing
 * (a restore): truncating thousands of cache files there took seconds,
 * with every file operation waiting. So it forgets the content in memory
 * only (no byte of it is present any more, as far as the cfile says) and
 * marks the cache file stale_disk; the file is emptied by the first
 * cache_fd() on it, before anything reads or writes it, or by the sweep,
 * a thread that goes through the cfiles once (again when a drop came
 * meanwhile), emptying the stale files one at a time, holding no lock but
 * stale_lock while it truncates. A caller that opened the cache file before the
 * mark and adds bytes after it (cache_fill, cache_truncate) empties it
 * under c->lock first (cache_unstale), so no byte of the old content is
 * ever taken for the new: what is marked present was written after the
 * emptying.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_i.h"
#include "log.h"

/* cache_sweep_wait: how often it looks */
#define SWEEP_WAIT_MS 10

int cache_unstale(struct cache *c, struct cfile *cf, int fd)
{
	pthread_mutex_lock(&c->stale_lock);
	bool stale = cf->stale_disk;
	if (stale && ftruncate(fd, 0) == 0)
		cf->stale_disk = false;
	pthread_mutex_unlock(&c->stale_lock);
	return stale;
}

/* Empties @cf's cache file if still stale (a reference held). */
static void empty_one(struct cache *c, struct cfile *cf)
{
	char name[17];
	pthread_mutex_lock(&c->stale_lock);
	if (cf->stale_disk) {
		cache_id_name(cf->id, name);
		int fd = openat(c->files_fd, name,
				O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0 || errno == ENOENT)
			cf->stale_disk = false;
		if (fd >= 0)
			close(fd);
	}
	pthread_mutex_unlock(&c->stale_lock);
}

static void *sweep(void *arg)
{
	struct cache *c = arg;
	size_t i = 0;
	for (;;) {
		pthread_mutex_lock(&c->lock);
		/* cfiles freed meanwhile move others down: a later pass (the
		 * next drop) or their next open empties what this one misses */
		if (!c->sweep_stop && i >= c->nall && c->sweep_again) {
			c->sweep_again = false; /* a drop came meanwhile */
			i = 0;
		}
		if (c->sweep_stop || i >= c->nall) {
			c->sweeping = false;
			pthread_mutex_unlock(&c->lock);
			return NULL;
		}
		struct cfile *cf = c->all[i++];
		cf->refs++;
		pthread_mutex_unlock(&c->lock);
		empty_one(c, cf);
		cache_unref(c, cf);
	}
}

/* Starts the sweep unless it runs (c->lock held). */
static void sweep_start_locked(struct cache *c)
{
	if (c->sweeping)
		c->sweep_again = true;
	if (c->sweeping || c->sweep_stop)
		return;
	if (!c->sweeper_joined)
		pthread_join(c->sweeper, NULL); /* it has ended */
	c->sweeper_joined = true;
	int rc = pthread_create(&c->sweeper, NULL, sweep, c);
	if (rc) {
		/* their next opens empty them */
		log_warn("cache: cannot start the thread that empties the "
			 "files dropped: %s; each goes when next opened",
			 strerror(rc));
		return;
	}
	c->sweeping = true;
	c->sweeper_joined = false;
}

void cache_drop_clean(struct cache *c)
{
	size_t marked = 0;
	pthread_mutex_lock(&c->lock);
	pthread_mutex_lock(&c->stale_lock);
	for (size_t i = 0; i < c->nall; i++) {
		struct cfile *cf = c->all[i];
		if (cf->dirty || cf->m.dir ||
		    (!cf->cached_bytes && !cf->complete))
			continue;
		if (cf->opens || cf->inflight || cf->fills) {
			cf->forget = true;
			continue;
		}
		cache_forget_content(c, cf);
		cf->stale_disk = true;
		marked++;
	}
	pthread_mutex_unlock(&c->stale_lock);
	if (marked)
		sweep_start_locked(c);
	pthread_mutex_unlock(&c->lock);
}

void cache_sweep_wait(struct cache *c)
{
	for (;;) {
		pthread_mutex_lock(&c->lock);
		bool busy = c->sweeping;
		pthread_mutex_unlock(&c->lock);
		if (!busy)
			return;
		usleep(SWEEP_WAIT_MS * 1000);
	}
}

void cache_sweep_stop(struct cache *c)
{
	pthread_mutex_lock(&c->lock);
	c->sweep_stop = true;
	bool join = !c->sweeper_joined;
	c->sweeper_joined = true;
	pthread_mutex_unlock(&c->lock);
	if (join)
		pthread_join(c->sweeper, NULL);
}

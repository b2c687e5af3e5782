/*
 * cache_room.c - the cache within its bounds: cache_max_size, and the
 * free space of the disk it is on (cache.h, "room").
 *
 * Only clean content goes: bytes the sandbox has as they are here.
 * Unsaved data never does. Room is made before bytes are downloaded
 * (cache_fill): first clean content of files nobody has open, least
 * recently used first; then, for a reader of a file bigger than what is
 * left, ranges of that same file outside the window it is fetching,
 * those before it first (a sequential reader has passed them), punched
 * out of the cache file. A reader of that file finds such bytes gone as
 * it reads them (cut_gen), and fetches them again. A file that must be
 * whole here (opened for writing: the upload takes whole files) and
 * cannot fit is refused before anything is fetched (cache_room_whole).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "cache_i.h"
#include "node.h"

static int by_last_use(const void *a, const void *b)
{
	const struct cfile *x = *(struct cfile *const *)a;
	const struct cfile *y = *(struct cfile *const *)b;
	return x->last_used < y->last_used ? -1 : x->last_used > y->last_used;
}

/* Drops clean content nobody has open, least recently used first, while
 * the total is over @target or less than @need was freed. The bytes
 * freed. Takes the node lock, then the cache lock. */
static int64_t evict(struct cache *c, int64_t target, int64_t need)
{
	struct node_table *nt = c->nt;
	int64_t freed = 0;
	pthread_mutex_lock(&nt->lock);
	pthread_mutex_lock(&c->lock);
	if (c->total_bytes <= target && need <= 0)
		goto out;
	struct cfile **v = malloc((c->nall ? c->nall : 1) * sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; v && i < c->nall; i++) {
		struct cfile *cf = c->all[i];
		if (!cf->dirty && !cf->opens && !cf->inflight && !cf->fills &&
		    cf->cached_bytes)
			v[n++] = cf;
	}
	if (v)
		qsort(v, n, sizeof(*v), by_last_use);
	for (size_t i = 0; i < n && (c->total_bytes > target || freed < need);
	     i++) {
		freed += v[i]->cached_bytes;
		cache_drop_content(c, v[i]);
	}
	free(v);
out:
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&nt->lock);
	return freed;
}

int64_t cache_evict(struct cache *c, int64_t need)
{
	if (need <= 0) {
		/* the common case (every close): nothing over the cap */
		pthread_mutex_lock(&c->lock);
		bool over = c->total_bytes > c->max_size;
		pthread_mutex_unlock(&c->lock);
		if (!over)
			return 0;
	}
	return evict(c, c->max_size, need);
}

bool cache_room_made(struct cache *c, int err)
{
	if (err < 0)
		err = -err;
	if (err != ENOSPC && err != EDQUOT)
		return false;
	return cache_evict(c, INT64_MAX) > 0;
}

int64_t cache_max_size(const struct cache *c)
{
	return c->max_size;
}

/* Bytes free for us on the cache dir's disk, or INT64_MAX if not known. */
static int64_t disk_free(const struct cache *c)
{
	struct statvfs sv;
	if (fstatvfs(c->files_fd, &sv) < 0)
		return INT64_MAX;
	return (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
}

int cache_room_whole(struct cache *c, struct cfile *cf, char *msg,
		     size_t msg_size)
{
	pthread_mutex_lock(&c->lock);
	bool whole = cf->complete || cf->dirty;
	int64_t size = cf->size, need = cf->size - cf->cached_bytes;
	pthread_mutex_unlock(&c->lock);
	if (whole)
		return 0;
	if (size > c->max_size) {
		snprintf(msg, msg_size,
			 "it is %lld bytes, more than cache_max_size (%lld "
			 "bytes) allows: a file opened for writing is held "
			 "whole in the cache, as the upload takes whole files",
			 (long long)size, (long long)c->max_size);
		return -EFBIG;
	}
	evict(c, c->max_size - need, 0);
	pthread_mutex_lock(&c->lock);
	int64_t total = c->total_bytes;
	pthread_mutex_unlock(&c->lock);
	if (total + need > c->max_size) {
		snprintf(msg, msg_size,
			 "%lld bytes of it are to be fetched, and the cache "
			 "holds %lld bytes of files open or not yet uploaded: "
			 "more than cache_max_size (%lld bytes)",
			 (long long)need, (long long)total,
			 (long long)c->max_size);
		return -ENOSPC;
	}
	int64_t avail = disk_free(c);
	if (need > avail) {
		evict(c, c->max_size, need - avail);
		avail = disk_free(c);
	}
	if (need > avail) {
		snprintf(msg, msg_size,
			 "%lld bytes of it are to be fetched, and the disk of "
			 "the cache dir %s has %lld bytes free",
			 (long long)need, c->dir, (long long)avail);
		return -ENOSPC;
	}
	return 0;
}

/* Cuts end on block boundaries where they can: a block partly held
 * takes the disk all the same. */
#define BLOCK 4096

static int64_t block_up(int64_t x)
{
	return (x + BLOCK - 1) / BLOCK * BLOCK;
}

/* The bytes [start, end) of @cf's cache file (@fd) are no longer held. */
static bool punch(int fd, int64_t start, int64_t end)
{
	return end <= start ||
	       fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			 (off_t)start, (off_t)(end - start)) == 0;
}

/*
 * Frees up to @excess bytes of clean @cf's ranges outside [lo, hi):
 * those before it first, from the start of the file, then those after
 * it, from the end (c->lock held; @fd its cache file).
 */
static void trim(struct cache *c, struct cfile *cf, int fd, int64_t lo,
		 int64_t hi, int64_t excess)
{
	if (cf->complete) {
		/* one range, to cut from */
		if (!cf->ext_cap) {
			cf->ext = malloc(8 * sizeof(*cf->ext));
			if (!cf->ext)
				return;
			cf->ext_cap = 8;
		}
		cf->ext[0] = (struct extent){ 0, cf->size };
		cf->next = 1;
		cf->complete = false;
	}
	int64_t freed = 0;
	for (size_t i = 0; freed < excess && i < cf->next; i++) {
		struct extent *e = &cf->ext[i];
		if (e->start >= lo)
			break;
		int64_t end = e->end < lo ? e->end : lo;
		int64_t want = block_up(e->start + (excess - freed));
		if (end > want)
			end = want;
		if (!punch(fd, e->start, end))
			break;
		freed += end - e->start;
		e->start = end;
	}
	for (size_t i = cf->next; freed < excess && i-- > 0;) {
		struct extent *e = &cf->ext[i];
		if (e->end <= hi)
			break;
		int64_t start = e->start > hi ? e->start : hi;
		int64_t want = (e->end - (excess - freed)) / BLOCK * BLOCK;
		if (start < want)
			start = want;
		if (!punch(fd, start, e->end))
			break;
		freed += e->end - start;
		e->end = start;
	}
	if (!freed)
		return;
	size_t w = 0;
	for (size_t r = 0; r < cf->next; r++)
		if (cf->ext[r].end > cf->ext[r].start)
			cf->ext[w++] = cf->ext[r];
	cf->next = w;
	cf->cached_bytes -= freed;
	c->total_bytes -= freed;
	cf->cut_gen++; /* readers check their bytes are still here */
}

void cache_fill_room(struct cache *c, struct cfile *cf, int fd, int64_t off,
		     int64_t len, int64_t need)
{
	pthread_mutex_lock(&c->lock);
	bool over = c->total_bytes + need > c->max_size;
	pthread_mutex_unlock(&c->lock);
	if (!over)
		return;
	evict(c, c->max_size - need, 0);
	pthread_mutex_lock(&c->lock);
	int64_t excess = c->total_bytes + need - c->max_size;
	if (excess > 0 && !cf->dirty)
		trim(c, cf, fd, off, off + len, excess);
	pthread_mutex_unlock(&c->lock);
}

/*
 * journal.h - the append-only record of dirty files (journal.c), used by
 * cache.c only.
 */
#ifndef OSBFS_JOURNAL_H
#define OSBFS_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "cache_i.h"

struct journal_record {
	char path[8192];
	struct fmeta m;
	bool left; /* a copy left at path, to remove: no data */
	bool link; /* a link to make at path, to file @file: no data */
	uint64_t file;
};

/* Opens (makes) CACHE/journal for appending. 0 or -errno. */
int journal_open(struct cache *c);
/* Appends the record of dirty @cf at sandbox path @path (c->lock held). */
int journal_put(struct cache *c, const struct cfile *cf, const char *path);
/* Appends the record of copy @id left at @path (c->lock held). */
int journal_put_left(struct cache *c, uint64_t id, const char *path);
/* Appends the record of link @id at @path to the file of cfile @file,
 * still to make (c->lock held). */
int journal_put_link(struct cache *c, uint64_t id, uint64_t file,
		     const char *path);
/* Appends "file @id is clean" (c->lock held); for a copy left, that it
 * is gone; for a link, that it is made or no longer to make. */
int journal_del(struct cache *c, uint64_t id);
/* Rewrites the journal with the dirty list's records only (c->lock). */
int journal_compact(struct cache *c);
bool journal_wants_compaction(const struct cache *c);

typedef void (*journal_replay_fn)(void *arg, uint64_t id,
				  const struct journal_record *r);
/* Calls @fn for each record still live in the journal; the count. */
int journal_replay(struct cache *c, journal_replay_fn fn, void *arg);
/* The same for the journal in directory @dir_fd (named @dir in
 * messages): another slot's (recover.c). */
int journal_replay_at(int dir_fd, const char *dir, journal_replay_fn fn,
		      void *arg);

#endif /* OSBFS_JOURNAL_H */

/*
 * pull.c - a walk that reads a directory's files (grep -r, tar c, an
 * indexer, a build reading its sources) gets the small files below the
 * directory in one archive: one command packs them in the sandbox, one
 * download brings them, one request removes the archive; each file then
 * reads from the cache. One download per file costs a round trip each,
 * which is most of a cold walk's time.
 *
 * A walk shows as a second cold read in the same directory soon after
 * the first; a single file read alone costs nothing more. The files
 * taken are those the mount knows from its listings (their sizes and
 * mtimes), small, with nothing of them cached; an archive member goes
 * into the cache only if its size and mtime to the nanosecond are the
 * listing's, so a file changed since is read afresh as ever. The names
 * in the archive are the sandbox's: only compared, never used as paths.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "log.h"
#include "node.h"
#include "pull.h"
#include "remote.h"

#define PULL_FILE_MAX (256 << 10) /* bigger files are read in ranges */
#define PULL_MIN 8                /* fewer files: read one by one */
#define PULL_FILES 2000
#define PULL_BYTES (16ll << 20)
#define PULL_NAMES_MAX (96 << 10) /* bytes of names in one command */
#define WALK_READS 2              /* cold reads in a directory ... */
#define WALK_MS 2000              /* ... each this soon after the last */
#define PULL_AGAIN_MS 30000       /* a directory is pulled at most so often */

#define PULL_PAUSE_MS 30000       /* after a pull that brought little */

static pthread_mutex_t pull_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool no_tar;
static atomic_llong pause_until;

struct cand {
	struct node *n;
	char *rel;              /* its path below the directory */
	struct fattr a;         /* as listed */
};

struct pull {
	struct cand *c;
	size_t n, cap;
	int64_t bytes, names;
};

static int cand_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cand *)a)->rel,
		      ((const struct cand *)b)->rel);
}

static bool full(const struct pull *p)
{
	return p->n >= PULL_FILES || p->bytes >= PULL_BYTES ||
	       p->names >= PULL_NAMES_MAX;
}

/* Adds the small files below @d (whose path below the mount's root is
 * @prefix, "" or ending in '/') with nothing cached, but not those below
 * its child @skip: the files of a directory before those of its
 * subdirectories (nodes lock held). */
static void collect(struct osbfs *fs, struct node *d, const char *prefix,
		    const struct node *skip, struct pull *p)
{
	for (int pass = 0; pass < 2; pass++) {
		for (struct node *x = d->child_first; x && !full(p);
		     x = x->sib_next) {
			if (!x->attr_valid || x->unlinked || x == skip)
				continue;
			char *rel = NULL;
			if (asprintf(&rel, "%s%s", prefix, x->name) < 0)
				return;
			if (pass == 1 && x->attr.type == OSB_DIR) {
				char *sub = NULL;
				if (asprintf(&sub, "%s/", rel) >= 0)
					collect(fs, x, sub, NULL, p);
				free(sub);
			}
			bool take = pass == 0 && x->attr.type == OSB_FILE &&
				    x->attr.size > 0 &&
				    x->attr.size <= PULL_FILE_MAX &&
				    (!x->cf || cache_fill_wanted(fs->cache, x->cf));
			if (take && p->n == p->cap) {
				size_t cap = p->cap ? p->cap * 2 : 64;
				struct cand *c = realloc(p->c, cap * sizeof(*c));
				take = c != NULL;
				if (c) {
					p->c = c;
					p->cap = cap;
				}
			}
			if (!take) {
				free(rel);
				continue;
			}
			node_ref(x);
			p->c[p->n++] = (struct cand){ x, rel, x->attr };
			p->bytes += x->attr.size;
			p->names += (int64_t)strlen(rel) + 3;
		}
	}
}

/* @d's path below the mount's root with a '/' after it, "" for the root
 * (nodes lock held). */
static char *prefix_of(struct osbfs *fs, const struct node *d)
{
	char *path = node_path(&fs->nodes, d);
	const char *rel = path ? path_below(fs->root, path) : NULL;
	char *out = NULL;
	if (path && (!rel || !*rel))
		out = strdup("");
	else if (rel && asprintf(&out, "%s/", rel) < 0)
		out = NULL;
	free(path);
	return out;
}

/* The files of the walk at @d: those below it first, then outwards, as
 * a walk goes on: its siblings', its parent's siblings', up to the
 * mount's root (nodes lock held). */
static void collect_around(struct osbfs *fs, struct node *d, struct pull *p)
{
	const struct node *skip = NULL;
	for (struct node *x = d; x && !full(p); skip = x, x = x->parent) {
		char *prefix = prefix_of(fs, x);
		if (!prefix)
			return;
		collect(fs, x, prefix, skip, p);
		free(prefix);
	}
}

/* Whether @n's cold read is the second in a row in its directory, or in
 * the directory above (a tree of one file per directory): then its
 * directory, held (node_ref). */
static struct node *walk_seen(struct node *n)
{
	long long now = mono_ms();
	struct node *d = n->parent;
	bool walk = false;
	if (!d)
		return NULL;
	struct node *levels[2] = { d, d->parent };
	for (int i = 0; i < 2 && levels[i]; i++) {
		struct node *x = levels[i];
		if (now - x->cold_at > WALK_MS)
			x->cold_reads = 0;
		x->cold_at = now;
		walk |= ++x->cold_reads >= WALK_READS;
	}
	if (!walk || (d->pulled_at && now - d->pulled_at < PULL_AGAIN_MS))
		return NULL;
	d->pulled_at = now;
	node_ref(d);
	return d;
}

struct member {
	int fd;
	int64_t off, size;
};

/* A cache_fetch_fn reading a member of the archive. */
static int from_archive(void *arg, int64_t off, int64_t len, int64_t size,
			osb_sink_fn sink, void *sink_arg)
{
	struct member *m = arg;
	char buf[65536];
	if (size != m->size || off < 0 || len < 0 || off + len > m->size)
		return -ESTALE;
	while (len > 0) {
		size_t want = len < (int64_t)sizeof(buf) ? (size_t)len :
							    sizeof(buf);
		ssize_t r = pread(m->fd, buf, want, (off_t)(m->off + off));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		int rc = sink(sink_arg, buf, (size_t)r);
		if (rc)
			return rc;
		off += r;
		len -= r;
	}
	return 0;
}

/* The members of archive @fd (@size bytes) that are the candidates as
 * listed go into the cache; how many did. */
static size_t unpack(struct osbfs *fs, int fd, int64_t size, struct pull *p)
{
	struct osb_tar_entry e;
	int64_t pos = 0;
	size_t done = 0;
	int rc;
	qsort(p->c, p->n, sizeof(*p->c), cand_cmp);
	while ((rc = osb_tar_next(fd, &pos, size, &e)) == 1) {
		struct cand key = { .rel = e.path };
		struct cand *c = e.type == '0' ?
					 bsearch(&key, p->c, p->n, sizeof(*p->c),
						 cand_cmp) :
					 NULL;
		if (c && c->a.size == e.size &&
		    c->a.mtime.tv_sec == e.mtime.tv_sec &&
		    c->a.mtime.tv_nsec == e.mtime.tv_nsec) {
			struct member m = { fd, e.data_off, e.size };
			if (cache_fill_new(fs->cache, c->n, &c->a, from_archive,
					   &m) == 0)
				done++;
		}
		osb_tar_entry_release(&e);
	}
	if (rc < 0)
		log_warn("the archive of files the sandbox packed is damaged "
			 "(%s); the rest are read one by one",
			 strerror(-rc));
	return done;
}

bool pull_for_read(struct osbfs *fs, struct node *n)
{
	if (atomic_load(&no_tar) || mono_ms() < atomic_load(&pause_until) ||
	    pthread_mutex_trylock(&pull_lock))
		return false;
	struct pull p = { 0 };
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *d = walk_seen(n);
	if (d)
		collect_around(fs, d, &p);
	pthread_mutex_unlock(&fs->nodes.lock);

	if (p.n >= PULL_MIN) {
		long long t0 = mono_ms();
		char **names = calloc(p.n, sizeof(*names));
		int fd = openat(AT_FDCWD, cache_dir(fs->cache),
				O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		int64_t size = 0;
		int rc = names && fd >= 0 ? 0 : -ENOMEM;
		for (size_t i = 0; names && i < p.n; i++)
			names[i] = p.c[i].rel;
		/* headers: a few blocks and the name per member */
		if (!rc)
			rc = remote_pull(fs, fs->root, names, p.n,
					 p.bytes + p.names +
						 (int64_t)p.n * 2048 + 65536,
					 fd, &size);
		if (rc == -ENOTSUP && !atomic_exchange(&no_tar, true))
			log_warn("the sandbox has no tar: files are read one "
				 "by one");
		size_t done = rc ? 0 : unpack(fs, fd, size, &p);
		/* most were not as listed (changed since), or it failed:
		 * reads go one by one for a while */
		if (done < p.n / 2)
			atomic_store(&pause_until, mono_ms() + PULL_PAUSE_MS);
		log_debug("pulled %zu of %zu files in one archive (%lld bytes, "
			  "%lld ms)",
			  done, p.n, (long long)size, mono_ms() - t0);
		if (fd >= 0)
			close(fd);
		free(names);
	}
	pthread_mutex_unlock(&pull_lock);
	pthread_mutex_lock(&fs->nodes.lock);
	for (size_t i = 0; i < p.n; i++) {
		node_unref(&fs->nodes, p.c[i].n);
		free(p.c[i].rel);
	}
	if (d)
		node_unref(&fs->nodes, d);
	pthread_mutex_unlock(&fs->nodes.lock);
	free(p.c);
	return p.n >= PULL_MIN;
}

/*
 * pull.c - a walk that reads a directory's files (grep -r, tar c, an
 * indexer, a build reading its sources) gets the small files below the
 * directory in one archive: one command packs them in the sandbox, one
 * download brings them, one request removes the archive; each file then
 * reads from the cache. One download per file costs a round trip each,
 * which is most of a cold walk's time.
 *
 * A walk shows as a second cold read in the same directory (or the one
 * above) soon after the first; a single file read alone costs nothing
 * more. The files taken are those the mount knows from its listings
 * (their sizes and mtimes), small, with nothing of them cached, in the
 * order the walk reads them; an archive member goes into the cache only
 * if its size, mtime and ctime to the nanosecond are the listing's, so a
 * file changed since is read afresh as ever. The names in the archive are the
 * sandbox's: only compared, never used as paths. When one archive cannot
 * take them all, a background thread goes on with the next while the
 * walk reads, and a read of a file on its way waits for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
#define PULL_PAUSE_MS 30000       /* no pulls after one that brought little */
#define PULL_WAIT_MS 60000        /* a read waits for a pull this long */

/* one pull at a time; the walk's reads try it, the puller waits for it */
static pthread_mutex_t pull_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool no_tar;
static atomic_llong pause_until;

/* the background puller (one mount per process) */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* next is set, or stop */
	pthread_cond_t done; /* a pull ended: its nodes are not pulling */
	pthread_t thread;
	bool started, stop;
	struct node *next; /* where to go on (held), or NULL */
} bg = { .lock = PTHREAD_MUTEX_INITIALIZER,
	 .wake = PTHREAD_COND_INITIALIZER,
	 .done = PTHREAD_COND_INITIALIZER };

static bool bg_stopping(void)
{
	pthread_mutex_lock(&bg.lock);
	bool stop = bg.stop;
	pthread_mutex_unlock(&bg.lock);
	return stop;
}

struct cand {
	struct node *n;
	char *rel;      /* its path below the mount's root */
	struct fattr a; /* as listed */
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

static int node_name_cmp(const void *a, const void *b)
{
	return strcmp((*(struct node *const *)a)->name,
		      (*(struct node *const *)b)->name);
}

/* Takes file @x (at @rel) if it is small and nothing of it is here
 * (nodes lock held); frees @rel if not. */
static void take(struct osbfs *fs, struct node *x, char *rel, struct pull *p)
{
	bool take = x->attr.size > 0 && x->attr.size <= PULL_FILE_MAX &&
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
		return;
	}
	node_ref(x);
	p->c[p->n++] = (struct cand){ x, rel, x->attr };
	p->bytes += x->attr.size;
	p->names += (int64_t)strlen(rel) + 3;
}

/*
 * Adds the small files below @d (whose path below the mount's root is
 * @prefix, "" or ending in '/') with nothing cached, in the order a walk
 * reads them: entries by name (as readdir gives them), each directory's
 * files where it comes. With @skip (a child of @d, done already), from
 * the entry after it on, then those before it (nodes lock held).
 */
static void collect(struct osbfs *fs, struct node *d, const char *prefix,
		    const struct node *skip, struct pull *p)
{
	size_t n = 0, first = 0;
	for (struct node *x = d->child_first; x; x = x->sib_next)
		n++;
	struct node **kids = calloc(n ? n : 1, sizeof(*kids));
	if (!kids)
		return;
	n = 0;
	for (struct node *x = d->child_first; x; x = x->sib_next)
		if (x->attr_valid && !x->unlinked &&
		    (x->attr.type == OSB_FILE || x->attr.type == OSB_DIR))
			kids[n++] = x;
	qsort(kids, n, sizeof(*kids), node_name_cmp);
	for (size_t i = 0; skip && i < n; i++)
		if (kids[i] == skip)
			first = i + 1;
	for (size_t k = 0; k < n && !full(p); k++) {
		struct node *x = kids[(first + k) % n];
		char *rel = NULL;
		if (x == skip || asprintf(&rel, "%s%s", prefix, x->name) < 0)
			continue;
		if (x->attr.type == OSB_FILE) {
			take(fs, x, rel, p);
			continue;
		}
		char *sub = NULL;
		if (asprintf(&sub, "%s/", rel) >= 0)
			collect(fs, x, sub, NULL, p);
		free(sub);
		free(rel);
	}
	free(kids);
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
		size_t want =
			len < (int64_t)sizeof(buf) ? (size_t)len : sizeof(buf);
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

/* Whether a member's ctime @m (GNU tar's pax header has it) is the
 * listing's @l: a rewrite that kept size and mtime shows there. One not
 * known on either side is not compared. */
static bool same_ctime(const struct timespec *l, const struct timespec *m)
{
	return !(l->tv_sec || l->tv_nsec) || !(m->tv_sec || m->tv_nsec) ||
	       (l->tv_sec == m->tv_sec && l->tv_nsec == m->tv_nsec);
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
					 bsearch(&key, p->c, p->n,
						 sizeof(*p->c), cand_cmp) :
					 NULL;
		if (c && c->a.size == e.size &&
		    c->a.mtime.tv_sec == e.mtime.tv_sec &&
		    c->a.mtime.tv_nsec == e.mtime.tv_nsec &&
		    same_ctime(&c->a.ctime, &e.ctime)) {
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

/* One pull of the files around @d (nodes of it marked pulling while it
 * runs), pull_lock held. Whether more were left than it could take. */
static bool pull_once(struct osbfs *fs, struct node *d, bool *ret_any)
{
	struct pull p = { 0 };
	pthread_mutex_lock(&fs->nodes.lock);
	collect_around(fs, d, &p);
	for (size_t i = 0; p.n >= PULL_MIN && i < p.n; i++)
		p.c[i].n->pulling = true;
	pthread_mutex_unlock(&fs->nodes.lock);

	bool more = full(&p);
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
		long long t1 = mono_ms();
		size_t done = rc ? 0 : unpack(fs, fd, size, &p);
		/* most were not as listed (changed since), or it failed:
		 * reads go one by one for a while */
		if (done < p.n / 2) {
			atomic_store(&pause_until, mono_ms() + PULL_PAUSE_MS);
			more = false;
		}
		log_debug("pulled %zu of %zu files in one archive (%lld bytes, "
			  "%lld ms, %lld of them here)",
			  done, p.n, (long long)size, mono_ms() - t0,
			  mono_ms() - t1);
		if (fd >= 0)
			close(fd);
		free(names);
	} else {
		more = false;
	}
	pthread_mutex_lock(&fs->nodes.lock);
	for (size_t i = 0; i < p.n; i++) {
		p.c[i].n->pulling = false;
		node_unref(&fs->nodes, p.c[i].n);
		free(p.c[i].rel);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	pthread_mutex_lock(&bg.lock);
	pthread_cond_broadcast(&bg.done);
	pthread_mutex_unlock(&bg.lock);
	*ret_any = p.n >= PULL_MIN;
	free(p.c);
	return more;
}

/* The background puller: goes on where a cut pull stopped, one archive
 * after another, while the walk reads what came before. */
static void *puller(void *arg)
{
	struct osbfs *fs = arg;
	pthread_mutex_lock(&bg.lock);
	while (!bg.stop) {
		struct node *d = bg.next;
		if (!d) {
			pthread_cond_wait(&bg.wake, &bg.lock);
			continue;
		}
		bg.next = NULL;
		pthread_mutex_unlock(&bg.lock);
		bool more = true, any;
		while (more && !bg_stopping()) {
			pthread_mutex_lock(&pull_lock);
			more = pull_once(fs, d, &any);
			pthread_mutex_unlock(&pull_lock);
		}
		pthread_mutex_lock(&fs->nodes.lock);
		node_unref(&fs->nodes, d);
		pthread_mutex_unlock(&fs->nodes.lock);
		pthread_mutex_lock(&bg.lock);
	}
	pthread_mutex_unlock(&bg.lock);
	return NULL;
}

/* Hands directory @d (held: the puller takes the reference) on to the
 * puller, started if it is not yet. */
static void go_on(struct osbfs *fs, struct node *d)
{
	struct node *old = NULL;
	pthread_mutex_lock(&bg.lock);
	if (!bg.started && !bg.stop)
		bg.started = pthread_create(&bg.thread, NULL, puller, fs) == 0;
	if (bg.started && !bg.stop) {
		old = bg.next;
		bg.next = d;
		d = NULL;
		pthread_cond_signal(&bg.wake);
	}
	pthread_mutex_unlock(&bg.lock);
	pthread_mutex_lock(&fs->nodes.lock);
	if (old)
		node_unref(&fs->nodes, old);
	if (d)
		node_unref(&fs->nodes, d);
	pthread_mutex_unlock(&fs->nodes.lock);
}

/* @n is in a pull under way: waits for it to end (bounded). */
static bool wait_pulled(struct osbfs *fs, struct node *n)
{
	long long until = mono_ms() + PULL_WAIT_MS;
	bool waited = false;
	for (;;) {
		pthread_mutex_lock(&fs->nodes.lock);
		bool pulling = n->pulling;
		pthread_mutex_unlock(&fs->nodes.lock);
		if (!pulling || mono_ms() >= until || bg_stopping())
			return waited;
		waited = true;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L; /* a missed wake costs this */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&bg.lock);
		pthread_cond_timedwait(&bg.done, &bg.lock, &ts);
		pthread_mutex_unlock(&bg.lock);
	}
}

bool pull_for_read(struct osbfs *fs, struct node *n)
{
	if (wait_pulled(fs, n))
		return true;
	if (atomic_load(&no_tar) || mono_ms() < atomic_load(&pause_until) ||
	    pthread_mutex_trylock(&pull_lock))
		return false;
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *d = walk_seen(n);
	pthread_mutex_unlock(&fs->nodes.lock);
	bool any = false, more = d && pull_once(fs, d, &any);
	pthread_mutex_unlock(&pull_lock);
	if (more) {
		go_on(fs, d); /* takes the reference */
	} else if (d) {
		pthread_mutex_lock(&fs->nodes.lock);
		node_unref(&fs->nodes, d);
		pthread_mutex_unlock(&fs->nodes.lock);
	}
	return any;
}

void pull_stop(struct osbfs *fs)
{
	pthread_mutex_lock(&bg.lock);
	bg.stop = true;
	pthread_cond_broadcast(&bg.wake);
	pthread_cond_broadcast(&bg.done);
	bool started = bg.started;
	struct node *d = bg.next;
	bg.next = NULL;
	pthread_mutex_unlock(&bg.lock);
	if (started)
		pthread_join(bg.thread, NULL);
	if (d) {
		pthread_mutex_lock(&fs->nodes.lock);
		node_unref(&fs->nodes, d);
		pthread_mutex_unlock(&fs->nodes.lock);
	}
}

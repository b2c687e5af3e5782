/*
 * cache.c - file content on local disk and the journal of dirty files
 * (see cache.h).
 *
 * Layout of CACHE_DIR/<sandbox id>/:
 *   lock          flock'ed by the running mount (one mount per cache),
 *                 saying who it is (holder.h)
 *   files/<id>    content, sparse; <id> is 16 hex digits
 *   journal       records of the files with changes not yet uploaded
 *
 * A record is appended when a file turns dirty, moves or changes mode or
 * times, and a "clean" line once the sandbox has the data (journal.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_i.h"
#include "holder.h"
#include "journal.h"
#include "log.h"
#include "node.h"

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int cache_dir_check(const char *cache_dir, char *msg, size_t msg_size)
{
	int rc = mkdir_p(cache_dir, 0700);
	if (!rc && access(cache_dir, W_OK | X_OK) < 0)
		rc = -errno;
	if (rc)
		snprintf(msg, msg_size,
			 "cache dir %s: %s (cache_dir= names "
			 "another)",
			 cache_dir, strerror(-rc));
	return rc;
}

void cache_id_name(uint64_t id, char out[17])
{
	snprintf(out, 17, "%016llx", (unsigned long long)id);
}

uint64_t cache_new_id(void)
{
	uint64_t id = 0;
	while (!id) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = (uint64_t)mono_ms() * 2654435761u;
	}
	return id;
}

static bool is_id_name(const char *s)
{
	return strlen(s) == 16 && strspn(s, "0123456789abcdef") == 16;
}

void cache_sweep(struct cache *c)
{
	DIR *d = fdopendir(dup(c->files_fd));
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!is_id_name(de->d_name))
			continue;
		uint64_t id = strtoull(de->d_name, NULL, 16);
		bool live = false;
		for (size_t i = 0; i < c->nall && !live; i++)
			live = c->all[i]->id == id;
		if (!live)
			unlinkat(c->files_fd, de->d_name, 0);
	}
	closedir(d);
}

static int init(struct cache *c, const char *cache_dir, const char *sandbox_id,
		int64_t max_size, struct holder *h, char *msg, size_t msg_size)
{
	char path[4096];
	int rc;

	c->dir_fd = c->files_fd = c->journal_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->stale_lock, NULL);
	c->sweeper_joined = true;
	pthread_cond_init(&c->changed, NULL);
	c->max_size = max_size;
	snprintf(path, sizeof(path), "%s/%s", cache_dir, sandbox_id);
	c->base = strdup(path);
	if (!c->base)
		return -ENOMEM;
	rc = mkdir_p(c->base, 0700);
	if (rc) {
		snprintf(msg, msg_size, "cache dir %s: %s", c->base,
			 strerror(-rc));
		return rc;
	}
	/* nothing in a slot is touched before its lock is ours */
	char *dir = NULL;
	rc = holder_take(h, c->base, &dir, msg, msg_size);
	c->dir = dir;
	if (rc)
		return rc;
	c->dir_fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/files", c->dir);
	rc = c->dir_fd < 0 ? -errno : mkdir_p(path, 0700);
	c->files_fd = rc ? -1 : open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!rc && c->files_fd < 0)
		rc = -errno;
	if (!rc)
		rc = journal_open(c);
	if (rc) {
		snprintf(msg, msg_size, "cache dir %s: %s", c->dir,
			 strerror(-rc));
		return rc;
	}
	return 0;
}

int cache_init(struct cache **ret, const char *cache_dir,
	       const char *sandbox_id, int64_t max_size, struct node_table *nt,
	       struct holder *h, char *msg, size_t msg_size)
{
	struct cache *c = calloc(1, sizeof(*c));
	*ret = NULL;
	if (!c) {
		snprintf(msg, msg_size, "cache: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	c->nt = nt;
	int rc = init(c, cache_dir, sandbox_id, max_size, h, msg, msg_size);
	if (rc)
		cache_release(c);
	else
		*ret = c;
	return rc;
}

const char *cache_dir(const struct cache *c)
{
	return c->dir;
}

/* Keeps the paths in use until the release (c->lock held): a reader may
 * hold them. */
static int retire_paths(struct cache *c)
{
	char **a = realloc(c->old_paths, (c->n_old_paths + 2) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	c->old_paths = a;
	a[c->n_old_paths++] = c->base;
	a[c->n_old_paths++] = c->dir;
	return 0;
}

int cache_move(struct cache *c, const char *sandbox_id, char *msg,
	       size_t msg_size)
{
	const char *old_base = c->base, *old_dir = c->dir;
	const char *slash = strrchr(old_base, '/');
	char *base = NULL;
	bool first = strcmp(old_dir, old_base) == 0;

	if (!slash || asprintf(&base, "%.*s/%s", (int)(slash - old_base),
			       old_base, sandbox_id) < 0) {
		snprintf(msg, msg_size, "cache dir: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	char *dir = strdup(base);
	int rc = dir ? 0 : -ENOMEM;
	/* the slot's files, journal and lock go as they are: open fds and
	 * the lock's flock follow the directory */
	if (!rc && rename(old_dir, base) < 0)
		rc = -errno;
	if (rc) {
		snprintf(msg, msg_size,
			 "cannot move the cache slot %s to %s: %s", old_dir,
			 base, strerror(-rc));
		free(base);
		free(dir);
		return rc;
	}
	if (first) {
		/* other mounts' slots of the old sandbox stay where they were
		 */
		char from[4200], to[4200];
		snprintf(from, sizeof(from), "%s/" HOLDER_SLOTS_DIR, base);
		snprintf(to, sizeof(to), "%s/" HOLDER_SLOTS_DIR, old_base);
		if (access(from, F_OK) == 0 &&
		    ((mkdir(old_base, 0700) < 0 && errno != EEXIST) ||
		     rename(from, to) < 0))
			log_error("cannot move %s back to %s: %s", from, to,
				  strerror(errno));
	}
	pthread_mutex_lock(&c->lock);
	rc = retire_paths(c);
	if (!rc) {
		c->base = base;
		c->dir = dir;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		/* the paths say the old place; the fds are right */
		free(base);
		free(dir);
	}
	return 0;
}

static void cfile_free(struct cache *c, struct cfile *cf);

void cache_release(struct cache *c)
{
	if (!c)
		return;
	cache_sweep_stop(c);
	/* what is left (files still dirty at exit) is freed in memory; its
	 * data and journal record stay on disk for the next mount */
	while (c->nall)
		cfile_free(c, c->all[c->nall - 1]);
	cache_lefts_free(c);
	cache_links_free(c);
	if (c->files_fd >= 0)
		close(c->files_fd);
	if (c->journal_fd >= 0)
		close(c->journal_fd);
	if (c->dir_fd >= 0)
		close(c->dir_fd);
	free(c->all);
	free(c->dir);
	free(c->base);
	for (size_t i = 0; i < c->n_old_paths; i++)
		free(c->old_paths[i]);
	free(c->old_paths);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->stale_lock);
	pthread_cond_destroy(&c->changed);
	free(c);
}

struct cfile *cache_cfile_new(struct cache *c, uint64_t id)
{
	struct cfile *cf = calloc(1, sizeof(*cf));
	if (!cf)
		return NULL;
	if (c->nall == c->all_cap) {
		size_t cap = c->all_cap ? c->all_cap * 2 : 256;
		struct cfile **a = realloc(c->all, cap * sizeof(*a));
		if (!a) {
			free(cf);
			return NULL;
		}
		c->all = a;
		c->all_cap = cap;
	}
	c->all[c->nall++] = cf;
	cf->id = id;
	cf->fd = -1;
	cf->refs = 1;
	pthread_mutex_init(&cf->fetch_lock, NULL);
	cf->last_used = mono_ms();
	return cf;
}

void cache_dirty_list_add(struct cache *c, struct cfile *cf)
{
	cf->dirty = true;
	cf->refs++; /* the dirty list holds a reference */
	cf->dnext = NULL;
	cf->dprev = c->dirty_last;
	if (c->dirty_last)
		c->dirty_last->dnext = cf;
	else
		c->dirty_first = cf;
	c->dirty_last = cf;
	c->ndirty++;
}

static void dirty_list_remove(struct cache *c, struct cfile *cf)
{
	if (cf->dprev)
		cf->dprev->dnext = cf->dnext;
	else
		c->dirty_first = cf->dnext;
	if (cf->dnext)
		cf->dnext->dprev = cf->dprev;
	else
		c->dirty_last = cf->dprev;
	cf->dnext = cf->dprev = NULL;
	c->ndirty--;
}

static void record_remove(struct cache *c, struct cfile *cf)
{
	if (journal_del(c, cf->id))
		log_error("cannot append to the journal in %s", c->dir);
	free(cf->record_path);
	cf->record_path = NULL;
}

static void cfile_free(struct cache *c, struct cfile *cf)
{
	char name[17];

	for (size_t i = 0; i < c->nall; i++) {
		if (c->all[i] == cf) {
			c->all[i] = c->all[--c->nall];
			break;
		}
	}
	if (cf->fd >= 0)
		close(cf->fd);
	c->total_bytes -= cf->cached_bytes;
	if (!cf->dirty) {
		cache_id_name(cf->id, name);
		unlinkat(c->files_fd, name, 0);
	}
	/* a dirty cfile that is freed keeps its record and data on disk:
	 * the next mount uploads it (this happens only at exit) */
	free(cf->record_path);
	free(cf->ext);
	pthread_mutex_destroy(&cf->fetch_lock);
	free(cf);
}

void cache_ref(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	cf->refs++;
	pthread_mutex_unlock(&c->lock);
}

void cache_unref(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	if (--cf->refs == 0) {
		if (cf->dirty)
			dirty_list_remove(c, cf);
		cfile_free(c, cf);
	}
	pthread_mutex_unlock(&c->lock);
}

struct cfile *cache_attach(struct cache *c, struct node *n)
{
	if (n->cf)
		return n->cf;
	pthread_mutex_lock(&c->lock);
	struct cfile *cf = cache_cfile_new(c, cache_new_id());
	pthread_mutex_unlock(&c->lock);
	if (!cf)
		return NULL;
	cf->node = n;
	n->cf = cf;
	return cf;
}

void cache_detach(struct node *n, void *cache)
{
	struct cfile *cf = n->cf;
	if (!cf)
		return;
	n->cf = NULL;
	cf->node = NULL;
	cache_unref(cache, cf);
}

int cache_fd(struct cache *c, struct cfile *cf)
{
	char name[17];
	cache_id_name(cf->id, name);
	pthread_mutex_lock(&c->stale_lock);
	int fd = openat(c->files_fd, name,
			O_RDWR | O_CREAT | O_CLOEXEC |
				(cf->stale_disk ? O_TRUNC : 0),
			0600);
	if (fd >= 0)
		cf->stale_disk = false;
	pthread_mutex_unlock(&c->stale_lock);
	return fd < 0 ? -errno : fd;
}

int cache_open(struct cache *c, struct cfile *cf, bool writer)
{
	pthread_mutex_lock(&c->lock);
	if (cf->fd < 0) {
		int fd = cache_fd(c, cf);
		if (fd < 0) {
			pthread_mutex_unlock(&c->lock);
			log_error("cache file of id %016llx: %s",
				  (unsigned long long)cf->id, strerror(-fd));
			return fd;
		}
		cf->fd = fd;
	}
	cf->opens++;
	if (writer)
		cf->writers++;
	cf->refs++;
	cf->last_used = mono_ms();
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void cache_close(struct cache *c, struct cfile *cf, bool writer)
{
	pthread_mutex_lock(&c->lock);
	if (writer && cf->writers)
		cf->writers--;
	if (cf->opens && --cf->opens == 0 && cf->fd >= 0) {
		close(cf->fd);
		cf->fd = -1;
	}
	if (!cf->opens && cf->forget) {
		cf->forget = false;
		if (!cf->dirty && !cf->inflight && !cf->fills)
			cache_drop_content(c, cf);
	}
	cf->last_used = mono_ms();
	pthread_mutex_unlock(&c->lock);
	cache_unref(c, cf);
}

bool cache_has(const struct cfile *cf, int64_t off, int64_t len)
{
	if (cf->complete)
		return true;
	int64_t end = off + len;
	for (size_t i = 0; i < cf->next; i++) {
		if (cf->ext[i].start <= off && cf->ext[i].end >= end)
			return true;
		if (cf->ext[i].start > off)
			break;
	}
	return false;
}

int cache_add_range(struct cache *c, struct cfile *cf, int64_t start,
		    int64_t end)
{
	if (cf->complete || end <= start)
		return 0;
	if (cf->next == cf->ext_cap) {
		size_t cap = cf->ext_cap ? cf->ext_cap * 2 : 8;
		struct extent *e = realloc(cf->ext, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		cf->ext = e;
		cf->ext_cap = cap;
	}
	/* insert in order, then merge neighbours */
	size_t i = 0;
	while (i < cf->next && cf->ext[i].start < start)
		i++;
	memmove(&cf->ext[i + 1], &cf->ext[i],
		(cf->next - i) * sizeof(*cf->ext));
	cf->ext[i].start = start;
	cf->ext[i].end = end;
	cf->next++;
	size_t w = 0;
	int64_t bytes = 0;
	for (size_t r = 0; r < cf->next; r++) {
		if (w && cf->ext[r].start <= cf->ext[w - 1].end) {
			if (cf->ext[r].end > cf->ext[w - 1].end)
				cf->ext[w - 1].end = cf->ext[r].end;
		} else {
			cf->ext[w++] = cf->ext[r];
		}
	}
	cf->next = w;
	for (size_t r = 0; r < w; r++)
		bytes += cf->ext[r].end - cf->ext[r].start;
	c->total_bytes += bytes - cf->cached_bytes;
	cf->cached_bytes = bytes;
	if (w == 1 && cf->ext[0].start == 0 && cf->ext[0].end >= cf->size) {
		cf->complete = true;
		cf->next = 0;
	}
	return 0;
}

void cache_forget_content(struct cache *c, struct cfile *cf)
{
	cf->complete = false;
	cf->next = 0;
	cf->mixed_at = 0;
	c->total_bytes -= cf->cached_bytes;
	cf->cached_bytes = 0;
	cf->size = 0;
}

void cache_drop_content(struct cache *c, struct cfile *cf)
{
	cache_forget_content(c, cf);
	if (cf->fd >= 0)
		ftruncate(cf->fd, 0);
	else {
		char name[17];
		cache_id_name(cf->id, name);
		int fd = openat(c->files_fd, name, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			ftruncate(fd, 0);
			close(fd);
		}
	}
}

static bool ts_known(const struct timespec *t)
{
	return t->tv_sec || t->tv_nsec;
}

static bool ts_same(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

bool fmeta_base_is(const struct fmeta *m, const struct fattr *a)
{
	return m->base == BASE_KNOWN && m->base_size == a->size &&
	       ts_same(&m->base_mtime, &a->mtime) &&
	       (!ts_known(&m->base_ctime) || !ts_known(&a->ctime) ||
		ts_same(&m->base_ctime, &a->ctime));
}

bool fmeta_base_take(struct fmeta *m, const struct fattr *a)
{
	if (!fmeta_base_is(m, a))
		return false;
	if (!ts_known(&m->base_ctime))
		m->base_ctime = a->ctime;
	return true;
}

struct timespec fmeta_ctime(const struct fmeta *m)
{
	return ts_known(&m->ctime) ? m->ctime : m->mtime;
}

void cache_set_base(struct cfile *cf, const struct fattr *a)
{
	cf->m.base = BASE_KNOWN;
	cf->m.base_size = a->size;
	cf->m.base_mtime = a->mtime;
	cf->m.base_ctime = a->ctime;
	if (!cf->dirty && !cf->complete)
		cf->size = a->size;
}

/* ---- the dirty records ---- */

static int record_write(struct cache *c, struct cfile *cf, const char *path)
{
	int rc = journal_put(c, cf, path);
	if (rc)
		return rc;
	char *copy = strdup(path);
	if (copy) {
		free(cf->record_path);
		cf->record_path = copy;
	}
	return 0;
}

int cache_mark_dirty(struct cache *c, struct cfile *cf, const char *path,
		     bool rewrite)
{
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	cf->wgen++;
	if (rewrite || !cf->dirty || !cf->record_path ||
	    strcmp(cf->record_path, path) != 0) {
		rc = record_write(c, cf, path);
		if (rc)
			log_error(
				"cannot write the dirty record of %s in %s: %s",
				path, c->dir, strerror(-rc));
		if (!cf->dirty) {
			cf->failures = 0;
			cache_dirty_list_add(c, cf);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int cache_dirty(struct cache *c, struct cfile *cf, const char *path)
{
	return cache_mark_dirty(c, cf, path, false);
}

int cache_dirty_meta(struct cache *c, struct cfile *cf, const char *path)
{
	return cache_mark_dirty(c, cf, path, true);
}

static int record_update(struct cache *c, struct cfile *cf, const char *path)
{
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	/* moved: the answer that its name was free is of another name */
	cf->absent_until = 0;
	if (cf->dirty)
		rc = record_write(c, cf, path);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int cache_record_update(struct cache *c, struct cfile *cf, const char *path)
{
	int rc = record_update(c, cf, path);
	if (rc && cache_room_made(c, rc))
		rc = record_update(c, cf, path);
	return rc;
}

int cache_resend(struct cache *c, struct cfile *cf, struct cfile *dcf,
		 const struct fattr *da, const char *old, const char *path,
		 bool *ret_left)
{
	*ret_left = false;
	pthread_mutex_lock(&c->lock);
	cf->data_gen = 0;
	cf->m.base = BASE_ABSENT;
	cf->absent_until = 0;
	/* the fsync that sent it is answered: no hurry but a sync's */
	if (cf->flush_gen > cf->full_gen)
		cf->flush_gen = cf->full_gen;
	pthread_mutex_unlock(&c->lock);
	if (da)
		cache_moved_over(c, cf, dcf, da);
	pthread_mutex_lock(&c->lock);
	int rc = record_write(c, cf, path);
	/* the copy is left for later: its removal waits for the disk
	 * (cache_sync()), and the save costs no sync here */
	if (!rc && cache_left_add(c, cache_new_id(), old,
				  mono_ms() + CACHE_LEFT_DELAY_MS) == 0)
		*ret_left = true;
	pthread_mutex_unlock(&c->lock);
	if (rc || *ret_left)
		return rc;
	/* the sandbox's copy goes now: this one must outlive a power loss,
	 * the bytes and the record that sends them */
	int fd = cache_fd(c, cf);
	rc = fd < 0 ? fd : fdatasync(fd) < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	pthread_mutex_lock(&c->lock);
	if (!rc && fdatasync(c->journal_fd) < 0)
		rc = -errno;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int cache_sync(struct cache *c)
{
	return syncfs(c->files_fd) < 0 ? -errno : 0;
}

void cache_base_lost(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	cf->m.base = BASE_UNKNOWN;
	pthread_mutex_unlock(&c->lock);
}

int cache_record_refresh(struct cache *c, struct cfile *cf)
{
	if (!cf->dirty || !cf->record_path)
		return 0;
	return journal_put(c, cf, cf->record_path);
}

static void make_clean(struct cache *c, struct cfile *cf)
{
	if (!cf->dirty)
		return;
	cf->dirty = false;
	cf->m.times_set = false;
	cf->m.chmod_needed = false;
	cf->m.sent = false;
	cf->failures = 0;
	cf->solo = false;
	cf->data_gen = 0;
	dirty_list_remove(c, cf);
	record_remove(c, cf);
	cf->refs--; /* the dirty list's; the caller still holds one */
}

void cache_uploaded(struct cache *c, struct cfile *cf, uint64_t gen)
{
	if (gen > cf->uploaded_gen)
		cf->uploaded_gen = gen;
	cf->failures = 0;
	if (cf->wgen == gen)
		make_clean(c, cf);
	pthread_cond_broadcast(&c->changed);
}

void cache_discard(struct cache *c, struct cfile *cf)
{
	cf->uploaded_gen = cf->wgen;
	make_clean(c, cf);
	pthread_cond_broadcast(&c->changed);
}

void cache_forget(struct cache *c, struct cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	cache_discard(c, cf);
	pthread_mutex_unlock(&c->lock);
}

/* Whether a dirty file or directory is @d (unless @strict) or below it
 * (c->nt->lock and c->lock held). */
static bool dirty_below(struct cache *c, const struct node *d, bool strict)
{
	for (struct cfile *cf = c->dirty_first; cf; cf = cf->dnext)
		if (cf->node && node_is_below(cf->node, d) &&
		    !(strict && cf->node == d))
			return true;
	return false;
}

bool cache_dirty_below(struct cache *c, const struct node *d, bool strict)
{
	pthread_mutex_lock(&c->nt->lock);
	pthread_mutex_lock(&c->lock);
	bool found = dirty_below(c, d, strict);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->nt->lock);
	return found;
}

void cache_records_follow(struct cache *c, struct node *moved)
{
	struct fix {
		struct cfile *cf;
		char *path;
	} *fixes = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&c->nt->lock);
	pthread_mutex_lock(&c->lock);
	for (struct cfile *cf = c->dirty_first; cf; cf = cf->dnext) {
		if (!cf->node || !node_is_below(cf->node, moved))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			struct fix *f = realloc(fixes, cap * sizeof(*f));
			if (!f)
				break;
			fixes = f;
		}
		fixes[n].cf = cf;
		fixes[n].path = node_path(c->nt, cf->node);
		cf->refs++;
		n++;
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->nt->lock);
	for (size_t i = 0; i < n; i++) {
		if (fixes[i].path &&
		    cache_record_update(c, fixes[i].cf, fixes[i].path))
			log_error("could not record the new path %s",
				  fixes[i].path);
		free(fixes[i].path);
		cache_unref(c, fixes[i].cf);
	}
	free(fixes);
}

int cache_pending(struct cache *c, size_t max, struct pending *ret)
{
	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&c->lock);
	ret->total = c->ndirty;
	size_t n = c->ndirty < max ? c->ndirty : max;
	ret->paths = n ? calloc(n, sizeof(char *)) : NULL;
	int rc = n && !ret->paths ? -ENOMEM : 0;
	for (struct cfile *cf = c->dirty_first; !rc && cf && ret->n < n;
	     cf = cf->dnext) {
		/* a directory made or given a mode here ends in "/" */
		const char *path = cf->record_path ? cf->record_path : "?";
		if (asprintf(&ret->paths[ret->n], "%s%s", path,
			     cf->m.dir ? "/" : "") < 0)
			ret->paths[ret->n] = NULL;
		if (!ret->paths[ret->n])
			rc = -ENOMEM;
		else
			ret->n++;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc)
		pending_release(ret);
	return rc;
}

/* ---- eviction ---- */

void cache_account(struct cache *c, struct cfile *cf)
{
	if (!cf->complete)
		return; /* the ranges count themselves (cache_add_range) */
	c->total_bytes += cf->size - cf->cached_bytes;
	cf->cached_bytes = cf->size;
}

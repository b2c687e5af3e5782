/*
 * xattr.c - the user.* extended attributes the mount keeps (xattr.h): a
 * hash table by sandbox path, each entry the names and values of one
 * file, and its log on disk (xattr_log.c).
 *
 * A change is appended to the log before it is made in memory, so what
 * a reader sees is always on its way to the disk. A rename or an rmdir
 * concerns what is below a path too; so that one of a directory with
 * nothing below it costs no walk of the table, a counting filter keeps,
 * for each hash of a directory path, how many entries have it as an
 * ancestor (its false positives only cost a walk). The same filter tells
 * a listing whether any child of its directory has an entry.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "log.h"
#include "xattr.h"
#include "xattr_log.h"

#define BUCKETS 16384
#define ANC_BUCKETS 65536
/* what an entry and a value cost besides their bytes */
#define ENTRY_COST 64
#define VALUE_COST 32
/* the log is rewritten when it is this many times the table, and past */
#define REWRITE_FACTOR 4
#define REWRITE_MIN (1ll << 20)

struct xval {
	char *name;
	char *value;
	size_t size;
};

struct xent {
	struct xent *next;
	char *path;
	struct xval *v;
	size_t n;
	size_t names; /* bytes of the names list (each with its NUL) */
};

struct xattrs {
	pthread_mutex_t lock; /* guards all below */
	struct xlog log;
	struct xent *tab[BUCKETS];
	size_t count;
	unsigned anc[ANC_BUCKETS]; /* the filter: entries below a dir */
	int64_t bytes, max;
	bool full_told; /* the log said the table is full */
	bool io_told;   /* the log said its file cannot be written */
	/* the walk of xattrs_rewrite() */
	size_t it_b, it_v;
	struct xent *it_e;
};

#define FNV_INIT 0xcbf29ce484222325ull

static uint64_t fnv_step(uint64_t h, unsigned char c)
{
	return (h ^ c) * 0x100000001b3ull;
}

static uint64_t fnv_str(const char *s)
{
	uint64_t h = FNV_INIT;
	while (*s)
		h = fnv_step(h, (unsigned char)*s++);
	return h;
}

/* The filter's bucket of directory @dir ("/" counts as ""). */
static size_t dir_bucket(const char *dir)
{
	return strcmp(dir, "/") == 0 ? FNV_INIT % ANC_BUCKETS :
				       fnv_str(dir) % ANC_BUCKETS;
}

/* Adds @d (+1 or -1) to the filter for each ancestor of @path. */
static void anc_count(struct xattrs *x, const char *path, int d)
{
	uint64_t h = FNV_INIT;
	for (const char *p = path; *p; p++) {
		if (*p == '/' && p[1])
			x->anc[h % ANC_BUCKETS] += (unsigned)d;
		h = fnv_step(h, (unsigned char)*p);
	}
}

static bool has_below(const struct xattrs *x, const char *dir)
{
	return x->count && x->anc[dir_bucket(dir)];
}

/* Whether @path is @top or below it. */
static bool at_or_below(const char *path, const char *top)
{
	size_t n = strlen(top);
	if (n == 1 && top[0] == '/')
		return path[0] == '/';
	return strncmp(path, top, n) == 0 && (!path[n] || path[n] == '/');
}

static struct xent **slot_of(struct xattrs *x, const char *path)
{
	struct xent **p = &x->tab[fnv_str(path) % BUCKETS];
	while (*p && strcmp((*p)->path, path) != 0)
		p = &(*p)->next;
	return p;
}

static struct xval *val_of(struct xent *e, const char *name)
{
	for (size_t i = 0; e && i < e->n; i++)
		if (strcmp(e->v[i].name, name) == 0)
			return &e->v[i];
	return NULL;
}

static int64_t val_cost(const char *name, size_t size)
{
	return (int64_t)(strlen(name) + size + VALUE_COST);
}

static void ent_free(struct xattrs *x, struct xent *e)
{
	for (size_t i = 0; i < e->n; i++) {
		x->bytes -= val_cost(e->v[i].name, e->v[i].size);
		free(e->v[i].name);
		free(e->v[i].value);
	}
	x->bytes -= (int64_t)(strlen(e->path) + ENTRY_COST);
	anc_count(x, e->path, -1);
	x->count--;
	free(e->v);
	free(e->path);
	free(e);
}

/* Unhooks and frees the entry at @p. */
static void ent_remove(struct xattrs *x, struct xent **p)
{
	struct xent *e = *p;
	*p = e->next;
	ent_free(x, e);
}

/* Links @e (its path set) into the table. */
static void ent_insert(struct xattrs *x, struct xent *e)
{
	struct xent **p = &x->tab[fnv_str(e->path) % BUCKETS];
	e->next = *p;
	*p = e;
	anc_count(x, e->path, 1);
	x->count++;
	x->bytes += (int64_t)(strlen(e->path) + ENTRY_COST);
}

/* The table's part of a set (the checks made, the log written): takes
 * @value (malloc'd). 0 or -ENOMEM. */
static int apply_set(struct xattrs *x, const char *path, const char *name,
		     char *value, size_t size)
{
	struct xent **p = slot_of(x, path);
	struct xent *e = *p;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e || !(e->path = strdup(path))) {
			free(e);
			return -ENOMEM;
		}
		ent_insert(x, e);
	}
	struct xval *v = val_of(e, name);
	if (!v) {
		struct xval *nv = realloc(e->v, (e->n + 1) * sizeof(*nv));
		char *copy = strdup(name);
		if (nv)
			e->v = nv;
		if (!nv || !copy) {
			free(copy);
			if (!e->n) /* made above: it goes again */
				ent_remove(x, slot_of(x, path));
			return -ENOMEM;
		}
		v = &e->v[e->n++];
		v->name = copy;
		v->value = NULL;
		v->size = 0;
		e->names += strlen(name) + 1;
		x->bytes += val_cost(name, 0);
	}
	free(v->value);
	x->bytes += (int64_t)size - (int64_t)v->size;
	v->value = value;
	v->size = size;
	return 0;
}

static void apply_remove(struct xattrs *x, const char *path, const char *name)
{
	struct xent **p = slot_of(x, path);
	struct xent *e = *p;
	struct xval *v = val_of(e, name);
	if (!v)
		return;
	x->bytes -= val_cost(v->name, v->size);
	e->names -= strlen(v->name) + 1;
	free(v->name);
	free(v->value);
	*v = e->v[--e->n];
	if (!e->n) {
		/* the entry goes as a whole: nothing of it is counted twice */
		ent_remove(x, p);
	}
}

static void apply_drop(struct xattrs *x, const char *path)
{
	struct xent **p = slot_of(x, path);
	if (*p)
		ent_remove(x, p);
	if (!has_below(x, path))
		return;
	for (size_t b = 0; b < BUCKETS; b++) {
		p = &x->tab[b];
		while (*p) {
			if (at_or_below((*p)->path, path))
				ent_remove(x, p);
			else
				p = &(*p)->next;
		}
	}
}

/* @e's path, under @from, made the same under @to; 0 or -ENOMEM. */
static int repath(struct xent *e, const char *from, const char *to)
{
	size_t nf = strcmp(from, "/") == 0 ? 0 : strlen(from);
	size_t nt = strlen(to), rest = strlen(e->path + nf);
	char *s = malloc(nt + rest + 1);
	if (!s)
		return -ENOMEM;
	snprintf(s, nt + rest + 1, "%s%s", to, e->path + nf);
	free(e->path);
	e->path = s;
	return 0;
}

/* Moves the entries of chain @q at or below @from onto list @moved (their
 * paths out of the counts). */
static void unhook_below(struct xattrs *x, struct xent **q, const char *from,
			 struct xent **moved)
{
	while (*q) {
		struct xent *e = *q;
		if (!at_or_below(e->path, from)) {
			q = &e->next;
			continue;
		}
		*q = e->next;
		e->next = *moved;
		*moved = e;
		anc_count(x, e->path, -1);
		x->count--;
		x->bytes -= (int64_t)(strlen(e->path) + ENTRY_COST);
	}
}

static void apply_move(struct xattrs *x, const char *from, const char *to)
{
	struct xent *moved = NULL;
	if (strcmp(from, to) == 0 || at_or_below(to, from))
		return;
	apply_drop(x, to);
	if (has_below(x, from))
		for (size_t b = 0; b < BUCKETS; b++)
			unhook_below(x, &x->tab[b], from, &moved);
	else
		unhook_below(x, &x->tab[fnv_str(from) % BUCKETS], from, &moved);
	while (moved) {
		struct xent *e = moved;
		moved = e->next;
		int rc = repath(e, from, to);
		/* counted back in, under its new path if it has one */
		ent_insert(x, e);
		if (rc)
			ent_remove(x, slot_of(x, e->path));
	}
}

/* ---- the log ---- */

static void replay_one(void *arg, struct xlog_rec *r)
{
	struct xattrs *x = arg;
	switch (r->op) {
	case XLOG_SET:
		if (r->len[2] <= XATTR_VALUE_MAX &&
		    apply_set(x, r->f[0], r->f[1], (char *)r->f[2],
			      r->len[2]) == 0)
			r->f[2] = NULL; /* the table's now */
		break;
	case XLOG_REMOVE:
		apply_remove(x, r->f[0], r->f[1]);
		break;
	case XLOG_DROP:
		apply_drop(x, r->f[0]);
		break;
	case XLOG_MOVE:
		apply_move(x, r->f[0], r->f[1]);
		break;
	default:
		break;
	}
	for (int i = 0; i < r->n; i++)
		free((char *)r->f[i]);
}

/* The next live value of the table as a set record (the walk is
 * x->it_*, reset before the first call). */
static int rewrite_next(void *arg, struct xlog_rec *r)
{
	struct xattrs *x = arg;
	while (!x->it_e || x->it_v >= x->it_e->n) {
		if (x->it_e && x->it_e->next) {
			x->it_e = x->it_e->next;
		} else {
			while (x->it_b < BUCKETS && !x->tab[x->it_b])
				x->it_b++;
			if (x->it_b >= BUCKETS)
				return 0;
			x->it_e = x->tab[x->it_b++];
		}
		x->it_v = 0;
	}
	const struct xval *v = &x->it_e->v[x->it_v++];
	r->op = XLOG_SET;
	r->n = 3;
	r->f[0] = x->it_e->path;
	r->len[0] = strlen(r->f[0]);
	r->f[1] = v->name;
	r->len[1] = strlen(v->name);
	r->f[2] = v->value ? v->value : "";
	r->len[2] = v->size;
	return 1;
}

static int rewrite(struct xattrs *x)
{
	x->it_b = x->it_v = 0;
	x->it_e = NULL;
	return xlog_rewrite(&x->log, rewrite_next, x);
}

/* Appends @r (x->lock held): 0 or -EIO, said once in the log. */
static int log_put(struct xattrs *x, const struct xlog_rec *r)
{
	int rc = xlog_append(&x->log, r);
	if (rc) {
		if (!x->io_told)
			log_error("extended attributes: cannot write the "
				  "record of %s: %s",
				  r->f[0], strerror(-rc));
		x->io_told = true;
		return -EIO;
	}
	x->io_told = false;
	return 0;
}

/* After a change (x->lock held): a log grown much bigger than the table
 * is rewritten. */
static void settle(struct xattrs *x)
{
	int rc = 0;
	if (x->log.bytes > REWRITE_FACTOR * x->bytes + REWRITE_MIN)
		rc = rewrite(x);
	if (rc)
		log_error("extended attributes: cannot rewrite their log: %s",
			  strerror(-rc));
}

static struct xlog_rec rec(char op, const char *a, const char *b, const void *c,
			   size_t clen)
{
	struct xlog_rec r = { .op = op, .n = 1, .f = { a }, .len = { 0 } };
	r.len[0] = strlen(a);
	if (b) {
		r.f[r.n] = b;
		r.len[r.n++] = strlen(b);
	}
	if (c) {
		r.f[r.n] = c;
		r.len[r.n++] = clen;
	}
	return r;
}

int xattrs_open(struct xattrs **ret, const char *dir, int64_t max_bytes,
		char *msg, size_t msg_size)
{
	struct xattrs *x = calloc(1, sizeof(*x));
	*ret = NULL;
	if (!x)
		return -ENOMEM;
	pthread_mutex_init(&x->lock, NULL);
	x->max = max_bytes;
	int rc = xlog_open(&x->log, dir);
	int skipped = rc ? rc : xlog_replay(&x->log, replay_one, x);
	if (skipped < 0) {
		snprintf(msg, msg_size, "extended attributes in %s/xattrs: %s",
			 dir, strerror(-skipped));
		xattrs_close(x);
		return skipped;
	}
	rc = rewrite(x);
	if (rc) {
		/* a full cache disk: the mount goes on with the log as it is
		 * (what it holds was read back); a new entry needs room */
		int krc = xlog_keep(&x->log);
		log_warn("extended attributes: cannot rewrite %s/xattrs (%s); "
			 "%s",
			 dir, strerror(-rc),
			 krc ? "new ones cannot be recorded until there is "
			       "room" :
			       "it is appended to as it is");
	}
	if (skipped)
		log_warn("extended attributes: %d damaged line(s) of "
			 "%s/xattrs skipped (a write cut short)",
			 skipped, dir);
	*ret = x;
	return 0;
}

void xattrs_close(struct xattrs *x)
{
	if (!x)
		return;
	for (size_t b = 0; b < BUCKETS; b++)
		while (x->tab[b])
			ent_remove(x, &x->tab[b]);
	xlog_close(&x->log);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* ---- the calls ---- */

bool xattrs_empty(struct xattrs *x)
{
	if (!x)
		return true;
	pthread_mutex_lock(&x->lock);
	bool empty = !x->count;
	pthread_mutex_unlock(&x->lock);
	return empty;
}

ssize_t xattrs_get(struct xattrs *x, const char *path, const char *name,
		   void *buf, size_t size)
{
	pthread_mutex_lock(&x->lock);
	const struct xval *v = x->count ? val_of(*slot_of(x, path), name) : 0;
	ssize_t rc = !v ? -ENODATA : (ssize_t)v->size;
	if (v && size && size < v->size)
		rc = -ERANGE;
	else if (v && size && v->size)
		memcpy(buf, v->value, v->size);
	pthread_mutex_unlock(&x->lock);
	return rc;
}

ssize_t xattrs_list(struct xattrs *x, const char *path, char *buf, size_t size)
{
	pthread_mutex_lock(&x->lock);
	const struct xent *e = x->count ? *slot_of(x, path) : NULL;
	ssize_t rc = e ? (ssize_t)e->names : 0;
	if (e && size && size < e->names) {
		rc = -ERANGE;
	} else if (e && size) {
		for (size_t i = 0; i < e->n; i++) {
			size_t n = strlen(e->v[i].name) + 1;
			memcpy(buf, e->v[i].name, n);
			buf += n;
		}
	}
	pthread_mutex_unlock(&x->lock);
	return rc;
}

/* Whether setting @name of @e to @size bytes fits (x->lock held): 0 or
 * -ENOSPC, said in the log. */
static int set_fits(struct xattrs *x, const char *path, const struct xent *e,
		    const char *name, size_t size)
{
	const struct xval *v = val_of((struct xent *)e, name);
	int64_t grow = (int64_t)size - (v ? (int64_t)v->size : 0);
	if (!v)
		grow += val_cost(name, 0) +
			(e ? 0 : (int64_t)strlen(path) + ENTRY_COST);
	size_t names = (e ? e->names : 0) + (v ? 0 : strlen(name) + 1);
	if (names > XATTR_NAMES_MAX) {
		log_warn("extended attributes of %s: their names would pass "
			 "%d bytes (ENOSPC)",
			 path, XATTR_NAMES_MAX);
		return -ENOSPC;
	}
	if (grow > 0 && x->bytes + grow > x->max) {
		if (!x->full_told)
			log_error("extended attributes: the mount's record is "
				  "full (xattr_max_size=%lld bytes); setting "
				  "%s of %s fails with ENOSPC",
				  (long long)x->max, name, path);
		x->full_told = true;
		return -ENOSPC;
	}
	return 0;
}

int xattrs_set(struct xattrs *x, const char *path, const char *name,
	       const void *value, size_t size, int flags)
{
	char *copy = malloc(size ? size : 1);
	if (!copy)
		return -ENOMEM;
	if (size)
		memcpy(copy, value, size);
	pthread_mutex_lock(&x->lock);
	const struct xent *e = *slot_of(x, path);
	bool has = val_of((struct xent *)e, name) != NULL;
	int rc = 0;
	if ((flags & XATTR_CREATE) && has)
		rc = -EEXIST;
	else if ((flags & XATTR_REPLACE) && !has)
		rc = -ENODATA;
	if (!rc)
		rc = set_fits(x, path, e, name, size);
	if (!rc) {
		struct xlog_rec r = rec(XLOG_SET, path, name, copy, size);
		rc = log_put(x, &r);
	}
	if (!rc && (rc = apply_set(x, path, name, copy, size)) != 0) {
		/* only a new name can fail so (ENOMEM): its record goes too */
		struct xlog_rec r = rec(XLOG_REMOVE, path, name, NULL, 0);
		log_put(x, &r);
	}
	if (rc)
		free(copy);
	settle(x);
	pthread_mutex_unlock(&x->lock);
	return rc;
}

int xattrs_remove(struct xattrs *x, const char *path, const char *name)
{
	pthread_mutex_lock(&x->lock);
	int rc = val_of(*slot_of(x, path), name) ? 0 : -ENODATA;
	if (!rc) {
		struct xlog_rec r = rec(XLOG_REMOVE, path, name, NULL, 0);
		rc = log_put(x, &r);
	}
	if (!rc) {
		apply_remove(x, path, name);
		x->full_told = false;
	}
	settle(x);
	pthread_mutex_unlock(&x->lock);
	return rc;
}

void xattrs_drop(struct xattrs *x, const char *path)
{
	if (!x)
		return;
	pthread_mutex_lock(&x->lock);
	if (*slot_of(x, path) || has_below(x, path)) {
		struct xlog_rec r = rec(XLOG_DROP, path, NULL, NULL, 0);
		log_put(x, &r);
		apply_drop(x, path);
		x->full_told = false;
		settle(x);
	}
	pthread_mutex_unlock(&x->lock);
}

void xattrs_move(struct xattrs *x, const char *from, const char *to)
{
	if (!x)
		return;
	pthread_mutex_lock(&x->lock);
	if (*slot_of(x, from) || has_below(x, from) || *slot_of(x, to) ||
	    has_below(x, to)) {
		struct xlog_rec r = rec(XLOG_MOVE, from, to, NULL, 0);
		log_put(x, &r);
		apply_move(x, from, to);
		settle(x);
	}
	pthread_mutex_unlock(&x->lock);
}

/* The name below @dir that @path is at or below, copied into @out;
 * false if @path is not below @dir. */
static bool name_below(const char *path, const char *dir,
		       char out[XATTR_NAME_LEN_MAX + 1])
{
	size_t n = strcmp(dir, "/") == 0 ? 0 : strlen(dir);
	if (strncmp(path, dir, n) != 0 || path[n] != '/')
		return false;
	const char *name = path + n + 1;
	size_t len = strcspn(name, "/");
	if (!len || len > XATTR_NAME_LEN_MAX)
		return false;
	memcpy(out, name, len);
	out[len] = '\0';
	return true;
}

/* Drops the entries of chain @p that are below @dir under a name
 * @listed says is gone (x->lock held). */
static void keep_chain(struct xattrs *x, struct xent **p, const char *dir,
		       bool (*listed)(const char *name, void *arg), void *arg)
{
	char name[XATTR_NAME_LEN_MAX + 1];
	while (*p) {
		struct xent *e = *p;
		if (!name_below(e->path, dir, name) || listed(name, arg)) {
			p = &e->next;
			continue;
		}
		struct xlog_rec r = rec(XLOG_DROP, e->path, NULL, NULL, 0);
		log_put(x, &r);
		ent_remove(x, p);
	}
}

void xattrs_keep_listed(struct xattrs *x, const char *dir,
			bool (*listed)(const char *name, void *arg), void *arg)
{
	pthread_mutex_lock(&x->lock);
	for (size_t b = 0; has_below(x, dir) && b < BUCKETS; b++)
		keep_chain(x, &x->tab[b], dir, listed, arg);
	settle(x);
	pthread_mutex_unlock(&x->lock);
}

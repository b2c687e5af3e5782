/*
 * snaps.c - the table behind snapshots/ (snaps.h): listing the mounted
 * sandbox's snapshots (one request a page of 200), the names they are
 * shown by, info, and wait.
 *
 * A snapshot is shown by its name when the tree can show it (a file name,
 * not taken by a newer one); else by its id. One the tree cannot show
 * either way (an id a hostile server made up) is left out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_text.h"
#include "log.h"
#include "node.h"
#include "osbfs.h"
#include "snaps_i.h"

#define PAGE_SIZE 200
#define PAGES_MAX 50
/* how old the table may be when info is read */
#define INFO_REFRESH_MS 1000
/* wait: the pauses between two questions start at this (a local
 * capture takes a few hundred ms) and grow by a quarter to the next, so
 * that the answer is seen at most a quarter after it came (8 questions
 * in the first second, 20 in ten) */
#define WAIT_PAUSE_FIRST_MS 50
#define WAIT_PAUSE_MAX_MS 1000
#define WAIT_SLICE_MS 50

int snaps_new(struct osbfs *fs, struct snaps **ret)
{
	struct snaps *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fs = fs;
	s->next_serial = 1;
	pthread_mutex_init(&s->lock, NULL);
	*ret = s;
	return 0;
}

static void snap_release(struct snap *e)
{
	free(e->name);
	free(e->reason);
	free(e->message);
}

void snaps_free(struct snaps *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		snap_release(&s->v[i]);
	free(s->v);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void snaps_stop(struct snaps *s)
{
	if (s)
		atomic_store(&s->stop, true);
}

bool snaps_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n < 1 || n > SNAP_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];
		bool alnum = (ch >= 'a' && ch <= 'z') ||
			     (ch >= 'A' && ch <= 'Z') ||
			     (ch >= '0' && ch <= '9');
		bool end = i == 0 || i == n - 1;
		if (!alnum && (end || !strchr("._-", ch)))
			return false;
	}
	return true;
}

/* Whether a directory here may be called @s. */
static bool dir_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n && n < SNAP_DIR_MAX && !strchr(s, '/') &&
	       strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static struct snap *find_dir_locked(struct snaps *s, const char *dir)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].dir, dir) == 0)
			return &s->v[i];
	return NULL;
}

static struct snap *find_serial_locked(struct snaps *s, uint64_t serial)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].serial == serial)
			return &s->v[i];
	return NULL;
}

/* Moves what the server said of a snapshot into @e (which keeps its
 * serial and dir). */
static void snap_take(struct snap *e, struct osb_snapshot *o)
{
	snprintf(e->id, sizeof(e->id), "%s", o->id);
	snprintf(e->state, sizeof(e->state), "%s",
		 o->state ? o->state : "Unknown");
	free(e->name);
	free(e->reason);
	free(e->message);
	e->name = o->name;
	e->reason = o->reason;
	e->message = o->message;
	o->name = o->reason = o->message = NULL;
	e->created = o->created;
}

/* Names every entry: its name if free and showable, else its id; drops
 * the ones that have neither. */
static void name_all_locked(struct snaps *s)
{
	size_t k = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct snap *e = &s->v[i];
		e->dir[0] = '\0';
		if (dir_ok(e->name) && !find_dir_locked(s, e->name))
			snprintf(e->dir, sizeof(e->dir), "%s", e->name);
		else if (dir_ok(e->id) && !find_dir_locked(s, e->id))
			snprintf(e->dir, sizeof(e->dir), "%s", e->id);
		if (!e->dir[0]) {
			snap_release(e);
			continue;
		}
		if (k != i)
			s->v[k] = *e;
		k++;
	}
	s->n = k;
}

static int grow_locked(struct snaps *s, size_t want)
{
	if (want <= s->cap)
		return 0;
	size_t nc = s->cap ? s->cap : 16;
	while (nc < want)
		nc *= 2;
	struct snap *v = realloc(s->v, nc * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->v = v;
	s->cap = nc;
	return 0;
}

void snaps_restored(struct snaps *s, const char *old_id)
{
	pthread_mutex_lock(&s->lock);
	if (s->nlineage == SNAPS_LINEAGE_MAX) {
		memmove(s->lineage[0], s->lineage[1],
			(SNAPS_LINEAGE_MAX - 1) * sizeof(s->lineage[0]));
		s->nlineage--;
	}
	snprintf(s->lineage[s->nlineage++], SNAP_DIR_MAX, "%s", old_id);
	s->listed_ms = 0;
	pthread_mutex_unlock(&s->lock);
}

static int newest_first(const void *a, const void *b)
{
	const struct osb_snapshot *x = a, *y = b;
	if (x->created.tv_sec != y->created.tv_sec)
		return x->created.tv_sec < y->created.tv_sec ? 1 : -1;
	if (x->created.tv_nsec != y->created.tv_nsec)
		return x->created.tv_nsec < y->created.tv_nsec ? 1 : -1;
	return 0;
}

/* Every page of sandbox @sandbox_id's snapshots (of @name only, unless
 * NULL), appended to @all. */
static int fetch_one(struct snaps *s, const char *sandbox_id, const char *name,
		     struct osb_snapshot_list *all, struct osb_error *err)
{
	struct osb_snapshot_list_params p = { .sandbox_id = sandbox_id,
					      .name = name,
					      .page_size = PAGE_SIZE };
	int rc = 0;
	for (p.page = 1; !rc && p.page <= PAGES_MAX; p.page++) {
		struct osb_snapshot_list l = { 0 };
		rc = osb_snapshot_list(s->fs->client, &p, &l, err);
		struct osb_snapshot *v =
			rc ? NULL :
			     realloc(all->items,
				     (all->n + l.n + 1) * sizeof(*v));
		if (!rc && !v)
			rc = -ENOMEM;
		if (!rc) {
			memcpy(v + all->n, l.items, l.n * sizeof(*v));
			all->items = v;
			all->n += l.n;
			free(l.items);
			l.items = NULL;
			l.n = 0;
		}
		bool more = !rc && l.pg.has_next;
		osb_snapshot_list_release(&l);
		if (!more)
			break;
	}
	return rc;
}

int snaps_fetch(struct snaps *s, const char *name,
		struct osb_snapshot_list *ret, struct osb_error *err)
{
	char lineage[SNAPS_LINEAGE_MAX][SNAP_DIR_MAX];
	struct osb_snapshot_list all = { 0 };

	pthread_mutex_lock(&s->lock);
	/* a name is looked for among this sandbox's only (mkdir's) */
	size_t n = name ? 0 : s->nlineage;
	memcpy(lineage, s->lineage, n * sizeof(lineage[0]));
	pthread_mutex_unlock(&s->lock);
	int rc = fetch_one(s, s->fs->sandbox_id, name, &all, err);
	for (size_t i = n; !rc && i > 0; i--)
		rc = fetch_one(s, lineage[i - 1], name, &all, err);
	if (rc) {
		osb_snapshot_list_release(&all);
		return rc;
	}
	if (n && all.n > 1)
		qsort(all.items, all.n, sizeof(*all.items), newest_first);
	*ret = all;
	return 0;
}

/* Puts the listing @l (of everything, made while s->gen was @gen) in
 * place of the table; the entries keep their serials. */
static int merge_locked(struct snaps *s, struct osb_snapshot_list *l,
			uint64_t gen)
{
	size_t cap = l->n + s->n + 1;
	struct snap *v = calloc(cap, sizeof(*v));
	size_t n = 0;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++) {
		struct osb_snapshot *o = &l->items[i];
		if (!o->id || strlen(o->id) >= SNAP_DIR_MAX)
			continue;
		struct snap *e = &v[n++];
		e->serial = 0;
		for (size_t j = 0; j < s->n && !e->serial; j++)
			if (strcmp(s->v[j].id, o->id) == 0)
				e->serial = s->v[j].serial;
		if (!e->serial)
			e->serial = s->next_serial++;
		snap_take(e, o);
	}
	/* made here after the listing began: not in it yet */
	for (size_t j = 0; j < s->n; j++) {
		bool listed = false;
		for (size_t i = 0; i < n && !listed; i++)
			listed = v[i].serial == s->v[j].serial;
		if (!listed && s->v[j].added > gen) {
			v[n++] = s->v[j];
			s->v[j].name = s->v[j].reason = s->v[j].message = NULL;
		}
	}
	for (size_t j = 0; j < s->n; j++)
		snap_release(&s->v[j]);
	free(s->v);
	s->v = v;
	s->n = n;
	s->cap = cap;
	name_all_locked(s);
	return 0;
}

void snaps_refresh(struct snaps *s, long long max_age_ms)
{
	struct osb_snapshot_list l = { 0 };
	struct osb_error err;

	pthread_mutex_lock(&s->lock);
	long long last = s->listed_ms;
	uint64_t gen = s->gen;
	pthread_mutex_unlock(&s->lock);
	if (last && mono_ms() - last <= max_age_ms)
		return;
	long long now = mono_ms();
	osb_error_clear(&err);
	int rc = snaps_fetch(s, NULL, &l, &err);
	if (rc) {
		log_error("snapshots: listing them failed: %s",
			  err.message[0] ? err.message : strerror(-rc));
		return;
	}
	pthread_mutex_lock(&s->lock);
	rc = merge_locked(s, &l, gen);
	if (!rc)
		s->listed_ms = now;
	pthread_mutex_unlock(&s->lock);
	osb_snapshot_list_release(&l);
}

void snaps_forget_age(struct snaps *s)
{
	pthread_mutex_lock(&s->lock);
	s->listed_ms = 0;
	pthread_mutex_unlock(&s->lock);
}

int snaps_add(struct snaps *s, struct osb_snapshot *o, uint64_t *ret_serial)
{
	pthread_mutex_lock(&s->lock);
	int rc = grow_locked(s, s->n + 1);
	struct snap *e = NULL;
	for (size_t i = 0; !rc && i < s->n && !e; i++)
		if (strcmp(s->v[i].id, o->id) == 0)
			e = &s->v[i];
	if (!rc && !e) {
		memmove(s->v + 1, s->v, s->n * sizeof(*s->v));
		e = &s->v[0];
		memset(e, 0, sizeof(*e));
		e->serial = s->next_serial++;
		s->n++;
	}
	if (!rc) {
		snap_take(e, o);
		e->added = ++s->gen;
		*ret_serial = e->serial;
		name_all_locked(s);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void snaps_drop(struct snaps *s, const char *id)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->v[i].id, id) != 0)
			continue;
		snap_release(&s->v[i]);
		memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof(*s->v));
		s->n--;
		break;
	}
	pthread_mutex_unlock(&s->lock);
}

int snaps_list(struct snaps *s, struct snap_entry **ret, size_t *ret_n)
{
	pthread_mutex_lock(&s->lock);
	struct snap_entry *v = s->n ? calloc(s->n, sizeof(*v)) : NULL;
	int rc = s->n && !v ? -ENOMEM : 0;
	for (size_t i = 0; !rc && i < s->n; i++) {
		memcpy(v[i].dir, s->v[i].dir, sizeof(v[i].dir));
		v[i].serial = s->v[i].serial;
		v[i].created = s->v[i].created;
	}
	*ret_n = rc ? 0 : s->n;
	pthread_mutex_unlock(&s->lock);
	*ret = v;
	return rc;
}

int snaps_find(struct snaps *s, const char *dir, uint64_t *ret_serial)
{
	pthread_mutex_lock(&s->lock);
	struct snap *e = find_dir_locked(s, dir);
	if (e)
		*ret_serial = e->serial;
	pthread_mutex_unlock(&s->lock);
	return e ? 0 : -ENOENT;
}

int snaps_id_of(struct snaps *s, const char *dir, char *id)
{
	pthread_mutex_lock(&s->lock);
	struct snap *e = find_dir_locked(s, dir);
	if (e)
		memcpy(id, e->id, SNAP_DIR_MAX);
	pthread_mutex_unlock(&s->lock);
	return e ? 0 : -ENOENT;
}

bool snaps_taken(struct snaps *s, const char *name)
{
	pthread_mutex_lock(&s->lock);
	bool taken = find_dir_locked(s, name) != NULL;
	for (size_t i = 0; !taken && i < s->n; i++)
		taken = s->v[i].name && strcmp(s->v[i].name, name) == 0;
	pthread_mutex_unlock(&s->lock);
	return taken;
}

bool snaps_exists(struct snaps *s, uint64_t serial)
{
	pthread_mutex_lock(&s->lock);
	bool found = find_serial_locked(s, serial) != NULL;
	pthread_mutex_unlock(&s->lock);
	return found;
}

struct timespec snaps_created(struct snaps *s, uint64_t serial)
{
	struct timespec t = { 0 };
	pthread_mutex_lock(&s->lock);
	struct snap *e = find_serial_locked(s, serial);
	if (e)
		t = e->created;
	pthread_mutex_unlock(&s->lock);
	return t;
}

static int info_locked(const struct snap *e, struct text *out)
{
	int rc = text_adds(out, "{\n  \"id\": ");
	rc = rc ? rc : text_json_str(out, e->id);
	rc = rc ? rc : text_adds(out, ",\n  \"name\": ");
	rc = rc ? rc : text_json_str(out, e->name);
	rc = rc ? rc : text_adds(out, ",\n  \"state\": ");
	rc = rc ? rc : text_json_str(out, e->state);
	rc = rc ? rc : text_adds(out, ",\n  \"reason\": ");
	rc = rc ? rc : text_json_str(out, e->reason);
	rc = rc ? rc : text_adds(out, ",\n  \"message\": ");
	rc = rc ? rc : text_json_str(out, e->message);
	rc = rc ? rc : text_adds(out, ",\n  \"created_at\": ");
	rc = rc ? rc : text_json_time(out, e->created);
	/* the API says nothing of a snapshot's size */
	return rc ? rc : text_adds(out, ",\n  \"size\": null\n}\n");
}

int snaps_info_json(struct snaps *s, uint64_t serial, struct text *out)
{
	snaps_refresh(s, INFO_REFRESH_MS);
	pthread_mutex_lock(&s->lock);
	struct snap *e = find_serial_locked(s, serial);
	int rc = e ? info_locked(e, out) : -ENOENT;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- wait ---- */

/* The answer once @e has left Creating (and Deleting), into @out; false
 * while it has not. */
static bool wait_done_locked(const struct snap *e, struct text *out)
{
	if (strcmp(e->state, "Creating") == 0 ||
	    strcmp(e->state, "Deleting") == 0)
		return false;
	if (strcmp(e->state, "Failed") != 0) {
		text_printf(out, "%s\n", e->state);
		return true;
	}
	const char *why = e->message ? e->message :
			  e->reason  ? e->reason :
				       "the server gave no reason";
	text_printf(out, "Failed: %s\n", why);
	return true;
}

/* Asks the server for @serial's snapshot and updates it: 0, -ENOENT
 * (gone: dropped), or another error (logged once). */
static int wait_ask(struct snaps *s, uint64_t serial, bool *logged)
{
	struct osb_snapshot o = { 0 };
	struct osb_error err;
	char id[SNAP_DIR_MAX] = "";

	pthread_mutex_lock(&s->lock);
	struct snap *e = find_serial_locked(s, serial);
	if (e)
		memcpy(id, e->id, sizeof(id));
	pthread_mutex_unlock(&s->lock);
	if (!id[0])
		return -ENOENT;
	osb_error_clear(&err);
	int rc = osb_snapshot_get(s->fs->client, id, &o, &err);
	if (rc == -ENOENT)
		snaps_drop(s, id);
	if (rc && rc != -ENOENT && !*logged) {
		*logged = true;
		log_warn("snapshots: asking for %s failed (asked again): %s",
			 id, err.message[0] ? err.message : strerror(-rc));
	}
	if (rc)
		return rc;
	pthread_mutex_lock(&s->lock);
	e = find_serial_locked(s, serial);
	if (e)
		snap_take(e, &o);
	pthread_mutex_unlock(&s->lock);
	osb_snapshot_release(&o);
	return 0;
}

/* Sleeps @ms unless interrupted or stopped: false then. */
static bool wait_pause(struct snaps *s, fuse_req_t req, long ms)
{
	for (long t = 0; t < ms; t += WAIT_SLICE_MS) {
		if (atomic_load(&s->stop) || fuse_req_interrupted(req))
			return false;
		long slice = ms - t < WAIT_SLICE_MS ? ms - t : WAIT_SLICE_MS;
		usleep((useconds_t)slice * 1000);
	}
	return !atomic_load(&s->stop) && !fuse_req_interrupted(req);
}

void snaps_wait(struct snaps *s, uint64_t serial, fuse_req_t req, size_t size,
		off_t off)
{
	struct text t = { 0 };
	long pause = WAIT_PAUSE_FIRST_MS;
	bool logged = false;
	int err = 0;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		struct snap *e = find_serial_locked(s, serial);
		bool done = e && wait_done_locked(e, &t);
		pthread_mutex_unlock(&s->lock);
		if (!e)
			err = ENOENT;
		if (!e || done)
			break;
		if (!wait_pause(s, req, pause)) {
			err = EINTR;
			break;
		}
		pause = pause + pause / 4 > WAIT_PAUSE_MAX_MS ?
				WAIT_PAUSE_MAX_MS :
				pause + pause / 4;
		if (wait_ask(s, serial, &logged) == -ENOENT) {
			err = ENOENT;
			break;
		}
	}
	if (err) {
		fuse_reply_err(req, err);
	} else {
		size_t from =
			off < 0 || (size_t)off > t.len ? t.len : (size_t)off;
		size_t n = t.len - from < size ? t.len - from : size;
		fuse_reply_buf(req, n ? t.s + from : NULL, n);
	}
	text_release(&t);
}

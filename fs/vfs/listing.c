/*
 * listing.c - directory listings: fetching them (one request at a time
 * per directory; who comes meanwhile waits for it) and applying them to
 * the node table, which then answers every child's lookup and getattr.
 *
 * One listing covers a directory's whole subtree when that is small
 * enough (WALK_MAX entries). Its entries come depth first, so every
 * directory whose entries all came gets a listing of its own from it: a
 * walk of a tree (find, ls -lR, git status, grep -r) costs one request,
 * not one per directory. A subtree too big for that (the answer was cut)
 * is remembered as such and listed one level at a time from then on;
 * what the cut answer held still serves its subdirectories.
 *
 * A change this mount makes under a directory while its listing is on
 * the way (dir_changed) wins: the listing is used once (for the readdir
 * that asked) but not kept, and attributes it brings for that
 * directory's children are not taken. A name changed here after the
 * asking (made, moved here or away, removed, uploaded to: its node's
 * change_gen) is shown as this mount knows it, in that one use too,
 * whatever the answer says of it or below it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "ops.h"
#include "special.h"
#include "watch.h"
#include "xattr.h"

/* The levels one listing asks for, and the entries it takes at most. */
#define WALK_DEPTH 32
#define WALK_MAX 20000

/* A directory on the path of the entry being applied. */
struct level {
	struct node *n;
	const char *name; /* its name in the entry's path */
	size_t name_len;
	bool complete; /* its entries all came: it gets a listing */
	bool raced;    /* it, or one above it, changed meanwhile */
};

struct walk {
	struct osbfs *fs;
	uint64_t seq;  /* the node table's change_seq when asked */
	uint64_t mark; /* the cache's mark when asked (cache_mark) */
	long long asked, now;
	int depth;        /* levels the answer covers */
	const char *last; /* a cut answer's last entry, else NULL */
	bool ours;        /* not asked: every child known stays */
	size_t bad;
	struct level lv[WALK_DEPTH + 1];
	struct node **done; /* directories given a listing */
	size_t ndone, done_cap;
	struct special_ask ask; /* entries whose special bits it cannot say */
};

static bool raced(const struct walk *w, const struct node *d)
{
	return d->change_gen > w->seq;
}

/* Starts @d's new listing (nodes lock held). */
static int begin(struct walk *w, struct node *d)
{
	if (w->ndone == w->done_cap) {
		size_t cap = w->done_cap ? w->done_cap * 2 : 16;
		struct node **a = realloc(w->done, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		w->done = a;
		w->done_cap = cap;
	}
	w->done[w->ndone++] = d;
	d->list_gen++;
	d->list_ours = false;
	d->listed_at = w->asked;
	d->list_count = 0;
	return 0;
}

struct kept {
	struct walk *w;
	struct node *d;
};

/* Whether @name of the listed directory is in its listing, or as a change
 * of ours made it (nodes lock held). */
static bool still_listed(const char *name, void *arg)
{
	struct kept *k = arg;
	struct node *c = node_child(&k->w->fs->nodes, k->d, name);
	return c && (c->listed_gen == k->d->list_gen || raced(k->w, c));
}

/* The extended attributes of @d's children that its listing did not have
 * go, also of names no node stands for (kept from an earlier mount). */
static void xattrs_listed(struct walk *w, struct node *d)
{
	struct osbfs *fs = w->fs;
	if (w->ours || xattrs_empty(fs->xattrs))
		return;
	char *path = node_path(&fs->nodes, d);
	struct kept k = { w, d };
	if (path)
		xattrs_keep_listed(fs->xattrs, path, still_listed, &k);
	free(path);
}

/* Ends @d's listing: children it did not have are gone (nodes lock). */
static void finish(struct walk *w, struct node *d)
{
	struct osbfs *fs = w->fs;
	bool r = raced(w, d);
	for (struct node *c = d->child_first; c; c = c->sib_next) {
		if (c->listed_gen == d->list_gen)
			continue;
		if (node_has_local(fs, c) || c->link_later ||
		    (w->ours && c->attr_valid)) {
			/* not uploaded yet (a link too), or not asked (a
			 * directory of ours) */
			c->listed_gen = d->list_gen;
			d->list_count++;
		} else if (raced(w, c)) {
			/* made, moved, removed or uploaded here after the
			 * asking, whatever the answer said: there if we
			 * know it so */
			if (c->attr_valid) {
				c->listed_gen = d->list_gen;
				d->list_count++;
			}
		} else if (!r) {
			c->attr_valid = false;
			c->neg_expiry = w->now + fs->opt->negative_timeout_ms;
		}
	}
	if (!r)
		xattrs_listed(w, d);
	/* a change of ours raced the listing: use it once, keep it not */
	d->list_valid = !r;
	d->list_expiry = w->now + fs->opt->dir_timeout_ms;
	d->neg_expiry = 0;
}

/* Whether directory @rel (a path below the listed one) had all its
 * entries in the answer: not if the answer was cut on its way. */
static bool all_came(const struct walk *w, const char *rel)
{
	return !w->last ||
	       (strcmp(w->last, rel) != 0 && !path_below(rel, w->last));
}

/* What the sandbox says of child @c, unless local data holds it or a
 * change of ours to it (an upload that landed) came after the asking
 * (nodes lock held). */
static int take_attr(struct walk *w, struct node *c, const struct fattr *a)
{
	if (node_has_local(w->fs, c) || raced(w, c))
		return 0;
	if (c->link_target && (a->type != OSB_SYMLINK ||
			       a->size != (int64_t)strlen(c->link_target) ||
			       a->mtime.tv_sec != c->attr.mtime.tv_sec ||
			       a->mtime.tv_nsec != c->attr.mtime.tv_nsec)) {
		/* another link now: its target is to be read again */
		free(c->link_target);
		c->link_target = NULL;
	}
	struct fattr m = *a;
	int rc = 0;
	if (!special_take(c, &m, w->seq))
		rc = special_ask_add(&w->fs->nodes, &w->ask, c, &m);
	node_set_attr(c, &m, w->now + w->fs->opt->attr_timeout_ms);
	if (c->cf && m.type == OSB_FILE)
		cache_confirm(w->fs->cache, c->cf, &m, w->mark);
	return rc;
}

/*
 * Applies entry @e (its name: the path below the listed directory) with
 * the directories on its way in w->lv (nodes lock held). A name no file
 * can have, or one whose directory was not applied, is skipped.
 */
static int apply(struct walk *w, const struct rdent *e)
{
	struct osbfs *fs = w->fs;
	const char *rel = e->name;
	int m = 0;
	size_t off[WALK_DEPTH + 1];

	/* a hostile sandbox can list any name: one the kernel refuses ("",
	 * or "/" in it), takes for another (".", "..", one cut at a NUL),
	 * or that would give a node a path outside its directory, is not
	 * shown */
	if (e->name_len != strlen(rel))
		goto bad;
	for (size_t i = 0;; m++) {
		if (m == w->depth)
			goto bad;
		off[m] = i;
		const char *slash = strchr(rel + i, '/');
		size_t len =
			slash ? (size_t)(slash - rel - i) : strlen(rel + i);
		char name[256];
		if (len == 0 || len > 255)
			goto bad;
		memcpy(name, rel + i, len);
		name[len] = '\0';
		if (name_valid(name))
			goto bad;
		if (!slash)
			break;
		i += len + 1;
	}
	/* m: the entry's level below the listed directory, from 0; its
	 * directories must be the ones applied last on each level */
	for (int j = 1; j <= m; j++) {
		size_t len = off[j] - off[j - 1] - 1;
		if (!w->lv[j].n || w->lv[j].name_len != len ||
		    memcmp(w->lv[j].name, rel + off[j - 1], len) != 0)
			return 0; /* below something not shown */
	}
	const char *name = rel + off[m];
	struct level *up = &w->lv[m];
	if (m == 0 && up->n == fs->nodes.root &&
	    strcmp(name, fs->opt->control_dir) == 0)
		return 0; /* the control tree hides a real one */
	struct node *c = node_child_get(&fs->nodes, up->n, name);
	if (!c)
		return -ENOMEM;
	/* a name this mount changed after the asking (made, moved here
	 * or away, removed, uploaded to) is as we know it, not as the
	 * answer says (finish()); nor is what the answer has below it */
	bool ours = raced(w, c);
	if (up->complete && !ours) {
		c->listed_gen = up->n->list_gen;
		up->n->list_count++;
	}
	int rc = up->raced ? 0 : take_attr(w, c, &e->attr);
	if (rc)
		return rc;
	/* a directory whose entries come next */
	struct level *lv = &w->lv[m + 1];
	memset(lv, 0, sizeof(*lv) * (size_t)(w->depth - m));
	if (e->attr.type != OSB_DIR || m + 1 >= w->depth || ours)
		return 0;
	lv->n = c;
	lv->name = name;
	lv->name_len = strlen(name);
	lv->raced = up->raced;
	lv->complete = !lv->raced && all_came(w, rel);
	return lv->complete ? begin(w, c) : 0;
bad:
	w->bad++;
	return 0;
}

/*
 * Fetches @h's listing, @depth levels deep, and applies it. -EAGAIN when
 * the answer was cut: the subdirectories it completed have their
 * listings, @h has not.
 */
static int fetch(struct osbfs *fs, struct held *h, int depth)
{
	struct rdent *ents = NULL;
	size_t n = 0;
	bool cut = false;
	struct node *d = h->n;
	struct walk w = { .fs = fs, .asked = mono_ms() };

	pthread_mutex_lock(&fs->nodes.lock);
	w.seq = fs->nodes.change_seq;
	/* made here and not sent yet: what is here is all there is (its
	 * files are ours), nothing to ask, unless listings are not to be
	 * cached at all (someone else may write into it meanwhile) */
	bool ours = fs->opt->dir_timeout_ms > 0 && d->list_ours && d->cf &&
		    cache_only_local(fs->cache, d->cf);
	pthread_mutex_unlock(&fs->nodes.lock);
	w.mark = cache_mark(fs->cache);

	int rc =
		ours ? 0 :
		       remote_walk(fs, h->path, depth, depth > 1 ? WALK_MAX : 0,
				   &ents, &n, &cut, &w.depth);
	if (ours)
		w.depth = 1;
	w.ours = ours;
	if (rc && watch_away(fs)) {
		pthread_mutex_lock(&fs->nodes.lock);
		bool listed_before = d->list_gen != 0;
		pthread_mutex_unlock(&fs->nodes.lock);
		/* the server is away: the last listing is the best there is */
		if (listed_before)
			return 0;
	}
	if (rc == -ENOENT) {
		pthread_mutex_lock(&fs->nodes.lock);
		ours = d->cf && cache_only_local(fs->cache, d->cf);
		pthread_mutex_unlock(&fs->nodes.lock);
		if (ours)
			rc = 0; /* not in the sandbox yet: what is here is all
				 */
		w.ours = ours;
	}
	if (rc) {
		if (rc == -ENOENT) {
			pthread_mutex_lock(&fs->nodes.lock);
			if (!raced(&w, d) && d != fs->nodes.root) {
				node_set_negative(
					d,
					w.asked + fs->opt->negative_timeout_ms);
				xattr_name_gone(fs, d);
			}
			pthread_mutex_unlock(&fs->nodes.lock);
		}
		return rc;
	}

	w.now = mono_ms();
	w.last = cut && n ? ents[n - 1].name : NULL;
	pthread_mutex_lock(&fs->nodes.lock);
	w.lv[0] = (struct level){ .n = d,
				  .raced = raced(&w, d),
				  .complete = !cut };
	if (cut)
		d->walk_cut = true; /* too big: one level at a time */
	if (!cut)
		rc = begin(&w, d);
	for (size_t i = 0; !rc && i < n; i++)
		rc = apply(&w, &ents[i]);
	for (size_t i = 0; i < w.ndone; i++)
		finish(&w, w.done[i]);
	if (ours)
		d->list_ours = true;
	pthread_mutex_unlock(&fs->nodes.lock);
	/* the special bits the listing could not say: one command for all */
	special_ask_run(fs, h, w.depth, &w.ask);
	free(w.done);
	rdent_array_free(ents, n);
	if (w.bad)
		log_warn("listing of %s: skipped %zu names no file can have "
			 "(empty, \".\", \"..\", holding \"/\" or NUL, over "
			 "255 bytes, or not UTF-8)",
			 h->path, w.bad);
	return rc ? rc : cut ? -EAGAIN : 0;
}

int dir_refresh(struct osbfs *fs, struct held *h, long long since)
{
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *d = h->n;
	/* one listing of a directory at a time: who comes while it is
	 * fetched waits for it (parallel ls, find beside an editor), which
	 * saves the requests and the memory of the copies */
	for (;;) {
		long long now = mono_ms();
		bool good = since < 0 ? node_list_fresh(&fs->nodes, d, now) :
					d->listed_at >= since;
		if (d->list_valid && good) {
			pthread_mutex_unlock(&fs->nodes.lock);
			return 0;
		}
		if (!d->listing)
			break;
		pthread_cond_wait(&fs->nodes.listed, &fs->nodes.lock);
	}
	d->listing = true;
	bool deep = !d->walk_cut;
	pthread_mutex_unlock(&fs->nodes.lock);

	int rc = fetch(fs, h, deep ? WALK_DEPTH : 1);
	if (rc == -EAGAIN)
		rc = fetch(fs, h, 1);

	pthread_mutex_lock(&fs->nodes.lock);
	d->listing = false;
	pthread_cond_broadcast(&fs->nodes.listed);
	pthread_mutex_unlock(&fs->nodes.lock);
	return rc;
}

int dir_load(struct osbfs *fs, struct held *h)
{
	return dir_refresh(fs, h, -1);
}

void dir_changed(struct osbfs *fs, struct node *parent, struct node *child)
{
	parent->change_gen = ++fs->nodes.change_seq;
	if (child)
		child->change_gen = parent->change_gen;
	special_touched(fs, parent);
	/* a name came or went: the directory changed now, as the sandbox
	 * will say when asked (make and editors look at its mtime) */
	clock_gettime(CLOCK_REALTIME, &parent->attr.mtime);
	parent->attr.ctime = parent->attr.mtime;
	parent->changed_here = parent->attr.mtime;
	/* that is its latest change: a ctime kept for an earlier one of
	 * ours (a chmod, a setting of its times) no longer is (node.h) */
	parent->ctime_here = (struct timespec){ 0, 0 };
	parent->ctime_ours = (struct timespec){ 0, 0 };
	/* as on a disk, a name made or removed after the user set its
	 * times moves them: times still waiting to go no longer do */
	parent->times_seq++;
	if (parent->times_pending) {
		parent->times_pending = false;
		fs->pending_dir_times--;
	}
	if (child) {
		if (child->listed_gen != parent->list_gen)
			parent->list_count++;
		child->listed_gen = parent->list_gen;
		child->neg_expiry = 0;
	} else if (parent->list_count) {
		parent->list_count--;
	}
}

void dir_name_gone(struct osbfs *fs, struct node *parent, const char *name)
{
	struct node *g = node_child_get(&fs->nodes, parent, name);
	if (!g)
		return;
	/* and an answer asked for before does not bring it back */
	g->change_gen = parent->change_gen;
	if (!g->nlookup && !g->refs)
		node_set_negative(g, mono_ms() + fs->opt->negative_timeout_ms);
}

/*
 * node.c - the inode table (see node.h): two hash tables (by inode number;
 * by parent and name) over a tree of nodes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node.h"

long long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cond_deadline(struct timespec *ts, long long ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void mono_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static size_t hash_ino(uint64_t ino, size_t buckets)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ULL) >> 17) & (buckets - 1);
}

static size_t hash_name(uint64_t parent, const char *name, size_t buckets)
{
	uint64_t h = 1469598103934665603ULL ^ parent;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h ^= *p;
		h *= 1099511628211ULL;
	}
	return (size_t)(h ^ (h >> 29)) & (buckets - 1);
}

static int grow(struct node_table *nt)
{
	size_t nb = nt->ino_buckets * 2;
	struct node **by_ino = calloc(nb, sizeof(*by_ino));
	struct node **by_name = calloc(nb, sizeof(*by_name));
	if (!by_ino || !by_name) {
		free(by_ino);
		free(by_name);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nt->ino_buckets; i++) {
		struct node *n = nt->by_ino[i], *next;
		for (; n; n = next) {
			next = n->ino_next;
			size_t h = hash_ino(n->ino, nb);
			n->ino_next = by_ino[h];
			by_ino[h] = n;
		}
		n = nt->by_name[i];
		for (; n; n = next) {
			next = n->name_next;
			size_t h = hash_name(n->parent->ino, n->name, nb);
			n->name_next = by_name[h];
			by_name[h] = n;
		}
	}
	free(nt->by_ino);
	free(nt->by_name);
	nt->by_ino = by_ino;
	nt->by_name = by_name;
	nt->ino_buckets = nt->name_buckets = nb;
	return 0;
}

static void ino_insert(struct node_table *nt, struct node *n)
{
	size_t h = hash_ino(n->ino, nt->ino_buckets);
	n->ino_next = nt->by_ino[h];
	nt->by_ino[h] = n;
}

static void ino_remove(struct node_table *nt, struct node *n)
{
	struct node **pp = &nt->by_ino[hash_ino(n->ino, nt->ino_buckets)];
	for (; *pp; pp = &(*pp)->ino_next) {
		if (*pp == n) {
			*pp = n->ino_next;
			return;
		}
	}
}

static void name_insert(struct node_table *nt, struct node *n)
{
	size_t h = hash_name(n->parent->ino, n->name, nt->name_buckets);
	n->name_next = nt->by_name[h];
	nt->by_name[h] = n;
	/* and into the parent's list of children */
	n->sib_prev = NULL;
	n->sib_next = n->parent->child_first;
	if (n->sib_next)
		n->sib_next->sib_prev = n;
	n->parent->child_first = n;
}

static void name_remove(struct node_table *nt, struct node *n)
{
	struct node **pp = &nt->by_name[hash_name(n->parent->ino, n->name,
						  nt->name_buckets)];
	for (; *pp; pp = &(*pp)->name_next) {
		if (*pp == n) {
			*pp = n->name_next;
			break;
		}
	}
	if (n->sib_prev)
		n->sib_prev->sib_next = n->sib_next;
	else
		n->parent->child_first = n->sib_next;
	if (n->sib_next)
		n->sib_next->sib_prev = n->sib_prev;
	n->sib_next = n->sib_prev = NULL;
}

int node_table_init(struct node_table *nt, const char *root_path)
{
	memset(nt, 0, sizeof(*nt));
	pthread_mutex_init(&nt->lock, NULL);
	pthread_cond_init(&nt->listed, NULL);
	nt->ino_buckets = nt->name_buckets = 1024;
	nt->by_ino = calloc(nt->ino_buckets, sizeof(*nt->by_ino));
	nt->by_name = calloc(nt->name_buckets, sizeof(*nt->by_name));
	nt->root = calloc(1, sizeof(*nt->root));
	if (!nt->by_ino || !nt->by_name || !nt->root)
		return -ENOMEM;
	nt->root->ino = NODE_ROOT_INO;
	nt->root->name = strdup(root_path);
	nt->root->nlookup = 1;
	nt->root->refs = 1;
	if (!nt->root->name)
		return -ENOMEM;
	nt->next_ino = NODE_ROOT_INO + 1;
	ino_insert(nt, nt->root);
	nt->count = 1;
	return 0;
}

struct node *node_file(struct node *n)
{
	return n->link_to ? n->link_to : n;
}

void node_link_add(struct node *n, struct node *alias)
{
	n = node_file(n);
	alias->link_to = n;
	alias->link_next = n->links;
	n->links = alias;
}

struct node *node_link_heir(const struct node *n)
{
	return n->links;
}

/* @alias is no longer a name of its file: a link still to make in the
 * sandbox is not to be made (said to @nt's on_link_gone; @nt NULL: the
 * table is being freed, and what is still to make stays so). */
static void link_drop(struct node_table *nt, struct node *alias)
{
	if (!alias->link_to)
		return;
	if (nt && alias->link_later && nt->on_link_gone)
		nt->on_link_gone(alias, nt->on_free_arg);
	struct node **pp = &alias->link_to->links;
	while (*pp && *pp != alias)
		pp = &(*pp)->link_next;
	if (*pp)
		*pp = alias->link_next;
	alias->link_to = NULL;
	alias->link_next = NULL;
	alias->link_later = false;
	alias->link_seen = false;
}

void node_link_break(struct node_table *nt, struct node *alias)
{
	link_drop(nt, alias);
}

/* @n's name goes, and it has others: it takes the first one's place
 * (its inode, content and handles stay), and that name's node goes. */
static void link_inherit(struct node_table *nt, struct node *n)
{
	struct node *heir = n->links;
	struct node *parent = heir->parent;
	link_drop(nt, heir);
	name_remove(nt, heir);
	name_remove(nt, n);
	/* the names are swapped: the heir, gone, keeps one to log */
	char *name = heir->name;
	heir->name = n->name;
	heir->parent = NULL;
	heir->unlinked = true;
	heir->attr_valid = false;
	n->name = name;
	n->parent = parent;
	name_insert(nt, n);
	n->listed_gen = heir->listed_gen;
	node_maybe_free(nt, heir);
}

static void node_free(struct node_table *nt, struct node *n)
{
	if (n->link_to)
		link_drop(NULL, n);
	while (n->links)
		link_drop(NULL, n->links);
	if (nt->on_free)
		nt->on_free(n, nt->on_free_arg);
	free(n->name);
	free(n->link_target);
	free(n);
}

void node_table_release(struct node_table *nt)
{
	for (size_t i = 0; nt->by_ino && i < nt->ino_buckets; i++) {
		struct node *n = nt->by_ino[i], *next;
		for (; n; n = next) {
			next = n->ino_next;
			node_free(nt, n);
		}
	}
	free(nt->by_ino);
	free(nt->by_name);
	pthread_mutex_destroy(&nt->lock);
	pthread_cond_destroy(&nt->listed);
	memset(nt, 0, sizeof(*nt));
}

struct node *node_by_ino(struct node_table *nt, uint64_t ino)
{
	struct node *n = nt->by_ino[hash_ino(ino, nt->ino_buckets)];
	for (; n; n = n->ino_next)
		if (n->ino == ino)
			return n;
	return NULL;
}

struct node *node_child(struct node_table *nt, struct node *parent,
			const char *name)
{
	struct node *n =
		nt->by_name[hash_name(parent->ino, name, nt->name_buckets)];
	for (; n; n = n->name_next)
		if (n->parent == parent && strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

struct node *node_child_get(struct node_table *nt, struct node *parent,
			    const char *name)
{
	struct node *n = node_child(nt, parent, name);
	if (n)
		return n;
	if (nt->count >= nt->ino_buckets * 2 && grow(nt))
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->name = strdup(name);
	if (!n->name) {
		free(n);
		return NULL;
	}
	n->ino = nt->next_ino++;
	n->parent = parent;
	ino_insert(nt, n);
	name_insert(nt, n);
	nt->count++;
	return n;
}

void node_unlink(struct node_table *nt, struct node *n)
{
	/* stale children (negative entries, forgotten names) go too; each
	 * leaves the list as it goes (the analyzer loses that track) */
	while (n->child_first)
		/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
		node_unlink(nt, n->child_first);
	if (!n->parent)
		return;
	if (n->link_to)
		link_drop(nt, n);
	if (n->links && n->links->parent) {
		link_inherit(nt, n);
		return;
	}
	name_remove(nt, n);
	n->parent = NULL;
	n->unlinked = true;
	n->attr_valid = false;
	node_maybe_free(nt, n);
}

int node_move(struct node_table *nt, struct node *n, struct node *parent,
	      const char *name)
{
	char *copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	struct node *old = node_child(nt, parent, name);
	if (old && old != n) {
		/* our reference keeps it through the unlink (the analyzer
		 * loses track of refs in the recursion) */
		node_ref(old);
		node_unlink(nt, old);
		node_unref(nt, old); /* NOLINT(clang-analyzer-unix.Malloc) */
	}
	if (n->parent)
		name_remove(nt, n);
	free(n->name);
	n->name = copy;
	n->parent = parent;
	n->unlinked = false;
	name_insert(nt, n);
	n->listed_gen = parent->list_gen;
	return 0;
}

void node_maybe_free(struct node_table *nt, struct node *n)
{
	if (n == nt->root || n->parent || n->nlookup || n->refs ||
	    n->child_first)
		return;
	ino_remove(nt, n);
	nt->count--;
	node_free(nt, n);
}

void node_ref(struct node *n)
{
	n->refs++;
}

void node_unref(struct node_table *nt, struct node *n)
{
	if (n->refs)
		n->refs--;
	node_maybe_free(nt, n);
}

char *node_path(struct node_table *nt, const struct node *n)
{
	size_t len = 0;
	const struct node *p;

	for (p = n; p && p != nt->root; p = p->parent) {
		if (!p->parent)
			return NULL; /* unlinked somewhere on the way */
		len += strlen(p->name) + 1;
	}
	if (!p)
		return NULL;
	size_t rlen = strlen(nt->root->name);
	bool slash_root = rlen == 1; /* "/" */
	char *out = malloc(rlen + len + 1);
	if (!out)
		return NULL;
	size_t pos = (slash_root ? 0 : rlen) + len;
	out[pos] = '\0';
	for (p = n; p != nt->root; p = p->parent) {
		size_t l = strlen(p->name);
		pos -= l;
		memcpy(out + pos, p->name, l);
		out[--pos] = '/';
	}
	if (!slash_root)
		memcpy(out, nt->root->name, rlen);
	else if (n == nt->root)
		memcpy(out, "/", 2);
	return out;
}

char *node_child_path(struct node_table *nt, const struct node *parent,
		      const char *name)
{
	char *pp = node_path(nt, parent);
	if (!pp)
		return NULL;
	size_t a = strlen(pp), b = strlen(name);
	bool slash = a == 1 && pp[0] == '/';
	char *out = malloc(a + b + 2);
	if (out) {
		memcpy(out, pp, a);
		size_t pos = a;
		if (!slash)
			out[pos++] = '/';
		memcpy(out + pos, name, b);
		out[pos + b] = '\0';
	}
	free(pp);
	return out;
}

bool node_is_below(const struct node *n, const struct node *anc)
{
	for (; n; n = n->parent)
		if (n == anc)
			return true;
	return false;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static bool ts_known(const struct timespec *t)
{
	return t->tv_sec || t->tv_nsec;
}

static bool ts_same(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* The smallest time after @t. */
static struct timespec ts_next(struct timespec t)
{
	if (++t.tv_nsec == 1000000000L) {
		t.tv_sec++;
		t.tv_nsec = 0;
	}
	return t;
}

/* An answer of the sandbox says @n's ctime is @ctime: the ctime of our
 * latest change is shown as long as that is the one the change left. */
static void ctime_answered(struct node *n, const struct timespec *ctime)
{
	if (!ts_known(&n->ctime_here) || !ts_known(ctime))
		return;
	if (!ts_known(&n->ctime_ours)) {
		/* the first answer asked after our change (node.h) */
		n->ctime_ours = *ctime;
	} else if (!ts_same(ctime, &n->ctime_ours)) {
		/* changed since by someone else: theirs is shown, and never
		 * as earlier than ours (the sandbox's clock is not ours) */
		if (ts_before(&n->ctime_here, ctime)) {
			n->ctime_here = (struct timespec){ 0, 0 };
		} else {
			n->ctime_here = ts_next(n->ctime_here);
			n->ctime_ours = *ctime;
		}
	}
}

void node_set_attr(struct node *n, const struct fattr *a, long long expiry)
{
	ctime_answered(n, &a->ctime);
	n->attr = *a;
	if (a->type == OSB_DIR && n->changed_here.tv_sec) {
		/* a name came or went here and the sandbox has not changed
		 * the directory since (its ctime is older, or was moved by
		 * a setting of its times begun before, which may land after
		 * the name came): what it will say once it has is later
		 * still (ARCHITECTURE.md) */
		bool ours = n->times_going ||
			    ts_before(&a->ctime, &n->changed_here) ||
			    ts_same(&a->ctime, &n->times_ctime);
		if (ours && ts_before(&a->mtime, &n->changed_here)) {
			n->attr.mtime = n->changed_here;
			n->attr.ctime = n->changed_here;
		} else {
			n->changed_here = (struct timespec){ 0, 0 };
		}
	}
	n->attr_valid = true;
	n->attr_expiry = expiry;
	n->neg_expiry = 0;
}

struct timespec node_ctime(const struct node *n)
{
	const struct timespec *sb = &n->attr.ctime;
	if (ts_known(&n->ctime_here) &&
	    (!ts_known(sb) || !ts_known(&n->ctime_ours) ||
	     ts_same(sb, &n->ctime_ours)))
		return n->ctime_here;
	return ts_known(sb) ? *sb : n->attr.mtime;
}

struct timespec node_ctime_local(const struct node *n,
				 const struct timespec *local)
{
	struct timespec shown = node_ctime(n);
	return ts_before(&shown, local) ? *local : shown;
}

void node_ctime_set(struct node *n, const struct timespec *ctime)
{
	struct timespec before = node_ctime(n), now;
	clock_gettime(CLOCK_REALTIME, &now);
	n->ctime_here = ts_before(&before, &now) ? now : ts_next(before);
	n->ctime_ours = *ctime;
	n->attr.ctime = *ctime;
}

void node_ctime_landed(struct node *n, const struct timespec *local,
		       const struct timespec *ctime)
{
	n->ctime_here = node_ctime_local(n, local);
	n->ctime_ours = *ctime;
}

void node_times_sent(struct node *n)
{
	n->times_going = true;
}

void node_times_done(struct node *n, const struct timespec *ctime)
{
	n->times_going = false;
	n->times_ctime = ctime ? *ctime : (struct timespec){ 0, 0 };
}

void node_set_negative(struct node *n, long long expiry)
{
	n->attr_valid = false;
	n->neg_expiry = expiry;
	n->list_valid = false;
}

bool node_feed_live(const struct node_table *nt, long long now)
{
	return nt->feed_since && now - nt->feed_seen <= nt->feed_grace_ms;
}

/* Knowledge of @n kept until @expiry for @ttl ms (so asked at expiry -
 * ttl) is held by the feed: asked after it went live and after it last
 * said @n changed, and the feed is live now. A timeout of 0 asks for no
 * caching at all: the feed, which reports a change a round later, holds
 * nothing then. */
static bool feed_holds(const struct node_table *nt, const struct node *n,
		       long long expiry, long ttl, long long now)
{
	long long asked = expiry - ttl;
	return ttl > 0 && node_feed_live(nt, now) && asked >= nt->feed_since &&
	       asked >= n->feed_mark;
}

bool node_attr_fresh(const struct node_table *nt, const struct node *n,
		     long long now)
{
	return n->attr_valid &&
	       (now < n->attr_expiry ||
		feed_holds(nt, n, n->attr_expiry, nt->attr_ms, now));
}

bool node_negative(const struct node_table *nt, const struct node *n,
		   long long now)
{
	return n->neg_expiry &&
	       (now < n->neg_expiry ||
		feed_holds(nt, n, n->neg_expiry, nt->neg_ms, now));
}

bool node_list_fresh(const struct node_table *nt, const struct node *n,
		     long long now)
{
	return n->list_valid &&
	       (now < n->list_expiry ||
		feed_holds(nt, n, n->list_expiry, nt->list_ms, now));
}

void node_invalidate(struct node *n)
{
	n->attr_expiry = 0;
	n->list_valid = false;
	n->neg_expiry = 0;
	free(n->link_target);
	n->link_target = NULL;
	if (n->special_state == SPECIAL_OURS)
		n->special_state = SPECIAL_UNKNOWN;
}

void node_for_each(struct node_table *nt, void (*fn)(struct node *n, void *arg),
		   void *arg)
{
	for (size_t i = 0; i < nt->ino_buckets; i++)
		for (struct node *n = nt->by_ino[i]; n; n = n->ino_next)
			fn(n, arg);
}

static void invalidate_one(struct node *n, void *arg)
{
	(void)arg;
	node_invalidate(n);
}

void node_invalidate_all(struct node_table *nt)
{
	node_for_each(nt, invalidate_one, NULL);
}

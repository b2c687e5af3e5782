/*
 * changed.c - a change the sandbox reported (the change feed, feed.h):
 * what the mount knew of that name goes, in our caches and the kernel's.
 *
 * A path that names a node: its attributes (and a directory's listing)
 * go, and a directory's children's attributes and negative entries too,
 * since a name that left it is reported only as a change of the
 * directory. A path below a node the mount does not know further: that
 * node's listing goes (a name came there). The node's feed_mark keeps an
 * answer asked before the report from being held by the feed when it
 * lands after it (node.h).
 *
 * Most reports of a directory are the mount's own doing (it made or
 * removed a name there a moment before). So the feed says a directory's
 * names too, as a checksum; when the mount knows exactly those names,
 * only the directory's own attributes go: its listing, and its
 * children, which are reported by themselves when they change, stay,
 * and the listing counts as asked now (the feed reports what changes
 * after).
 */
#include <stdlib.h>
#include <string.h>

#include "changed.h"
#include "notify.h"
#include "ops.h"
#include "special.h"

/* @path relative to the mount's root ("" for the root), or NULL when it
 * is not below it. */
static const char *below_root(const char *root, const char *path)
{
	size_t rl = strlen(root);
	if (strcmp(root, "/") == 0)
		return path[0] == '/' ? path + 1 : NULL;
	if (strncmp(path, root, rl) != 0)
		return NULL;
	if (path[rl] == '\0')
		return path + rl;
	return path[rl] == '/' ? path + rl + 1 : NULL;
}

/* The deepest node on @rel's way from the root; *ret_whole says whether
 * it is @rel itself. Stops before a component holding @stop_at. */
static struct node *deepest(struct node_table *nt, const char *rel, int stop_at,
			    bool *ret_whole)
{
	struct node *n = nt->root;
	const char *p = rel;
	*ret_whole = false;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p) {
			*ret_whole = true;
			return n;
		}
		size_t len = strcspn(p, "/");
		if (len > 255 || memchr(p, stop_at, len))
			return n;
		char name[256];
		memcpy(name, p, len);
		name[len] = '\0';
		struct node *c = node_child(nt, n, name);
		if (!c || c->unlinked)
			return n;
		n = c;
		p += len;
	}
}

static uint32_t crc_byte(uint32_t crc, unsigned char b)
{
	crc ^= (uint32_t)b << 24;
	for (int i = 0; i < 8; i++)
		crc = crc & 0x80000000u ? (crc << 1) ^ 0x04C11DB7u : crc << 1;
	return crc;
}

struct names_sum names_sum_of(const char *const *names, size_t n)
{
	uint32_t crc = 0;
	uint64_t size = 0;
	for (size_t i = 0; i < n; i++) {
		for (const char *p = names[i]; *p; p++, size++)
			crc = crc_byte(crc, (unsigned char)*p);
		crc = crc_byte(crc, '\n');
		size++;
	}
	for (uint64_t len = size; len; len >>= 8)
		crc = crc_byte(crc, (unsigned char)(len & 0xff));
	return (struct names_sum){ ~crc, size };
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether directory @d's listing holds exactly the names @want says
 * (nodes lock held). */
static bool names_known(struct node_table *nt, struct node *d,
			const struct names_sum *want, long long now)
{
	if (!d->list_valid)
		return false;
	size_t n = 0, i = 0;
	for (struct node *c = d->child_first; c; c = c->sib_next)
		n++;
	const char **names = malloc((n ? n : 1) * sizeof(*names));
	if (!names)
		return false;
	for (struct node *c = d->child_first; c; c = c->sib_next)
		if (c->listed_gen == d->list_gen && !node_negative(nt, c, now))
			names[i++] = c->name;
	qsort(names, i, sizeof(*names), name_cmp);
	struct names_sum have = names_sum_of(names, i);
	free(names);
	return have.crc == want->crc && have.size == want->size;
}

static void drop_attr(struct node *n)
{
	n->attr_expiry = 0;
	n->neg_expiry = 0;
}

/* The kernel drops what it holds of @n. */
static void tell_kernel(struct osbfs *fs, struct node *n)
{
	if (n->nlookup)
		notify_inode(fs, n->ino);
}

static void drop_node(struct osbfs *fs, struct node *n, long long now)
{
	node_invalidate(n);
	n->feed_mark = now;
	tell_kernel(fs, n);
}

/* @n goes, and its children's attributes (a name that left a directory
 * is reported only as a change of the directory). */
static void drop_dir(struct osbfs *fs, struct node *n, long long now)
{
	drop_node(fs, n, now);
	for (struct node *c = n->child_first; c; c = c->sib_next)
		drop_attr(c);
}

/* A name came below @n, the deepest node the mount knows of a path. */
static void name_came(struct osbfs *fs, struct node *n, long long now)
{
	n->list_valid = false;
	n->feed_mark = now;
	tell_kernel(fs, n);
}

/* Every node below @top (not @top), pre-order by parent pointers. */
static struct node *next_below(struct node *n, struct node *top)
{
	if (n->child_first)
		return n->child_first;
	while (n != top && !n->sib_next)
		n = n->parent;
	return n == top ? NULL : n->sib_next;
}

void fs_feed_changed(struct osbfs *fs, const char *path, bool unsure)
{
	const char *rel = below_root(fs->root, path);
	if (!rel)
		return;
	long long now = mono_ms();
	bool whole;
	pthread_mutex_lock(&fs->nodes.lock);
	/* unsure: a name in it may have held a newline or a CR (the feed
	 * cannot tell them from \1): all below the part that is sure goes */
	struct node *n = deepest(&fs->nodes, rel, unsure ? '\1' : 0, &whole);
	if (unsure) {
		drop_node(fs, n, now);
		for (struct node *c = next_below(n, n); c; c = next_below(c, n))
			drop_node(fs, c, now);
	} else if (!whole) {
		name_came(fs, n, now);
	} else {
		drop_dir(fs, n, now); /* a file has no children */
	}
	pthread_mutex_unlock(&fs->nodes.lock);
}

/* The node @path names (nodes lock held), or NULL; a name below what the
 * mount knows makes the deepest node known lose its listing. */
static struct node *node_at(struct osbfs *fs, const char *path, long long now)
{
	const char *rel = below_root(fs->root, path);
	if (!rel)
		return NULL;
	bool whole;
	struct node *n = deepest(&fs->nodes, rel, 0, &whole);
	if (whole)
		return n;
	name_came(fs, n, now);
	return NULL;
}

/* (a directory's size is the sandbox's filesystem's business, and the
 * mount's own guess at it until it is asked) */
static bool same_attr(const struct fattr *x, const struct fattr *y)
{
	return x->type == y->type &&
	       (x->size == y->size || x->type == OSB_DIR) &&
	       (x->mode & 07777) == (y->mode & 07777) &&
	       x->mtime.tv_sec == y->mtime.tv_sec &&
	       x->mtime.tv_nsec == y->mtime.tv_nsec;
}

void fs_feed_attr(struct osbfs *fs, const char *path, bool unsure,
		  struct fattr *a, uint64_t since)
{
	if (unsure) {
		fs_feed_changed(fs, path, true);
		return;
	}
	uint64_t mark = cache_mark(fs->cache);
	long long now = mono_ms();
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *n = node_at(fs, path, now);
	if (n && n->link_seen && n->parent) {
		/* a name the sandbox linked to a file: whether it still is
		 * one is for the scan of the listing asked next to say */
		drop_attr(n);
		n->feed_mark = now;
		n->parent->list_valid = false;
		notify_entry(fs, n->parent->ino, n->name);
		pthread_mutex_unlock(&fs->nodes.lock);
		return;
	}
	if (n && n->cf)
		cache_base_report(fs->cache, n->cf, a, now);
	if (!n || node_has_local(fs, n)) {
		/* unknown here, or what is shown is ours until it lands */
		pthread_mutex_unlock(&fs->nodes.lock);
		return;
	}
	if (n->attr_valid && n->attr.type != a->type) {
		/* another kind of file under the same name */
		drop_dir(fs, n, now);
		pthread_mutex_unlock(&fs->nodes.lock);
		return;
	}
	bool same = n->attr_valid && same_attr(&n->attr, a);
	if (n->change_gen > since && !same) {
		/* ours, maybe landed after the report was made: asked again.
		 * A report that shows what this mount made (its size and
		 * mtime to the nanosecond) was made after it landed. */
		drop_attr(n);
		tell_kernel(fs, n);
		pthread_mutex_unlock(&fs->nodes.lock);
		return;
	}
	special_take(n, a, fs->nodes.change_seq);
	node_set_attr(n, a, now + fs->opt->attr_timeout_ms);
	bool stale = n->cf && cache_check_version(fs->cache, n->cf, a, mark);
	if (!same) {
		free(n->link_target);
		n->link_target = NULL;
		tell_kernel(fs, n);
	}
	fuse_ino_t ino = n->ino;
	pthread_mutex_unlock(&fs->nodes.lock);
	if (stale)
		tell_changed(fs, ino, path);
}

/* Whether this mount changed @d's own attributes after the table's
 * change_seq was @since, or is changing them (times being set): a
 * report may be older than that. */
static bool own_attr_change(const struct node *d, uint64_t since)
{
	return d->times_going || d->times_pending || d->own_gen > since;
}

void fs_feed_dir(struct osbfs *fs, const char *path, bool unsure,
		 const struct names_sum *names, struct fattr *a, uint64_t since)
{
	if (unsure) {
		fs_feed_changed(fs, path, true);
		return;
	}
	long long now = mono_ms();
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *n = node_at(fs, path, now);
	if (!n) {
		pthread_mutex_unlock(&fs->nodes.lock);
		return;
	}
	bool kind = !a || !n->attr_valid || n->attr.type == a->type;
	if (kind && names_known(&fs->nodes, n, names, now)) {
		/* the names the mount knows, and every change of them it
		 * made was in the sandbox when they were read, before its
		 * attributes were: the listing is as good as one asked now,
		 * and so are they unless it is changing them */
		n->list_expiry = now + fs->nodes.list_ms;
		n->list_ours = false; /* the sandbox's answer now */
		/* attributes that are what this mount made them were read
		 * after it made them */
		bool same = a && n->attr_valid && same_attr(&n->attr, a) &&
			    !n->times_going && !n->times_pending;
		if (node_has_local(fs, n)) {
			/* what is shown is ours until it lands */
		} else if (a && (same || !own_attr_change(n, since))) {
			special_take(n, a, fs->nodes.change_seq);
			node_set_attr(n, a, now + fs->opt->attr_timeout_ms);
		} else {
			drop_attr(n);
		}
		tell_kernel(fs, n);
	} else {
		drop_dir(fs, n, now);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
}

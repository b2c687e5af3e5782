/*
 * special.c - what the mount knows of setuid, setgid and sticky, and the
 * one command per listing that learns the sandbox's own (special.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hex.h"
#include "log.h"
#include "notify.h"
#include "ops.h"
#include "special.h"

#define SPECIAL_BITS (S_ISUID | S_ISGID | S_ISVTX)

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Only files and directories have special bits that mean anything here:
 * the rest always show none. */
static bool has_bits(const struct fattr *a)
{
	return a->type == OSB_FILE || a->type == OSB_DIR;
}

bool special_known(const struct node *n, const struct fattr *a, uint64_t asked)
{
	if (!has_bits(a) || a->mode_full)
		return true;
	if (n->special_state == SPECIAL_OURS)
		return asked < n->special_gen || mono_ms() <= n->special_until;
	return n->special_state == SPECIAL_KNOWN &&
	       same_time(&n->special_ctime, &a->ctime);
}

bool special_take(struct node *n, struct fattr *a, uint64_t asked)
{
	if (!has_bits(a) || a->mode_full) {
		n->special = has_bits(a) ? a->mode & SPECIAL_BITS : 0;
		n->special_state = SPECIAL_KNOWN;
		n->special_ctime = a->ctime;
		a->mode = (a->mode & 0777) | n->special;
		return true;
	}
	if (n->special_state == SPECIAL_OURS && asked >= n->special_gen) {
		/* the first report asked after our change: its ctime is
		 * the one our bits go with, unless it came so late that
		 * someone else may have changed the file meanwhile */
		bool soon = mono_ms() <= n->special_until;
		n->special_state = soon ? SPECIAL_KNOWN : SPECIAL_UNKNOWN;
		n->special_ctime = a->ctime;
		n->special_gen = 0;
	} else if (n->special_state == SPECIAL_KNOWN &&
		   !same_time(&n->special_ctime, &a->ctime)) {
		/* changed since: its bits may have too */
		n->special_state = SPECIAL_UNKNOWN;
		n->special_gen = 0;
	}
	a->mode = (a->mode & 0777) | n->special;
	return n->special_state != SPECIAL_UNKNOWN;
}

/* @n's bits are what this mount just made them: the first report asked
 * after @gen (a change_seq) says the ctime they go with. */
static void mark_ours(struct osbfs *fs, struct node *n, uint64_t gen)
{
	n->special_state = SPECIAL_OURS;
	n->special_gen = gen;
	n->special_until = mono_ms() + fs->opt->attr_timeout_ms;
}

void special_set(struct node *n, mode_t mode)
{
	n->special = mode & SPECIAL_BITS;
	n->attr.mode = (n->attr.mode & 0777) | n->special;
	n->special_state = SPECIAL_OURS; /* special_changed() says since when */
}

void special_changed(struct osbfs *fs, struct node *n,
		     const struct timespec *ctime)
{
	if (n->special_state == SPECIAL_UNKNOWN)
		return;
	if (ctime && (ctime->tv_sec || ctime->tv_nsec)) {
		n->special_state = SPECIAL_KNOWN;
		n->special_ctime = *ctime;
		n->special_gen = 0;
	} else {
		mark_ours(fs, n, n->change_gen);
	}
}

void special_seen(struct node *n, mode_t mode, const struct timespec *ctime)
{
	if (n->attr.type != OSB_FILE && n->attr.type != OSB_DIR)
		return;
	n->special = mode & SPECIAL_BITS;
	n->special_state = SPECIAL_KNOWN;
	n->special_ctime = *ctime;
	n->special_gen = 0;
	n->attr.mode = (n->attr.mode & 0777) | n->special;
}

void special_touched(struct osbfs *fs, struct node *n)
{
	if (n->special_state != SPECIAL_UNKNOWN)
		mark_ours(fs, n, ++fs->nodes.change_seq);
}

int special_ask_add(struct node_table *nt, struct special_ask *sa,
		    struct node *n, const struct fattr *a)
{
	if (!sa->id)
		sa->id = ++nt->change_seq;
	if (sa->count == sa->cap) {
		size_t cap = sa->cap ? sa->cap * 2 : 64;
		struct node **g = realloc(sa->n, cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
		sa->n = g;
		sa->cap = cap;
	}
	n->special_gen = sa->id;
	n->special_ctime = a->ctime; /* what the answer will go with */
	node_ref(n);
	sa->n[sa->count++] = n;
	return 0;
}

/* The node at @rel ("a/b") below @d, or NULL (nodes lock held). */
static struct node *node_below(struct node_table *nt, struct node *d,
			       const char *rel)
{
	char name[256];
	while (d && *rel) {
		size_t len = strcspn(rel, "/");
		if (len == 0 || len >= sizeof(name))
			return NULL;
		memcpy(name, rel, len);
		name[len] = '\0';
		d = node_child(nt, d, name);
		rel += len;
		if (*rel == '/')
			rel++;
	}
	return d;
}

void special_touched_dir_of(struct osbfs *fs, const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = !slash        ? NULL :
		    slash == path ? strdup("/") :
				    strndup(path, (size_t)(slash - path));
	const char *rel = !dir ? NULL :
			  strcmp(dir, fs->root) == 0 ?
				 "" :
				 path_below(fs->root, dir);
	pthread_mutex_lock(&fs->nodes.lock);
	struct node *d =
		rel ? node_below(&fs->nodes, fs->nodes.root, rel) : NULL;
	if (d)
		special_touched(fs, d);
	pthread_mutex_unlock(&fs->nodes.lock);
	free(dir);
}

/* Whether @n is still waiting for the scan @id. */
static bool asked_by(const struct node *n, uint64_t id)
{
	return n->special_state == SPECIAL_UNKNOWN && n->special_gen == id;
}

/* Whether the scan @id asked for @n and has its answer now (before
 * settle() makes it KNOWN). */
static bool answered(const struct node *n, uint64_t id)
{
	return n->special_state == SPECIAL_UNKNOWN &&
	       (n->special_gen == id || n->special_gen == ~0ull);
}

/* Whether @n is a name the kernel never had and nothing here holds: it
 * can become another name of a file (its own inode never given out). */
static bool fresh_name(const struct node *n)
{
	return n->parent && !n->nlookup && !n->cf && !n->links && !n->link_to &&
	       n->attr_valid && n->attr.type == OSB_FILE;
}

/*
 * The names of one file in the sandbox that the scan found (@found with
 * the same inode, a link count past 1): those the kernel never had become
 * other names of the first it had, or of the first found, so that they
 * show as one inode with its count, as links made here do. A name asked
 * that is another name of a file but was not found so (alone now, or of
 * another inode than its file) is a node of its own again.
 */
static void links_settle(struct osbfs *fs, struct special_ask *sa,
			 const struct rdent *found, size_t nfound,
			 struct node **nodes)
{
	struct node_table *nt = &fs->nodes;
	/* (@nodes[i]: the node of found[i], or NULL) */
	for (size_t i = 0; i < sa->count; i++) {
		struct node *n = sa->n[i];
		if (!n->link_to || n->link_later || !answered(n, sa->id))
			continue;
		size_t k = 0, kf = nfound;
		while (k < nfound && nodes[k] != n)
			k++;
		for (size_t j = 0; j < nfound; j++)
			if (nodes[j] == n->link_to)
				kf = j;
		if (k == nfound || !found[k].nlink ||
		    (kf < nfound && found[kf].ino != found[k].ino)) {
			node_link_break(nt, n);
			/* the kernel's entry has the file's inode */
			if (n->parent)
				notify_entry(fs, n->parent->ino, n->name);
		}
	}
	for (size_t i = 0; i < nfound; i++) {
		if (!found[i].nlink || !nodes[i])
			continue;
		/* the file: the first of its names that is not fresh */
		struct node *f = NULL;
		for (size_t j = i; j < nfound && !f; j++)
			if (found[j].nlink && found[j].ino == found[i].ino &&
			    nodes[j] && !fresh_name(nodes[j]))
				f = node_file(nodes[j]);
		if (!f)
			f = nodes[i];
		for (size_t j = i; j < nfound; j++) {
			struct node *m = nodes[j];
			if (!found[j].nlink || found[j].ino != found[i].ino)
				continue;
			if (m && m != f && fresh_name(m)) {
				node_link_add(f, m);
				m->link_seen = true;
			}
			nodes[j] = NULL; /* its group is done */
		}
	}
}

/* Gives @sa's nodes what the scan found (@found: paths below @d, with
 * their special bits), none to the others (nodes lock held). */
static void settle(struct osbfs *fs, struct special_ask *sa, struct node *d,
		   const struct rdent *found, size_t nfound)
{
	struct node_table *nt = &fs->nodes;
	struct node **nodes = calloc(nfound ? nfound : 1, sizeof(*nodes));
	for (size_t i = 0; i < nfound; i++) {
		struct node *n = node_below(nt, d, found[i].name);
		if (nodes)
			nodes[i] = n;
		if (n && asked_by(n, sa->id)) {
			n->special = found[i].attr.mode & SPECIAL_BITS;
			n->special_gen = ~0ull; /* found: keep it */
		}
	}
	if (nodes)
		links_settle(fs, sa, found, nfound, nodes);
	free(nodes);
	for (size_t i = 0; i < sa->count; i++) {
		struct node *n = sa->n[i];
		bool named = n->special_state == SPECIAL_UNKNOWN &&
			     n->special_gen == ~0ull;
		if (!named && !asked_by(n, sa->id))
			continue; /* learned or set meanwhile */
		if (!named)
			n->special = 0;
		n->special_state = SPECIAL_KNOWN;
		if (same_time(&n->attr.ctime, &n->special_ctime))
			n->attr.mode = (n->attr.mode & 0777) | n->special;
	}
}

/*
 * The root's special bits outlive the mount in the slot's file ROOT_FILE
 * ("<ctime> <octal bits> <hex path>"): a remount whose root still has that
 * ctime knows them without a command (a remount sends none otherwise).
 */
#define ROOT_FILE "root-mode"

void special_root_load(struct osbfs *fs)
{
	char *path = NULL, hex[8200];
	long long sec;
	long nsec;
	unsigned bits;
	if (asprintf(&path, "%s/" ROOT_FILE, cache_dir(fs->cache)) < 0)
		return;
	FILE *f = fopen(path, "re");
	free(path);
	if (!f)
		return;
	bool ok =
		fscanf(f, "%lld.%ld %o %8199s", &sec, &nsec, &bits, hex) == 4 &&
		nsec >= 0 && nsec < 1000000000L;
	fclose(f);
	char *dir = ok ? hex_decode_dup(hex, strlen(hex)) : NULL;
	if (dir && strcmp(dir, fs->root) == 0) {
		struct node *r = fs->nodes.root;
		pthread_mutex_lock(&fs->nodes.lock);
		r->special = bits & SPECIAL_BITS;
		r->special_state = SPECIAL_KNOWN;
		r->special_ctime = (struct timespec){ (time_t)sec, nsec };
		pthread_mutex_unlock(&fs->nodes.lock);
	}
	free(dir);
}

void special_root_save(struct osbfs *fs)
{
	struct node *r = fs->nodes.root;
	pthread_mutex_lock(&fs->nodes.lock);
	bool known = r->special_state == SPECIAL_KNOWN;
	struct timespec ct = r->special_ctime;
	mode_t bits = r->special;
	pthread_mutex_unlock(&fs->nodes.lock);
	char *tmp = NULL, *path = NULL;
	if (!known || asprintf(&tmp, "%s/" ROOT_FILE ".%d",
			       cache_dir(fs->cache), gettid()) < 0)
		return;
	FILE *f = asprintf(&path, "%s/" ROOT_FILE, cache_dir(fs->cache)) < 0 ?
			  NULL :
			  fopen(tmp, "we");
	if (f) {
		fprintf(f, "%lld.%09ld %o ", (long long)ct.tv_sec, ct.tv_nsec,
			(unsigned)bits);
		hex_put(f, fs->root);
		fputc('\n', f);
		if (fclose(f) != 0 || rename(tmp, path) != 0)
			unlink(tmp);
	}
	free(tmp);
	free(path);
}

static atomic_bool no_find;

void special_ask_run(struct osbfs *fs, struct held *h, int depth,
		     struct special_ask *sa)
{
	struct rdent *found = NULL;
	size_t nfound = 0;
	int rc = -ENOTSUP;

	if (sa->count && !atomic_load(&no_find))
		rc = remote_specials(fs, h->path, depth, &found, &nfound);
	if (rc == -ENOTSUP && sa->count && !atomic_exchange(&no_find, true))
		log_warn("the sandbox has no find: special mode bits (setuid, "
			 "setgid, sticky) made there are not shown, only those "
			 "set through the mount");
	pthread_mutex_lock(&fs->nodes.lock);
	if (!rc)
		settle(fs, sa, h->n, found, nfound);
	for (size_t i = 0; i < sa->count; i++)
		node_unref(&fs->nodes, sa->n[i]);
	pthread_mutex_unlock(&fs->nodes.lock);
	rdent_array_free(found, nfound);
	free(sa->n);
	memset(sa, 0, sizeof(*sa));
}

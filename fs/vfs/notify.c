/*
 * notify.c - dropping every cache at once, the kernel's too: when a job
 * ends (it may have changed anything) and on `.osb/ctl invalidate`; and
 * the kernel's pages of one file that changed in the sandbox while it was
 * being read (ops_file.c).
 *
 * Our own caches are dropped at once; the kernel is told (which names
 * and inodes to forget) from a thread of our own, never from inside a
 * request handler, where a notification can deadlock against the very
 * request being served.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "notify.h"
#include "ops.h"

struct inval {
	fuse_ino_t parent; /* 0: an inode, else a name under parent */
	fuse_ino_t ino;
	char *name;
};

struct notifier {
	pthread_mutex_t lock; /* guards the queue and stop */
	pthread_cond_t cond;
	struct inval *q;
	size_t n, cap;
	bool stop;
	uint64_t queued; /* batches handed to the thread */
	uint64_t done;   /* batches it has sent to the kernel */
	pthread_cond_t done_cond;
	pthread_t thread;
};

static int push(struct notifier *nt, fuse_ino_t parent, fuse_ino_t ino,
		const char *name)
{
	if (nt->n == nt->cap) {
		size_t cap = nt->cap ? nt->cap * 2 : 256;
		struct inval *q = realloc(nt->q, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		nt->q = q;
		nt->cap = cap;
	}
	nt->q[nt->n].parent = parent;
	nt->q[nt->n].ino = ino;
	nt->q[nt->n].name = name ? strdup(name) : NULL;
	nt->n++;
	return 0;
}

struct collect {
	struct notifier *nt;
	struct node *root;
};

/* Every name but a directory's: the kernel unhashes the entry it is
 * told to drop, and a process whose working directory it is then gets
 * ENOENT from getcwd (git, a shell's pwd). A directory's entry expires
 * with entry_timeout instead, and its inode is dropped as any other. */
static void collect_one(struct node *n, void *arg)
{
	struct collect *c = arg;
	bool dir = n->attr_valid && n->attr.type == OSB_DIR;
	node_invalidate(n);
	if (n->parent && !dir)
		push(c->nt, n->parent->ino, 0, n->name);
	if (n->nlookup && n != c->root)
		push(c->nt, 0, n->ino, NULL);
}

void fs_invalidate_all(struct osbfs *fs)
{
	struct notifier *nt = fs->notifier;

	pthread_mutex_lock(&fs->nodes.lock);
	if (nt)
		pthread_mutex_lock(&nt->lock);
	struct collect c = { nt, fs->nodes.root };
	if (nt) {
		node_for_each(&fs->nodes, collect_one, &c);
		push(nt, 0, NODE_ROOT_INO, NULL);
		nt->queued++;
		pthread_cond_signal(&nt->cond);
		pthread_mutex_unlock(&nt->lock);
	} else {
		node_invalidate_all(&fs->nodes);
	}
	pthread_mutex_unlock(&fs->nodes.lock);
	pthread_mutex_lock(&fs->statfs_lock);
	fs->statfs_expiry = 0;
	pthread_mutex_unlock(&fs->statfs_lock);
}

void notify_inode(struct osbfs *fs, fuse_ino_t ino)
{
	struct notifier *nt = fs->notifier;
	if (!nt)
		return;
	pthread_mutex_lock(&nt->lock);
	if (!push(nt, 0, ino, NULL)) {
		nt->queued++;
		pthread_cond_signal(&nt->cond);
	}
	pthread_mutex_unlock(&nt->lock);
}

void notify_entry(struct osbfs *fs, fuse_ino_t parent, const char *name)
{
	struct notifier *nt = fs->notifier;
	if (!nt)
		return;
	pthread_mutex_lock(&nt->lock);
	if (!push(nt, parent, 0, name)) {
		nt->queued++;
		pthread_cond_signal(&nt->cond);
	}
	pthread_mutex_unlock(&nt->lock);
}

static void *notifier_thread(void *arg)
{
	struct osbfs *fs = arg;
	struct notifier *nt = fs->notifier;

	pthread_mutex_lock(&nt->lock);
	while (!nt->stop) {
		if (!nt->n) {
			pthread_cond_wait(&nt->cond, &nt->lock);
			continue;
		}
		struct inval *q = nt->q;
		size_t n = nt->n;
		uint64_t upto = nt->queued;
		nt->q = NULL;
		nt->n = nt->cap = 0;
		pthread_mutex_unlock(&nt->lock);
		for (size_t i = 0; i < n; i++) {
			if (q[i].parent)
				fuse_lowlevel_notify_inval_entry(
					fs->se, q[i].parent, q[i].name,
					strlen(q[i].name));
			else
				fuse_lowlevel_notify_inval_inode(
					fs->se, q[i].ino, 0, 0);
			free(q[i].name);
		}
		free(q);
		pthread_mutex_lock(&nt->lock);
		nt->done = upto;
		pthread_cond_broadcast(&nt->done_cond);
	}
	nt->done = nt->queued;
	pthread_cond_broadcast(&nt->done_cond);
	pthread_mutex_unlock(&nt->lock);
	return NULL;
}

void notify_drain(struct osbfs *fs)
{
	struct notifier *nt = fs->notifier;
	if (!nt)
		return;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	pthread_mutex_lock(&nt->lock);
	uint64_t want = nt->queued;
	while (nt->done < want && !nt->stop)
		if (pthread_cond_timedwait(&nt->done_cond, &nt->lock, &until) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&nt->lock);
}

int notify_start(struct osbfs *fs)
{
	struct notifier *nt = calloc(1, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	pthread_mutex_init(&nt->lock, NULL);
	pthread_cond_init(&nt->cond, NULL);
	pthread_cond_init(&nt->done_cond, NULL);
	fs->notifier = nt;
	int rc = pthread_create(&nt->thread, NULL, notifier_thread, fs);
	if (rc) {
		fs->notifier = NULL;
		free(nt);
		return -rc;
	}
	return 0;
}

void notify_stop(struct osbfs *fs)
{
	struct notifier *nt = fs->notifier;
	if (!nt)
		return;
	pthread_mutex_lock(&nt->lock);
	nt->stop = true;
	pthread_cond_signal(&nt->cond);
	pthread_cond_broadcast(&nt->done_cond);
	pthread_mutex_unlock(&nt->lock);
	pthread_join(nt->thread, NULL);
	fs->notifier = NULL;
	for (size_t i = 0; i < nt->n; i++)
		free(nt->q[i].name);
	free(nt->q);
	pthread_mutex_destroy(&nt->lock);
	pthread_cond_destroy(&nt->cond);
	pthread_cond_destroy(&nt->done_cond);
	free(nt);
}

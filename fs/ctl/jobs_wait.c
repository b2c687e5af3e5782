/*
 * jobs_wait.c - reads of jobs/ID/wait: they block until the job ends,
 * without holding a FUSE worker thread. The request is kept in a list
 * (js->waiters, under js->lock) and answered by whichever thread learns
 * that the job ended (the monitor, usually), or with EINTR when the
 * reader is interrupted (Ctrl-C), or at unmount.
 *
 * Whoever takes a waiter out of the list answers its request, exactly
 * once. The interrupt callback gets the table (not the waiter) and
 * looks the request up, so it never touches a waiter another thread has
 * already answered and freed (the locks involved, and their order, are
 * in osbfs.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_i.h"

/* Answers @req with the part of @line from @off, at most @size bytes. */
static void reply_line(fuse_req_t req, const char *line, size_t size, off_t off)
{
	size_t len = strlen(line);
	if (off < 0 || (size_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	size_t n = len - (size_t)off;
	fuse_reply_buf(req, line + off, n < size ? n : size);
}

static void wait_interrupted(fuse_req_t req, void *data)
{
	struct jobs *js = data;
	struct waiter *found = NULL;

	pthread_mutex_lock(&js->lock);
	for (struct waiter **pp = &js->waiters; *pp; pp = &(*pp)->next) {
		if ((*pp)->req == req) {
			found = *pp;
			*pp = found->next;
			break;
		}
	}
	if (found)
		job_put_locked(js, found->job);
	pthread_mutex_unlock(&js->lock);
	if (found) {
		fuse_reply_err(req, EINTR);
		free(found);
	}
}

void job_wait(struct jobs *js, struct job *j, fuse_req_t req, size_t size,
	      off_t off)
{
	char line[1200];
	struct waiter *w = calloc(1, sizeof(*w));
	if (!w) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* before the request can be answered from another thread */
	fuse_req_interrupt_func(req, wait_interrupted, js);

	pthread_mutex_lock(&js->lock);
	int err = 0;
	bool now = false;
	if (!j->in_table)
		err = ENOENT;
	else if (js->stop || fuse_req_interrupted(req))
		err = EINTR;
	else if (j->state == JOB_DONE)
		now = true;
	if (now)
		job_status_locked(j, line, sizeof(line));
	if (!err && !now) {
		w->req = req;
		w->job = j;
		job_get_locked(j);
		w->size = size;
		w->off = off;
		w->next = js->waiters;
		js->waiters = w;
		w = NULL;
		jobs_kick_locked(js);
	}
	pthread_mutex_unlock(&js->lock);
	free(w);
	if (err)
		fuse_reply_err(req, err);
	else if (now)
		reply_line(req, line, size, off);
}

struct answer {
	struct waiter *w;
	char line[1200];
	int err;
};

void jobs_wake_waiters(struct jobs *js)
{
	struct answer *a = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&js->lock);
	for (struct waiter **pp = &js->waiters; *pp;) {
		struct waiter *w = *pp;
		struct job *j = w->job;
		if (j->in_table && j->state != JOB_DONE) {
			pp = &w->next;
			continue;
		}
		if (n == cap) {
			size_t c = cap ? cap * 2 : 16;
			struct answer *na = realloc(a, c * sizeof(*na));
			if (!na)
				break; /* the rest: at the next wake-up */
			a = na;
			cap = c;
		}
		*pp = w->next;
		a[n].w = w;
		a[n].err = j->in_table ? 0 : ENOENT;
		if (!a[n].err)
			job_status_locked(j, a[n].line, sizeof(a[n].line));
		job_put_locked(js, j);
		n++;
	}
	pthread_mutex_unlock(&js->lock);

	for (size_t i = 0; i < n; i++) {
		struct waiter *w = a[i].w;
		if (a[i].err)
			fuse_reply_err(w->req, a[i].err);
		else
			reply_line(w->req, a[i].line, w->size, w->off);
		free(w);
	}
	free(a);
}

void jobs_cancel_waiters(struct jobs *js)
{
	pthread_mutex_lock(&js->lock);
	struct waiter *list = js->waiters;
	js->waiters = NULL;
	for (struct waiter *w = list; w; w = w->next)
		job_put_locked(js, w->job);
	pthread_mutex_unlock(&js->lock);
	while (list) {
		struct waiter *next = list->next;
		fuse_reply_err(list->req, EINTR);
		free(list);
		list = next;
	}
}

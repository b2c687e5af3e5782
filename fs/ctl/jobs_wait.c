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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_text.h"
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

/* Lets the jobs of @w go (js->lock held). */
static void waiter_put_locked(struct jobs *js, struct waiter *w)
{
	if (w->job)
		job_put_locked(js, w->job);
	for (size_t i = 0; i < w->nset; i++)
		job_put_locked(js, w->set[i]);
	free(w->set);
	w->set = NULL;
	w->nset = 0;
}

/* Whether what @w waits for has happened (js->lock held). */
static bool waiter_done_locked(const struct waiter *w)
{
	if (w->job)
		return !w->job->in_table || w->job->state == JOB_DONE;
	for (size_t i = 0; i < w->nset; i++)
		if (w->set[i]->in_table && w->set[i]->state != JOB_DONE)
			return false;
	return true;
}

/* jobs/wait-all's text for @set (js->lock held): "ID STATUS" a line;
 * a job forgotten meanwhile says so. */
static int all_text_locked(struct job *const *set, size_t n, struct text *out)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		char line[1200];
		if (set[i]->in_table)
			job_status_locked(set[i], line, sizeof(line));
		else
			snprintf(line, sizeof(line), "forgotten\n");
		rc = text_printf(out, "%s %s", set[i]->id, line);
	}
	return rc;
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
		waiter_put_locked(js, found);
	pthread_mutex_unlock(&js->lock);
	if (found) {
		fuse_reply_err(req, EINTR);
		free(found);
	}
}

/* What the read gets once what @w waits for has happened (js->lock
 * held). 0 or -ENOMEM. */
static int answer_locked(const struct waiter *w, struct text *out)
{
	if (!w->job)
		return all_text_locked(w->set, w->nset, out);
	char line[1200];
	job_status_locked(w->job, line, sizeof(line));
	return text_adds(out, line);
}

/*
 * Answers @req at once when what @w waits for (its job, or its set, not
 * yet referenced: they are taken here) has happened, or fails; else
 * queues @w for jobs_wake_waiters(). @w is taken either way.
 */
static void wait_submit(struct jobs *js, struct waiter *w, fuse_req_t req,
			size_t size, off_t off)
{
	struct text t = { 0 };
	/* before the request can be answered from another thread */
	fuse_req_interrupt_func(req, wait_interrupted, js);

	pthread_mutex_lock(&js->lock);
	if (w->job)
		job_get_locked(w->job);
	for (size_t i = 0; i < w->nset; i++)
		job_get_locked(w->set[i]);
	int err = 0;
	bool now = false;
	if (w->job && !w->job->in_table)
		err = ENOENT;
	else if (js->stop || fuse_req_interrupted(req))
		err = EINTR;
	else if (waiter_done_locked(w))
		now = true;
	if (now && answer_locked(w, &t))
		err = ENOMEM;
	if (!err && !now) {
		w->req = req;
		w->size = size;
		w->off = off;
		w->next = js->waiters;
		js->waiters = w;
		w = NULL;
		jobs_kick_locked(js);
	}
	if (w)
		waiter_put_locked(js, w);
	pthread_mutex_unlock(&js->lock);
	free(w);
	if (err)
		fuse_reply_err(req, err);
	else if (now)
		reply_line(req, t.s ? t.s : "", size, off);
	text_release(&t);
}

void job_wait(struct jobs *js, struct job *j, fuse_req_t req, size_t size,
	      off_t off)
{
	struct waiter *w = calloc(1, sizeof(*w));
	if (!w) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	w->job = j;
	wait_submit(js, w, req, size, off);
}

void jobs_wait_all(struct jobs *js, struct job *const *set, size_t n,
		   fuse_req_t req, size_t size, off_t off)
{
	struct waiter *w = calloc(1, sizeof(*w));
	struct job **mine = n ? calloc(n, sizeof(*mine)) : NULL;
	if (!w || (n && !mine)) {
		free(w);
		free(mine);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (n)
		memcpy(mine, set, n * sizeof(*mine));
	w->set = mine;
	w->nset = n;
	wait_submit(js, w, req, size, off);
}

struct answer {
	struct waiter *w;
	struct text text; /* what the read gets, from w->off */
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
		if (!waiter_done_locked(w)) {
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
		a[n].text = (struct text){ 0 };
		a[n].err = j && !j->in_table ? ENOENT : 0;
		if (!a[n].err && answer_locked(w, &a[n].text))
			a[n].err = ENOMEM;
		waiter_put_locked(js, w);
		n++;
	}
	pthread_mutex_unlock(&js->lock);

	for (size_t i = 0; i < n; i++) {
		struct waiter *w = a[i].w;
		if (a[i].err)
			fuse_reply_err(w->req, a[i].err);
		else
			reply_line(w->req, a[i].text.s ? a[i].text.s : "",
				   w->size, w->off);
		text_release(&a[i].text);
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
		waiter_put_locked(js, w);
	pthread_mutex_unlock(&js->lock);
	while (list) {
		struct waiter *next = list->next;
		fuse_reply_err(list->req, EINTR);
		free(list);
		list = next;
	}
}

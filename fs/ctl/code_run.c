/*
 * code_run.c - running code in a context: the write of `input` hands the
 * code to a follower thread, which streams the run (POST /code) into the
 * context's result; the close waits for the end, or request_timeout,
 * whichever comes first, and the run goes on without it. `ctl` takes
 * `interrupt` and `reset`. code_stop() ends the followers at unmount.
 *
 * Before a run every file written through the mount is uploaded (the
 * code sees them, as a job does), and after it every cache is dropped
 * (the code may have changed any file).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "code_i.h"
#include "log.h"
#include "ops.h"
#include "notify.h"
#include "osbfs.h"
#include "remote.h"
#include "writeback.h"

/* the longest a run waits for the uploads before it */
#define RUN_FLUSH_MS (10L * 60 * 1000)

void code_result_release(struct code_result *r)
{
	free(r->failure);
	free(r->ename);
	free(r->evalue);
	text_release(&r->out);
	text_release(&r->err);
	text_release(&r->value);
	text_release(&r->bundles);
	code_images_release(r);
	text_release(&r->traceback);
	text_release(&r->tb_plain);
	memset(r, 0, sizeof(*r));
}

static const char *lang_of(const struct code_ctx *cx)
{
	return code_langs[cx->lang];
}

/* "python" or "python/NAME", for messages. */
static void ctx_label(const struct code_ctx *cx, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s%s", lang_of(cx), cx->name[0] ? "/" : "",
		 cx->name);
}

bool code_busy(struct code *cd, struct code_ctx *cx)
{
	pthread_mutex_lock(&cd->lock);
	bool busy = cx->running || cx->resetting;
	pthread_mutex_unlock(&cd->lock);
	return busy;
}

/* ---- the follower ---- */

struct run {
	struct code *cd;
	struct code_ctx *cx;
	char id[OSB_ID_MAX];
	char *src;
	long count_low; /* the context's execution count before (code_i.h) */
	bool count_exact;
};

/* Appends to one of the result's texts; what goes past TEXT_MAX is
 * dropped and said so. Locked. */
static void add_locked(struct code_result *r, struct text *t, const char *s,
		       size_t n)
{
	if (!r->truncated && text_add(t, s, n))
		r->truncated = true;
}

static int on_event(void *arg, const struct osb_event *ev)
{
	struct run *run = arg;
	struct code *cd = run->cd;
	struct code_result *r = &run->cx->r;
	const char *s = ev->text ? ev->text : "";

	/* a stream is a use of the sandbox (idle_pause waits); it stops at
	 * the next event (a ping comes every 3 s) once the mount goes */
	remote_touch_activity(cd->fs);
	if (atomic_load(&run->cx->cancel))
		return -ECANCELED;
	pthread_mutex_lock(&cd->lock);
	switch (ev->type) {
	case OSB_EV_STDOUT:
		add_locked(r, &r->out, s, strlen(s));
		break;
	case OSB_EV_STDERR:
		add_locked(r, &r->err, s, strlen(s));
		break;
	case OSB_EV_EXECUTION_COUNT:
		r->count = ev->execution_count;
		break;
	case OSB_EV_RESULT:
		if (ev->result_text) {
			add_locked(r, &r->value, ev->result_text,
				   strlen(ev->result_text));
			if (r->value.len &&
			    r->value.s[r->value.len - 1] != '\n')
				add_locked(r, &r->value, "\n", 1);
		}
		if (ev->results_json) {
			if (r->bundles.len)
				add_locked(r, &r->bundles, ",", 1);
			add_locked(r, &r->bundles, ev->results_json,
				   strlen(ev->results_json));
			if (code_images_take(r, ev->results_json))
				r->truncated = true; /* out of memory */
		}
		break;
	case OSB_EV_ERROR:
		free(r->ename);
		free(r->evalue);
		r->ename = strdup(ev->ename ? ev->ename : "");
		r->evalue = strdup(ev->evalue ? ev->evalue : "");
		text_clear(&r->traceback);
		text_clear(&r->tb_plain);
		add_locked(r, &r->traceback, "[", 1);
		for (size_t i = 0; ev->traceback && ev->traceback[i]; i++) {
			const char *l = ev->traceback[i];
			size_t n = strlen(l);
			if (i)
				add_locked(r, &r->traceback, ",", 1);
			if (text_json_str(&r->traceback, l))
				r->truncated = true;
			add_locked(r, &r->tb_plain, l, n);
			if (!n || l[n - 1] != '\n')
				add_locked(r, &r->tb_plain, "\n", 1);
		}
		add_locked(r, &r->traceback, "]", 1);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&cd->lock);
	return 0;
}

/*
 * A run that execd refuses with "session is busy" did not run (execd
 * answers so before it starts the code). Right after a run of this
 * mount ends, its context may still be marked busy for a moment: the
 * end of the stream can come before execd lets the context go. So a
 * busy answer is asked again a few times, over about a second, before
 * it is taken to mean that other code is running there. A run the
 * mount is leaving is not asked again.
 */
static int run_unless_busy(struct run *run, bool *failed, struct osb_error *err)
{
	static const long waits_ms[] = { 20, 50, 100, 200, 300, 400 };
	struct code *cd = run->cd;
	int rc = osb_code_run(cd->fs->sb, run->id, lang_of(run->cx), run->src,
			      on_event, run, failed, err);
	for (size_t i = 0; rc == -EBUSY && !atomic_load(&run->cx->cancel) &&
			   i < sizeof(waits_ms) / sizeof(*waits_ms);
	     i++) {
		struct timespec ts = { 0, waits_ms[i] * 1000000L };
		nanosleep(&ts, NULL);
		osb_error_clear(err);
		*failed = false;
		rc = osb_code_run(cd->fs->sb, run->id, lang_of(run->cx),
				  run->src, on_event, run, failed, err);
	}
	return rc;
}

/*
 * The context is gone from execd (restarted, or its context deleted by
 * someone else): the run goes to a new one, which takes the old one's
 * place, and the result says that the earlier state is lost.
 */
static int run_in_new_context(struct run *run, const char *label, bool *failed,
			      struct osb_error *err)
{
	struct code *cd = run->cd;
	struct code_ctx *cx = run->cx;
	char old[OSB_ID_MAX];

	snprintf(old, sizeof(old), "%s", run->id);
	int rc = code_ctx_create(cd, cx->lang, run->id, err);
	if (rc)
		return rc;
	log_warn("code/%s: context %s was gone from the sandbox; a new one "
		 "(%s) takes its place, without its state",
		 label, old, run->id);
	run->count_low = 0;
	run->count_exact = false;
	pthread_mutex_lock(&cd->lock);
	if (strcmp(cx->id, old) == 0) { /* not reset meanwhile */
		snprintf(cx->id, sizeof(cx->id), "%s", run->id);
		cx->count_low = 0;
		cx->count_exact = false;
	}
	cx->r.context_lost = true;
	pthread_mutex_unlock(&cd->lock);
	code_rec_write(cd, cx, old);
	osb_error_clear(err);
	return osb_code_run(cd->fs->sb, run->id, lang_of(cx), run->src,
			    on_event, run, failed, err);
}

/* The end of a run (locked): its status, and what the context's
 * execution count is now known to be. @settled is CODE_IDLE unless the
 * answer was lost and code_settle() said what became of the run. */
static void finish_locked(struct run *run, int rc, const struct osb_error *err,
			  bool failed, enum code_status settled,
			  const char *why, bool cancelled)
{
	struct code_ctx *cx = run->cx;
	struct code_result *r = &cx->r;
	bool same = strcmp(cx->id, run->id) == 0; /* not reset meanwhile */
	clock_gettime(CLOCK_REALTIME, &r->finished_at);
	free(r->failure);
	r->failure = NULL;
	if (settled != CODE_IDLE) {
		r->status = settled;
		r->answer_lost = true;
		if (settled != CODE_RAN)
			r->failure = strdup(why);
		cx->run_rc = settled == CODE_RAN ? 0 : -EIO;
	} else if (rc) {
		r->status = CODE_FAILED;
		r->failure = strdup(
			cancelled    ? "the mount went away during "
				       "the run (it was interrupted)" :
			rc == -EBUSY ? "the context is running other code "
				       "(write interrupt to ctl)" :
				       err->message);
		cx->run_rc = cancelled ? -ESHUTDOWN : fs_errno(rc);
		if (same && (cancelled || rc == -EBUSY))
			cx->count_exact = false; /* others ran in it */
	} else {
		r->status = failed || r->ename ? CODE_ERROR : CODE_OK;
		cx->run_rc = 0;
		if (same && r->count > 0)
			cx->count_low = r->count;
		if (same)
			cx->count_exact = r->count > 0;
	}
	cx->running = false;
}

static void *follow_main(void *arg)
{
	struct run *run = arg;
	struct code *cd = run->cd;
	struct code_ctx *cx = run->cx;
	struct osb_error err;
	bool failed = false;
	char label[96], why[1200] = "";
	enum code_status settled = CODE_IDLE;

	ctx_label(cx, label, sizeof(label));
	osb_error_clear(&err);
	int rc = run_unless_busy(run, &failed, &err);
	if (rc == -ENOENT && !atomic_load(&cx->cancel))
		rc = run_in_new_context(run, label, &failed, &err);
	if (rc && !atomic_load(&cx->cancel) && code_maybe_ran(rc, &err)) {
		log_warn("code/%s: %s; checking whether the code ran", label,
			 err.message);
		settled = code_settle(cd, cx, run->id, run->count_low,
				      run->count_exact, why, sizeof(why));
	}
	bool cancelled = atomic_load(&cx->cancel);
	if (!cancelled) {
		/* what the code wrote shows through the mount at once */
		fs_invalidate_all(cd->fs);
		notify_drain(cd->fs);
	}
	pthread_mutex_lock(&cd->lock);
	finish_locked(run, rc, &err, failed, settled, why, cancelled);
	pthread_cond_broadcast(&cd->cond);
	pthread_mutex_unlock(&cd->lock);
	if (settled == CODE_RAN)
		log_warn("code/%s: the answer was lost, but the code ran "
			 "(the context's execution count says so): what it "
			 "printed after the break is lost",
			 label);
	else if (settled != CODE_IDLE)
		log_error("code/%s: %s", label, why);
	else if (rc && !cancelled)
		log_error("code/%s: the run failed: %s", label,
			  rc == -EBUSY ? "the context is busy" : err.message);
	free(run->src);
	free(run);
	return NULL;
}

/* ---- running ---- */

/* Takes a finished follower to join. Locked. */
static bool take_thread(struct code_ctx *cx, pthread_t *t)
{
	if (!cx->has_thread)
		return false;
	*t = cx->thread;
	cx->has_thread = false;
	return true;
}

/* Starts the follower of a run of @src in @cx (cx->running set).
 * Locked. */
static int start_locked(struct code *cd, struct code_ctx *cx, char *src)
{
	struct run *run = calloc(1, sizeof(*run));
	if (!run)
		return -ENOMEM;
	run->cd = cd;
	run->cx = cx;
	run->src = src;
	snprintf(run->id, sizeof(run->id), "%s", cx->id);
	run->count_low = cx->count_low;
	run->count_exact = cx->count_exact;
	code_result_release(&cx->r);
	cx->r.status = CODE_RUNNING;
	clock_gettime(CLOCK_REALTIME, &cx->r.started_at);
	atomic_store(&cx->cancel, 0);
	int rc = pthread_create(&cx->thread, NULL, follow_main, run);
	if (rc) {
		free(run);
		return -rc;
	}
	cx->has_thread = true;
	return 0;
}

void code_deadline(struct timespec *dl, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, dl);
	dl->tv_sec += ms / 1000;
	dl->tv_nsec += (ms % 1000) * 1000000L;
	if (dl->tv_nsec >= 1000000000L) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000L;
	}
}

/* The run's end, or the deadline. Locked. */
static void wait_locked(struct code *cd, struct code_ctx *cx, long ms)
{
	struct timespec dl;
	code_deadline(&dl, ms);
	while (cx->running && !cd->stopping)
		if (pthread_cond_timedwait(&cd->cond, &cd->lock, &dl) ==
		    ETIMEDOUT)
			break;
}

int code_run(struct code *cd, struct code_ctx *cx, const char *src, size_t len)
{
	struct osbfs *fs = cd->fs;
	char label[96];
	pthread_t old;

	ctx_label(cx, label, sizeof(label));
	char *copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, src, len);
	copy[len] = '\0';

	pthread_mutex_lock(&cd->lock);
	int rc = 0;
	if (cd->stopping)
		rc = -ESHUTDOWN;
	else if (cx->gone)
		rc = -ENOENT;
	else if (cx->running || cx->resetting)
		rc = -EBUSY;
	bool join = !rc && take_thread(cx, &old);
	bool mine = !rc; /* this call set running */
	if (mine)
		cx->running = true;
	pthread_mutex_unlock(&cd->lock);
	if (rc == -EBUSY)
		log_error("code/%s: a run is in progress (write interrupt to "
			  "its ctl to stop it)",
			  label);
	if (join)
		pthread_join(old, NULL);
	if (!rc && remote_enter(fs)) {
		log_error("code/%s: not run: the sandbox is not running",
			  label);
		rc = -EIO;
	}
	if (!rc) {
		rc = wb_flush_all(fs, RUN_FLUSH_MS);
		if (rc) {
			log_error("code/%s: not run: files written through "
				  "the mount could not all be uploaded to the "
				  "sandbox (%s)",
				  label, strerror(-rc));
			rc = -EIO;
		}
	}

	pthread_mutex_lock(&cd->lock);
	if (!rc && cd->stopping)
		rc = -ESHUTDOWN;
	if (!rc) {
		text_clear(&cx->code);
		if (text_add(&cx->code, src, len))
			text_release(&cx->code);
		rc = start_locked(cd, cx, copy);
		copy = rc ? copy : NULL;
	}
	if (rc && mine) {
		cx->running = false;
		pthread_cond_broadcast(&cd->cond);
	} else if (!rc) {
		wait_locked(cd, cx, fs->opt->request_timeout_ms);
		rc = cx->running ? 0 : cx->run_rc;
	}
	pthread_mutex_unlock(&cd->lock);
	free(copy);
	return rc;
}

/* ---- interrupt, reset, stop ---- */

static int interrupt(struct code *cd, struct code_ctx *cx, const char *label)
{
	struct osb_error err;
	char id[OSB_ID_MAX];

	pthread_mutex_lock(&cd->lock);
	bool running = cx->running;
	snprintf(id, sizeof(id), "%s", cx->id);
	pthread_mutex_unlock(&cd->lock);
	if (!running) {
		log_error("code/%s: interrupt: nothing is running", label);
		return -ESRCH;
	}
	if (remote_enter(cd->fs)) {
		log_error("code/%s: interrupt: the sandbox is not running",
			  label);
		return -EIO;
	}
	int rc = osb_code_interrupt(cd->fs->sb, id, &err);
	if (rc)
		log_error("code/%s: interrupt: %s", label, err.message);
	return fs_errno(rc);
}

static int reset(struct code *cd, struct code_ctx *cx, const char *label)
{
	struct osb_error err;
	char old[OSB_ID_MAX], id[OSB_ID_MAX];
	pthread_t t;

	pthread_mutex_lock(&cd->lock);
	int rc = cx->resetting ? -EBUSY : 0;
	if (!rc)
		cx->resetting = true;
	snprintf(old, sizeof(old), "%s", cx->id);
	pthread_mutex_unlock(&cd->lock);
	if (rc) {
		log_error("code/%s: a reset is in progress", label);
		return rc;
	}
	/* the old context goes, with whatever runs in it */
	rc = code_ctx_delete(cd, old, &err);
	if (!rc) {
		pthread_mutex_lock(&cd->lock);
		wait_locked(cd, cx, cd->fs->opt->request_timeout_ms);
		pthread_mutex_unlock(&cd->lock);
		rc = code_ctx_create(cd, cx->lang, id, &err);
	}
	pthread_mutex_lock(&cd->lock);
	bool join = !rc && !cx->running && take_thread(cx, &t);
	if (!rc) {
		snprintf(cx->id, sizeof(cx->id), "%s", id);
		cx->count_low = 0;
		cx->count_exact = false;
		if (!cx->running) {
			code_result_release(&cx->r);
			text_release(&cx->code);
		}
	}
	cx->resetting = false;
	pthread_mutex_unlock(&cd->lock);
	if (join)
		pthread_join(t, NULL);
	if (rc) {
		log_error("code/%s: reset: %s", label, err.message);
		return fs_errno(rc);
	}
	code_rec_write(cd, cx, old);
	return 0;
}

int code_ctl(struct code *cd, struct code_ctx *cx, const char *buf, size_t len)
{
	char label[96], verb[32];
	int rc = 0;

	ctx_label(cx, label, sizeof(label));
	pthread_mutex_lock(&cd->lock);
	bool gone = cx->gone;
	pthread_mutex_unlock(&cd->lock);
	if (gone)
		return -ENOENT; /* removed by rmdir since the open */
	/* one verb a line; blank lines are nothing */
	for (const char *p = buf, *end = buf + len; !rc && p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		const char *q = e;
		while (q > p &&
		       (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\r'))
			q--;
		size_t n = (size_t)(q - p);
		if (n && n < sizeof(verb)) {
			memcpy(verb, p, n);
			verb[n] = '\0';
		}
		if (!n)
			;
		else if (n < sizeof(verb) && strcmp(verb, "interrupt") == 0)
			rc = interrupt(cd, cx, label);
		else if (n < sizeof(verb) && strcmp(verb, "reset") == 0)
			rc = reset(cd, cx, label);
		else {
			log_error(
				"code/%s/ctl: unknown verb \"%.*s\" (interrupt "
				"or reset)",
				label, (int)(n > 64 ? 64 : n), p);
			rc = -EINVAL;
		}
		p = e + 1;
	}
	return rc;
}

void code_reset(struct code *cd)
{
	if (!cd)
		return;
	code_stop(cd);
	pthread_mutex_lock(&cd->lock);
	/* entries stay (open handles may name them), found by nothing */
	for (size_t i = 0; i < cd->n; i++)
		cd->cx[i]->gone = true;
	for (int l = 0; l < CODE_NLANG; l++) {
		cd->by_lang[l] = NULL;
		if (cd->lang[l] == LANG_OK)
			cd->lang[l] = LANG_UNKNOWN;
	}
	/* a reading under way is the old sandbox's: read again after it */
	if (!cd->recs_loading) {
		free(cd->recs);
		cd->recs = NULL;
		cd->nrecs = 0;
		cd->recs_loaded = false;
	}
	cd->stopping = false;
	pthread_cond_broadcast(&cd->cond);
	pthread_mutex_unlock(&cd->lock);
}

void code_stop(struct code *cd)
{
	struct osb_error err;
	if (!cd)
		return;
	pthread_mutex_lock(&cd->lock);
	cd->stopping = true;
	pthread_cond_broadcast(&cd->cond);
	size_t n = cd->n;
	pthread_mutex_unlock(&cd->lock);
	/* the table only grows, and not any more: cx[0..n) stay */
	for (size_t i = 0; i < n; i++) {
		struct code_ctx *cx = cd->cx[i];
		char id[OSB_ID_MAX];
		pthread_mutex_lock(&cd->lock);
		bool running = cx->running;
		snprintf(id, sizeof(id), "%s", cx->id);
		if (running)
			atomic_store(&cx->cancel, 1);
		pthread_mutex_unlock(&cd->lock);
		/* its result would have nowhere to go */
		if (running && osb_code_interrupt(cd->fs->sb, id, &err))
			log_warn("code: interrupting context %s at unmount: %s",
				 id, err.message);
	}
	for (size_t i = 0; i < n; i++) {
		pthread_t t;
		pthread_mutex_lock(&cd->lock);
		bool join = take_thread(cd->cx[i], &t);
		pthread_mutex_unlock(&cd->lock);
		if (join)
			pthread_join(t, NULL);
	}
}

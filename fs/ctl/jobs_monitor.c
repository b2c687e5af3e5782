/*
 * jobs_monitor.c - the thread that follows running jobs.
 *
 * One round is one listing of LIVE_DIR (depth 2) for every running job
 * at once: it gives each job's output sizes and heartbeat, and the exit
 * marker of a job that has just ended. A job gone from the listing has
 * ended too (its record then says how); a job whose
 * heartbeat stopped while the sandbox ran has vanished (a restart).
 * When jobs end, every cache is dropped and pending `wait` reads are
 * answered.
 *
 * Pace: no rounds while nothing runs or while the sandbox is not
 * running (a paused sandbox's jobs are frozen, and a listing would wake
 * it); quick rounds (5 ms, slowing to 200 ms) after a start, an end or
 * a new wait, and while someone waits or follows output; one a second
 * otherwise; backing off while rounds fail.
 */
#include <errno.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jobs_i.h"
#include "life.h"
#include "log.h"
#include "remote.h"

#define ROUND_MIN_MS 5
#define ROUND_HOT_MS 200
#define ROUND_SLOW_MS 1000
#define ROUND_PAUSED_MS 500
#define ROUND_FAIL_MAX_MS 5000
#define HOT_AFTER_EVENT_MS 2000

static bool ts_eq(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Whether the monitor follows @j: it runs, and no stream tells its end
 * (jobs_stream.c). A job still STARTING counts (its start may yet
 * follow it here). Locked. */
static bool is_followed(const struct job *j)
{
	return (j->state == JOB_RUNNING && !j->streamed) ||
	       j->state == JOB_STARTING;
}

/* Milliseconds from the last round to the next; -1: none needed.
 * Locked. */
static long long round_interval(struct jobs *js, long long now)
{
	bool any = false;
	for (size_t i = 0; i < js->n && !any; i++)
		any = is_followed(js->all[i]);
	if (!any)
		return -1;
	if (js->poll_failures) {
		long long iv =
			(long long)ROUND_HOT_MS
			<< (js->poll_failures < 5 ? js->poll_failures : 5);
		return iv < ROUND_FAIL_MAX_MS ? iv : ROUND_FAIL_MAX_MS;
	}
	bool hot = js->waiters || now - js->last_event_ms < HOT_AFTER_EVENT_MS;
	long long iv = ROUND_SLOW_MS;
	for (size_t i = 0; i < js->n; i++) {
		struct job *j = js->all[i];
		if (j->watched_until_ms > now)
			hot = true;
		if (j->kill_at_ms && j->kill_at_ms - now < iv)
			iv = j->kill_at_ms > now ? j->kill_at_ms - now : 0;
	}
	if (hot) {
		long long h = ROUND_MIN_MS + (now - js->last_event_ms) / 8;
		if (h > ROUND_HOT_MS)
			h = ROUND_HOT_MS;
		if (h < iv)
			iv = h;
	}
	return iv;
}

/* Forgets every heartbeat baseline (rounds were missed). Locked. */
static void reset_heartbeats_locked(struct jobs *js)
{
	for (size_t i = 0; i < js->n; i++)
		js->all[i]->alive_seen_ms = 0;
}

/* a job whose exit marker a listing saw without its output's sizes */
struct marked {
	struct job *j;
	int code;
	struct timespec when;
};

struct round {
	struct job **ended, **vanished, **to_kill;
	struct marked *marked;
	size_t nended, nvanished, nkill, nmarked;
	bool strangers; /* live jobs we do not know */
	bool over;      /* jobs seen ending in live/ */
};

static void round_release(struct jobs *js, struct round *r)
{
	pthread_mutex_lock(&js->lock);
	for (size_t i = 0; i < r->nended; i++)
		job_put_locked(js, r->ended[i]);
	for (size_t i = 0; i < r->nvanished; i++)
		job_put_locked(js, r->vanished[i]);
	for (size_t i = 0; i < r->nkill; i++)
		job_put_locked(js, r->to_kill[i]);
	for (size_t i = 0; i < r->nmarked; i++)
		job_put_locked(js, r->marked[i].j);
	pthread_mutex_unlock(&js->lock);
	free(r->marked);
	free(r->ended);
	free(r->vanished);
	free(r->to_kill);
}

/* Compares the listing with the running jobs. Locked. */
static void round_sort(struct jobs *js, struct rec *live, size_t nlive,
		       struct round *r, long long now)
{
	size_t cap = js->n ? js->n : 1;
	r->ended = calloc(cap, sizeof(*r->ended));
	r->vanished = calloc(cap, sizeof(*r->vanished));
	r->to_kill = calloc(cap, sizeof(*r->to_kill));
	r->marked = calloc(cap, sizeof(*r->marked));
	if (!r->ended || !r->vanished || !r->to_kill || !r->marked)
		return;
	for (size_t i = 0; i < js->n; i++) {
		struct job *j = js->all[i];
		if (j->state != JOB_RUNNING || j->streamed)
			continue;
		struct rec *l = recs_find(live, nlive, j->id);
		if (!l) {
			job_get_locked(j);
			r->ended[r->nended++] = j;
			continue;
		}
		for (int k = 0; k < 2; k++) {
			if (l->has_out[k] && l->size[k] > j->size[k])
				j->size[k] = l->size[k];
			if (l->has_out[k])
				j->mtime[k] = l->mtime[k];
		}
		if (l->has_exit && !(l->has_out[0] && l->has_out[1])) {
			/* ended, and the wrapper was removing live/ID as it
			 * was listed (the links to the output went first):
			 * the record says how big the output is */
			job_get_locked(j);
			r->marked[r->nmarked++] =
				(struct marked){ j, l->exit_code,
						 l->exit_mtime };
			continue;
		}
		if (l->has_exit) {
			/* ended; the record has its exit marker already */
			if (job_end_locked(js, j, l->exit_code, NULL,
					   l->exit_mtime))
				r->over = true;
			continue;
		}
		if (!j->alive_seen_ms ||
		    !ts_eq(l->alive_mtime, j->alive_mtime)) {
			j->alive_mtime = l->alive_mtime;
			j->alive_seen_ms = now;
		} else if (now - j->alive_seen_ms > JOB_STALE_MS) {
			job_get_locked(j);
			r->vanished[r->nvanished++] = j;
			continue;
		}
		if (j->kill_at_ms && now >= j->kill_at_ms) {
			j->kill_at_ms = 0;
			job_get_locked(j);
			r->to_kill[r->nkill++] = j;
		}
	}
	for (size_t i = 0; i < nlive; i++)
		if (!job_find_locked(js, live[i].id))
			r->strangers = true;
}

void jobs_poll(struct jobs *js)
{
	struct rec *live = NULL;
	size_t nlive = 0;
	struct round r = { 0 };

	pthread_mutex_lock(&js->lock);
	bool any = false;
	for (size_t i = 0; i < js->n && !any; i++)
		any = js->all[i]->state == JOB_RUNNING && !js->all[i]->streamed;
	pthread_mutex_unlock(&js->lock);
	if (!any)
		return;

	int rc = recs_list(js, LIVE_DIR, &live, &nlive);
	long long now = mono_ms();
	pthread_mutex_lock(&js->lock);
	if (rc) {
		if (!js->poll_failures++)
			log_error(
				"cannot follow the jobs running in sandbox %s: "
				"%s",
				js->fs->sandbox_id, strerror(-fs_errno(rc)));
		reset_heartbeats_locked(js);
		pthread_mutex_unlock(&js->lock);
		return;
	}
	if (js->poll_failures)
		log_info("following the jobs in sandbox %s again",
			 js->fs->sandbox_id);
	js->poll_failures = 0;
	round_sort(js, live, nlive, &r, now);
	pthread_mutex_unlock(&js->lock);
	free(live);

	/* a job running here keeps the sandbox in use (idle_pause) */
	remote_touch_activity(js->fs);
	for (size_t i = 0; i < r.nended; i++)
		job_finalize(js, r.ended[i], -1, (struct timespec){ 0, 0 });
	for (size_t i = 0; i < r.nmarked; i++)
		job_finalize(js, r.marked[i].j, r.marked[i].code,
			     r.marked[i].when);
	for (size_t i = 0; i < r.nvanished; i++)
		job_vanished(js, r.vanished[i]);
	for (size_t i = 0; i < r.nkill; i++) {
		log_info("job %s still runs after SIGTERM: sending SIGKILL",
			 job_id(r.to_kill[i]));
		job_signal(js, r.to_kill[i], "KILL", false);
	}
	if (r.over)
		jobs_after_end(js);
	if (r.strangers)
		jobs_sync(js);
	round_release(js, &r);
}

/* The sandbox is gone: so are its jobs (nobody waits for them forever). */
static void sandbox_gone(struct jobs *js)
{
	struct timespec now;
	bool ended = false;

	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&js->lock);
	for (size_t i = 0; i < js->n; i++)
		if (js->all[i]->state == JOB_RUNNING &&
		    job_end_locked(js, js->all[i], -1,
				   "the sandbox was deleted", now))
			ended = true;
	pthread_mutex_unlock(&js->lock);
	if (ended)
		jobs_after_end(js);
}

/* One round, if the sandbox runs. */
static void round_run(struct jobs *js)
{
	struct life_info li;
	life_get(js->fs, &li);
	if (strcasecmp(li.state, "Deleted") == 0) {
		sandbox_gone(js);
		return;
	}
	if (strcasecmp(li.state, "Running") != 0) {
		pthread_mutex_lock(&js->lock);
		reset_heartbeats_locked(js);
		pthread_mutex_unlock(&js->lock);
		return;
	}
	jobs_poll(js);
}

static void wait_until(struct jobs *js, long long due_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	long long d = due_ms - now;
	ts.tv_sec += d / 1000;
	ts.tv_nsec += (d % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&js->cond, &js->lock, &ts);
}

static void *monitor_main(void *arg)
{
	struct jobs *js = arg;
	struct life_info li;
	long long last = 0;

	/* the jobs of earlier mounts, unless that would wake the sandbox */
	life_get(js->fs, &li);
	if (strcasecmp(li.state, "Running") == 0)
		jobs_ensure_loaded(js);

	pthread_mutex_lock(&js->lock);
	while (!js->stop) {
		long long now = mono_ms();
		long long iv = round_interval(js, now);
		js->kick = false; /* from here on, a kick means: look again */
		if (iv < 0) {
			pthread_cond_wait(&js->cond, &js->lock);
			continue;
		}
		/* (the life lock is a leaf: taking it under js->lock is safe)
		 */
		life_get(js->fs, &li);
		if (strcasecmp(li.state, "Running") != 0 &&
		    iv < ROUND_PAUSED_MS)
			iv = ROUND_PAUSED_MS;
		if (last + iv > now) {
			wait_until(js, last + iv);
			continue;
		}
		pthread_mutex_unlock(&js->lock);
		round_run(js);
		last = mono_ms();
		pthread_mutex_lock(&js->lock);
	}
	pthread_mutex_unlock(&js->lock);
	return NULL;
}

int jobs_monitor_start(struct jobs *js)
{
	int rc = pthread_create(&js->thread, NULL, monitor_main, js);
	if (rc)
		return -rc;
	js->started = true;
	return 0;
}

int jobs_monitor_restart(struct jobs *js, const char *why)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&js->lock);
	while (why && js->n) {
		struct job *j = js->all[js->n - 1];
		if (j->state == JOB_STARTING || j->state == JOB_RUNNING)
			job_end_locked(js, j, 0, why, now);
		job_drop_locked(js, j);
	}
	if (why) {
		js->loaded = false;
		js->synced_ms = 0;
	}
	js->stop = false;
	atomic_store(&js->streams_cancel, 0);
	pthread_mutex_unlock(&js->lock);
	return jobs_monitor_start(js);
}

void jobs_monitor_stop(struct jobs *js)
{
	if (!js)
		return;
	pthread_mutex_lock(&js->lock);
	js->stop = true;
	pthread_cond_broadcast(&js->cond);
	pthread_mutex_unlock(&js->lock);
	if (js->started)
		pthread_join(js->thread, NULL);
	js->started = false;
	jstreams_stop(js);
	jobs_cancel_waiters(js);
}

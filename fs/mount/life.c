/*
 * life.c - the sandbox's lifecycle as the mount sees it (see life.h):
 * the resume gate, pause/resume/renew/kill for `.osb/ctl`, and a thread
 * that renews the TTL while mounted (keepalive, on by default), warns in
 * the log when the sandbox is about to expire, and pauses the sandbox
 * when nothing has touched it for idle_pause.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ctl.h"
#include "life.h"
#include "log.h"
#include "osbfs.h"

#define READY_WAIT_MS 60000

struct lifecycle {
	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t cond;
	char state[32];
	time_t expires_at;
	time_t last_renew;
	long long last_renew_try; /* wall ms of keepalive's last renewal */
	time_t warned_for;        /* the expiry the log warned of */
	bool busy;                /* a pause/resume is under way */
	bool stop;
	bool started;
	pthread_t thread;
};

static void set_state(struct lifecycle *l, const char *state)
{
	snprintf(l->state, sizeof(l->state), "%s", state);
	pthread_cond_broadcast(&l->cond);
}

void life_reset(struct osbfs *fs, const char *state, time_t expires_at)
{
	struct lifecycle *l = fs->life;
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	set_state(l, state);
	l->expires_at = expires_at;
	l->last_renew = time(NULL);
	l->warned_for = 0;
	pthread_mutex_unlock(&l->lock);
}

int life_init(struct osbfs *fs, const char *state, time_t expires_at)
{
	struct lifecycle *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	set_state(l, state);
	l->expires_at = expires_at;
	l->last_renew = time(NULL);
	fs->life = l;
	return 0;
}

void life_release(struct osbfs *fs)
{
	struct lifecycle *l = fs->life;
	if (!l)
		return;
	life_stop(fs);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
	free(l);
	fs->life = NULL;
}

static bool is_state(struct lifecycle *l, const char *s)
{
	return strcasecmp(l->state, s) == 0;
}

/* Resume and wait until execd answers. Called without l->lock, with
 * l->busy set by the caller. */
static int do_resume(struct osbfs *fs, struct osb_error *err)
{
	int rc = osb_sandbox_resume(fs->client, fs->sandbox_id, err);
	if (rc == -EBUSY)
		rc = 0; /* not paused (any more) */
	if (!rc)
		rc = osb_sandbox_wait_running(fs->client, fs->sandbox_id,
					      fs->opt->start_timeout_ms, NULL,
					      err);
	if (!rc)
		rc = osb_wait_ready(fs->sb, READY_WAIT_MS, err);
	return rc;
}

int life_ensure_running(struct osbfs *fs)
{
	struct lifecycle *l = fs->life;
	struct osb_error err;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		if (is_state(l, "Running")) {
			pthread_mutex_unlock(&l->lock);
			return 0;
		}
		if (is_state(l, "Deleted")) {
			pthread_mutex_unlock(&l->lock);
			return -EIO;
		}
		if (!l->busy)
			break;
		pthread_cond_wait(&l->cond, &l->lock);
	}
	/* Paused (or Pending): resume it, once, for every waiter */
	l->busy = true;
	bool was_paused = is_state(l, "Paused");
	set_state(l, was_paused ? "Resuming" : "Starting");
	pthread_mutex_unlock(&l->lock);

	int rc = was_paused ?
			 do_resume(fs, &err) :
			 osb_sandbox_wait_running(fs->client, fs->sandbox_id,
						  fs->opt->start_timeout_ms,
						  NULL, &err);
	pthread_mutex_lock(&l->lock);
	l->busy = false;
	if (rc) {
		set_state(l, rc == -ENOENT ? "Deleted" :
			     was_paused    ? "Paused" :
					     "Pending");
		pthread_mutex_unlock(&l->lock);
		log_error("sandbox %s could not be %s: %s", fs->sandbox_id,
			  was_paused ? "resumed" : "started", err.message);
		return -EIO;
	}
	set_state(l, "Running");
	pthread_mutex_unlock(&l->lock);
	if (was_paused)
		log_info("sandbox %s resumed", fs->sandbox_id);
	return 0;
}

int life_recheck(struct osbfs *fs)
{
	struct lifecycle *l = fs->life;
	struct osb_sandbox_info info;
	struct osb_error err;

	/* one quick question: the request that brought us here has had its
	 * retries already */
	int saved = osb_thread_set_retries(0);
	int rc = osb_sandbox_get(fs->client, fs->sandbox_id, &info, &err);
	osb_thread_set_retries(saved);
	if (rc == -ENOENT) {
		pthread_mutex_lock(&l->lock);
		set_state(l, "Deleted");
		pthread_mutex_unlock(&l->lock);
		log_error("sandbox %s no longer exists (expired or deleted)",
			  fs->sandbox_id);
		return -ENOENT;
	}
	if (rc)
		return 0;
	bool paused = strcasecmp(info.state, "Paused") == 0;
	pthread_mutex_lock(&l->lock);
	if (!l->busy)
		set_state(l, info.state);
	pthread_mutex_unlock(&l->lock);
	osb_sandbox_info_release(&info);
	if (!paused)
		return 0;
	log_info("sandbox %s was paused; resuming it", fs->sandbox_id);
	return life_ensure_running(fs) == 0 ? 1 : -EIO;
}

bool life_gone(struct osbfs *fs)
{
	struct lifecycle *l = fs->life;
	if (!l)
		return false;
	pthread_mutex_lock(&l->lock);
	bool gone = is_state(l, "Deleted");
	pthread_mutex_unlock(&l->lock);
	return gone;
}

int life_pause(struct osbfs *fs, char *msg, size_t msg_size)
{
	struct lifecycle *l = fs->life;
	struct osb_error err;

	pthread_mutex_lock(&l->lock);
	while (l->busy)
		pthread_cond_wait(&l->cond, &l->lock);
	if (is_state(l, "Paused")) {
		pthread_mutex_unlock(&l->lock);
		return 0;
	}
	l->busy = true;
	set_state(l, "Pausing");
	pthread_mutex_unlock(&l->lock);

	int rc = osb_sandbox_pause(fs->client, fs->sandbox_id, &err);
	pthread_mutex_lock(&l->lock);
	l->busy = false;
	set_state(l, rc ? "Running" : "Paused");
	pthread_mutex_unlock(&l->lock);
	if (rc) {
		snprintf(msg, msg_size, "pause: %s", err.message);
		return rc;
	}
	log_info("sandbox %s paused", fs->sandbox_id);
	return 0;
}

int life_resume(struct osbfs *fs, char *msg, size_t msg_size)
{
	struct lifecycle *l = fs->life;
	if (!l)
		return -EIO;
	pthread_mutex_lock(&l->lock);
	if (!l->busy && !is_state(l, "Deleted"))
		set_state(l, "Paused"); /* make the gate resume it */
	pthread_mutex_unlock(&l->lock);
	int rc = life_ensure_running(fs);
	if (rc)
		snprintf(msg, msg_size, "resume failed (see the log)");
	return rc;
}

/* How long a renewal gives: timeout=, or 600 s for a sandbox with none. */
static long renew_secs(const struct osbfs *fs)
{
	return fs->opt->timeout_s > 0 ? fs->opt->timeout_s : 600;
}

int life_renew(struct osbfs *fs, long seconds, char *msg, size_t msg_size)
{
	struct lifecycle *l = fs->life;
	struct osb_error err;
	time_t got;

	if (seconds <= 0)
		seconds = renew_secs(fs);
	/* whole seconds on the wire: round up, never give less */
	int rc = osb_sandbox_renew(fs->client, fs->sandbox_id,
				   time(NULL) + seconds + 1, &got, &err);
	if (rc) {
		snprintf(msg, msg_size, "renew: %s", err.message);
		return rc;
	}
	pthread_mutex_lock(&l->lock);
	l->expires_at = got;
	l->last_renew = time(NULL);
	pthread_mutex_unlock(&l->lock);
	return 0;
}

int life_kill(struct osbfs *fs, char *msg, size_t msg_size)
{
	struct lifecycle *l = fs->life;
	struct osb_error err;
	int rc = osb_sandbox_delete(fs->client, fs->sandbox_id, &err);
	if (rc && rc != -ENOENT) {
		snprintf(msg, msg_size, "kill: %s", err.message);
		return rc;
	}
	pthread_mutex_lock(&l->lock);
	set_state(l, "Deleted");
	pthread_mutex_unlock(&l->lock);
	log_info("sandbox %s deleted", fs->sandbox_id);
	return 0;
}

void life_get(struct osbfs *fs, struct life_info *ret)
{
	struct lifecycle *l = fs->life;
	pthread_mutex_lock(&l->lock);
	snprintf(ret->state, sizeof(ret->state), "%s", l->state);
	ret->expires_at = l->expires_at;
	ret->last_renew = l->last_renew;
	pthread_mutex_unlock(&l->lock);
	ret->idle_ms = mono_ms() - atomic_load(&fs->last_activity);
}

/* ---- keepalive and idle pause ---- */

static long long wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Renews once half the TTL is gone, used or not (a paused sandbox
 * too): a mounted sandbox never expires under its user. At most once a
 * second after a failure. */
static void keepalive_tick(struct osbfs *fs)
{
	struct lifecycle *l = fs->life;
	long ttl = renew_secs(fs);
	long long now = wall_ms();

	pthread_mutex_lock(&l->lock);
	long long left = (long long)l->expires_at * 1000 - now;
	bool due = (is_state(l, "Running") || is_state(l, "Paused")) &&
		   l->expires_at && left < ttl * 500LL &&
		   now - l->last_renew_try >= 1000;
	if (due)
		l->last_renew_try = now;
	pthread_mutex_unlock(&l->lock);
	if (!due)
		return;
	char msg[1200];
	if (life_renew(fs, ttl, msg, sizeof(msg)) == 0)
		log_debug("renewed sandbox %s for %ld s", fs->sandbox_id, ttl);
	else
		log_error("keepalive: %s", msg);
}

/* Says so in the log once when the sandbox will expire within
 * LIFE_EXPIRY_WARN_S: keepalive is off, or its renewals fail. */
static void expiry_tick(struct osbfs *fs)
{
	struct lifecycle *l = fs->life;
	pthread_mutex_lock(&l->lock);
	time_t at = l->expires_at;
	long long left = (long long)at * 1000 - wall_ms();
	bool warn = at && at != l->warned_for && left >= 0 &&
		    left < LIFE_EXPIRY_WARN_S * 1000LL &&
		    !is_state(l, "Deleted");
	if (warn)
		l->warned_for = at;
	pthread_mutex_unlock(&l->lock);
	if (warn)
		log_warn("sandbox %s expires in %lld s, and everything in it "
			 "with it: write 'renew' to %s/ctl, or mount with "
			 "keepalive",
			 fs->sandbox_id, left / 1000, fs->opt->control_dir);
}

static void idle_tick(struct osbfs *fs)
{
	struct lifecycle *l = fs->life;
	if (!l)
		return;
	/* a job running keeps the sandbox in use, whether or not the
	 * monitor is asking about it at the moment */
	if (ctl_jobs_running(fs))
		atomic_store(&fs->last_activity, mono_ms());
	long long idle = mono_ms() - atomic_load(&fs->last_activity);

	pthread_mutex_lock(&l->lock);
	bool due = is_state(l, "Running") && !l->busy &&
		   idle >= fs->opt->idle_pause_ms;
	pthread_mutex_unlock(&l->lock);
	if (!due)
		return;
	char msg[1200];
	log_info("sandbox %s idle for %lld ms: pausing it", fs->sandbox_id,
		 idle);
	if (life_pause(fs, msg, sizeof(msg)))
		log_error("idle pause: %s", msg);
}

static void *life_thread(void *arg)
{
	struct osbfs *fs = arg;
	struct lifecycle *l = fs->life;

	pthread_mutex_lock(&l->lock);
	while (!l->stop) {
		struct timespec ts;
		cond_deadline(&ts, 250);
		pthread_cond_timedwait(&l->cond, &l->lock, &ts);
		if (l->stop)
			break;
		pthread_mutex_unlock(&l->lock);
		if (fs->opt->keepalive)
			keepalive_tick(fs);
		expiry_tick(fs);
		if (fs->opt->idle_pause_ms > 0)
			idle_tick(fs);
		pthread_mutex_lock(&l->lock);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int life_start(struct osbfs *fs)
{
	struct lifecycle *l = fs->life;
	int rc = pthread_create(&l->thread, NULL, life_thread, fs);
	if (rc)
		return -rc;
	l->started = true;
	return 0;
}

void life_stop(struct osbfs *fs)
{
	struct lifecycle *l = fs->life;
	if (!l || !l->started)
		return;
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->thread, NULL);
	l->started = false;
}

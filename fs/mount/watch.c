/*
 * watch.c - requests that hang, and a server that is away (see watch.h).
 *
 * Every thread that sends requests gets a slot (made at its first
 * request, freed when the thread ends) holding the last sign of life of
 * its current request: when it began, or when bytes last moved (the
 * client's hooks). The watchdog thread looks at the slots twice a second.
 *
 * Cancelling uses the client's per-thread cancel flag: every registered
 * thread points it at one flag, cancel_all, so that one store stops every
 * request in flight. The flag is static (not in struct watch), so a
 * thread that outlives the watch never points at freed memory.
 *
 * Locking: w->lock guards the slot list, the fields marked below and the
 * condition variable; the flag, the slots' times and `away` are atomics.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "life.h"
#include "log.h"
#include "osbfs.h"
#include "watch.h"
#include "writeback.h"

/* a request without a sign of life this long makes the watchdog ask
 * whether the sandbox was paused (no more often than that either) */
#define STUCK_MS 3000
#define TICK_MS 500
#define PROBE_MS 1000
#define GATE_PROBE_MS 100

struct slot {
	atomic_llong alive_ms; /* 0: no request in flight */
	struct slot *prev, *next;
};

struct watch {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* the watchdog's sleep; a resume is over */
	struct slot *slots;  /* lock */
	pthread_key_t key;   /* frees a thread's slot when it ends */
	bool key_made;
	atomic_bool away;
	atomic_llong away_ms;   /* when it went away */
	atomic_llong probed_ms; /* the last question while away */
	atomic_bool refused;    /* its answer came at once (refused) */
	long long asked_ms;     /* watchdog only */
	bool stop, started;     /* lock */
	pthread_t thread;
};

static atomic_int cancel_all;
static __thread struct slot *my_slot;
static __thread bool exempt; /* the watchdog's own requests */

/* The watch the slots belong to: the process's only one (a thread's
 * slot is freed by a key destructor, which gets only the slot). */
static struct watch *the_watch;

static void slot_unlink_free(void *p)
{
	struct slot *s = p;
	struct watch *w = the_watch;
	if (w) {
		pthread_mutex_lock(&w->lock);
		if (s->prev)
			s->prev->next = s->next;
		else if (w->slots == s)
			w->slots = s->next;
		if (s->next)
			s->next->prev = s->prev;
		pthread_mutex_unlock(&w->lock);
	}
	free(s);
}

static void hook_begin(void *arg)
{
	struct watch *w = arg;
	if (exempt)
		return;
	if (!my_slot) {
		struct slot *s = calloc(1, sizeof(*s));
		if (!s)
			return;
		pthread_mutex_lock(&w->lock);
		s->next = w->slots;
		if (w->slots)
			w->slots->prev = s;
		w->slots = s;
		pthread_mutex_unlock(&w->lock);
		pthread_setspecific(w->key, s);
		osb_cancel_flag_set(&cancel_all);
		my_slot = s;
	}
	atomic_store(&my_slot->alive_ms, mono_ms());
}

static void hook_progress(void *arg)
{
	(void)arg;
	if (my_slot)
		atomic_store(&my_slot->alive_ms, mono_ms());
}

static void hook_end(void *arg)
{
	(void)arg;
	if (my_slot)
		atomic_store(&my_slot->alive_ms, 0);
}

static void hook_moved(void *arg, const char *id, const char *old_url,
		       const char *new_url)
{
	(void)arg;
	if (strcmp(old_url, new_url) == 0)
		log_info("execd of sandbox %s wants other headers now", id);
	else
		log_info("execd of sandbox %s is now at %s (was %s)", id,
			 new_url, old_url);
}

int watch_init(struct osbfs *fs)
{
	struct watch *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	int rc = pthread_key_create(&w->key, slot_unlink_free);
	if (rc) {
		free(w);
		return -rc;
	}
	w->key_made = true;
	fs->watch = w;
	the_watch = w;
	struct osb_hooks h = { .begin = hook_begin,
			       .progress = hook_progress,
			       .end = hook_end,
			       .moved = hook_moved,
			       .arg = w };
	osb_client_set_hooks(fs->client, &h);
	return 0;
}

void watch_exempt_thread(void)
{
	exempt = true;
}

bool watch_away(struct osbfs *fs)
{
	return fs->watch && atomic_load(&fs->watch->away);
}

void watch_failed(struct osbfs *fs, int rc)
{
	struct watch *w = fs->watch;
	if (!w ||
	    (rc != -ECONNREFUSED && rc != -EHOSTUNREACH && rc != -ETIMEDOUT))
		return;
	atomic_store(&w->refused, rc == -ECONNREFUSED);
	long long none = 0;
	atomic_compare_exchange_strong(&w->away_ms, &none, mono_ms());
	if (!atomic_exchange(&w->away, true))
		log_error(
			"the OpenSandbox server at %s cannot be reached (%s): "
			"until it answers again, requests fail at once with "
			"EIO and cached data is served as it is",
			osb_client_base_url(fs->client), strerror(-rc));
}

bool watch_cancelled_resume(struct osbfs *fs)
{
	struct watch *w = fs->watch;
	if (!w)
		return false;
	struct timespec ts;
	cond_deadline(&ts, fs->opt->start_timeout_ms + 60000);
	pthread_mutex_lock(&w->lock);
	while (atomic_load(&cancel_all) && !w->stop)
		if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) ==
		    ETIMEDOUT)
			break;
	bool again = !atomic_load(&cancel_all) && !w->stop;
	pthread_mutex_unlock(&w->lock);
	return again && !life_gone(fs);
}

/* ---- the watchdog ---- */

/* While away: where execd is now (the lifecycle server is asked at most
 * once a second: a restart may have moved it), then one quick question
 * to execd there, no more often than @every ms whoever asks; the end of
 * it when answered. Returns whether still away. */
static bool probe(struct osbfs *fs, struct watch *w, long long now, long every)
{
	long long last = atomic_load(&w->probed_ms);
	if (now - last < every ||
	    !atomic_compare_exchange_strong(&w->probed_ms, &last, now))
		return atomic_load(&w->away);
	int saved = osb_thread_set_retries(0);
	osb_sandbox_locate(fs->sb, NULL);
	int rc = osb_ping(fs->sb, NULL);
	osb_thread_set_retries(saved);
	atomic_store(&w->refused, rc == -ECONNREFUSED);
	if (rc != 0)
		return atomic_load(&w->away);
	if (atomic_exchange(&w->away, false)) {
		atomic_store(&w->away_ms, 0);
		log_info("the OpenSandbox server answers again");
		wb_retry_now(fs);
	}
	return false;
}

bool watch_gate(struct osbfs *fs)
{
	struct watch *w = fs->watch;
	if (!w || !atomic_load(&w->away))
		return false;
	/* a server that refuses answers at once: the request that comes
	 * just after a restart may ask itself; one that hangs is left to
	 * the watchdog, so that nobody else waits for it */
	if (!atomic_load(&w->refused))
		return true;
	return probe(fs, w, mono_ms(), GATE_PROBE_MS);
}

/* The oldest sign of life of a request in flight, 0 when none. */
static long long oldest_request(struct watch *w)
{
	long long oldest = 0;
	pthread_mutex_lock(&w->lock);
	for (struct slot *s = w->slots; s; s = s->next) {
		long long t = atomic_load(&s->alive_ms);
		if (t && (!oldest || t < oldest))
			oldest = t;
	}
	pthread_mutex_unlock(&w->lock);
	return oldest;
}

long long watch_silent_ms(struct osbfs *fs)
{
	struct watch *w = fs->watch;
	if (!w)
		return 0;
	long long now = mono_ms();
	if (atomic_load(&w->away)) {
		long long since = atomic_load(&w->away_ms);
		return since && now > since ? now - since : 1;
	}
	long long oldest = oldest_request(w);
	return oldest && now - oldest > STUCK_MS ? now - oldest : 0;
}

/* A request hangs: was the sandbox paused behind our back? Then cancel
 * what is in flight, resume, and let the requests go again. */
static void check_paused(struct osbfs *fs, struct watch *w)
{
	struct osb_sandbox_info info;
	if (osb_sandbox_get(fs->client, fs->sandbox_id, &info, NULL) != 0)
		return;
	bool paused = strcasecmp(info.state, "Paused") == 0;
	osb_sandbox_info_release(&info);
	if (!paused)
		return;
	log_info("sandbox %s was paused by someone else while requests "
		 "waited: resuming it",
		 fs->sandbox_id);
	atomic_store(&cancel_all, 1);
	char msg[1200];
	if (life_resume(fs, msg, sizeof(msg)))
		log_error("sandbox %s: %s", fs->sandbox_id, msg);
	pthread_mutex_lock(&w->lock);
	atomic_store(&cancel_all, 0);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void *watchdog(void *arg)
{
	struct osbfs *fs = arg;
	struct watch *w = fs->watch;

	exempt = true;
	osb_thread_set_retries(0); /* quick questions: it asks again anyway */
	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		struct timespec ts;
		cond_deadline(&ts, TICK_MS);
		pthread_cond_timedwait(&w->cond, &w->lock, &ts);
		if (w->stop)
			break;
		pthread_mutex_unlock(&w->lock);
		long long now = mono_ms();
		if (atomic_load(&w->away)) {
			probe(fs, w, now, PROBE_MS);
		} else if (fs->life && !life_gone(fs)) {
			long long oldest = oldest_request(w);
			if (oldest && now - oldest > STUCK_MS &&
			    now - w->asked_ms > STUCK_MS) {
				w->asked_ms = now;
				check_paused(fs, w);
			}
		}
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int watch_start(struct osbfs *fs)
{
	struct watch *w = fs->watch;
	if (!w)
		return 0;
	int rc = pthread_create(&w->thread, NULL, watchdog, fs);
	if (rc)
		return -rc;
	w->started = true;
	return 0;
}

void watch_stop(struct osbfs *fs)
{
	struct watch *w = fs->watch;
	if (!w || !w->started)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->started = false;
}

void watch_release(struct osbfs *fs)
{
	struct watch *w = fs->watch;
	if (!w)
		return;
	watch_stop(fs);
	if (fs->client)
		osb_client_set_hooks(fs->client, NULL);
	the_watch = NULL;
	/* the slots of threads still alive (main's): their hooks are gone */
	while (w->slots) {
		struct slot *s = w->slots;
		w->slots = s->next;
		free(s);
	}
	my_slot = NULL;
	if (w->key_made)
		pthread_key_delete(w->key);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
	fs->watch = NULL;
}

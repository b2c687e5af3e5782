/*
 * jobs_sync.c - the table against the records in the sandbox: the
 * records merged into the table at the first access and again when the
 * table is stale (jobs of other mounts); how a job ended, once it left
 * live/; a job whose wrapper went silent.
 *
 * Merging never moves a job backwards (created < running < done), except
 * that an exit status found later replaces an error (the wrapper was
 * only slow); a job this mount is starting is left alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jobs_i.h"
#include "life.h"
#include "log.h"
#include "remote.h"

/* ---- merging ---- */

static bool ts_zero(struct timespec t)
{
	return !t.tv_sec && !t.tv_nsec;
}

/* Sizes and times the record adds to what we know. Locked. */
static void rec_apply(struct job *j, const struct rec *r)
{
	for (int k = 0; k < 2; k++) {
		if (r->has_out[k] && r->size[k] > j->size[k])
			j->size[k] = r->size[k];
		if (r->has_out[k])
			j->mtime[k] = r->mtime[k];
	}
	if (r->has_cmd && !j->cmd)
		j->cmd_size = r->cmd_size;
	if (r->has_cmd && ts_zero(j->started_at))
		j->started_at = r->cmd_mtime;
	if (ts_zero(j->created_at))
		j->created_at = r->has_cmd ? r->cmd_mtime : r->dir_mtime;
}

static const char orphan_msg[] =
	"the job ended without an exit status (its wrapper was stopped)";

/* How the record says the job stands; merges it into @j. Returns true
 * if the job ended by this. Locked. */
static bool rec_merge(struct jobs *js, struct job *j, const struct rec *r,
		      const char *error)
{
	rec_apply(j, r);
	if (r->has_exit)
		return job_end_locked(js, j, r->exit_code, NULL, r->exit_mtime);
	if (r->has_error && error)
		return job_end_locked(js, j, -1, error, r->dir_mtime);
	if (!r->has_cmd)
		return false;
	if (!r->live)
		return job_end_locked(js, j, -1, orphan_msg, r->cmd_mtime);
	if (j->state == JOB_CREATED) {
		job_set_state_locked(js, j, JOB_RUNNING);
		j->alive_seen_ms = 0;
		jobs_kick_locked(js);
	}
	return false;
}

struct sync_data {
	struct rec *recs, *live;
	size_t n, nlive;
	char **errors; /* per rec: the message, if needed */
};

static void sync_data_release(struct sync_data *d)
{
	for (size_t i = 0; d->errors && i < d->n; i++)
		free(d->errors[i]);
	free(d->errors);
	free(d->recs);
	free(d->live);
}

/*
 * Reads jobs/, then live/. A job with a command but no exit status that
 * is not in live/ either may have ended between the two listings: its
 * record is listed again, after live/, when its exit marker (made before
 * the wrapper removes live/ID) must be there if it ended normally.
 */
static int sync_read(struct jobs *js, struct sync_data *d)
{
	int rc = recs_list(js, JOBS_DIR, &d->recs, &d->n);
	if (!rc)
		rc = recs_list(js, LIVE_DIR, &d->live, &d->nlive);
	if (rc)
		return rc;
	for (size_t i = 0; i < d->n; i++) {
		struct rec *r = &d->recs[i];
		r->live = recs_find(d->live, d->nlive, r->id) != NULL;
		if (!r->has_cmd || r->has_exit || r->has_error || r->live)
			continue;
		struct rec again;
		rc = rec_read(js, r->id, &again);
		if (rc == -ENOENT) {
			r->gone = true; /* removed meanwhile */
			continue;
		}
		if (rc)
			return rc;
		again.live = false;
		again.dir_mtime = r->dir_mtime;
		*r = again;
	}
	d->errors = calloc(d->n ? d->n : 1, sizeof(*d->errors));
	if (!d->errors)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++) {
		struct rec *r = &d->recs[i];
		if (!r->has_error || r->has_exit)
			continue;
		pthread_mutex_lock(&js->lock);
		struct job *j = job_find_locked(js, r->id);
		bool need = !j || j->state != JOB_DONE;
		pthread_mutex_unlock(&js->lock);
		if (need)
			d->errors[i] = job_read_error(js, r->id);
	}
	return 0;
}

/* Merges what sync_read() found; @t0: when the reading began. Returns
 * whether some job ended; *ret_orphans (malloc'd ids) are jobs to
 * record as failed. Locked. */
static bool sync_merge(struct jobs *js, struct sync_data *d, long long t0,
		       char ***ret_orphans, size_t *ret_norphans)
{
	bool ended = false;
	char **orphans = calloc(d->n ? d->n : 1, sizeof(*orphans));
	size_t norphans = 0;

	for (size_t i = 0; i < d->n; i++) {
		struct rec *r = &d->recs[i];
		struct job *j = job_find_locked(js, r->id);
		if (r->gone || (j && j->state == JOB_STARTING))
			continue;
		if (!j) {
			j = job_add_locked(js, r->id, JOB_CREATED);
			if (!j)
				continue;
			j->recorded_ms = t0;
			job_put_locked(js, j); /* the table keeps it */
		}
		bool was_done = j->state == JOB_DONE;
		if (rec_merge(js, j, r, d->errors[i]))
			ended = ended || !was_done;
		if (r->has_cmd && !r->has_exit && !r->has_error && !r->live &&
		    orphans)
			orphans[norphans++] = strdup(r->id);
	}
	/* removed from the sandbox by someone else */
	for (size_t i = js->n; i-- > 0;) {
		struct job *j = js->all[i];
		/* only a record that existed before the listing can be
		 * missing from it */
		if (!j->recorded_ms || j->recorded_ms >= t0 ||
		    recs_find(d->recs, d->n, j->id))
			continue;
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (job_end_locked(js, j, -1,
				   "its record was removed from the sandbox",
				   now))
			ended = true;
		job_drop_locked(js, j);
	}
	js->loaded = true;
	js->synced_ms = t0; /* what it shows is at least this fresh */
	*ret_orphans = orphans;
	*ret_norphans = norphans;
	return ended;
}

int jobs_sync(struct jobs *js)
{
	struct sync_data d = { 0 };
	char **orphans = NULL;
	size_t norphans = 0;
	long long t0 = mono_ms();

	int rc = remote_enter(js->fs);
	if (!rc)
		rc = sync_read(js, &d);
	if (rc) {
		sync_data_release(&d);
		log_error("cannot read the jobs recorded in sandbox %s: %s",
			  js->fs->sandbox_id, strerror(-fs_errno(rc)));
		return fs_errno(rc);
	}
	pthread_mutex_lock(&js->lock);
	bool ended = sync_merge(js, &d, t0, &orphans, &norphans);
	pthread_mutex_unlock(&js->lock);
	sync_data_release(&d);

	for (size_t i = 0; i < norphans; i++) {
		if (orphans[i])
			job_persist_error(js, orphans[i], orphan_msg);
		free(orphans[i]);
	}
	free(orphans);
	if (ended)
		jobs_after_end(js);
	else
		jobs_wake_waiters(js);
	return 0;
}

int jobs_ensure_loaded(struct jobs *js)
{
	pthread_mutex_lock(&js->lock);
	while (js->loading && !js->loaded)
		pthread_cond_wait(&js->cond, &js->lock);
	if (js->loaded) {
		pthread_mutex_unlock(&js->lock);
		return 0;
	}
	js->loading = true;
	pthread_mutex_unlock(&js->lock);
	int rc = jobs_sync(js);
	pthread_mutex_lock(&js->lock);
	js->loading = false;
	pthread_cond_broadcast(&js->cond);
	pthread_mutex_unlock(&js->lock);
	return rc;
}

void jobs_refresh(struct jobs *js, long long max_age_ms)
{
	struct life_info li;
	long long asked = mono_ms();

	pthread_mutex_lock(&js->lock);
	/* a reading under way may be recent enough: wait for it */
	while (js->loading)
		pthread_cond_wait(&js->cond, &js->lock);
	bool loaded = js->loaded;
	bool due = loaded && js->synced_ms < asked - max_age_ms;
	if (due)
		js->loading = true;
	pthread_mutex_unlock(&js->lock);
	if (!loaded) {
		jobs_ensure_loaded(js);
		return;
	}
	if (!due)
		return;
	life_get(js->fs, &li);
	/* a listing alone does not wake a paused sandbox */
	if (strcasecmp(li.state, "Running") == 0)
		jobs_sync(js);
	pthread_mutex_lock(&js->lock);
	js->loading = false;
	pthread_cond_broadcast(&js->cond);
	pthread_mutex_unlock(&js->lock);
}

/* ---- the end of one job ---- */

static void end_now(struct jobs *js, struct job *j, int code, const char *error,
		    struct timespec when, bool drop)
{
	pthread_mutex_lock(&js->lock);
	bool ended = job_end_locked(js, j, code, error, when);
	if (drop && j->in_table)
		job_drop_locked(js, j);
	pthread_mutex_unlock(&js->lock);
	if (ended || drop)
		jobs_after_end(js);
}

void job_finalize(struct jobs *js, struct job *j, int code,
		  struct timespec when)
{
	struct rec r;
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	/* it left live/: its exit marker, if any, is there already */
	int rc = rec_read(js, j->id, &r);
	if (rc == 0 && code >= 0 && !r.has_exit) {
		/* the marker live/ showed (the record's comes first in
		 * the wrapper; one the job forged in live/ is taken too) */
		r.has_exit = true;
		r.exit_code = code;
		r.exit_mtime = when;
	}
	if (rc == -ENOENT) {
		end_now(js, j, -1, "its record was removed from the sandbox",
			now, true);
		return;
	}
	if (rc)
		return; /* the next round tries again */
	pthread_mutex_lock(&js->lock);
	rec_apply(j, &r);
	pthread_mutex_unlock(&js->lock);
	if (r.has_exit) {
		end_now(js, j, r.exit_code, NULL, r.exit_mtime, false);
	} else if (r.has_error) {
		char *msg = job_read_error(js, j->id);
		end_now(js, j, -1, msg ? msg : "failed", now, false);
		free(msg);
	} else {
		job_persist_error(js, j->id, orphan_msg);
		end_now(js, j, -1, orphan_msg, now, false);
	}
}

void job_vanished(struct jobs *js, struct job *j)
{
	char msg[200];
	char live[128];
	struct timespec now;

	snprintf(msg, sizeof(msg),
		 "the job's process vanished (no sign of life for %d s; the "
		 "sandbox may have restarted)",
		 JOB_STALE_MS / 1000);
	snprintf(live, sizeof(live), LIVE_DIR "/%s", j->id);
	log_error("job %s: %s", j->id, msg);
	job_persist_error(js, j->id, msg);
	const char *paths[1] = { live };
	osb_dirs_remove(js->fs->sb, paths, 1, NULL);
	clock_gettime(CLOCK_REALTIME, &now);
	end_now(js, j, -1, msg, now, false);
}

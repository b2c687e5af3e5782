/*
 * jobs.c - the table of jobs this mount knows (see jobs.h): references,
 * lookups, listing in start order, ids and named jobs, removal, and the
 * end of a job. What a job's small files say is in jobs_show.c.
 *
 * All state is behind js->lock (jobs_i.h says what it guards).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "jobs_i.h"
#include "notify.h"
#include "log.h"
#include "ops.h"
#include "remote.h"

int jobs_new(struct osbfs *fs, struct jobs **ret)
{
	struct jobs *js = calloc(1, sizeof(*js));
	if (!js)
		return -ENOMEM;
	js->fs = fs;
	pthread_mutex_init(&js->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&js->cond, &ca);
	pthread_condattr_destroy(&ca);
	js->next_serial = 1;
	*ret = js;
	return 0;
}

static void job_free(struct job *j)
{
	free(j->error);
	free(j->cmd);
	free(j->cwd);
	free(j);
}

void jobs_free(struct jobs *js)
{
	if (!js)
		return;
	jobs_cancel_waiters(js);
	for (size_t i = 0; i < js->n; i++) {
		struct job *j = js->all[i];
		j->in_table = false;
		if (--j->refs == 0)
			job_free(j);
	}
	free(js->all);
	pthread_mutex_destroy(&js->lock);
	pthread_cond_destroy(&js->cond);
	free(js);
}

/* ---- references and lookups ---- */

static bool is_running(enum job_state st)
{
	return st == JOB_STARTING || st == JOB_RUNNING;
}

void job_get_locked(struct job *j)
{
	j->refs++;
}

void job_put_locked(struct jobs *js, struct job *j)
{
	(void)js;
	if (j && --j->refs == 0)
		job_free(j);
}

void job_put(struct jobs *js, struct job *j)
{
	if (!j)
		return;
	pthread_mutex_lock(&js->lock);
	job_put_locked(js, j);
	pthread_mutex_unlock(&js->lock);
}

const char *job_id(const struct job *j)
{
	return j->id;
}

uint64_t job_serial(const struct job *j)
{
	return j->serial;
}

struct job *job_find_locked(struct jobs *js, const char *id)
{
	for (size_t i = 0; i < js->n; i++)
		if (strcmp(js->all[i]->id, id) == 0)
			return js->all[i];
	return NULL;
}

struct job *jobs_find(struct jobs *js, const char *id)
{
	pthread_mutex_lock(&js->lock);
	struct job *j = job_find_locked(js, id);
	if (j)
		job_get_locked(j);
	pthread_mutex_unlock(&js->lock);
	return j;
}

struct job *jobs_by_serial(struct jobs *js, uint64_t serial)
{
	struct job *found = NULL;
	pthread_mutex_lock(&js->lock);
	for (size_t i = 0; i < js->n && !found; i++)
		if (js->all[i]->serial == serial)
			found = js->all[i];
	if (found)
		job_get_locked(found);
	pthread_mutex_unlock(&js->lock);
	return found;
}

struct job *job_add_locked(struct jobs *js, const char *id, enum job_state st)
{
	/* no id is cut short here: every caller checked it already */
	if (!job_name_valid(id))
		return NULL;
	if (js->n == js->cap) {
		size_t cap = js->cap ? js->cap * 2 : 64;
		struct job **a = realloc(js->all, cap * sizeof(*a));
		if (!a)
			return NULL;
		js->all = a;
		js->cap = cap;
	}
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->serial = js->next_serial++;
	snprintf(j->id, sizeof(j->id), "%s", id);
	j->refs = 2; /* the table's and the caller's */
	j->in_table = true;
	j->cmd_size = -1;
	j->state = JOB_CREATED;
	js->all[js->n++] = j;
	job_set_state_locked(js, j, st);
	return j;
}

void job_drop_locked(struct jobs *js, struct job *j)
{
	for (size_t i = 0; i < js->n; i++) {
		if (js->all[i] != j)
			continue;
		js->all[i] = js->all[--js->n];
		if (is_running(j->state))
			js->nrunning--;
		j->in_table = false;
		job_put_locked(js, j);
		return;
	}
}

void job_set_state_locked(struct jobs *js, struct job *j, enum job_state st)
{
	/* nrunning counts the running jobs in the table */
	if (j->in_table && is_running(j->state) && !is_running(st))
		js->nrunning--;
	else if (j->in_table && !is_running(j->state) && is_running(st))
		js->nrunning++;
	j->state = st;
}

void jobs_kick_locked(struct jobs *js)
{
	js->last_event_ms = mono_ms();
	js->kick = true;
	pthread_cond_broadcast(&js->cond);
}

/* ---- listing ---- */

static struct timespec when_of(const struct job *j)
{
	return j->started_at.tv_sec ? j->started_at : j->created_at;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct job_entry *x = a, *y = b;
	if (x->when.tv_sec != y->when.tv_sec)
		return x->when.tv_sec < y->when.tv_sec ? -1 : 1;
	if (x->when.tv_nsec != y->when.tv_nsec)
		return x->when.tv_nsec < y->when.tv_nsec ? -1 : 1;
	return strcmp(x->id, y->id);
}

int jobs_list(struct jobs *js, struct job_entry **ret, size_t *ret_n)
{
	pthread_mutex_lock(&js->lock);
	size_t n = js->n;
	struct job_entry *e = n ? calloc(n, sizeof(*e)) : NULL;
	if (n && !e) {
		pthread_mutex_unlock(&js->lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(e[i].id, sizeof(e[i].id), "%s", js->all[i]->id);
		e[i].serial = js->all[i]->serial;
		e[i].when = when_of(js->all[i]);
	}
	pthread_mutex_unlock(&js->lock);
	if (n)
		qsort(e, n, sizeof(*e), entry_cmp);
	*ret = e;
	*ret_n = n;
	return 0;
}

/* Started and not ended (a job made by mkdir waits for its cmd). */
static bool running(const struct job *j)
{
	return j->state == JOB_STARTING || j->state == JOB_RUNNING;
}

int jobs_running(struct jobs *js, struct job ***ret, size_t *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	pthread_mutex_lock(&js->lock);
	size_t n = 0;
	for (size_t i = 0; i < js->n; i++)
		n += running(js->all[i]);
	struct job **set = n ? calloc(n, sizeof(*set)) : NULL;
	if (n && !set) {
		pthread_mutex_unlock(&js->lock);
		return -ENOMEM;
	}
	n = 0;
	for (size_t i = 0; set && i < js->n; i++) {
		struct job *j = js->all[i];
		if (running(j)) {
			job_get_locked(j);
			set[n++] = j;
		}
	}
	pthread_mutex_unlock(&js->lock);
	*ret = set;
	*ret_n = n;
	return 0;
}

void jobs_put_set(struct jobs *js, struct job **set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		job_put(js, set[i]);
	free(set);
}

void jobs_counts(struct jobs *js, size_t *ret_running, size_t *ret_total)
{
	pthread_mutex_lock(&js->lock);
	*ret_running = js->nrunning;
	*ret_total = js->n;
	pthread_mutex_unlock(&js->lock);
}

void job_view(struct jobs *js, struct job *j, struct job_view *ret)
{
	pthread_mutex_lock(&js->lock);
	memset(ret, 0, sizeof(*ret));
	ret->state = j->state;
	ret->failed = j->state == JOB_DONE && j->error;
	ret->exit_code = j->exit_code;
	ret->cmd_size = j->cmd ? (int64_t)strlen(j->cmd) : j->cmd_size;
	for (int k = 0; k < 2; k++) {
		ret->size[k] = j->size[k];
		ret->mtime[k] = j->mtime[k];
	}
	ret->created_at = j->created_at;
	ret->started_at = j->started_at;
	ret->finished_at = j->finished_at;
	pthread_mutex_unlock(&js->lock);
}

/* ---- ids and names ---- */

void jobs_new_id_locked(struct jobs *js, char *buf, size_t size,
			struct timespec *ret_when)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	now.tv_nsec -= now.tv_nsec % 1000000;
	/* strictly after the last id, to the millisecond */
	struct timespec last = js->last_id;
	if (now.tv_sec < last.tv_sec ||
	    (now.tv_sec == last.tv_sec && now.tv_nsec <= last.tv_nsec)) {
		now = last;
		now.tv_nsec += 1000000;
		if (now.tv_nsec >= 1000000000L) {
			now.tv_sec++;
			now.tv_nsec -= 1000000000L;
		}
	}
	js->last_id = now;

	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)mono_ms() * 2654435761u;
	struct tm tm;
	time_t sec = now.tv_sec;
	char day[24];
	gmtime_r(&sec, &tm);
	strftime(day, sizeof(day), "%Y%m%dT%H%M%S", &tm);
	snprintf(buf, size, "%s.%03ldZ-%06x", day, now.tv_nsec / 1000000,
		 r & 0xffffff);
	*ret_when = now;
}

bool job_id_valid(const char *s, size_t len)
{
	static const char ok[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				 "abcdefghijklmnopqrstuvwxyz0123456789._-";
	const size_t wl = sizeof(JOBS_WAIT_ALL) - 1;
	if (!len || len > JOB_NAME_MAX || s[0] == '.' || s[0] == '-' ||
	    (len == 6 && memcmp(s, "latest", 6) == 0) ||
	    (len == wl && memcmp(s, JOBS_WAIT_ALL, wl) == 0))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!s[i] || !strchr(ok, s[i]))
			return false;
	return true;
}

bool job_name_valid(const char *name)
{
	return job_id_valid(name, strlen(name));
}

static char *record_path(const char *dir, const char *id)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s", dir, id) < 0)
		return NULL;
	return p;
}

int jobs_make_named(struct jobs *js, const char *name, struct job **ret)
{
	struct osbfs *fs = js->fs;
	struct osb_error err;
	struct osb_stat st;

	osb_error_clear(&err);
	if (!job_name_valid(name))
		return -EINVAL;
	int rc = jobs_ensure_loaded(js);
	if (rc)
		return rc;
	struct job *j = jobs_find(js, name);
	if (j) {
		job_put(js, j);
		return -EEXIST;
	}
	char *path = record_path(JOBS_DIR, name);
	if (!path)
		return -ENOMEM;
	rc = remote_enter(fs);
	if (!rc) {
		/* another mount may have made it since we last looked */
		rc = osb_file_stat(fs->sb, path, &st, &err);
		if (!rc) {
			osb_stat_release(&st);
			rc = -EEXIST;
		} else if (rc == -ENOENT) {
			rc = osb_dir_make(fs->sb, path, 0755, NULL, NULL, &err);
			if (rc)
				log_error("mkdir jobs/%s: %s", name,
					  err.message);
		} else {
			log_error("mkdir jobs/%s: %s", name, err.message);
		}
	}
	free(path);
	if (rc)
		return rc == -EEXIST ? rc : fs_errno(rc);

	pthread_mutex_lock(&js->lock);
	j = job_find_locked(js, name);
	if (j) {
		j = NULL;
		rc = -EEXIST;
	} else {
		j = job_add_locked(js, name, JOB_CREATED);
		if (!j) {
			rc = -ENOMEM;
		} else {
			clock_gettime(CLOCK_REALTIME, &j->created_at);
			j->recorded_ms = mono_ms();
		}
	}
	pthread_mutex_unlock(&js->lock);
	if (!rc)
		*ret = j;
	return rc;
}

int jobs_remove(struct jobs *js, const char *id)
{
	struct osbfs *fs = js->fs;
	struct osb_error err;

	osb_error_clear(&err);
	pthread_mutex_lock(&js->lock);
	struct job *j = job_find_locked(js, id);
	int rc = !j ? -ENOENT : is_running(j->state) ? -EBUSY : 0;
	if (!rc)
		j->removing = true; /* job_start refuses it from now on */
	pthread_mutex_unlock(&js->lock);
	if (rc)
		return rc;

	char *paths[2] = { record_path(JOBS_DIR, id),
			   record_path(LIVE_DIR, id) };
	if (!paths[0] || !paths[1])
		rc = -ENOMEM;
	if (!rc)
		rc = remote_enter(fs);
	if (!rc) {
		rc = osb_dirs_remove(fs->sb, (const char *const *)paths, 2,
				     &err);
		if (rc)
			log_error("rmdir jobs/%s: %s", id, err.message);
	}
	free(paths[0]);
	free(paths[1]);
	if (rc)
		rc = fs_errno(rc);

	pthread_mutex_lock(&js->lock);
	j = job_find_locked(js, id);
	if (j && rc)
		j->removing = false;
	else if (j)
		job_drop_locked(js, j);
	pthread_mutex_unlock(&js->lock);
	jobs_wake_waiters(js);
	return rc;
}

/* ---- the end of a job ---- */

bool job_end_locked(struct jobs *js, struct job *j, int code, const char *error,
		    struct timespec finished)
{
	if (j->state == JOB_DONE && (error || !j->error))
		return false; /* known; an exit status beats an error */
	free(j->error);
	j->error = error ? strdup(error) : NULL;
	if (error && !j->error)
		j->error = strdup("out of memory");
	j->exit_code = error ? -1 : code;
	j->finished_at = finished;
	j->kill_at_ms = 0;
	job_set_state_locked(js, j, JOB_DONE);
	js->last_event_ms = mono_ms();
	return true;
}

void jobs_after_end(struct jobs *js)
{
	/* what the job wrote shows through the mount at once: the kernel
	 * has forgotten it before any `wait` reader hears of the end */
	fs_invalidate_all(js->fs);
	notify_drain(js->fs);
	jobs_wake_waiters(js);
}

void job_watch(struct jobs *js, struct job *j)
{
	pthread_mutex_lock(&js->lock);
	long long now = mono_ms();
	bool was = j->watched_until_ms > now;
	j->watched_until_ms = now + 3000;
	/* the monitor's listings give the output's sizes as it grows */
	if (j->streamed) {
		j->streamed = false;
		was = false;
	}
	if (!was && is_running(j->state)) {
		js->kick = true;
		pthread_cond_broadcast(&js->cond);
	}
	pthread_mutex_unlock(&js->lock);
}

/*
 * setup.c - the setup job's life in this mount (setup.h): the marker
 * read, the job started or followed, its outcome, and the gate other
 * jobs pass.
 *
 * State is behind s->lock (only the log's lock is taken under it, and it
 * is never held across a request; fs/osbfs.h has the order). The thread
 * alone talks to the sandbox; gates only wait on s->cond.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "log.h"
#include "osbfs.h"
#include "remote.h"
#include "setup.h"
#include "setup_decl.h"
#include "setup_script.h"

/* how often the thread looks at the setup job while it runs */
#define SETUP_LOOK_MS 250
/* a marker that cannot be read (the server away) is tried this often */
#define MARKER_TRIES 5

enum setup_state {
	SETUP_CHECKING, /* reading the marker */
	SETUP_RUNNING,  /* the setup job runs */
	SETUP_DONE,
	SETUP_FAILED,
};

struct setup {
	struct osbfs *fs;
	struct jobs *js;
	const struct setup_decl *decl;
	char hash[17];

	pthread_mutex_t lock; /* guards what follows */
	pthread_cond_t cond;  /* state changes, stop */
	enum setup_state state;
	bool reused;   /* the marker said it was all there */
	size_t count;  /* items the job installs */
	char *message; /* SETUP_FAILED: for info and refused starts */
	bool stop, started;
	pthread_t thread;
};

int setup_new(struct osbfs *fs, struct jobs *js, const struct setup_decl *decl,
	      struct setup **ret)
{
	*ret = NULL;
	if (!decl || setup_decl_empty(decl))
		return 0;
	struct setup *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fs = fs;
	s->js = js;
	s->decl = decl;
	setup_decl_hash(decl, s->hash);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->state = SETUP_CHECKING;
	*ret = s;
	return 0;
}

void setup_free(struct setup *s)
{
	if (!s)
		return;
	setup_stop(s);
	free(s->message);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

static bool stopping(struct setup *s)
{
	pthread_mutex_lock(&s->lock);
	bool stop = s->stop;
	pthread_mutex_unlock(&s->lock);
	return stop;
}

/* Sleeps @ms unless stopped; returns whether stopped. */
static bool nap(struct setup *s, long ms)
{
	struct timespec until;
	cond_deadline(&until, ms);
	pthread_mutex_lock(&s->lock);
	while (!s->stop &&
	       pthread_cond_timedwait(&s->cond, &s->lock, &until) == 0)
		;
	bool stop = s->stop;
	pthread_mutex_unlock(&s->lock);
	return stop;
}

static void set_state(struct setup *s, enum setup_state st)
{
	pthread_mutex_lock(&s->lock);
	s->state = st;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void succeed(struct setup *s, bool reused)
{
	if (reused)
		log_info("setup: the sandbox has what %s declares (marker %s)",
			 s->fs->opt->setup, SETUP_MARKER);
	else
		log_info("setup: done");
	pthread_mutex_lock(&s->lock);
	s->reused = reused;
	s->state = SETUP_DONE;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* The setup failed: @why, and whether the job's stderr tells more. */
static void fail(struct setup *s, const char *why, bool see_stderr)
{
	char *m = NULL;
	if (see_stderr)
		(void)!asprintf(&m,
				"setup failed (%s): see %s/jobs/" SETUP_JOB
				"/stderr",
				why, s->fs->opt->control_dir);
	else
		(void)!asprintf(&m, "setup failed: %s", why);
	log_error("%s", m ? m : why);
	pthread_mutex_lock(&s->lock);
	free(s->message);
	s->message = m;
	s->state = SETUP_FAILED;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* ---- reading the sandbox ---- */

/* Up to @max bytes of @path. -ENOENT if there is none. */
static int fetch(struct setup *s, const char *path, int64_t max,
		 struct text *out)
{
	int rc = remote_enter(s->fs);
	if (!rc)
		rc = remote_download(s->fs, path, 0, max, text_sink, out, NULL);
	return rc;
}

/*
 * The marker: 0 with its hash and items; -ENOENT when it is absent or
 * not one (the sandbox is not trusted: garbage is no marker); another
 * errno when it could not be read.
 */
static int marker_read(struct setup *s, char hash[17], struct setup_list *items)
{
	int rc = -EIO;
	for (int i = 0; i < MARKER_TRIES && !stopping(s); i++) {
		struct text t = { 0 };
		if (i && nap(s, 1000L << (i - 1)))
			break;
		rc = fetch(s, SETUP_MARKER, (int64_t)SETUP_MARKER_MAX + 1, &t);
		if (!rc && setup_marker_parse(t.s ? t.s : "", t.len, hash,
					      items) != 0) {
			log_info("setup: %s in the sandbox is not a marker "
				 "osbfs wrote: taken as absent",
				 SETUP_MARKER);
			rc = -ENOENT;
		}
		text_release(&t);
		if (rc != -EIO && rc != -ETIMEDOUT && rc != -EAGAIN)
			break;
	}
	return rc;
}

/* One line of text the script left on why it failed, made printable;
 * malloc'd, NULL if none. */
static char *failed_reason(struct setup *s)
{
	struct text t = { 0 };
	char *why = NULL;
	if (fetch(s, SETUP_REASON, 512, &t) == 0 && t.s) {
		size_t n = strcspn(t.s, "\n");
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)t.s[i] < 0x20 || t.s[i] == 0x7f)
				t.s[i] = '?';
		if (n)
			why = strndup(t.s, n);
	}
	text_release(&t);
	return why;
}

/* Whether job @j's command is our script (the same hash). */
static bool cmd_is_ours(struct setup *s, struct job *j)
{
	struct text t = { 0 };
	char head[64];
	snprintf(head, sizeof(head), "# osbfs setup %s:", s->hash);
	bool ours = job_cmd_text(s->js, j, &t) == 0 && t.s &&
		    strncmp(t.s, head, strlen(head)) == 0;
	text_release(&t);
	return ours;
}

/* ---- the job ---- */

/* Waits for @j to end: 0, or -EINTR when the mount stops. */
static int wait_end(struct setup *s, struct job *j)
{
	for (;;) {
		struct job_view v;
		job_view(s->js, j, &v);
		if (v.state == JOB_DONE)
			return 0;
		job_watch(s->js, j); /* the monitor polls it quickly */
		if (nap(s, SETUP_LOOK_MS))
			return -EINTR;
	}
}

/* How job @j ended, as the setup's outcome. */
static void outcome(struct setup *s, struct job *j)
{
	struct job_view v;
	struct text st = { 0 };
	char why[300];

	job_view(s->js, j, &v);
	if (!v.failed && v.exit_code == 0) {
		succeed(s, false);
		return;
	}
	if (v.failed) {
		/* no exit status: the job's own error says why */
		job_status_text(s->js, j, &st);
		size_t n = st.s ? strcspn(st.s, "\n") : 0;
		snprintf(why, sizeof(why), "the setup job: %.*s", (int)n,
			 st.s ? st.s : "failed");
		text_release(&st);
		fail(s, why, false);
		return;
	}
	char *reason = failed_reason(s);
	if (reason)
		snprintf(why, sizeof(why), "%s", reason);
	else
		snprintf(why, sizeof(why), "the setup job exited %d",
			 v.exit_code);
	free(reason);
	fail(s, why, true);
}

/* Starts our setup job for what @have (NULL: nothing) lacks. 0, -EEXIST
 * (another mount made one meanwhile), or another errno (reported). */
static int start_job(struct setup *s, const struct setup_list *have,
		     struct job **ret)
{
	struct text script = { 0 };
	struct job *j = NULL;
	size_t count = 0;
	char why[300];

	int rc = setup_script(s->decl, s->hash, have, &script, &count);
	if (rc) {
		fail(s, strerror(-rc), false);
		return rc;
	}
	rc = jobs_make_named(s->js, SETUP_JOB, &j);
	if (rc == -EEXIST) {
		text_release(&script);
		return rc;
	}
	if (!rc) {
		rc = job_start(s->js, j, script.s, script.len);
		if (rc) {
			job_put(s->js, j);
			jobs_remove(s->js, SETUP_JOB);
		}
	}
	text_release(&script);
	if (rc) {
		snprintf(why, sizeof(why), "the setup job could not start: %s",
			 strerror(-rc));
		fail(s, why, false);
		return rc;
	}
	log_info("setup: installing %zu item%s (job %s)", count,
		 count == 1 ? "" : "s", SETUP_JOB);
	pthread_mutex_lock(&s->lock);
	s->count = count;
	s->state = SETUP_RUNNING;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	*ret = j;
	return 0;
}

/*
 * One look: the marker, then a setup job running already (followed), or
 * ours started. Returns 1 to look again (another mount's job ended, or
 * made one meanwhile), else 0 (the outcome is set) or -EINTR.
 */
static int look(struct setup *s)
{
	char hash[17], why[300];
	struct setup_list have = { 0 };
	struct job *j = NULL;

	int rc = marker_read(s, hash, &have);
	if (rc && rc != -ENOENT) {
		snprintf(why, sizeof(why), "cannot read %s in the sandbox: %s",
			 SETUP_MARKER, strerror(-fs_errno(rc)));
		fail(s, why, false);
		return 0;
	}
	bool found = rc == 0;
	if (found && strcmp(hash, s->hash) == 0) {
		setup_list_release(&have);
		succeed(s, true);
		return 0;
	}
	rc = jobs_ensure_loaded(s->js);
	j = rc ? NULL : jobs_find(s->js, SETUP_JOB);
	if (rc) {
		snprintf(why, sizeof(why),
			 "cannot read the jobs in the sandbox: %s",
			 strerror(-rc));
		fail(s, why, false);
	} else if (j) {
		struct job_view v;
		job_view(s->js, j, &v);
		if (v.state == JOB_RUNNING || v.state == JOB_STARTING) {
			/* a mount killed during its setup, or another
			 * mount's: never a second one at once */
			bool ours = cmd_is_ours(s, j);
			log_info("setup: a setup job runs in the sandbox "
				 "already; following it");
			set_state(s, SETUP_RUNNING);
			rc = wait_end(s, j);
			if (!rc && ours)
				outcome(s, j);
			else if (!rc)
				rc = 1; /* another declaration's: look again */
		} else {
			/* an earlier setup's record: ours replaces it */
			rc = jobs_remove(s->js, SETUP_JOB);
			if (rc && rc != -ENOENT) {
				snprintf(why, sizeof(why),
					 "cannot remove the earlier jobs/"
					 "setup: %s",
					 strerror(-rc));
				fail(s, why, false);
				rc = 0;
			} else {
				rc = 2; /* start ours */
			}
		}
		job_put(s->js, j);
		j = NULL;
	} else {
		rc = 2;
	}
	if (rc == 2) {
		rc = start_job(s, found ? &have : NULL, &j);
		if (rc == -EEXIST) {
			rc = 1;
		} else if (!rc) {
			rc = wait_end(s, j);
			if (!rc)
				outcome(s, j);
			job_put(s->js, j);
		} else {
			rc = 0;
		}
	}
	setup_list_release(&have);
	return rc;
}

static void *setup_main(void *arg)
{
	struct setup *s = arg;
	int rc = 1;
	for (int round = 0; round < 4 && rc == 1; round++)
		rc = look(s);
	if (rc == 1)
		fail(s,
		     "another mount of the sandbox kept starting a setup job "
		     "of another declaration",
		     false);
	return NULL;
}

int setup_start(struct setup *s)
{
	if (!s)
		return 0;
	int rc = pthread_create(&s->thread, NULL, setup_main, s);
	if (rc)
		return -rc;
	s->started = true;
	return 0;
}

void setup_stop(struct setup *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (s->started) {
		pthread_join(s->thread, NULL);
		s->started = false;
	}
}

/* ---- the gate ---- */

int setup_gate(struct setup *s, const char *what)
{
	if (!s)
		return 0;
	long long deadline = mono_ms() + SETUP_GATE_MS;
	bool said = false, late = false, gone = false;

	pthread_mutex_lock(&s->lock);
	while (!s->stop &&
	       (s->state == SETUP_CHECKING || s->state == SETUP_RUNNING)) {
		if (!said) {
			said = true;
			log_info("%s: waits for the setup (jobs/" SETUP_JOB
				 ") to end",
				 what);
		}
		/* in slices: an unmount does not wait for the setup (the
		 * FUSE loop joins this thread before setup_stop() runs) */
		struct timespec slice;
		cond_deadline(&slice, 1000);
		pthread_cond_timedwait(&s->cond, &s->lock, &slice);
		if (s->fs->se && fuse_session_exited(s->fs->se)) {
			gone = true;
			break;
		}
		if (mono_ms() >= deadline) {
			late = true;
			break;
		}
	}
	enum setup_state st = s->state;
	char *m = s->message ? strdup(s->message) : NULL;
	bool stop = s->stop;
	pthread_mutex_unlock(&s->lock);

	int rc = 0;
	if (st == SETUP_FAILED) {
		log_error("%s: %s", what, m ? m : "setup failed");
		rc = -ENOPKG;
	} else if (late && st != SETUP_DONE) {
		log_error("%s: the setup (%s/jobs/" SETUP_JOB
			  ") is still running after %ld minutes; try again "
			  "later",
			  what, s->fs->opt->control_dir, SETUP_GATE_MS / 60000);
		rc = -EAGAIN;
	} else if ((stop || gone) && st != SETUP_DONE) {
		rc = -EIO;
	}
	free(m);
	return rc;
}

int setup_info_json(struct setup *s, struct text *out)
{
	static const char *const names[] = {
		[SETUP_CHECKING] = "checking",
		[SETUP_RUNNING] = "running",
		[SETUP_DONE] = "done",
		[SETUP_FAILED] = "failed",
	};
	if (!s)
		return text_adds(out, ",\"setup\":null");
	pthread_mutex_lock(&s->lock);
	enum setup_state st = s->state;
	bool reused = s->reused;
	size_t count = s->count;
	char *m = s->message ? strdup(s->message) : NULL;
	pthread_mutex_unlock(&s->lock);

	int rc = text_adds(out, ",\"setup\":{\"state\":");
	rc = rc ? rc : text_json_str(out, names[st]);
	rc = rc ? rc : text_adds(out, ",\"file\":");
	rc = rc ? rc : text_json_str(out, s->fs->opt->setup);
	rc = rc ? rc : text_printf(out, ",\"hash\":\"%s\"", s->hash);
	rc = rc ? rc : text_adds(out, ",\"job\":\"" SETUP_JOB "\"");
	rc = rc ? rc :
		  text_printf(out, ",\"reused\":%s,\"installing\":%zu",
			      reused ? "true" : "false", count);
	rc = rc ? rc : text_adds(out, ",\"error\":");
	rc = rc ? rc : text_json_str(out, st == SETUP_FAILED ? m : NULL);
	free(m);
	return rc ? rc : text_adds(out, "}");
}

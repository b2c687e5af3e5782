/*
 * jobs_start.c - what a user does to a job that talks to the sandbox:
 * start it (after every dirty file is uploaded, so the job sees every
 * write that completed before), signal it, read its command and output.
 *
 * Starting sends the wrapper with the command in it: it makes the record
 * itself (live/ID/alive, then cwd, then cmd: a record with a cmd always
 * has its live/ directory until it ends), as a foreground command whose
 * stream tells the start and the end (jobs_stream.c), or as a background
 * command when too many streams are read. A command that cannot travel
 * in the wrapper (not UTF-8, a NUL, too long) is uploaded as the record
 * (the same parts in one upload, which execd stores in order) before a
 * background wrapper.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_i.h"
#include "log.h"
#include "remote.h"
#include "writeback.h"

/* the longest a start waits for dirty files to reach the sandbox */
#define START_FLUSH_MS (10L * 60 * 1000)
/* how many times the wrapper is sent before a start fails */
#define START_TRIES 5
/* how long a start whose outcome is unknown looks for the job's claim
 * before it sends the wrapper again */
#define CLAIM_LOOKS 10
#define CLAIM_LOOK_MS 200

/* Whether a failed command start never left: execd could not be
 * reached at all. */
static bool unsent(int rc)
{
	return rc == -ECONNREFUSED || rc == -EHOSTUNREACH;
}

/* Whether a failed command start may still have reached execd (then the
 * job is taken as started, and the monitor finds out). */
static bool maybe_started(int rc, const struct osb_error *err)
{
	if (unsent(rc))
		return false;
	if (err->status >= 400 && err->status < 500)
		return false;
	/* execd said it could not spawn; an answer it cut or garbled
	 * (-EPROTO) says nothing of whether the command runs */
	if (err->status == 200 && rc != -EPROTO)
		return false;
	return true;
}

/* Whether a wrapper has claimed job @id: how a start whose answer was
 * lost is settled by checking. The claim's sign is the record's stdout,
 * which the wrapper makes right after it (live/ID/claim itself goes with
 * live/ID when the job ends). */
static bool claimed(struct osbfs *fs, const char *id)
{
	char path[160];
	struct fattr a;

	snprintf(path, sizeof(path), JOBS_DIR "/%s/stdout", id);
	for (int i = 0; i < CLAIM_LOOKS; i++) {
		if (i)
			mono_sleep_ms(CLAIM_LOOK_MS);
		if (remote_stat(fs, path, &a) == 0)
			return true;
	}
	return false;
}

/* Removes what a failed start left in the sandbox. */
static void start_undo(struct jobs *js, const char *id, bool named)
{
	char rec[128], live[128], cmd[128], cwd[128], claim[128];
	snprintf(rec, sizeof(rec), JOBS_DIR "/%s", id);
	snprintf(live, sizeof(live), LIVE_DIR "/%s", id);
	snprintf(cmd, sizeof(cmd), JOBS_DIR "/%s/cmd", id);
	snprintf(cwd, sizeof(cwd), JOBS_DIR "/%s/cwd", id);
	snprintf(claim, sizeof(claim), JOBS_DIR "/%s/claim", id);
	/* a named job's record stays, without the claim: it may be
	 * started again */
	const char *dirs[2] = { live, rec };
	const char *files[3] = { cmd, cwd, claim };
	osb_dirs_remove(js->fs->sb, dirs, named ? 1 : 2, NULL);
	if (named)
		osb_files_remove(js->fs->sb, files, 3, NULL);
}

/* Flush, record, start the wrapper. 0, or a negative errno (logged);
 * *ret_ambiguous when the job may run anyway. */
/* The record, uploaded: the path of a command the wrapper cannot carry.
 * 0, or a negative errno (logged). */
static int upload_record(struct jobs *js, const char *id, const char *cmd,
			 size_t len)
{
	struct osbfs *fs = js->fs;
	struct osb_error err;
	char alive[128], cwd[128], cmdp[128];

	osb_error_clear(&err);
	snprintf(alive, sizeof(alive), LIVE_DIR "/%s/alive", id);
	snprintf(cwd, sizeof(cwd), JOBS_DIR "/%s/cwd", id);
	snprintf(cmdp, sizeof(cmdp), JOBS_DIR "/%s/cmd", id);
	struct osb_upload u[3] = {
		{ .path = alive,
		  .data = "",
		  .fd = -1,
		  .size = 0,
		  .mode = 0644 },
		{ .path = cwd,
		  .data = fs->root,
		  .fd = -1,
		  .size = (int64_t)strlen(fs->root),
		  .mode = 0644 },
		{ .path = cmdp,
		  .data = cmd,
		  .fd = -1,
		  .size = (int64_t)len,
		  .mode = 0644 },
	};
	int rc = osb_file_upload(fs->sb, u, 3, &err);
	if (rc) {
		log_error("job %s not started: cannot write its record: %s", id,
			  err.message);
		return fs_errno(rc);
	}
	return 0;
}

/* Flush, then start the wrapper: streamed (*ret_st, to be acked once @j
 * runs; NULL when the monitor follows the job) or in the background. 0,
 * or a negative errno (logged); *ret_ambiguous when the job may run
 * anyway. */
static int start_remote(struct jobs *js, struct job *j, const char *cmd,
			size_t len, bool *ret_ambiguous,
			struct jstream **ret_st)
{
	const char *id = j->id;
	struct osbfs *fs = js->fs;
	struct osb_error err;

	*ret_ambiguous = false;
	*ret_st = NULL;
	osb_error_clear(&err);
	int rc = remote_enter(fs);
	if (rc) {
		log_error("job %s not started: the sandbox is not running", id);
		return -EIO;
	}
	rc = wb_flush_all(fs, START_FLUSH_MS);
	if (rc) {
		log_error("job %s not started: files written through the mount "
			  "could not all be uploaded to the sandbox (%s)",
			  id, strerror(-rc));
		return -EIO;
	}
	bool maybe = false;
	char *script = job_inline_script(id, fs->root, cmd, len);
	bool inline_ = script != NULL;
	if (inline_) {
		bool taken;
		rc = jstream_start(js, j, script, ret_st, &taken, &err);
		if (!rc) {
			log_debug("job %s started%s", id,
				  taken ? " (by an earlier copy of its start)" :
					  "");
			free(script);
			return 0;
		}
		maybe = rc != -EBUSY && maybe_started(rc, &err);
		if (rc != -EBUSY && !maybe && !unsent(rc)) {
			log_error("job %s: not started: %s", id, err.message);
			free(script);
			return fs_errno(rc);
		}
		if (rc == -EBUSY) {
			/* too many streams: the record is uploaded first, so
			 * that it is there once the start returns */
			free(script);
			script = NULL;
			inline_ = false;
		}
		/* else the wrapper holds the claim, and may go again as a
		 * background command */
	}
	if (!inline_) {
		rc = upload_record(js, id, cmd, len);
		if (rc)
			return rc;
		script = job_wrapper_script(id);
		if (!script)
			return -ENOMEM;
	}
	struct osb_command_opts o;
	char cid[OSB_ID_MAX];
	osb_command_opts_init(&o);
	o.cwd = fs->root;
	o.resend_safe = inline_; /* its claim outlives the job */
	/* The wrapper claims the job before anything else (jobs_script.c),
	 * and a second copy of it exits at once. A start whose answer was
	 * lost is settled by looking for the claim; only when none shows is
	 * it sent again, and then the job still runs once. */
	if (maybe && claimed(fs, id)) {
		log_info("job %s: its start was not confirmed (%s), and the "
			 "sandbox has it running",
			 id, err.message);
		free(script);
		return 0;
	}
	for (int attempt = 1;; attempt++) {
		osb_error_clear(&err);
		rc = osb_command_start(fs->sb, script, &o, cid, &err);
		if (!rc)
			break;
		bool reached = maybe_started(rc, &err);
		maybe = maybe || reached;
		if (reached && claimed(fs, id)) {
			log_info("job %s: its start was not confirmed (%s), "
				 "and the sandbox has it running",
				 id, err.message);
			snprintf(cid, sizeof(cid), "unknown");
			rc = 0;
			break;
		}
		if (attempt == START_TRIES || !(reached || unsent(rc)))
			break;
		log_info("job %s: starting again (%s)", id, err.message);
		mono_sleep_ms(250L * attempt);
	}
	free(script);
	if (!rc && inline_ && !claimed(fs, id)) {
		/* a background wrapper makes the record as it runs: the job
		 * is started once its claim shows */
		snprintf(err.message, sizeof(err.message),
			 "its wrapper did not claim it");
		rc = -EIO;
		maybe = true;
	}
	if (rc) {
		*ret_ambiguous = maybe;
		log_error("job %s: %s: %s", id,
			  *ret_ambiguous ? "the start was not confirmed" :
					   "not started",
			  err.message);
		return fs_errno(rc);
	}
	log_debug("job %s started (execd command %s)", id, cid);
	return 0;
}

/* Marks @j started with @cmd. Locked. */
static void started_locked(struct jobs *js, struct job *j, const char *cmd,
			   size_t len, struct timespec when, bool streamed)
{
	j->streamed = streamed;
	free(j->cmd);
	j->cmd = strndup(cmd, len);
	j->cmd_size = (int64_t)len;
	free(j->cwd);
	j->cwd = strdup(js->fs->root);
	j->started_at = when;
	j->recorded_ms = mono_ms();
	j->alive_seen_ms = 0;
	job_set_state_locked(js, j, JOB_RUNNING);
	jobs_kick_locked(js);
}

int job_start(struct jobs *js, struct job *j, const char *cmd, size_t len)
{
	struct jstream *st = NULL;
	bool ambiguous;
	struct timespec now;

	pthread_mutex_lock(&js->lock);
	int rc = !j->in_table || j->removing ? -ENOENT :
		 j->state != JOB_CREATED     ? -EACCES :
					       0;
	if (!rc)
		job_set_state_locked(js, j, JOB_STARTING);
	pthread_mutex_unlock(&js->lock);
	if (rc)
		return rc;

	clock_gettime(CLOCK_REALTIME, &now);
	rc = start_remote(js, j, cmd, len, &ambiguous, &st);
	if (rc && !ambiguous)
		start_undo(js, j->id, true);
	pthread_mutex_lock(&js->lock);
	if (!rc || ambiguous)
		started_locked(js, j, cmd, len, now, st != NULL);
	else
		job_set_state_locked(js, j, JOB_CREATED);
	pthread_mutex_unlock(&js->lock);
	jstream_ack(st);
	return rc;
}

int jobs_run(struct jobs *js, const char *cmd, size_t len, struct job **ret)
{
	char id[JOB_ID_MAX];
	struct timespec when;
	struct jstream *st = NULL;
	bool ambiguous;

	pthread_mutex_lock(&js->lock);
	jobs_new_id_locked(js, id, sizeof(id), &when);
	struct job *j = job_add_locked(js, id, JOB_STARTING);
	if (j)
		j->created_at = when;
	pthread_mutex_unlock(&js->lock);
	if (!j)
		return -ENOMEM;

	int rc = start_remote(js, j, cmd, len, &ambiguous, &st);
	if (rc && !ambiguous)
		start_undo(js, id, false);
	pthread_mutex_lock(&js->lock);
	if (!rc || ambiguous) {
		started_locked(js, j, cmd, len, when, st != NULL);
	} else {
		job_drop_locked(js, j);
		job_put_locked(js, j);
		j = NULL;
	}
	pthread_mutex_unlock(&js->lock);
	jstream_ack(st);
	if (!j) {
		jobs_wake_waiters(js);
		return rc;
	}
	*ret = j;
	return 0;
}

int job_signal(struct jobs *js, struct job *j, const char *name, bool escalate)
{
	char sig[16];
	char *out = NULL, *errout = NULL;
	int code = -1;

	if (job_signal_parse(name, sig, sizeof(sig)))
		return -EINVAL;
	pthread_mutex_lock(&js->lock);
	bool running = j->state == JOB_RUNNING || j->state == JOB_STARTING;
	pthread_mutex_unlock(&js->lock);
	if (!running)
		return -ESRCH;
	char *script = job_signal_script(j->id, sig);
	if (!script)
		return -ENOMEM;
	int rc = remote_shell(js->fs, script, SHELL_ONCE, &out, &errout, &code);
	free(script);
	free(out);
	free(errout);
	if (rc)
		return rc;
	if (code == 3)
		return -ESRCH;
	if (code != 0) {
		log_error("job %s: could not hand it signal %s (it takes no "
			  "signals)",
			  j->id, sig);
		return -EIO;
	}
	log_info("job %s: sent SIG%s", j->id, sig);
	pthread_mutex_lock(&js->lock);
	if (escalate && j->state != JOB_DONE) {
		j->kill_at_ms = mono_ms() + JOB_KILL_GRACE_MS;
		j->streamed = false; /* the monitor sends the SIGKILL */
	}
	jobs_kick_locked(js);
	pthread_mutex_unlock(&js->lock);
	return 0;
}

int job_cmd_text(struct jobs *js, struct job *j, struct text *out)
{
	char path[128];
	struct text t = { 0 };

	pthread_mutex_lock(&js->lock);
	int rc = j->cmd                  ? text_adds(out, j->cmd) :
		 j->state == JOB_CREATED ? -ENOENT :
					   1;
	pthread_mutex_unlock(&js->lock);
	if (rc <= 0)
		return rc;
	/* a job this mount did not start: its record has the command */
	snprintf(path, sizeof(path), JOBS_DIR "/%s/cmd", j->id);
	rc = remote_download(js->fs, path, 0, TEXT_MAX, text_sink, &t, NULL);
	if (rc) {
		text_release(&t);
		return rc;
	}
	pthread_mutex_lock(&js->lock);
	if (!j->cmd && t.s)
		j->cmd = strdup(t.s);
	pthread_mutex_unlock(&js->lock);
	rc = t.s ? text_add(out, t.s, t.len) : 0;
	text_release(&t);
	return rc;
}

int job_read_output(struct jobs *js, struct job *j, enum job_stream which,
		    size_t size, int64_t off, struct text *out)
{
	char path[128];

	pthread_mutex_lock(&js->lock);
	bool done = j->state == JOB_DONE;
	bool none = j->state == JOB_CREATED;
	bool final = done && j->size_final[which];
	int64_t known = j->size[which];
	pthread_mutex_unlock(&js->lock);
	/* the size seen last may predate the job's last writes (a listing
	 * stats stdout before the exit marker): a done job's end is known
	 * once a read found it */
	if (none || (final && off >= known))
		return 0;
	if (!done)
		job_watch(js, j);
	snprintf(path, sizeof(path), JOBS_DIR "/%s/%s", j->id,
		 which == JOB_STDOUT ? "stdout" : "stderr");
	int rc = remote_download(js->fs, path, off, (int64_t)size, text_sink,
				 out, NULL);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	/* st_size never goes below what a reader has seen (tail -f would
	 * take a smaller size for a truncation) */
	pthread_mutex_lock(&js->lock);
	if (off + (int64_t)out->len > j->size[which])
		j->size[which] = off + (int64_t)out->len;
	if (done && out->len < size)
		j->size_final[which] = true; /* short: the end */
	pthread_mutex_unlock(&js->lock);
	return 0;
}

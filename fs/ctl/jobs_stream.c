/*
 * jobs_stream.c - a job started as a foreground command whose stream
 * tells its start and its end.
 *
 * The inline wrapper (jobs_script.c) claims the job in its record before
 * anything else, so a copy of it that arrives twice runs nothing: its
 * request may go over a reused connection (resend_safe). It prints a
 * line once the job runs (its pid is in the record) and one when it
 * ended, with the exit status and the output's sizes. The start waits
 * for the first line only; a reader thread keeps reading the stream and
 * ends the job at the second, which answers the waits without a
 * listing. It also reads the second or so execd keeps the response open
 * after the command, so that the connection goes back to the pool.
 *
 * The wrapper still keeps its record and live/ID as a background one
 * does: when the stream breaks, is read for longer than
 * JOB_STREAM_HOLD_MS, or someone follows the job's output, the monitor
 * follows the job instead (streamed cleared). At most JOB_STREAMS_MAX
 * streams are read at once; beyond, a start is a background command.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_i.h"
#include "log.h"
#include "watch.h"

enum phase { PH_WAIT, PH_STARTED, PH_TAKEN, PH_FAILED };

struct jstream {
	struct jobs *js;
	struct job *j; /* a reference */
	char *script;
	pthread_mutex_t m;
	pthread_cond_t c;
	/* under m */
	enum phase phase;
	bool acked; /* the job is RUNNING and streamed */
	int refs;
	/* the reader's */
	bool ended;
	char last_err[256]; /* the wrapper's last stderr line */
	/* for the starter, once phase is PH_FAILED */
	int rc;
	struct osb_error err;
};

static void st_put(struct jstream *st)
{
	pthread_mutex_lock(&st->m);
	bool last = --st->refs == 0;
	pthread_mutex_unlock(&st->m);
	if (!last)
		return;
	pthread_mutex_destroy(&st->m);
	pthread_cond_destroy(&st->c);
	free(st->script);
	free(st);
}

static void set_phase(struct jstream *st, enum phase ph)
{
	pthread_mutex_lock(&st->m);
	if (st->phase == PH_WAIT)
		st->phase = ph;
	pthread_cond_broadcast(&st->c);
	pthread_mutex_unlock(&st->m);
}

/* Waits until the starter made the job RUNNING. false: it never will
 * (the start did not take the stream's word). */
static bool wait_ack(struct jstream *st)
{
	pthread_mutex_lock(&st->m);
	while (st->phase == PH_STARTED && !st->acked)
		pthread_cond_wait(&st->c, &st->m);
	bool ok = st->phase == PH_STARTED && st->acked;
	pthread_mutex_unlock(&st->m);
	return ok;
}

/* "osbfs-job: end RC OUT ERR": the job ended. */
static void on_end(struct jstream *st, const char *args)
{
	long long code = -1, size[2] = { -1, -1 };
	struct timespec now;

	if (sscanf(args, "%lld %lld %lld", &code, &size[0], &size[1]) < 1 ||
	    code < 0 || code > 255 || !wait_ack(st))
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	struct jobs *js = st->js;
	struct job *j = st->j;
	pthread_mutex_lock(&js->lock);
	bool changed = false;
	if (j->state == JOB_RUNNING) {
		for (int k = 0; k < 2; k++)
			if (size[k] > j->size[k])
				j->size[k] = size[k];
		changed = job_end_locked(js, j, (int)code, NULL, now);
	}
	pthread_mutex_unlock(&js->lock);
	st->ended = true;
	if (changed) {
		log_debug("job %s ended (exit %lld), as its stream said", j->id,
			  code);
		jobs_after_end(js);
	}
}

static void on_line(struct jstream *st, const char *line, size_t len,
		    bool is_stderr)
{
	char buf[256];
	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	memcpy(buf, line, len);
	buf[len] = '\0';
	if (is_stderr) {
		/* the sandbox's text, for a message: printable only */
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
				buf[i] = '?';
		if (len)
			memcpy(st->last_err, buf, len + 1);
		return;
	}
	if (strcmp(buf, JOB_LINE_STARTED) == 0)
		set_phase(st, PH_STARTED);
	else if (strcmp(buf, JOB_LINE_TAKEN) == 0)
		set_phase(st, PH_TAKEN);
	else if (strncmp(buf, JOB_LINE_END " ", strlen(JOB_LINE_END) + 1) == 0)
		on_end(st, buf + strlen(JOB_LINE_END) + 1);
}

static int on_event(void *arg, const struct osb_event *ev)
{
	struct jstream *st = arg;
	if ((ev->type != OSB_EV_STDOUT && ev->type != OSB_EV_STDERR) ||
	    !ev->text)
		return 0;
	for (const char *p = ev->text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		on_line(st, p, len, ev->type == OSB_EV_STDERR);
		p += len + (nl ? 1 : 0);
	}
	return 0;
}

static void *reader_main(void *arg)
{
	struct jstream *st = arg;
	struct jobs *js = st->js;
	struct job *j = st->j;
	struct osb_command_opts o;
	struct osb_error err;
	int code = -1;

	/* a stream that lasts, with its own flag (and its own limit,
	 * JOB_STREAM_HOLD_MS): not the watchdog's */
	watch_exempt_thread();
	osb_cancel_flag_set(&js->streams_cancel);
	osb_command_opts_init(&o);
	o.cwd = js->fs->root;
	o.no_follow = true;
	o.resend_safe = true;
	o.stream_max_ms = JOB_STREAM_HOLD_MS;
	osb_error_clear(&err);
	int rc = osb_command_run(js->fs->sb, st->script, &o, on_event, st,
				 &code, NULL, &err);

	pthread_mutex_lock(&st->m);
	if (st->phase == PH_WAIT) {
		st->phase = PH_FAILED;
		if (rc) {
			st->rc = rc;
			st->err = err;
		} else if (code != 0) {
			/* the wrapper ran and failed: nothing started */
			st->rc = -EIO;
			st->err.status = 200;
			snprintf(st->err.message, sizeof(st->err.message),
				 "its wrapper failed (exit %d%s%s)", code,
				 st->last_err[0] ? ": " : "", st->last_err);
		} else {
			st->rc = -EPROTO;
			st->err.status = 200;
			snprintf(st->err.message, sizeof(st->err.message),
				 "its wrapper ended without a word");
		}
	}
	pthread_cond_broadcast(&st->c);
	pthread_mutex_unlock(&st->m);

	if (!st->ended && wait_ack(st)) {
		/* the stream broke or was read long enough: the monitor
		 * finds the end in the sandbox */
		log_debug("job %s: its stream ended before the job (%s)", j->id,
			  rc ? err.message : "no end line");
		pthread_mutex_lock(&js->lock);
		j->streamed = false;
		jobs_kick_locked(js);
		pthread_mutex_unlock(&js->lock);
	}
	pthread_mutex_lock(&js->lock);
	js->nstreams--;
	job_put_locked(js, j);
	pthread_cond_broadcast(&js->cond);
	pthread_mutex_unlock(&js->lock);
	st_put(st);
	return NULL;
}

int jstream_start(struct jobs *js, struct job *j, const char *script,
		  struct jstream **ret, bool *ret_taken, struct osb_error *err)
{
	pthread_attr_t attr;
	pthread_t t;

	*ret = NULL;
	*ret_taken = false;
	struct jstream *st = calloc(1, sizeof(*st));
	if (!st)
		return -EBUSY;
	st->script = strdup(script);
	if (!st->script) {
		free(st);
		return -EBUSY;
	}
	st->js = js;
	st->j = j;
	st->refs = 2;
	pthread_mutex_init(&st->m, NULL);
	pthread_cond_init(&st->c, NULL);

	pthread_mutex_lock(&js->lock);
	bool room = !js->stop && js->nstreams < JOB_STREAMS_MAX;
	if (room) {
		js->nstreams++;
		job_get_locked(j);
	}
	pthread_mutex_unlock(&js->lock);
	int rc = room ? 0 : -EBUSY;
	if (!rc) {
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = -pthread_create(&t, &attr, reader_main, st);
		pthread_attr_destroy(&attr);
		if (rc) {
			pthread_mutex_lock(&js->lock);
			js->nstreams--;
			job_put_locked(js, j);
			pthread_cond_broadcast(&js->cond);
			pthread_mutex_unlock(&js->lock);
			rc = -EBUSY;
		}
	}
	if (rc) {
		st->refs = 1;
		st_put(st);
		return rc;
	}

	pthread_mutex_lock(&st->m);
	while (st->phase == PH_WAIT)
		pthread_cond_wait(&st->c, &st->m);
	enum phase ph = st->phase;
	if (ph == PH_FAILED) {
		rc = st->rc;
		*err = st->err;
	}
	pthread_mutex_unlock(&st->m);
	if (ph == PH_STARTED) {
		*ret = st;
		return 0;
	}
	*ret_taken = ph == PH_TAKEN;
	st_put(st);
	return rc;
}

void jstream_ack(struct jstream *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->m);
	st->acked = true;
	pthread_cond_broadcast(&st->c);
	pthread_mutex_unlock(&st->m);
	st_put(st);
}

void jstreams_stop(struct jobs *js)
{
	atomic_store(&js->streams_cancel, 1);
	pthread_mutex_lock(&js->lock);
	if (js->nstreams)
		log_debug("stopping %zu job stream(s)", js->nstreams);
	while (js->nstreams)
		pthread_cond_wait(&js->cond, &js->lock);
	pthread_mutex_unlock(&js->lock);
}

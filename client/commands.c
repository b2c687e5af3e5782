/*
 * commands.c - execd's /command (foreground, background, status, logs,
 * interrupt) and bash sessions (/session).
 *
 * A command is never sent twice: once the request may have reached execd,
 * only the command's id (from its init event) is used to learn how it
 * ended, by polling its status.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"

void osb_command_opts_init(struct osb_command_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->uid = -1;
	o->gid = -1;
}

void osb_command_status_release(struct osb_command_status *st)
{
	if (!st)
		return;
	free(st->id);
	free(st->content);
	free(st->error);
	memset(st, 0, sizeof(*st));
}

static int check_id(const char *id, struct osb_error *err)
{
	if (id && *id && strlen(id) < OSB_ID_MAX &&
	    strspn(id, "0123456789abcdefABCDEF-_") == strlen(id))
		return 0;
	osb_error_set(err, 0, "", "invalid id \"%s\"", id ? id : "");
	return -EINVAL;
}

/*
 * Runs a streamed POST and feeds the events to @s. When the connection
 * broke after the init event, waits for the command's end by its status
 * (output after the break is lost; the exit code is not).
 */
static int run_stream(struct osb_sandbox *sb, const char *path,
		      const char *body, const char *what, bool follow,
		      const struct osb_command_opts *o, struct event_stream *s,
		      struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct http_request rq = {
		.method = "POST",
		.path = path,
		.what = what,
		.content_type = "application/json",
		.body = body,
		.body_len = strlen(body),
		.sink = event_stream_sink,
		.sink_arg = s,
		.streaming = true,
		.max_ms = o ? o->stream_max_ms : 0,
		.retry = o && o->resend_safe ? HTTP_RETRY_RESEND_SAFE :
					       HTTP_RETRY_UNSENT,
	};
	int rc = execd_call(sb, &rq, &rs, err);
	bool broken = rc && rs.retryable && rs.delivered;
	http_response_release(&rs);
	if (!rc || s->rc)
		return event_stream_finish(s, err);
	if (!broken || !follow || !s->id[0] || strcmp(path, "/command") != 0)
		return rc;

	for (int failures = 0;;) {
		struct osb_command_status st;
		int src = osb_command_status(sb, s->id, &st, err);
		if (src) {
			if (++failures > sb->c->max_retries)
				return rc;
			sleep_ms(http_backoff_ms(sb->c, failures));
			continue;
		}
		failures = 0;
		bool done = !st.running;
		if (done) {
			s->terminal = true;
			s->output_lost = true;
			s->exit_code = st.exited ? st.exit_code : -1;
			s->failed = s->exit_code != 0;
		}
		osb_command_status_release(&st);
		if (done) {
			osb_error_clear(err);
			return 0;
		}
		sleep_ms(500);
	}
}

/* osb_command_run(), and whether output was lost to a broken stream. */
static int command_run(struct osb_sandbox *sb, const char *cmd,
		       const struct osb_command_opts *o, osb_event_fn fn,
		       void *arg, int *ret_exit_code, char *ret_id,
		       bool *ret_lost, struct osb_error *err)
{
	struct event_stream s;

	if (!cmd || !*cmd) {
		osb_error_set(err, 0, "", "the command is empty");
		return -EINVAL;
	}
	char *body = json_command_request(cmd, o, false);
	if (!body)
		return -ENOMEM;
	event_stream_init(&s, fn, arg);
	int rc = run_stream(sb, "/command", body, NULL, !(o && o->no_follow), o,
			    &s, err);
	if (ret_id && s.id[0])
		snprintf(ret_id, OSB_ID_MAX, "%s", s.id);
	if (!rc) {
		if (ret_exit_code)
			*ret_exit_code = s.exit_code;
		if (ret_lost)
			*ret_lost = s.output_lost;
	}
	event_stream_release(&s);
	free(body);
	return rc;
}

int osb_command_run(struct osb_sandbox *sb, const char *cmd,
		    const struct osb_command_opts *o, osb_event_fn fn,
		    void *arg, int *ret_exit_code, char *ret_id,
		    struct osb_error *err)
{
	return command_run(sb, cmd, o, fn, arg, ret_exit_code, ret_id, NULL,
			   err);
}

struct capture {
	struct buf out, errout;
};

static int capture_event(void *arg, const struct osb_event *ev)
{
	struct capture *c = arg;
	struct buf *b;
	int rc;

	if (ev->type == OSB_EV_STDOUT)
		b = &c->out;
	else if (ev->type == OSB_EV_STDERR)
		b = &c->errout;
	else
		return 0;
	if (!ev->text)
		return 0;
	if (strcmp(ev->text, "\n") == 0)
		return buf_append(b, "\n", 1);
	rc = buf_append(b, ev->text, strlen(ev->text));
	if (!rc)
		rc = buf_append(b, "\n", 1);
	return rc;
}

int osb_command_capture(struct osb_sandbox *sb, const char *cmd,
			const struct osb_command_opts *o, size_t max,
			char **ret_out, char **ret_errout, int *ret_exit_code,
			struct osb_error *err)
{
	struct capture c = { .out = { .max = max }, .errout = { .max = max } };
	bool lost = false;
	int code = 0;
	int rc = command_run(sb, cmd, o, capture_event, &c, &code, NULL, &lost,
			     err);
	if (rc == -EFBIG)
		osb_error_set(err, 0, "", "command output exceeds %zu bytes",
			      max);
	if (!rc && lost) {
		/* a capture that misses its end is no capture */
		osb_error_set(
			err, 0, "",
			"POST /command: the connection broke while the "
			"output streamed; the command ended (exit %d) but "
			"its output is incomplete",
			code);
		rc = -ECONNRESET;
	}
	if (!rc && ret_exit_code)
		*ret_exit_code = code;
	if (!rc) {
		if (ret_out)
			*ret_out = buf_steal(&c.out);
		if (ret_errout)
			*ret_errout = buf_steal(&c.errout);
	}
	buf_release(&c.out);
	buf_release(&c.errout);
	return rc;
}

int osb_command_start(struct osb_sandbox *sb, const char *cmd,
		      const struct osb_command_opts *o, char *ret_id,
		      struct osb_error *err)
{
	struct event_stream s;

	if (!cmd || !*cmd) {
		osb_error_set(err, 0, "", "the command is empty");
		return -EINVAL;
	}
	char *body = json_command_request(cmd, o, true);
	if (!body)
		return -ENOMEM;
	event_stream_init(&s, NULL, NULL);
	int rc = run_stream(sb, "/command", body, NULL, true, o, &s, err);
	if (!rc && s.failed) {
		osb_error_set(
			err, 200, "", "POST /command: could not start: %s",
			s.err.message[0] ? s.err.message : "spawn failed");
		rc = -EIO;
	}
	if (!rc && !s.id[0]) {
		osb_error_set(err, 200, "",
			      "POST /command: no id in the answer");
		rc = -EPROTO;
	}
	if (!rc)
		snprintf(ret_id, OSB_ID_MAX, "%s", s.id);
	event_stream_release(&s);
	free(body);
	return rc;
}

int osb_command_status(struct osb_sandbox *sb, const char *id,
		       struct osb_command_status *ret, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf path = { 0 };
	int rc = check_id(id, err);

	if (!rc)
		rc = buf_printf(&path, "/command/status/%s", id);
	if (!rc) {
		struct http_request rq = { .method = "GET",
					   .path = path.data,
					   .retry = HTTP_RETRY_IDEMPOTENT };
		rc = execd_call(sb, &rq, &rs, err);
	}
	if (!rc) {
		rc = json_command_status(rs.body.data, rs.body.len, ret);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "GET %s: unexpected answer", path.data);
	}
	buf_release(&path);
	http_response_release(&rs);
	return rc;
}

int osb_command_logs(struct osb_sandbox *sb, const char *id, int64_t cursor,
		     osb_sink_fn sink, void *arg, int64_t *ret_next,
		     struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf path = { 0 };
	char query[48];
	int rc = check_id(id, err);

	snprintf(query, sizeof(query), "?cursor=%lld",
		 (long long)(cursor > 0 ? cursor : 0));
	if (!rc)
		rc = buf_printf(&path, "/command/%s/logs", id);
	if (!rc) {
		struct http_request rq = {
			.method = "GET",
			.path = path.data,
			.query = query,
			.sink = sink,
			.sink_arg = arg,
			.streaming = true,
			.retry = HTTP_RETRY_IDEMPOTENT,
		};
		rc = execd_call(sb, &rq, &rs, err);
	}
	if (!rc && ret_next)
		*ret_next = rs.tail_cursor >= 0 ? rs.tail_cursor :
						  (cursor > 0 ? cursor : 0) +
							  (int64_t)rs.delivered;
	buf_release(&path);
	http_response_release(&rs);
	return rc;
}

/* DELETE with ?id=, as /command and /code share; a repeat after a lost
 * answer finds the command no longer running, which is success. */
int interrupt_call(struct osb_sandbox *sb, const char *api_path, const char *id,
		   struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf q = { 0 };
	int rc = check_id(id, err);

	if (!rc)
		rc = query_add(&q, "id", id);
	if (!rc) {
		struct http_request rq = { .method = "DELETE",
					   .path = api_path,
					   .query = q.data,
					   .retry = HTTP_RETRY_IDEMPOTENT };
		rc = execd_call(sb, &rq, &rs, err);
		if (rc == -ESRCH && rs.attempts > 1) {
			osb_error_clear(err);
			rc = 0;
		}
	}
	buf_release(&q);
	http_response_release(&rs);
	return rc;
}

int osb_command_interrupt(struct osb_sandbox *sb, const char *id,
			  struct osb_error *err)
{
	return interrupt_call(sb, "/command", id, err);
}

/* ---- bash sessions ---- */

int osb_session_create(struct osb_sandbox *sb, const char *cwd, char *ret_id,
		       struct osb_error *err)
{
	struct http_response rs = { 0 };
	char *body = json_cwd_request(cwd);
	if (!body)
		return -ENOMEM;
	struct http_request rq = {
		.method = "POST",
		.path = "/session",
		.content_type = "application/json",
		.body = body,
		.body_len = strlen(body),
		.retry = HTTP_RETRY_UNSENT,
	};
	int rc = execd_call(sb, &rq, &rs, err);
	if (!rc) {
		rc = json_session_id(rs.body.data, rs.body.len, ret_id);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "POST /session: unexpected answer");
	}
	free(body);
	http_response_release(&rs);
	return rc;
}

int osb_session_run(struct osb_sandbox *sb, const char *id, const char *cmd,
		    const char *cwd, long timeout_ms, osb_event_fn fn,
		    void *arg, int *ret_exit_code, struct osb_error *err)
{
	struct event_stream s;
	struct buf path = { 0 };
	int rc = check_id(id, err);

	if (!rc && (!cmd || !*cmd)) {
		osb_error_set(err, 0, "", "the command is empty");
		rc = -EINVAL;
	}
	if (!rc)
		rc = buf_printf(&path, "/session/%s/run", id);
	if (rc) {
		buf_release(&path);
		return rc;
	}
	char *body = json_session_run_request(cmd, cwd, timeout_ms);
	if (!body) {
		buf_release(&path);
		return -ENOMEM;
	}
	event_stream_init(&s, fn, arg);
	rc = run_stream(sb, path.data, body, NULL, true, NULL, &s, err);
	if (!rc && ret_exit_code)
		*ret_exit_code = s.exit_code;
	event_stream_release(&s);
	free(body);
	buf_release(&path);
	return rc;
}

int osb_session_delete(struct osb_sandbox *sb, const char *id,
		       struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf path = { 0 };
	int rc = check_id(id, err);

	if (!rc)
		rc = buf_printf(&path, "/session/%s", id);
	if (!rc) {
		struct http_request rq = { .method = "DELETE",
					   .path = path.data,
					   .retry = HTTP_RETRY_IDEMPOTENT };
		rc = execd_call(sb, &rq, &rs, err);
		if (rc == -ENOENT && rs.attempts > 1) {
			osb_error_clear(err);
			rc = 0;
		}
	}
	buf_release(&path);
	http_response_release(&rs);
	return rc;
}

/*
 * code.c - execd's code interpreter: contexts (/code/context,
 * /code/contexts) and runs (/code), whose results stream as events.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"

void osb_code_context_release(struct osb_code_context *ctx)
{
	if (!ctx)
		return;
	free(ctx->id);
	free(ctx->language);
	free(ctx->cwd);
	memset(ctx, 0, sizeof(*ctx));
}

void osb_code_context_array_free(struct osb_code_context *a, size_t n)
{
	if (!a)
		return;
	for (size_t i = 0; i < n; i++)
		osb_code_context_release(&a[i]);
	free(a);
}

static int check_language(const char *language, struct osb_error *err)
{
	if (language && *language &&
	    strspn(language, "abcdefghijklmnopqrstuvwxyz-") == strlen(language))
		return 0;
	osb_error_set(err, 0, "", "invalid language \"%s\"",
		      language ? language : "");
	return -EINVAL;
}

int osb_code_context_create(struct osb_sandbox *sb, const char *language,
			    const char *cwd, struct osb_code_context *ret,
			    struct osb_error *err)
{
	struct http_response rs = { 0 };
	int rc = check_language(language, err);
	if (rc)
		return rc;
	char *body = json_code_context_request(language, cwd);
	if (!body)
		return -ENOMEM;
	struct http_request rq = {
		.method = "POST",
		.path = "/code/context",
		.what = language,
		.content_type = "application/json",
		.body = body,
		.body_len = strlen(body),
		.retry = HTTP_RETRY_UNSENT,
	};
	rc = execd_call(sb, &rq, &rs, err);
	if (!rc) {
		rc = json_code_context(rs.body.data, rs.body.len, ret);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "POST /code/context: unexpected answer");
	}
	free(body);
	http_response_release(&rs);
	return rc;
}

int osb_code_context_list(struct osb_sandbox *sb, const char *language,
			  struct osb_code_context **ret, size_t *ret_n,
			  struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf q = { 0 };
	int rc = 0;

	if (language) {
		rc = check_language(language, err);
		if (!rc)
			rc = query_add(&q, "language", language);
	}
	if (!rc) {
		struct http_request rq = { .method = "GET",
					   .path = "/code/contexts",
					   .query = q.data,
					   .retry = HTTP_RETRY_IDEMPOTENT };
		rc = execd_call(sb, &rq, &rs, err);
	}
	if (!rc) {
		rc = json_code_context_array(rs.body.data, rs.body.len, ret,
					     ret_n);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "GET /code/contexts: unexpected answer");
	}
	buf_release(&q);
	http_response_release(&rs);
	return rc;
}

int osb_code_context_delete(struct osb_sandbox *sb, const char *id,
			    struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf path = { 0 };
	int rc = buf_append(&path, "/code/contexts/", 15);

	if (!id || !*id || strchr(id, '/')) {
		osb_error_set(err, 0, "", "invalid context id");
		rc = -EINVAL;
	}
	if (!rc)
		rc = url_encode(&path, id);
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

int osb_code_run(struct osb_sandbox *sb, const char *context_id,
		 const char *language, const char *code, osb_event_fn fn,
		 void *arg, bool *ret_failed, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct event_stream s;
	int rc = check_language(language, err);

	if (rc)
		return rc;
	if (!code) {
		osb_error_set(err, 0, "", "no code to run");
		return -EINVAL;
	}
	char *body = json_code_run_request(context_id, language, code);
	if (!body)
		return -ENOMEM;
	event_stream_init(&s, fn, arg);
	s.code_mode = true;
	struct http_request rq = {
		.method = "POST",
		.path = "/code",
		.what = language,
		.content_type = "application/json",
		.body = body,
		.body_len = strlen(body),
		.sink = event_stream_sink,
		.sink_arg = &s,
		.streaming = true,
		.retry = HTTP_RETRY_UNSENT,
	};
	rc = execd_call(sb, &rq, &rs, err);
	if (!rc || s.rc)
		rc = event_stream_finish(&s, err);
	if (!rc && ret_failed)
		*ret_failed = s.failed;
	event_stream_release(&s);
	http_response_release(&rs);
	free(body);
	return rc;
}

int osb_code_interrupt(struct osb_sandbox *sb, const char *context_id,
		       struct osb_error *err)
{
	return interrupt_call(sb, "/code", context_id, err);
}

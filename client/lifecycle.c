/*
 * lifecycle.c - the sandbox server's API (/v1/sandboxes...): create, get,
 * list, delete, pause, resume, renew, wait, endpoints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "osb_i.h"

void osb_sandbox_info_release(struct osb_sandbox_info *info)
{
	if (!info)
		return;
	free(info->id);
	free(info->state);
	free(info->reason);
	free(info->message);
	free(info->image);
	free(info->snapshot_id);
	osb_kvlist_release(&info->metadata);
	if (info->entrypoint) {
		for (size_t i = 0; info->entrypoint[i]; i++)
			free(info->entrypoint[i]);
		free(info->entrypoint);
	}
	memset(info, 0, sizeof(*info));
}

void osb_sandbox_list_release(struct osb_sandbox_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		osb_sandbox_info_release(&l->items[i]);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

void osb_endpoint_release(struct osb_endpoint *ep)
{
	if (!ep)
		return;
	free(ep->url);
	ep->url = NULL;
	osb_kvlist_release(&ep->headers);
}

/* "/v1/sandboxes/<id><suffix>" with the id encoded. */
static int sandbox_path(struct buf *b, const char *id, const char *suffix)
{
	int rc = buf_append(b, "/v1/sandboxes/", 14);
	if (!rc)
		rc = url_encode(b, id);
	if (!rc && strchr(id, '/'))
		rc = -EINVAL;
	if (!rc && suffix)
		rc = buf_printf(b, "%s", suffix);
	return rc;
}

int lifecycle_bad_id(const char *id, const char *what, struct osb_error *err)
{
	if (id && *id && !strchr(id, '/'))
		return 0;
	osb_error_set(err, 0, "", "invalid %s id \"%s\"", what, id ? id : "");
	return -EINVAL;
}

static int bad_id(const char *id, struct osb_error *err)
{
	return lifecycle_bad_id(id, "sandbox", err);
}

int lifecycle_call(struct osb_client *c, const char *method, const char *path,
		   const char *query, const char *body, enum http_retry retry,
		   struct http_response *rs, struct osb_error *err)
{
	struct http_request rq = {
		.method = method,
		.base = c->base_url,
		.path = path,
		.query = query,
		.lifecycle = true,
		.content_type = body ? "application/json" : NULL,
		.body = body,
		.body_len = body ? strlen(body) : 0,
		.retry = retry,
	};
	return http_call(c, &rq, rs, err);
}

int osb_sandbox_create(struct osb_client *c, const struct osb_create_params *p,
		       struct osb_sandbox_info *ret, struct osb_error *err)
{
	struct http_response rs = { 0 };

	bool image = p->image && *p->image;
	bool snap = p->snapshot_id && *p->snapshot_id;

	if (image == snap) {
		osb_error_set(err, 0, "", "%s",
			      image ? "a sandbox is made from an image or "
				      "from a snapshot, not both" :
				      "an image or a snapshot is needed to "
				      "create a sandbox");
		return -EINVAL;
	}
	errno = 0;
	char *body = json_create_request(p);
	if (!body) {
		int e = errno == EINVAL ? EINVAL : ENOMEM;
		osb_error_set(
			err, 0, "", "%s",
			e == EINVAL ?
				"the network policy is not a JSON object, "
				"or the volumes not a JSON array" :
				"out of memory");
		return -e;
	}
	int rc = lifecycle_call(c, "POST", "/v1/sandboxes", NULL, body,
				HTTP_RETRY_UNSENT, &rs, err);
	free(body);
	if (!rc) {
		rc = json_sandbox(rs.body.data, rs.body.len, ret);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "POST /v1/sandboxes: unexpected answer");
	}
	http_response_release(&rs);
	return rc;
}

int osb_sandbox_get(struct osb_client *c, const char *id,
		    struct osb_sandbox_info *ret, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf path = { 0 };
	int rc = bad_id(id, err);

	if (!rc)
		rc = sandbox_path(&path, id, NULL);
	if (!rc)
		rc = lifecycle_call(c, "GET", path.data, NULL, NULL,
				    HTTP_RETRY_IDEMPOTENT, &rs, err);
	if (!rc) {
		rc = json_sandbox(rs.body.data, rs.body.len, ret);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "GET %s: unexpected answer", path.data);
	}
	buf_release(&path);
	http_response_release(&rs);
	return rc;
}

int osb_sandbox_list(struct osb_client *c, const struct osb_list_params *p,
		     struct osb_sandbox_list *ret, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf q = { 0 }, md = { 0 };
	int rc = 0;

	for (size_t i = 0; !rc && p && p->states && p->states[i]; i++)
		rc = query_add(&q, "state", p->states[i]);
	/* metadata is one parameter holding a form-encoded string, so it is
	 * encoded twice (docs/SERVER.md §2.5) */
	for (size_t i = 0; !rc && p && p->metadata && i < p->metadata->n; i++) {
		if (md.len)
			rc = buf_append(&md, "&", 1);
		if (!rc)
			rc = url_encode(&md, p->metadata->items[i].key);
		if (!rc)
			rc = buf_append(&md, "=", 1);
		if (!rc)
			rc = url_encode(&md, p->metadata->items[i].value);
	}
	if (!rc && md.len)
		rc = query_add(&q, "metadata", md.data);
	if (!rc && p)
		rc = lifecycle_query_page(&q, p->page, p->page_size);
	if (!rc)
		rc = lifecycle_call(c, "GET", "/v1/sandboxes", q.data, NULL,
				    HTTP_RETRY_IDEMPOTENT, &rs, err);
	if (!rc) {
		rc = json_sandbox_list(rs.body.data, rs.body.len, ret);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "GET /v1/sandboxes: unexpected answer");
	}
	buf_release(&q);
	buf_release(&md);
	http_response_release(&rs);
	return rc;
}

int lifecycle_query_page(struct buf *q, int page, int page_size)
{
	char num[32];
	int rc = 0;

	if (page > 0) {
		snprintf(num, sizeof(num), "%d", page);
		rc = query_add(q, "page", num);
	}
	if (!rc && page_size > 0) {
		snprintf(num, sizeof(num), "%d", page_size);
		rc = query_add(q, "pageSize", num);
	}
	return rc;
}

int lifecycle_delete(struct osb_client *c, const char *path,
		     struct osb_error *err)
{
	struct http_response rs = { 0 };
	int rc = lifecycle_call(c, "DELETE", path, NULL, NULL,
				HTTP_RETRY_IDEMPOTENT, &rs, err);

	/* an earlier attempt deleted it and its answer was lost */
	if (rc == -ENOENT && rs.attempts > 1) {
		osb_error_clear(err);
		rc = 0;
	}
	http_response_release(&rs);
	return rc;
}

int osb_sandbox_delete(struct osb_client *c, const char *id,
		       struct osb_error *err)
{
	struct buf path = { 0 };
	int rc = bad_id(id, err);

	if (!rc)
		rc = sandbox_path(&path, id, NULL);
	if (!rc)
		rc = lifecycle_delete(c, path.data, err);
	buf_release(&path);
	return rc;
}

static int state_is(struct osb_client *c, const char *id, const char *state)
{
	struct osb_sandbox_info info;
	if (osb_sandbox_get(c, id, &info, NULL))
		return 0;
	int yes = strcasecmp(info.state, state) == 0;
	osb_sandbox_info_release(&info);
	return yes;
}

/*
 * pause and resume change state, so they are not blindly repeated: after
 * an answer that may have been lost, the sandbox's state tells whether
 * the call took effect.
 */
static int state_action(struct osb_client *c, const char *id,
			const char *action, const char *target,
			struct osb_error *err)
{
	struct buf path = { 0 };
	int rc = bad_id(id, err);
	if (!rc)
		rc = sandbox_path(&path, id, action);
	for (int attempt = 1; !rc; attempt++) {
		struct http_response rs = { 0 };
		rc = lifecycle_call(c, "POST", path.data, NULL, NULL,
				    HTTP_RETRY_UNSENT, &rs, err);
		bool lost = rc && rs.retryable;
		http_response_release(&rs);
		if (!rc)
			break;
		/* a 409 after a lost answer may be our own earlier call */
		if ((lost || (rc == -EBUSY && attempt > 1)) &&
		    state_is(c, id, target)) {
			osb_error_clear(err);
			rc = 0;
			break;
		}
		if (!lost || attempt > c->max_retries)
			break;
		sleep_ms(http_backoff_ms(c, attempt));
		rc = 0;
	}
	buf_release(&path);
	return rc;
}

int osb_sandbox_pause(struct osb_client *c, const char *id,
		      struct osb_error *err)
{
	return state_action(c, id, "/pause", "Paused", err);
}

int osb_sandbox_resume(struct osb_client *c, const char *id,
		       struct osb_error *err)
{
	return state_action(c, id, "/resume", "Running", err);
}

int osb_sandbox_renew(struct osb_client *c, const char *id, time_t expires_at,
		      time_t *ret_expires_at, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf path = { 0 };
	char *body = NULL;
	int rc = bad_id(id, err);

	if (!rc)
		rc = sandbox_path(&path, id, "/renew-expiration");
	if (!rc) {
		body = json_renew_request(expires_at);
		rc = body ? 0 : -ENOMEM;
	}
	if (!rc)
		rc = lifecycle_call(c, "POST", path.data, NULL, body,
				    HTTP_RETRY_IDEMPOTENT, &rs, err);
	if (!rc && ret_expires_at &&
	    json_renew_response(rs.body.data, rs.body.len, ret_expires_at))
		*ret_expires_at = expires_at;
	free(body);
	buf_release(&path);
	http_response_release(&rs);
	return rc;
}

int osb_sandbox_wait_running(struct osb_client *c, const char *id,
			     long timeout_ms, struct osb_sandbox_info *ret,
			     struct osb_error *err)
{
	long long deadline = now_ms() + timeout_ms;
	long delay = 100;

	for (;;) {
		struct osb_sandbox_info info;
		int rc = osb_sandbox_get(c, id, &info, err);
		if (rc)
			return rc;
		if (strcasecmp(info.state, "Running") == 0) {
			if (ret)
				*ret = info;
			else
				osb_sandbox_info_release(&info);
			return 0;
		}
		if (strcasecmp(info.state, "Failed") == 0 ||
		    strcasecmp(info.state, "Terminated") == 0 ||
		    strcasecmp(info.state, "Stopping") == 0) {
			osb_error_set(err, 200, "",
				      "sandbox %s is %s%s%s%s%s%s", id,
				      info.state, info.reason ? " (" : "",
				      info.reason ? info.reason : "",
				      info.reason ? ")" : "",
				      info.message ? ": " : "",
				      info.message ? info.message : "");
			osb_sandbox_info_release(&info);
			return -EIO;
		}
		if (now_ms() >= deadline) {
			osb_error_set(err, 200, "",
				      "sandbox %s still %s after %ld ms", id,
				      info.state, timeout_ms);
			osb_sandbox_info_release(&info);
			return -ETIMEDOUT;
		}
		osb_sandbox_info_release(&info);
		sleep_ms(delay);
		if (delay < 1000)
			delay *= 2;
	}
}

int osb_endpoint_get(struct osb_client *c, const char *id, int port,
		     struct osb_endpoint *ret, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf path = { 0 };
	char suffix[48];
	int rc = bad_id(id, err);

	snprintf(suffix, sizeof(suffix), "/endpoints/%d", port);
	if (!rc)
		rc = sandbox_path(&path, id, suffix);
	if (!rc)
		rc = lifecycle_call(c, "GET", path.data,
				    c->use_server_proxy ?
					    "?use_server_proxy=true" :
					    "?use_server_proxy=false",
				    NULL, HTTP_RETRY_IDEMPOTENT, &rs, err);
	if (!rc) {
		rc = json_endpoint(rs.body.data, rs.body.len, c->scheme, ret);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "GET %s: unexpected answer", path.data);
	}
	buf_release(&path);
	http_response_release(&rs);
	return rc;
}

/*
 * snapshots.c - the lifecycle server's snapshots: create one from a
 * sandbox (POST /v1/sandboxes/ID/snapshots), get, list and delete them
 * (/v1/snapshots...). Each call is one request (a list, one page). A
 * sandbox is made from a snapshot by osb_sandbox_create() with its
 * snapshot_id. docs/SERVER.md §2.10 says how the servers answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"

void osb_snapshot_release(struct osb_snapshot *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->sandbox_id);
	free(s->name);
	free(s->state);
	free(s->reason);
	free(s->message);
	memset(s, 0, sizeof(*s));
}

void osb_snapshot_list_release(struct osb_snapshot_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		osb_snapshot_release(&l->items[i]);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

/* @prefix followed by @id, encoded. */
static int id_path(struct buf *b, const char *prefix, const char *id,
		   const char *suffix)
{
	int rc = buf_printf(b, "%s", prefix);
	if (!rc)
		rc = url_encode(b, id);
	if (!rc && suffix)
		rc = buf_printf(b, "%s", suffix);
	return rc;
}

/* The snapshot in a 2xx answer to @method @path. */
static int parse_snapshot(const struct http_response *rs, const char *method,
			  const char *path, struct osb_snapshot *ret,
			  struct osb_error *err)
{
	int rc = json_snapshot(rs->body.data, rs->body.len, ret);
	if (rc)
		osb_error_set(err, rs->status, "", "%s %s: unexpected answer",
			      method, path);
	return rc;
}

int osb_snapshot_create(struct osb_client *c, const char *sandbox_id,
			const char *name, struct osb_snapshot *ret,
			struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf path = { 0 };
	char *body = NULL;
	int rc = lifecycle_bad_id(sandbox_id, "sandbox", err);

	if (!rc && name && !*name) {
		osb_error_set(err, 0, "", "a snapshot's name cannot be empty");
		rc = -EINVAL;
	}
	if (!rc)
		rc = id_path(&path, "/v1/sandboxes/", sandbox_id, "/snapshots");
	if (!rc) {
		body = json_snapshot_request(name);
		rc = body ? 0 : -ENOMEM;
		if (rc)
			osb_error_set(err, 0, "", "out of memory");
	}
	if (!rc)
		rc = lifecycle_call(c, "POST", path.data, NULL, body,
				    HTTP_RETRY_UNSENT, &rs, err);
	if (!rc)
		rc = parse_snapshot(&rs, "POST", path.data, ret, err);
	free(body);
	buf_release(&path);
	http_response_release(&rs);
	return rc;
}

int osb_snapshot_get(struct osb_client *c, const char *id,
		     struct osb_snapshot *ret, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf path = { 0 };
	int rc = lifecycle_bad_id(id, "snapshot", err);

	if (!rc)
		rc = id_path(&path, "/v1/snapshots/", id, NULL);
	if (!rc)
		rc = lifecycle_call(c, "GET", path.data, NULL, NULL,
				    HTTP_RETRY_IDEMPOTENT, &rs, err);
	if (!rc)
		rc = parse_snapshot(&rs, "GET", path.data, ret, err);
	buf_release(&path);
	http_response_release(&rs);
	return rc;
}

static int list_query(struct buf *q, const struct osb_snapshot_list_params *p)
{
	int rc = 0;

	if (!p)
		return 0;
	if (p->sandbox_id)
		rc = query_add(q, "sandboxId", p->sandbox_id);
	if (!rc && p->name)
		rc = query_add(q, "name", p->name);
	for (size_t i = 0; !rc && p->states && p->states[i]; i++)
		rc = query_add(q, "state", p->states[i]);
	if (!rc)
		rc = lifecycle_query_page(q, p->page, p->page_size);
	return rc;
}

int osb_snapshot_list(struct osb_client *c,
		      const struct osb_snapshot_list_params *p,
		      struct osb_snapshot_list *ret, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf q = { 0 };
	int rc = list_query(&q, p);

	if (rc)
		osb_error_set(err, 0, "", "out of memory");
	if (!rc)
		rc = lifecycle_call(c, "GET", "/v1/snapshots", q.data, NULL,
				    HTTP_RETRY_IDEMPOTENT, &rs, err);
	if (!rc) {
		rc = json_snapshot_list(rs.body.data, rs.body.len, ret);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "GET /v1/snapshots: unexpected answer");
	}
	buf_release(&q);
	http_response_release(&rs);
	return rc;
}

int osb_snapshot_delete(struct osb_client *c, const char *id,
			struct osb_error *err)
{
	struct buf path = { 0 };
	int rc = lifecycle_bad_id(id, "snapshot", err);

	if (!rc)
		rc = id_path(&path, "/v1/snapshots/", id, NULL);
	if (!rc)
		rc = lifecycle_delete(c, path.data, err);
	buf_release(&path);
	return rc;
}

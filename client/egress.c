/*
 * egress.c - the egress sidecar's /policy: read, merge rules, remove
 * rules, replace the whole policy (POST, which the sidecar's code serves
 * though its spec leaves it out), set the default action. Reached through
 * the endpoint of port 18080 with the OPENSANDBOX-EGRESS-AUTH header the
 * endpoint call returns. Its errors are text/plain.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"

/* A sandbox made without a network policy has no sidecar: execd's proxy
 * answers 502 Bad Gateway. Said plainly. */
static int no_sidecar(int rc, const struct http_response *rs,
		      struct osb_sandbox *sb, struct osb_error *err)
{
	if (rs->status != 502)
		return rc;
	osb_error_set(err, 502, "",
		      "sandbox %s has no egress sidecar (it was created "
		      "without a network policy)",
		      sb->id);
	return -ENOENT;
}

static int policy_call(struct osb_sandbox *sb, const char *method,
		       const char *body, enum http_retry retry,
		       struct http_response *rs, struct osb_error *err)
{
	struct http_request rq = {
		.method = method,
		.path = "/policy",
		.content_type = body ? "application/json" : NULL,
		.body = body,
		.body_len = body ? strlen(body) : 0,
		.retry = retry,
	};
	int rc = egress_call(sb, &rq, rs, err);
	return rc ? no_sidecar(rc, rs, sb, err) : 0;
}

int osb_egress_get(struct osb_sandbox *sb, char **ret_json,
		   struct osb_error *err)
{
	struct http_response rs = { 0 };
	int rc = policy_call(sb, "GET", NULL, HTTP_RETRY_IDEMPOTENT, &rs, err);
	if (!rc)
		*ret_json = buf_steal(&rs.body);
	http_response_release(&rs);
	return rc;
}

/* A change of the policy, whose answer says nothing more than that it
 * was made. Each is idempotent: sent twice, it leaves what once would. */
static int policy_send(struct osb_sandbox *sb, const char *method,
		       const char *body, struct osb_error *err)
{
	struct http_response rs = { 0 };
	int rc = policy_call(sb, method, body, HTTP_RETRY_IDEMPOTENT, &rs, err);
	http_response_release(&rs);
	return rc;
}

static bool is_action(const char *action)
{
	return action &&
	       (strcmp(action, "allow") == 0 || strcmp(action, "deny") == 0);
}

int osb_egress_patch(struct osb_sandbox *sb, const char *rules_json,
		     struct osb_error *err)
{
	if (json_check_array(rules_json)) {
		osb_error_set(err, 0, "",
			      "egress rules must be a non-empty JSON array");
		return -EINVAL;
	}
	return policy_send(sb, "PATCH", rules_json, err);
}

int osb_egress_rule(struct osb_sandbox *sb, const char *action,
		    const char *target, struct osb_error *err)
{
	if (!is_action(action)) {
		osb_error_set(err, 0, "",
			      "egress action must be allow or deny");
		return -EINVAL;
	}
	size_t n = target ? strlen(target) : 0;
	if (!n || n > 253 || strcspn(target, " \t\r\n\"'") != n) {
		osb_error_set(err, 0, "", "bad egress target \"%s\"",
			      target ? target : "");
		return -EINVAL;
	}
	char *body = json_rule(action, target);
	if (!body)
		return -ENOMEM;
	int rc = osb_egress_patch(sb, body, err);
	free(body);
	return rc;
}

int osb_egress_delete(struct osb_sandbox *sb, const char *const *targets,
		      size_t n, struct osb_error *err)
{
	if (!n) {
		osb_error_set(err, 0, "", "no egress targets to remove");
		return -EINVAL;
	}
	char *body = json_string_array(targets, n);
	if (!body)
		return -ENOMEM;
	int rc = policy_send(sb, "DELETE", body, err);
	free(body);
	return rc;
}

int osb_egress_set(struct osb_sandbox *sb, const char *policy_json,
		   struct osb_error *err)
{
	char why[200];
	char *body = json_policy(policy_json, NULL, why, sizeof(why));
	if (!body) {
		osb_error_set(err, 0, "", "%s", why[0] ? why : "no memory");
		return why[0] ? -EINVAL : -ENOMEM;
	}
	int rc = policy_send(sb, "POST", body, err);
	free(body);
	return rc;
}

int osb_egress_default(struct osb_sandbox *sb, const char *action,
		       struct osb_error *err)
{
	if (!is_action(action)) {
		osb_error_set(err, 0, "",
			      "the default action is allow or deny");
		return -EINVAL;
	}
	char *got = NULL, why[200];
	int rc = osb_egress_get(sb, &got, err);
	char *body = rc ? NULL : json_policy(got, action, why, sizeof(why));
	free(got);
	if (rc)
		return rc;
	if (!body) {
		osb_error_set(err, 0, "", "the sidecar's policy: %s", why);
		return -EPROTO;
	}
	rc = policy_send(sb, "POST", body, err);
	free(body);
	return rc;
}

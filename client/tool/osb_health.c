/*
 * osb_health.c - `osb sandbox health` (is it Running, and does execd
 * answer? one GET /ping, not retried) and `osb sandbox metrics` (execd's GET
 * /metrics: cores, CPU and memory in use), printed under the official SDKs'
 * names.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_tool.h"

static const char *one_id(struct osb_cli *cli, int argc, char **argv)
{
	if (argc > 2) {
		cli_usage("usage: osb sandbox %s SANDBOX_ID", argv[0]);
		return NULL;
	}
	cli->sandbox_id = cli_sandbox_id(cli, argc, argv, 1);
	return cli->sandbox_id;
}

/* The answer of health: healthy or why not. */
static int say_health(struct osb_cli *cli, const char *id, const char *state,
		      int rc, const struct osb_error *err)
{
	const char *why = !rc ? NULL : err->message[0] ? err->message : "?";
	if (CLI_STRUCTURED(cli->format)) {
		struct cli_rec *r = rec_object();
		rec_str(r, "sandbox_id", id);
		rec_bool(r, "healthy", rc == 0);
		rec_str(r, "state", state);
		rec_str(r, "error", why);
		int st = cli_print(cli, r, NULL);
		return st ? st : rc ? 1 : 0;
	}
	if (rc) {
		char what[160];
		snprintf(what, sizeof(what), "sandbox %s is unhealthy", id);
		return cli_fail(what, rc, err);
	}
	cli_done(cli, "sandbox %s is healthy", id);
	return 0;
}

/*
 * Healthy: Running, and execd answers /ping. A sandbox in another state
 * is not asked (a paused one's execd would keep the ping waiting for the
 * whole request timeout). Exits 0 when healthy, 1 when not (or when the
 * sandbox is not there, said as an error). Three requests: the sandbox,
 * the endpoint, the ping.
 */
int cmd_health(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_sandbox_info info;
	struct osb_error err;
	const char *id = one_id(cli, argc, argv);
	if (!id)
		return 2;
	int rc = osb_sandbox_get(cli->client, id, &info, &err);
	if (rc)
		return cli_fail(id, rc, &err);
	if (strcmp(info.state, "Running") != 0) {
		osb_error_clear(&err);
		snprintf(err.message, sizeof(err.message),
			 "it is %s, not Running", info.state);
		rc = say_health(cli, id, info.state, -EAGAIN, &err);
		osb_sandbox_info_release(&info);
		return rc;
	}
	osb_sandbox_info_release(&info);
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	rc = osb_ping(sb, &err);
	return say_health(cli, id, "Running", rc, &err);
}

int cmd_metrics(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_metrics m;
	struct osb_error err;
	const char *id = one_id(cli, argc, argv);
	if (!id)
		return 2;
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_metrics_get(sb, &m, &err);
	if (rc)
		return cli_fail("metrics", rc, &err);
	struct cli_rec *r = rec_object();
	rec_num(r, "cpu_count", m.cpu_count);
	rec_num(r, "cpu_used_percentage", m.cpu_used_pct);
	rec_num(r, "memory_total_in_mib", m.mem_total_mib);
	rec_num(r, "memory_used_in_mib", m.mem_used_mib);
	rec_int(r, "timestamp", m.timestamp_ms);
	return cli_print(cli, r, NULL);
}

/*
 * osb_health.c - `osb sandbox health` (is it Running, and does execd
 * answer? one GET /ping, not retried) and `osb sandbox metrics` (execd's GET
 * /metrics: cores, CPU and memory in use; --watch: /metrics/watch's sample
 * a second), printed under the official SDKs' names.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static struct cli_rec *metrics_rec(const struct osb_metrics *m)
{
	struct cli_rec *r = rec_object();
	rec_num(r, "cpu_count", m->cpu_count);
	rec_num(r, "cpu_used_percentage", m->cpu_used_pct);
	rec_num(r, "memory_total_in_mib", m->mem_total_mib);
	rec_num(r, "memory_used_in_mib", m->mem_used_mib);
	rec_int(r, "timestamp", m->timestamp_ms);
	return r;
}

/* One sample of --watch: a line (raw, table), a JSON object a line
 * (json), a YAML document (yaml). Ends the watch when stdout is gone. */
static int print_sample(void *arg, const struct osb_metrics *m,
			const char *error)
{
	struct osb_cli *cli = arg;
	if (!m) {
		fprintf(stderr, "osb: metrics: execd: %s\n", error);
		return 0;
	}
	int rc = 0;
	if (cli->format == CLI_JSON) {
		rc = cli_print_line(metrics_rec(m));
	} else if (cli->format == CLI_YAML) {
		fputs("---\n", stdout);
		rc = cli_print(cli, metrics_rec(m), NULL);
	} else {
		char when[64];
		osb_time_format((time_t)(m->timestamp_ms / 1000), when,
				sizeof(when));
		printf("%s cpu %.2f%% of %g cores, memory %.1f/%.1f MiB\n",
		       when, m->cpu_used_pct, m->cpu_count, m->mem_used_mib,
		       m->mem_total_mib);
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		return -EPIPE;
	return rc ? -EIO : 0;
}

/* metrics SANDBOX_ID [--watch]: one sample (about a second: execd
 * measures the CPU over one), or one a second until interrupted */
int cmd_metrics(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "watch", no_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_metrics m;
	struct osb_error err;
	bool watch = false;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'w')
			return 2;
		watch = true;
	}
	if (argc - optind > 1)
		return cli_usage("usage: osb sandbox metrics SANDBOX_ID "
				 "[--watch]");
	const char *id = cli_sandbox_id(cli, argc, argv, optind);
	if (!id)
		return 2;
	cli->sandbox_id = id;
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	if (watch) {
		int rc = osb_metrics_watch(sb, print_sample, cli, &err);
		if (rc == -EPIPE)
			return 0;
		return rc ? cli_fail("metrics", rc, &err) : 0;
	}
	int rc = osb_metrics_get(sb, &m, &err);
	if (rc)
		return cli_fail("metrics", rc, &err);
	return cli_print(cli, metrics_rec(&m), NULL);
}

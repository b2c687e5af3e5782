/*
 * osb.c - `osb`, a small command-line tool on libosb: manage sandboxes,
 * move files, run commands. main() parses the connection options (flags,
 * else the environment, as osbfs does) and hands over to a subcommand.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_tool.h"

static const struct {
	const char *name;
	cli_cmd_fn fn;
	const char *usage;
} commands[] = {
	{ "create", cmd_create, "create [--image IMG] [--entrypoint ARG]... [--timeout SECS|none] [--env K=V]... [--metadata K=V]... [--network-policy FILE] [--cpu N] [--memory N] [--no-wait]" },
	{ "list", cmd_list, "list [--state STATE]... [--metadata K=V]... [--page N] [--page-size N]" },
	{ "info", cmd_info, "info [ID]" },
	{ "pause", cmd_pause, "pause [ID]" },
	{ "resume", cmd_resume, "resume [ID]" },
	{ "renew", cmd_renew, "renew [ID] SECONDS" },
	{ "kill", cmd_kill, "kill [ID]" },
	{ "endpoint", cmd_endpoint, "endpoint PORT" },
	{ "ls", cmd_ls, "ls [-l] [-a] [-d DEPTH] PATH" },
	{ "stat", cmd_stat, "stat PATH" },
	{ "get", cmd_get, "get [--offset N] [--length N] SANDBOX_PATH LOCAL_PATH|-" },
	{ "put", cmd_put, "put [-m MODE] [--owner U] [--group G] LOCAL_PATH|- SANDBOX_PATH" },
	{ "rm", cmd_rm, "rm [-r] PATH..." },
	{ "mkdir", cmd_mkdir, "mkdir [-m MODE] PATH..." },
	{ "mv", cmd_mv, "mv SRC DEST" },
	{ "chmod", cmd_chmod, "chmod [--owner U] [--group G] MODE PATH" },
	{ "search", cmd_search, "search DIR [PATTERN]" },
	{ "replace", cmd_replace, "replace PATH OLD NEW" },
	{ "exec", cmd_exec, "exec [--cwd DIR] [--timeout MS] [--env K=V]... -- COMMAND..." },
	{ "spawn", cmd_spawn, "spawn [--cwd DIR] [--timeout MS] [--env K=V]... -- COMMAND..." },
	{ "status", cmd_status, "status ID" },
	{ "logs", cmd_logs, "logs [-f] [--cursor N] ID" },
	{ "interrupt", cmd_interrupt, "interrupt ID" },
	{ "session", cmd_session, "session create [--cwd DIR] | run ID COMMAND | delete ID" },
	{ "code", cmd_code, "code [--language L] [--context ID] CODE|- | code contexts [L] | code new L | code delete ID | code interrupt ID" },
	{ "egress", cmd_egress, "egress [get] | patch JSON | allow HOST | deny HOST | delete TARGET..." },
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: osb [options] COMMAND [ARGS]\n"
		"\n"
		"Options (each also from the environment):\n"
		"  --domain HOST[:PORT]     server (OPEN_SANDBOX_DOMAIN, OPENSANDBOX_DOMAIN;\n"
		"                           default localhost:8080)\n"
		"  --protocol http|https\n"
		"  --api-key-file FILE      API key (else OPEN_SANDBOX_API_KEY, OPENSANDBOX_API_KEY)\n"
		"  --cacert FILE            CA bundle to trust for https\n"
		"  --insecure               accept any TLS certificate\n"
		"  --request-timeout SECS   per request (default 30)\n"
		"  --retries N              retries of transient failures (default 5)\n"
		"  --server-proxy           reach execd through the lifecycle server\n"
		"  -H, --header 'Name: V'   an extra header on every request\n"
		"  -s, --sandbox ID         the sandbox (OPEN_SANDBOX_ID)\n"
		"\n"
		"Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  osb %s\n", commands[i].usage);
}

int cli_fail(const char *what, int rc, const struct osb_error *err)
{
	const char *msg = err && err->message[0] ? err->message : strerror(-rc);
	if (what)
		fprintf(stderr, "osb: %s: %s\n", what, msg);
	else
		fprintf(stderr, "osb: %s\n", msg);
	return 1;
}

int cli_fail_unsure(const char *what, int rc, const struct osb_error *err,
		    const char *maybe)
{
	if (rc != -ECONNRESET && rc != -ETIMEDOUT)
		return cli_fail(what, rc, err);
	fprintf(stderr, "osb: %s: %s; %s\n", what,
		err && err->message[0] ? err->message : strerror(-rc), maybe);
	return 1;
}

int cli_usage(const char *fmt, ...)
{
	va_list ap;
	fputs("osb: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (osb --help for usage)\n", stderr);
	return 2;
}

int cli_parse_long(const char *s, long *ret)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end)
		return -EINVAL;
	*ret = v;
	return 0;
}

int cli_parse_mode(const char *s, mode_t *ret)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 8);
	if (errno || end == s || *end || v > 07777)
		return -EINVAL;
	*ret = (mode_t)v;
	return 0;
}

struct osb_sandbox *cli_sandbox(struct osb_cli *cli)
{
	struct osb_error err;

	if (cli->sb)
		return cli->sb;
	if (!cli->sandbox_id) {
		cli_usage("no sandbox: give -s ID or set OPEN_SANDBOX_ID");
		return NULL;
	}
	int rc = osb_sandbox_open(cli->client, cli->sandbox_id, &cli->sb, &err);
	if (rc) {
		cli_fail(cli->sandbox_id, rc, &err);
		return NULL;
	}
	return cli->sb;
}

const char *cli_sandbox_id(struct osb_cli *cli, int argc, char **argv,
			   int optind_now)
{
	if (optind_now < argc)
		return argv[optind_now];
	if (!cli->sandbox_id)
		cli_usage("no sandbox: give an id, -s ID or OPEN_SANDBOX_ID");
	return cli->sandbox_id;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "domain", required_argument, NULL, 'D' },
		{ "protocol", required_argument, NULL, 'P' },
		{ "api-key-file", required_argument, NULL, 'K' },
		{ "cacert", required_argument, NULL, 'C' },
		{ "insecure", no_argument, NULL, 'k' },
		{ "request-timeout", required_argument, NULL, 'T' },
		{ "retries", required_argument, NULL, 'R' },
		{ "server-proxy", no_argument, NULL, 'X' },
		{ "header", required_argument, NULL, 'H' },
		{ "sandbox", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_config cfg = { 0 };
	struct osb_header headers[32];
	struct osb_cli cli = { 0 };
	struct osb_error err;
	char *key = NULL;
	long v;
	int c, status;

	cli.sandbox_id = getenv("OPEN_SANDBOX_ID");
	while ((c = getopt_long(argc, argv, "+hs:H:", opts, NULL)) != -1) {
		switch (c) {
		case 'D':
			cfg.domain = optarg;
			break;
		case 'P':
			cfg.protocol = optarg;
			break;
		case 'K':
			free(key);
			key = NULL;
			if (osb_read_key_file(optarg, &key, &err))
				return cli_fail(NULL, -EINVAL, &err);
			cfg.api_key = key;
			break;
		case 'C':
			cfg.ca_file = optarg;
			break;
		case 'k':
			cfg.insecure = true;
			break;
		case 'T':
			if (cli_parse_long(optarg, &v) || v <= 0)
				return cli_usage("bad --request-timeout %s",
						 optarg);
			cfg.request_timeout_ms = v * 1000;
			break;
		case 'R':
			if (cli_parse_long(optarg, &v) || v < 0)
				return cli_usage("bad --retries %s", optarg);
			cfg.max_retries = v ? (int)v : -1;
			break;
		case 'X':
			cfg.use_server_proxy = true;
			break;
		case 'H': {
			char *colon = strchr(optarg, ':');
			if (!colon || cfg.n_headers >= 32)
				return cli_usage("bad header \"%s\"", optarg);
			*colon = '\0';
			headers[cfg.n_headers].name = optarg;
			headers[cfg.n_headers].value = colon + 1 +
						       strspn(colon + 1, " ");
			cfg.n_headers++;
			cfg.headers = headers;
			break;
		}
		case 's':
			cli.sandbox_id = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	const char *name = argv[optind];
	cli_cmd_fn fn = NULL;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			fn = commands[i].fn;
	if (!fn)
		return cli_usage("unknown command \"%s\"", name);

	int rc = osb_client_new(&cfg, &cli.client, &err);
	if (key) {
		explicit_bzero(key, strlen(key));
		free(key);
	}
	if (rc)
		return cli_fail(NULL, rc, &err);
	/* the subcommand sees argv[0] = its name */
	argc -= optind;
	argv += optind;
	optind = 0; /* glibc: start getopt afresh */
	status = fn(&cli, argc, argv);
	/* output lost on its way out (a full disk...) is a failure too */
	errno = 0;
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "osb: stdout: %s\n",
			errno ? strerror(errno) : "write error");
		if (!status)
			status = 1;
	}
	osb_sandbox_close(cli.sb);
	osb_client_free(cli.client);
	return status;
}

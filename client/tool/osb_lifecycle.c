/*
 * osb_lifecycle.c - `osb create|list|info|pause|resume|renew|kill|endpoint`.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "osb_tool.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t cap = 4096, len = 0;
	char *s = malloc(cap);
	while (s) {
		size_t n = fread(s + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
		if (len + 1 == cap) {
			char *p = realloc(s, cap * 2);
			if (!p) {
				free(s);
				s = NULL;
				break;
			}
			s = p;
			cap *= 2;
		}
	}
	if (s)
		s[len] = '\0';
	fclose(f);
	return s;
}

static void print_time(const char *label, time_t t)
{
	char buf[64];
	if (!t) {
		printf("%s: never\n", label);
		return;
	}
	osb_time_format(t, buf, sizeof(buf));
	printf("%s: %s\n", label, buf);
}

static void print_info(const struct osb_sandbox_info *info)
{
	printf("id: %s\n", info->id);
	printf("state: %s\n", info->state);
	if (info->reason)
		printf("reason: %s\n", info->reason);
	if (info->message)
		printf("message: %s\n", info->message);
	if (info->image)
		printf("image: %s\n", info->image);
	if (info->entrypoint) {
		printf("entrypoint:");
		for (size_t i = 0; info->entrypoint[i]; i++)
			printf(" %s", info->entrypoint[i]);
		printf("\n");
	}
	print_time("created", info->created_at);
	print_time("expires", info->expires_at);
	for (size_t i = 0; i < info->metadata.n; i++)
		printf("metadata.%s: %s\n", info->metadata.items[i].key,
		       info->metadata.items[i].value);
}

int cmd_create(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "image", required_argument, NULL, 'i' },
		{ "entrypoint", required_argument, NULL, 'e' },
		{ "timeout", required_argument, NULL, 't' },
		{ "env", required_argument, NULL, 'E' },
		{ "metadata", required_argument, NULL, 'm' },
		{ "network-policy", required_argument, NULL, 'n' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'M' },
		{ "no-wait", no_argument, NULL, 'W' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_create_params p = {
		.image = "opensandbox/code-interpreter:latest",
		.timeout_s = 600,
	};
	struct osb_kvlist env = { 0 }, md = { 0 };
	const char *ep[64];
	size_t nep = 0;
	bool wait = true;
	char *policy = NULL;
	struct osb_error err;
	struct osb_sandbox_info info;
	long v;
	int c, status = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			p.image = optarg;
			break;
		case 'e':
			if (nep + 1 >= sizeof(ep) / sizeof(ep[0]))
				return cli_usage("too many --entrypoint");
			ep[nep++] = optarg;
			break;
		case 't':
			if (strcmp(optarg, "none") == 0)
				p.timeout_s = 0;
			else if (cli_parse_long(optarg, &v) || v <= 0)
				return cli_usage("bad --timeout %s", optarg);
			else
				p.timeout_s = v;
			break;
		case 'E':
			if (osb_kvlist_add_pair(&env, optarg))
				return cli_usage("bad --env %s", optarg);
			break;
		case 'm':
			if (osb_kvlist_add_pair(&md, optarg))
				return cli_usage("bad --metadata %s", optarg);
			break;
		case 'n':
			free(policy);
			policy = slurp(optarg);
			if (!policy) {
				fprintf(stderr, "osb: %s: %s\n", optarg,
					strerror(errno));
				return 1;
			}
			break;
		case 'c':
			p.cpu = optarg;
			break;
		case 'M':
			p.memory = optarg;
			break;
		case 'W':
			wait = false;
			break;
		default:
			return 2;
		}
	}
	if (optind < argc)
		return cli_usage("create takes no arguments");
	ep[nep] = NULL;
	if (nep)
		p.entrypoint = ep;
	p.env = &env;
	p.metadata = &md;
	p.network_policy_json = policy;

	int rc = osb_sandbox_create(cli->client, &p, &info, &err);
	if (rc) {
		status = cli_fail_unsure("create", rc, &err,
					 "the sandbox may exist all the same "
					 "(osb list shows it)");
		goto out;
	}
	if (wait) {
		struct osb_sandbox *sb = NULL;
		rc = osb_sandbox_wait_running(cli->client, info.id, 120000,
					      NULL, &err);
		if (!rc)
			rc = osb_sandbox_open(cli->client, info.id, &sb, &err);
		if (!rc)
			rc = osb_wait_ready(sb, 30000, &err);
		osb_sandbox_close(sb);
		if (rc) {
			/* the id is still useful: print it, fail anyway */
			printf("%s\n", info.id);
			status = cli_fail(info.id, rc, &err);
			osb_sandbox_info_release(&info);
			goto out;
		}
	}
	printf("%s\n", info.id);
	osb_sandbox_info_release(&info);
out:
	free(policy);
	osb_kvlist_release(&env);
	osb_kvlist_release(&md);
	return status;
}

int cmd_list(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' },
		{ "metadata", required_argument, NULL, 'm' },
		{ "page", required_argument, NULL, 'p' },
		{ "page-size", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_list_params p = { 0 };
	struct osb_kvlist md = { 0 };
	struct osb_sandbox_list l;
	struct osb_error err;
	const char *states[16];
	size_t ns = 0;
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (ns + 1 >= 16)
				return cli_usage("too many --state");
			states[ns++] = optarg;
			break;
		case 'm':
			if (osb_kvlist_add_pair(&md, optarg))
				return cli_usage("bad --metadata %s", optarg);
			break;
		case 'p':
			if (cli_parse_long(optarg, &v) || v < 1)
				return cli_usage("bad --page %s", optarg);
			p.page = (int)v;
			break;
		case 'n':
			if (cli_parse_long(optarg, &v) || v < 1)
				return cli_usage("bad --page-size %s", optarg);
			p.page_size = (int)v;
			break;
		default:
			return 2;
		}
	}
	states[ns] = NULL;
	p.states = ns ? states : NULL;
	p.metadata = &md;
	int rc = osb_sandbox_list(cli->client, &p, &l, &err);
	osb_kvlist_release(&md);
	if (rc)
		return cli_fail("list", rc, &err);
	for (size_t i = 0; i < l.n; i++) {
		char created[64], expires[64] = "never";
		osb_time_format(l.items[i].created_at, created,
				sizeof(created));
		if (l.items[i].expires_at)
			osb_time_format(l.items[i].expires_at, expires,
					sizeof(expires));
		printf("%s\t%s\t%s\t%s", l.items[i].id, l.items[i].state,
		       created, expires);
		for (size_t k = 0; k < l.items[i].metadata.n; k++)
			printf("%s%s=%s", k ? "," : "\t",
			       l.items[i].metadata.items[k].key,
			       l.items[i].metadata.items[k].value);
		printf("\n");
	}
	if (l.has_next)
		fprintf(stderr, "osb: page %d of %d; --page %d for more\n",
			l.page, l.total_pages, l.page + 1);
	osb_sandbox_list_release(&l);
	return 0;
}

int cmd_info(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_sandbox_info info;
	struct osb_error err;
	const char *id = cli_sandbox_id(cli, argc, argv, 1);
	if (!id)
		return 2;
	int rc = osb_sandbox_get(cli->client, id, &info, &err);
	if (rc)
		return cli_fail(id, rc, &err);
	print_info(&info);
	osb_sandbox_info_release(&info);
	return 0;
}

static int simple_action(struct osb_cli *cli, int argc, char **argv,
			 int (*fn)(struct osb_client *, const char *,
				   struct osb_error *))
{
	struct osb_error err;
	const char *id = cli_sandbox_id(cli, argc, argv, 1);
	if (!id)
		return 2;
	int rc = fn(cli->client, id, &err);
	return rc ? cli_fail(id, rc, &err) : 0;
}

int cmd_pause(struct osb_cli *cli, int argc, char **argv)
{
	return simple_action(cli, argc, argv, osb_sandbox_pause);
}

int cmd_resume(struct osb_cli *cli, int argc, char **argv)
{
	return simple_action(cli, argc, argv, osb_sandbox_resume);
}

int cmd_kill(struct osb_cli *cli, int argc, char **argv)
{
	return simple_action(cli, argc, argv, osb_sandbox_delete);
}

int cmd_renew(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	const char *id = cli->sandbox_id;
	long secs;
	time_t got;

	if (argc == 3)
		id = argv[1];
	else if (argc != 2)
		return cli_usage("usage: osb renew [ID] SECONDS");
	if (!id)
		return cli_usage("no sandbox: give an id, -s ID or OPEN_SANDBOX_ID");
	if (cli_parse_long(argv[argc - 1], &secs) || secs <= 0)
		return cli_usage("bad SECONDS %s", argv[argc - 1]);
	int rc = osb_sandbox_renew(cli->client, id, time(NULL) + secs, &got,
				   &err);
	if (rc)
		return cli_fail(id, rc, &err);
	print_time("expires", got);
	return 0;
}

int cmd_endpoint(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_endpoint ep;
	struct osb_error err;
	long port;

	if (argc != 2 || cli_parse_long(argv[1], &port) || port <= 0 ||
	    port > 65535)
		return cli_usage("usage: osb endpoint PORT");
	if (!cli->sandbox_id)
		return cli_usage("no sandbox: give -s ID or OPEN_SANDBOX_ID");
	int rc = osb_endpoint_get(cli->client, cli->sandbox_id, (int)port, &ep,
				  &err);
	if (rc)
		return cli_fail(cli->sandbox_id, rc, &err);
	printf("%s\n", ep.url);
	for (size_t i = 0; i < ep.headers.n; i++)
		printf("%s: %s\n", ep.headers.items[i].key,
		       ep.headers.items[i].value);
	osb_endpoint_release(&ep);
	return 0;
}

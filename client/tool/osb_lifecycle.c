/*
 * osb_lifecycle.c - `osb sandbox create|list|get|kill|pause|resume|renew|
 * endpoint`, and their older spellings (create, list, info...).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "osb_tool.h"

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

/* A sandbox as JSON, in the official CLI's shape (its status an
 * object with the state). */
static void rec_sandbox(struct cli_rec *r, const struct osb_sandbox_info *i)
{
	rec_str(r, "id", i->id);
	struct cli_rec *st = rec_add_object(r, "status");
	rec_str(st, "state", i->state);
	rec_str(st, "reason", i->reason);
	rec_str(st, "message", i->message);
	rec_str(r, "image", i->image);
	if (i->snapshot_id)
		rec_str(r, "snapshot_id", i->snapshot_id);
	struct cli_rec *ep = rec_add_array(r, "entrypoint");
	for (size_t k = 0; i->entrypoint && i->entrypoint[k]; k++)
		rec_str(ep, NULL, i->entrypoint[k]);
	rec_kv(r, "metadata", &i->metadata);
	rec_time(r, "created_at", i->created_at);
	rec_time(r, "expires_at", i->expires_at);
}

/* What `sandbox create` was asked for. */
struct create_args {
	struct osb_create_params p;
	long ready_s;
	const char *timeout_arg;
	struct osb_kvlist env, md, ext;
	const char *ep[64];
	size_t nep;
	bool wait;
	char *policy, *volumes, *password;
	struct osb_snapshot snap; /* --snapshot's, found */
};

static void create_args_release(struct create_args *a)
{
	free(a->policy);
	free(a->volumes);
	if (a->password) {
		explicit_bzero(a->password, strlen(a->password));
		free(a->password);
	}
	osb_kvlist_release(&a->env);
	osb_kvlist_release(&a->md);
	osb_kvlist_release(&a->ext);
	osb_snapshot_release(&a->snap);
}

/* --snapshot names a snapshot by id or name; a Creating one is waited
 * for (--ready-timeout) */
static int find_snapshot(struct osb_cli *cli, struct create_args *a)
{
	struct osb_error err;
	const char *ref = a->p.snapshot_id;
	int rc = osb_snapshot_find(cli->client, ref, &a->snap, &err);
	if (!rc)
		rc = osb_snapshot_wait(cli->client, &a->snap, a->ready_s * 1000,
				       &err);
	if (rc)
		return cli_fail(ref, rc, &err);
	a->p.snapshot_id = a->snap.id;
	return 0;
}

enum {
	CR_ENTRYPOINT = 256,
	CR_POLICY,
	CR_CPU,
	CR_MEMORY,
	CR_RESOURCE,
	CR_SKIP,
	CR_READY,
	CR_USER,
	CR_PASSWORD,
	CR_PASSWORD_FILE,
	CR_EXTENSION,
	CR_VOLUMES,
	CR_CRED_PROXY,
	CR_SNAPSHOT,
};

/* A JSON file of the options that take one: the whole of it, checked to
 * be an object (@array: an array), else a message naming the file. */
static int json_file(const char *path, bool array, char **ret)
{
	free(*ret);
	*ret = cli_slurp(path, NULL);
	if (!*ret) {
		fprintf(stderr, "osb: %s: %s\n", path, strerror(errno));
		return 1;
	}
	cJSON *v = cJSON_Parse(*ret);
	bool parsed = v != NULL;
	bool ok = array ? cJSON_IsArray(v) : cJSON_IsObject(v);
	cJSON_Delete(v);
	if (ok)
		return 0;
	fprintf(stderr, "osb: %s: %s\n", path,
		!parsed ? "not valid JSON" :
		array   ? "not a JSON array (of volumes)" :
			  "not a JSON object (a network policy)");
	return 1;
}

static int kv_opt(struct osb_kvlist *l, const char *opt, const char *arg)
{
	return osb_kvlist_add_pair(l, arg) ?
		       cli_usage("bad %s %s (KEY=VALUE)", opt, arg) :
		       0;
}

static int duration_opt(const char *opt, const char *arg, bool none_ok,
			long *ret)
{
	if (osb_duration_parse(arg, ret) ||
	    (!*ret && (!none_ok || strcasecmp(arg, "none") != 0)))
		return cli_usage("bad %s %s", opt, arg);
	return 0;
}

static int create_opt(struct create_args *a, int c, char *arg)
{
	long v;

	switch (c) {
	case 'i':
		a->p.image = arg;
		return 0;
	case CR_SNAPSHOT:
		a->p.snapshot_id = arg;
		return 0;
	case 't':
		a->timeout_arg = arg;
		return duration_opt("--timeout", arg, true, &v);
	case 'e':
		return kv_opt(&a->env, "--env", arg);
	case 'm':
		return kv_opt(&a->md, "--metadata", arg);
	case CR_EXTENSION:
		return kv_opt(&a->ext, "--extension", arg);
	case CR_RESOURCE:
		if (strncmp(arg, "cpu=", 4) == 0)
			a->p.cpu = arg + 4;
		else if (strncmp(arg, "memory=", 7) == 0)
			a->p.memory = arg + 7;
		else
			return cli_usage("bad --resource %s (cpu=N or "
					 "memory=N)",
					 arg);
		return 0;
	case CR_CPU:
		a->p.cpu = arg;
		return 0;
	case CR_MEMORY:
		a->p.memory = arg;
		return 0;
	case CR_READY:
		return duration_opt("--ready-timeout", arg, false, &a->ready_s);
	case CR_ENTRYPOINT:
		if (a->nep + 1 >= sizeof(a->ep) / sizeof(a->ep[0]))
			return cli_usage("too many --entrypoint");
		a->ep[a->nep++] = arg;
		return 0;
	case CR_POLICY:
		return json_file(arg, false, &a->policy);
	case CR_VOLUMES:
		return json_file(arg, true, &a->volumes);
	case CR_CRED_PROXY:
		a->p.credential_proxy = true;
		return 0;
	case CR_SKIP:
		a->wait = false;
		return 0;
	case CR_USER:
		a->p.image_username = arg;
		return 0;
	case CR_PASSWORD:
	case CR_PASSWORD_FILE:
		return cli_secret_opt(&a->password, c == CR_PASSWORD_FILE, arg);
	default:
		return 2;
	}
}

static int parse_create(struct osb_cli *cli, int argc, char **argv,
			struct create_args *a)
{
	static const struct option opts[] = {
		{ "image", required_argument, NULL, 'i' },
		{ "snapshot", required_argument, NULL, CR_SNAPSHOT },
		{ "entrypoint", required_argument, NULL, CR_ENTRYPOINT },
		{ "timeout", required_argument, NULL, 't' },
		{ "env", required_argument, NULL, 'e' },
		{ "metadata", required_argument, NULL, 'm' },
		{ "extension", required_argument, NULL, CR_EXTENSION },
		{ "network-policy", required_argument, NULL, CR_POLICY },
		{ "network-policy-file", required_argument, NULL, CR_POLICY },
		{ "volumes-file", required_argument, NULL, CR_VOLUMES },
		{ "credential-proxy", no_argument, NULL, CR_CRED_PROXY },
		{ "cpu", required_argument, NULL, CR_CPU },
		{ "memory", required_argument, NULL, CR_MEMORY },
		{ "resource", required_argument, NULL, CR_RESOURCE },
		{ "no-wait", no_argument, NULL, CR_SKIP },
		{ "skip-health-check", no_argument, NULL, CR_SKIP },
		{ "ready-timeout", required_argument, NULL, CR_READY },
		{ "image-auth-username", required_argument, NULL, CR_USER },
		{ "image-auth-password", required_argument, NULL, CR_PASSWORD },
		{ "image-auth-password-file", required_argument, NULL,
		  CR_PASSWORD_FILE },
		{ NULL, 0, NULL, 0 },
	};
	/* [defaults] of the settings file, else ours */
	const char *dflt = cli->file->image ?
				   cli->file->image :
				   "opensandbox/code-interpreter:latest";
	a->p.image = dflt;
	a->p.timeout_s = 600;
	a->ready_s = 120;
	a->timeout_arg = cli->file->timeout;
	a->wait = true;
	int c, st;
	while ((c = getopt_long(argc, argv, "i:t:e:m:", opts, NULL)) != -1)
		if ((st = create_opt(a, c, optarg)) != 0)
			return st;
	if (optind < argc)
		return cli_usage("create takes no arguments");
	if (a->p.snapshot_id && a->p.image != dflt)
		return cli_usage("--snapshot and --image: a sandbox is made "
				 "from one of them");
	if (a->p.snapshot_id)
		a->p.image = NULL; /* the snapshot's files instead */
	long v;
	if (a->timeout_arg && (osb_duration_parse(a->timeout_arg, &v) ||
			       (!v && strcasecmp(a->timeout_arg, "none") != 0)))
		return cli_usage("bad [defaults] timeout \"%s\" in %s",
				 a->timeout_arg, cli->config_path);
	if (a->timeout_arg)
		a->p.timeout_s = v;
	if (!a->p.image_username != !a->password)
		return cli_usage("--image-auth-username and "
				 "--image-auth-password go together");
	if (a->p.credential_proxy && !a->policy)
		return cli_usage("--credential-proxy needs "
				 "--network-policy-file: the credential "
				 "vault works through the egress policy");
	a->ep[a->nep] = NULL;
	if (a->nep)
		a->p.entrypoint = a->ep;
	a->p.env = &a->env;
	a->p.metadata = &a->md;
	a->p.extensions = &a->ext;
	a->p.network_policy_json = a->policy;
	a->p.volumes_json = a->volumes;
	a->p.image_password = a->password;
	return 0;
}

/* Waits until the new sandbox runs and its execd answers; *@info
 * becomes its record then (what get and list show). */
static int create_wait(struct osb_cli *cli, struct osb_sandbox_info *info,
		       long ready_s)
{
	struct osb_sandbox *sb = NULL;
	struct osb_sandbox_info now;
	struct osb_error err;
	int rc = osb_sandbox_wait_running(cli->client, info->id, ready_s * 1000,
					  &now, &err);
	if (!rc) {
		osb_sandbox_info_release(info);
		*info = now;
		rc = osb_sandbox_open(cli->client, info->id, &sb, &err);
	}
	if (!rc)
		rc = osb_wait_ready(sb, 30000, &err);
	osb_sandbox_close(sb);
	if (!rc)
		return 0;
	/* the id is still useful: print it, fail anyway */
	printf("%s\n", info->id);
	return cli_fail(info->id, rc, &err);
}

int cmd_create(struct osb_cli *cli, int argc, char **argv)
{
	struct create_args a = { 0 };
	struct osb_sandbox_info info;
	struct osb_error err;

	int status = parse_create(cli, argc, argv, &a);
	if (!status && a.p.snapshot_id)
		status = find_snapshot(cli, &a);
	if (status)
		goto out;
	int rc = osb_sandbox_create(cli->client, &a.p, &info, &err);
	if (rc) {
		status = cli_fail_unsure("create", rc, &err,
					 "the sandbox may exist all the same "
					 "(osb list shows it)");
		goto out;
	}
	if (a.wait)
		status = create_wait(cli, &info, a.ready_s);
	if (status) {
		/* printed by create_wait */
	} else if (cli->format == CLI_RAW) {
		printf("%s\n", info.id);
	} else {
		/* the shape of get and list; a create's answer names no
		 * image (with --skip-health-check): the one asked for */
		struct cli_rec *r = rec_object();
		if (!info.image && a.p.image)
			info.image = strdup(a.p.image);
		rec_sandbox(r, &info);
		status = cli_print(cli, r, NULL);
	}
	osb_sandbox_info_release(&info);
out:
	create_args_release(&a);
	return status;
}

static int print_list(struct osb_cli *cli, struct osb_sandbox_list *l)
{
	static const char *const cols[] = { "id",         "status.state",
					    "image",      "created_at",
					    "expires_at", NULL };
	struct cli_rec *r = rec_object(), *items = NULL;
	if (cli->format == CLI_TABLE)
		items = rec_array();
	else
		items = rec_add_array(r, "items");
	for (size_t i = 0; i < l->n; i++)
		rec_sandbox(rec_add_object(items, NULL), &l->items[i]);
	struct cli_rec *pg = rec_add_object(r, "pagination");
	rec_int(pg, "page", l->page);
	rec_int(pg, "page_size", l->page_size);
	rec_int(pg, "total_pages", l->total_pages);
	rec_int(pg, "total_items", l->total_items);
	rec_bool(pg, "has_next_page", l->has_next);
	if (cli->format == CLI_TABLE) {
		if (l->has_next)
			fprintf(stderr,
				"osb: page %d of %d; --page %d for more\n",
				l->page, l->total_pages, l->page + 1);
		rec_free(r);
		r = items;
	}
	osb_sandbox_list_release(l);
	return cli_print(cli, r, cols);
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

	while ((c = getopt_long(argc, argv, "s:m:", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (ns + 1 >= 16)
				return cli_usage("too many --state");
			/* "running" is "Running", as the official CLI takes it
			 */
			for (char *q = optarg; *q; q++)
				*q = (char)(q == optarg ?
						    toupper((unsigned char)*q) :
						    tolower((unsigned char)*q));
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
	if (cli->format != CLI_RAW)
		return print_list(cli, &l);
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
	if (cli->format == CLI_RAW) {
		print_info(&info);
	} else {
		struct cli_rec *r = rec_object();
		rec_sandbox(r, &info);
		rc = cli_print(cli, r, NULL);
	}
	osb_sandbox_info_release(&info);
	return rc;
}

static int simple_action(struct osb_cli *cli, int argc, char **argv,
			 int (*fn)(struct osb_client *, const char *,
				   struct osb_error *),
			 const char *done)
{
	struct osb_error err;
	if (argc > 2)
		return cli_usage("usage: osb sandbox %s SANDBOX_ID", argv[0]);
	const char *id = cli_sandbox_id(cli, argc, argv, 1);
	if (!id)
		return 2;
	int rc = fn(cli->client, id, &err);
	if (rc)
		return cli_fail(id, rc, &err);
	cli_done(cli, "sandbox %s %s", id, done);
	return 0;
}

int cmd_pause(struct osb_cli *cli, int argc, char **argv)
{
	return simple_action(cli, argc, argv, osb_sandbox_pause, "paused");
}

int cmd_resume(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "skip-health-check", no_argument, NULL, 'S' },
		{ "resume-timeout", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_error err;
	bool wait = true;
	long secs = 120;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'S')
			wait = false;
		else if (c != 'T' || osb_duration_parse(optarg, &secs) || !secs)
			return c == 'T' ? cli_usage("bad --resume-timeout %s",
						    optarg) :
					  2;
	}
	if (optind + 1 < argc)
		return cli_usage("usage: osb sandbox resume SANDBOX_ID");
	const char *id = cli_sandbox_id(cli, argc, argv, optind);
	if (!id)
		return 2;
	int rc = osb_sandbox_resume(cli->client, id, &err);
	if (!rc && wait)
		rc = osb_sandbox_wait_running(cli->client, id, secs * 1000,
					      NULL, &err);
	if (rc)
		return cli_fail(id, rc, &err);
	cli_done(cli, "sandbox %s resumed", id);
	return 0;
}

/* kill ID...: each one, on to the next after a failure; a line for
 * each one killed (a table's row), none with -q. */
int cmd_kill(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	const char *id = cli_sandbox_id(cli, argc, argv, 1);
	int status = 0;

	if (!id)
		return 2;
	struct cli_rec *r = rec_array();
	for (int i = argc > 1 ? 1 : 0; i < (argc > 1 ? argc : 1); i++) {
		if (argc > 1)
			id = argv[i];
		int rc = osb_sandbox_delete(cli->client, id, &err);
		if (rc) {
			status = cli_fail(id, rc, &err);
			continue;
		}
		struct cli_rec *row = rec_add_object(r, NULL);
		rec_str(row, "sandbox_id", id);
		rec_str(row, "status", "terminated");
		if (cli->format == CLI_RAW)
			cli_done(cli, "sandbox %s terminated", id);
	}
	if (cli->format == CLI_RAW || status ||
	    (cli->quiet && !CLI_STRUCTURED(cli->format))) {
		rec_free(r);
		return status;
	}
	static const char *const cols[] = { "sandbox_id", "status", NULL };
	return cli_print(cli, r, cols);
}

/* renew SANDBOX_ID --timeout DURATION, or the older renew [ID] SECONDS */
int cmd_renew(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_error err;
	const char *ttl = NULL;
	long secs;
	time_t got;
	int c;

	while ((c = getopt_long(argc, argv, "t:", opts, NULL)) != -1) {
		if (c != 't')
			return 2;
		ttl = optarg;
	}
	int first = cli_take_id(cli, argc, argv, optind, ttl ? 0 : 1);
	if (!ttl && first + 1 == argc)
		ttl = argv[first++];
	if (!ttl || first != argc)
		return cli_usage("usage: osb sandbox renew SANDBOX_ID "
				 "--timeout DURATION");
	const char *id = cli->sandbox_id;
	if (!id)
		return cli_usage(
			"no sandbox: give an id, -s ID or OPEN_SANDBOX_ID");
	if (osb_duration_parse(ttl, &secs) || secs <= 0)
		return cli_usage("bad timeout %s", ttl);
	int rc = osb_sandbox_renew(cli->client, id, time(NULL) + secs, &got,
				   &err);
	if (rc)
		return cli_fail(id, rc, &err);
	if (cli->format == CLI_RAW) {
		print_time("expires", got);
		return 0;
	}
	struct cli_rec *r = rec_object();
	rec_str(r, "sandbox_id", id);
	rec_time(r, "expires_at", got);
	return cli_print(cli, r, NULL);
}

/* endpoint SANDBOX_ID --port PORT, or the older endpoint PORT */
int cmd_endpoint(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_endpoint ep;
	struct osb_error err;
	const char *port_arg = NULL;
	long port;
	int c;

	while ((c = getopt_long(argc, argv, "p:", opts, NULL)) != -1) {
		if (c != 'p')
			return 2;
		port_arg = optarg;
	}
	int first = cli_take_id(cli, argc, argv, optind, port_arg ? 0 : 1);
	if (!port_arg && first + 1 == argc)
		port_arg = argv[first++];
	if (!port_arg || first != argc || cli_parse_long(port_arg, &port) ||
	    port <= 0 || port > 65535)
		return cli_usage(
			"usage: osb sandbox endpoint SANDBOX_ID --port PORT");
	if (!cli->sandbox_id)
		return cli_usage("no sandbox: give -s ID or OPEN_SANDBOX_ID");
	int rc = osb_endpoint_get(cli->client, cli->sandbox_id, (int)port, &ep,
				  &err);
	if (rc)
		return cli_fail(cli->sandbox_id, rc, &err);
	if (cli->format == CLI_RAW) {
		printf("%s\n", ep.url);
		for (size_t i = 0; i < ep.headers.n; i++)
			printf("%s: %s\n", ep.headers.items[i].key,
			       ep.headers.items[i].value);
	} else {
		struct cli_rec *r = rec_object();
		rec_str(r, "endpoint", ep.url);
		rec_kv(r, "headers", &ep.headers);
		rc = cli_print(cli, r, NULL);
	}
	osb_endpoint_release(&ep);
	return rc;
}

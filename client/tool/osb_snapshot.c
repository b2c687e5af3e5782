/*
 * osb_snapshot.c - `osb snapshot create|list|get|delete`: the lifecycle
 * server's snapshots of sandboxes (docs/SERVER.md §2.10). The official CLI
 * has no such group; these are osb's own. A sandbox is made from one by
 * `osb sandbox create --snapshot SNAP`.
 *
 * A create is sent once: when its answer is lost and a name was given,
 * the sandbox's snapshots of that name say whether it was made.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_tool.h"

static void rec_snapshot(struct cli_rec *r, const struct osb_snapshot *s)
{
	rec_str(r, "id", s->id);
	rec_str(r, "sandbox_id", s->sandbox_id);
	rec_str(r, "name", s->name);
	struct cli_rec *st = rec_add_object(r, "status");
	rec_str(st, "state", s->state);
	rec_str(st, "reason", s->reason);
	rec_str(st, "message", s->message);
	rec_time(r, "created_at", s->created.tv_sec);
}

/* Prints @s as the format says, and releases it. */
static int print_snapshot(struct osb_cli *cli, struct osb_snapshot *s)
{
	int rc = 0;
	if (cli->format == CLI_RAW) {
		printf("%s\n", s->id);
	} else {
		struct cli_rec *r = rec_object();
		rec_snapshot(r, s);
		rc = cli_print(cli, r, NULL);
	}
	osb_snapshot_release(s);
	return rc;
}

/* Polls @s until it is Ready (shared with osbfs's snapshot=). */
static int wait_done(struct osb_cli *cli, struct osb_snapshot *s)
{
	struct osb_error err;
	int rc = osb_snapshot_wait(cli->client, s, -1, &err);
	return rc ? cli_fail(s->id, rc, &err) : 0;
}

/* The create of @name on @sid was sent and its answer lost: the one it
 * made, if it is listed. */
static int settle(struct osb_cli *cli, const char *sid, const char *name,
		  struct osb_snapshot *ret)
{
	struct osb_snapshot_list_params p = { .sandbox_id = sid, .name = name };
	struct osb_snapshot_list l = { 0 };
	struct osb_error err;
	int rc = osb_snapshot_list(cli->client, &p, &l, &err);
	if (!rc && l.n == 1) {
		*ret = l.items[0];
		memset(&l.items[0], 0, sizeof(*ret));
	} else if (!rc) {
		rc = -ENOENT;
	}
	osb_snapshot_list_release(&l);
	return rc;
}

int cmd_snap_create(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "wait", no_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_snapshot s = { 0 };
	struct osb_error err;
	const char *name = NULL;
	bool wait = false;
	int c;

	while ((c = getopt_long(argc, argv, "n:w", opts, NULL)) != -1) {
		if (c == 'n')
			name = optarg;
		else if (c == 'w')
			wait = true;
		else
			return 2;
	}
	const char *sid = cli_sandbox_id(cli, argc, argv, optind);
	if (!sid)
		return 2;
	int rc = osb_snapshot_create(cli->client, sid, name, &s, &err);
	bool lost = rc && rc != -EOPNOTSUPP &&
		    (err.status == 0 || err.status >= 500);
	if (lost && name && settle(cli, sid, name, &s) == 0)
		rc = 0;
	if (rc)
		return cli_fail_unsure(sid, rc, &err,
				       name ? "no snapshot of that name is "
					      "listed: none was made" :
					      "osb snapshot list --sandbox "
					      "ID shows it if it was made");
	rc = wait ? wait_done(cli, &s) : 0;
	if (rc) {
		osb_snapshot_release(&s);
		return rc;
	}
	return print_snapshot(cli, &s);
}

int cmd_snap_get(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_snapshot s = { 0 };
	struct osb_error err;
	if (argc != 2)
		return cli_usage("snapshot get takes one SNAPSHOT_ID");
	int rc = osb_snapshot_get(cli->client, argv[1], &s, &err);
	if (rc)
		return cli_fail(argv[1], rc, &err);
	return print_snapshot(cli, &s);
}

int cmd_snap_delete(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	if (argc != 2)
		return cli_usage("snapshot delete takes one SNAPSHOT_ID");
	int rc = osb_snapshot_delete(cli->client, argv[1], &err);
	if (rc)
		return cli_fail(argv[1], rc, &err);
	return 0;
}

static int print_snap_list(struct osb_cli *cli, struct osb_snapshot_list *l)
{
	static const char *const cols[] = { "id",           "name",
					    "status.state", "sandbox_id",
					    "created_at",   NULL };
	struct cli_rec *r = rec_object(), *items = NULL;
	if (cli->format == CLI_TABLE)
		items = rec_array();
	else
		items = rec_add_array(r, "items");
	for (size_t i = 0; i < l->n; i++)
		rec_snapshot(rec_add_object(items, NULL), &l->items[i]);
	if (cli->format == CLI_TABLE) {
		rec_free(r);
		r = items;
	}
	return cli_print(cli, r, cols);
}

int cmd_snap_list(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sandbox", required_argument, NULL, 's' },
		{ "state", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_snapshot_list_params p = { .page_size = 200 };
	struct osb_snapshot_list l = { 0 };
	struct osb_error err;
	const char *states[16];
	size_t ns = 0;
	int c;

	while ((c = getopt_long(argc, argv, "s:n:", opts, NULL)) != -1) {
		if (c == 's')
			p.sandbox_id = optarg;
		else if (c == 'n')
			p.name = optarg;
		else if (c == 't' && ns + 1 < 16)
			states[ns++] = optarg;
		else
			return c == 't' ? cli_usage("too many --state") : 2;
	}
	states[ns] = NULL;
	p.states = ns ? states : NULL;
	int rc = osb_snapshot_list(cli->client, &p, &l, &err);
	if (rc)
		return cli_fail("snapshot list", rc, &err);
	if (cli->format != CLI_RAW) {
		rc = print_snap_list(cli, &l);
	} else {
		for (size_t i = 0; i < l.n; i++)
			printf("%s\t%s\t%s\t%s\n", l.items[i].id,
			       l.items[i].name ? l.items[i].name : "-",
			       l.items[i].state ? l.items[i].state : "?",
			       l.items[i].sandbox_id ? l.items[i].sandbox_id :
						       "-");
	}
	if (l.pg.has_next)
		fprintf(stderr,
			"osb: more than %zu snapshots: narrow the list "
			"(--sandbox, --name, --state)\n",
			l.n);
	osb_snapshot_list_release(&l);
	return rc;
}

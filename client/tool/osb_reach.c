/*
 * osb_reach.c - how a command of osb reaches its sandbox's execd.
 *
 * The first time, by the endpoint the lifecycle server gives, asked with
 * the sandbox's state (a paused one is resumed first); the endpoint is
 * then kept on disk (osb_cache.c). The next time a command that runs
 * something goes to the kept endpoint at once and the state is asked
 * beside it: a paused sandbox is resumed while the command waits at its
 * door, a deleted one stops the command. When the kept endpoint turns
 * out stale (its connection refused, its name unknown, or execd refusing
 * the call with 401, 403 or 404), the call did not run: the endpoint is
 * looked up again and the call made once more.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_tool.h"

/* A paused sandbox is resumed: 0, or what resuming it failed with. */
static int resume(struct osb_client *c, const char *id, struct osb_error *err)
{
	fprintf(stderr, "osb: sandbox %s is paused: resuming it\n", id);
	int rc = osb_sandbox_resume(c, id, err);
	if (!rc)
		rc = osb_sandbox_wait_running(c, id, 120L * 1000, NULL, err);
	return rc;
}

/* The sandbox's state, asked beside its endpoint. */
struct state_ask {
	struct osb_client *client;
	const char *id;
	struct osb_sandbox_info info;
	int rc;
};

static void *ask_state(void *arg)
{
	struct state_ask *a = arg;
	a->rc = osb_sandbox_get(a->client, a->id, &a->info, NULL);
	return NULL;
}

static bool is_paused(const char *state)
{
	return state && strcmp(state, "Paused") == 0;
}

/*
 * A paused sandbox's execd takes connections and never answers: a call
 * would wait out its timeout. So its state is asked with its endpoint,
 * at once (no round trip more), and a paused sandbox is resumed first,
 * as a mount does. 0, or what resuming it failed with.
 */
static int resume_if_paused(struct osb_cli *cli, struct state_ask *a)
{
	struct osb_error err;
	bool paused = !a->rc && is_paused(a->info.state);
	if (!a->rc)
		osb_sandbox_info_release(&a->info);
	if (!paused)
		return 0;
	int rc = resume(cli->client, a->id, &err);
	if (rc)
		cli_fail(a->id, rc, &err);
	return rc;
}

/* Keeps the endpoint of the handle for the next run of osb. */
static void keep_endpoint(struct osb_cli *cli)
{
	struct osb_endpoint ep;
	if (osb_sandbox_execd_endpoint(cli->sb, &ep) == 0) {
		cli_cache_store(cli, cli->sandbox_id, &ep);
		osb_endpoint_release(&ep);
	}
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
	struct state_ask a = { .client = cli->client, .id = cli->sandbox_id };
	pthread_t t;
	bool asking = pthread_create(&t, NULL, ask_state, &a) == 0;
	int rc = osb_sandbox_open(cli->client, cli->sandbox_id, &cli->sb, &err);
	if (asking)
		pthread_join(t, NULL);
	else
		ask_state(&a);
	if (rc) {
		if (!a.rc)
			osb_sandbox_info_release(&a.info);
		if (rc == -ENOENT)
			cli_cache_drop(cli, cli->sandbox_id);
		cli_fail(cli->sandbox_id, rc, &err);
		return NULL;
	}
	if (resume_if_paused(cli, &a)) {
		osb_sandbox_close(cli->sb);
		cli->sb = NULL;
		return NULL;
	}
	keep_endpoint(cli);
	return cli->sb;
}

/* The state asked beside a call on a kept endpoint. */
struct cli_check {
	struct osb_client *client;
	const char *id;
	pthread_t thread;
	bool asking;  /* the thread runs */
	bool retried; /* the call was made once more */
	atomic_int cancel;
	int rc; /* of the state's request */
	struct osb_error err;
	char state[256]; /* "Failed (OOM: boom)": a state not Running */
	int resume_rc;   /* of resuming a paused sandbox */
	struct osb_error resume_err;
	struct osb_endpoint kept; /* the endpoint as kept */
};

/* The thread: the state; a paused sandbox resumed; the call stopped
 * when the sandbox is gone or stays paused. */
static void *check_state(void *arg)
{
	struct cli_check *k = arg;
	struct osb_sandbox_info info;
	k->rc = osb_sandbox_get(k->client, k->id, &info, &k->err);
	if (k->rc) {
		if (k->rc == -ENOENT)
			atomic_store(&k->cancel, 1);
		return NULL;
	}
	bool paused = is_paused(info.state);
	if (info.state && strcmp(info.state, "Running") != 0)
		snprintf(k->state, sizeof(k->state), "%s%s%s%s%s%s", info.state,
			 info.reason ? " (" : "",
			 info.reason ? info.reason : "",
			 info.reason && info.message ? ": " : "",
			 info.reason && info.message ? info.message : "",
			 info.reason ? ")" : "");
	osb_sandbox_info_release(&info);
	if (paused) {
		k->resume_rc = resume(k->client, k->id, &k->resume_err);
		if (k->resume_rc)
			atomic_store(&k->cancel, 1);
	}
	return NULL;
}

static void check_free(struct cli_check *k)
{
	if (!k)
		return;
	osb_endpoint_release(&k->kept);
	free(k);
}

struct osb_sandbox *cli_sandbox_fast(struct osb_cli *cli)
{
	if (cli->sb || !cli->sandbox_id)
		return cli_sandbox(cli);
	struct cli_check *k = calloc(1, sizeof(*k));
	if (!k || cli_cache_load(cli, cli->sandbox_id, &k->kept) ||
	    osb_sandbox_open_at(cli->client, cli->sandbox_id, &k->kept,
				&cli->sb)) {
		check_free(k);
		return cli_sandbox(cli);
	}
	k->client = cli->client;
	k->id = cli->sandbox_id;
	k->asking = pthread_create(&k->thread, NULL, check_state, k) == 0;
	if (!k->asking)
		check_state(k);
	osb_cancel_flag_set(&k->cancel);
	cli->check = k;
	return cli->sb;
}

/* Whether the call surely never reached execd: no connection, or a
 * name that does not resolve. */
static bool unsent(int rc, const struct osb_error *err)
{
	return !err->status && (rc == -ECONNREFUSED || rc == -EHOSTUNREACH);
}

/* Whether execd (or a proxy before it) refused the call before running
 * it: a token or an address no longer right. */
static bool refused(const struct osb_error *err)
{
	return err->status == 401 || err->status == 403 || err->status == 404;
}

/*
 * Looks the endpoint up again after a call that did not run: 1 when it
 * moved (the call is worth making once more), 0 when the call's failure
 * stands (the same endpoint would fail the same way: libosb already
 * looks execd up again between attempts refused a connection), -1 when
 * the lookup failed (said).
 */
static int relocate(struct osb_cli *cli, struct cli_check *k)
{
	struct osb_error e;
	struct osb_endpoint used, now;
	cli_cache_drop(cli, k->id);
	k->retried = true;
	if (osb_sandbox_execd_endpoint(cli->sb, &used))
		return 0;
	int rc = osb_sandbox_refresh(cli->sb, &e);
	if (rc) {
		osb_endpoint_release(&used);
		cli_fail(k->id, rc, &e);
		return -1;
	}
	bool same = true;
	if (osb_sandbox_execd_endpoint(cli->sb, &now) == 0) {
		same = osb_endpoint_same(&now, &used);
		osb_endpoint_release(&now);
	}
	osb_endpoint_release(&used);
	keep_endpoint(cli);
	return same ? 0 : 1;
}

int cli_sandbox_settle(struct osb_cli *cli, int rc, const struct osb_error *err)
{
	struct cli_check *k = cli->check;
	if (!k)
		return 0;
	if (k->asking) {
		osb_cancel_flag_set(NULL);
		pthread_join(k->thread, NULL);
		k->asking = false;
	}
	if (!rc) {
		struct osb_endpoint now;
		if (osb_sandbox_execd_endpoint(cli->sb, &now) == 0) {
			if (!osb_endpoint_same(&now, &k->kept))
				cli_cache_store(cli, k->id, &now);
			osb_endpoint_release(&now);
		}
		return 0;
	}
	if (k->rc == -ENOENT) {
		cli_cache_drop(cli, k->id);
		cli_fail(k->id, k->rc, &k->err);
		return -1;
	}
	if (k->resume_rc) {
		cli_fail_unsure(k->id, -ECONNRESET, &k->resume_err,
				"the command was sent and may run once the "
				"sandbox resumes");
		return -1;
	}
	bool not_run = unsent(rc, err) || refused(err);
	if (not_run && k->state[0] && strncmp(k->state, "Paused", 6) != 0 &&
	    strncmp(k->state, "Pending", 7) != 0) {
		/* Failed, Terminated...: no endpoint will do */
		fprintf(stderr, "osb: %s: the sandbox is %s\n", k->id,
			k->state);
		return -1;
	}
	if (k->retried || !not_run)
		return 0;
	return relocate(cli, k);
}

void cli_sandbox_release(struct osb_cli *cli)
{
	struct cli_check *k = cli->check;
	if (k && k->asking) {
		osb_cancel_flag_set(NULL);
		pthread_join(k->thread, NULL);
	}
	check_free(k);
	cli->check = NULL;
}

/*
 * osb_exec.c - `osb command run|status|logs|interrupt|session`, `osb exec`
 * (the same as command run), `osb egress get|patch`, and osb's own
 * `spawn` and `code`. The older spellings (exec -- CMD, status ID...)
 * take the sandbox from -s.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "osb_tool.h"

/* Joins argv into one shell command line: a single argument is taken as
 * a shell command as it is; several are quoted word by word. */
static char *join_command(int argc, char **argv)
{
	if (argc == 1)
		return strdup(argv[0]);
	size_t cap = 1, len = 0;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	out[0] = '\0';
	for (int i = 0; i < argc; i++) {
		char *q = osb_shell_quote(argv[i]);
		if (!q) {
			free(out);
			return NULL;
		}
		size_t ql = strlen(q);
		char *p = realloc(out, len + ql + 2);
		if (!p) {
			free(q);
			free(out);
			return NULL;
		}
		out = p;
		if (len)
			out[len++] = ' ';
		memcpy(out + len, q, ql + 1);
		len += ql;
		free(q);
	}
	return out;
}

static int signal_exit(const struct osb_event *ev)
{
	const char *t =
		ev->traceback && ev->traceback[0] ? ev->traceback[0] : "";
	if (strstr(t, "killed"))
		return 128 + 9;
	if (strstr(t, "terminated"))
		return 128 + 15;
	if (strstr(t, "interrupt"))
		return 128 + 2;
	if (strstr(t, "hangup"))
		return 128 + 1;
	return 255;
}

struct exec_out {
	int exit_status; /* for the shell */
};

static int exec_event(void *arg, const struct osb_event *ev)
{
	struct exec_out *o = arg;
	FILE *f = NULL;

	if (ev->type == OSB_EV_STDOUT)
		f = stdout;
	else if (ev->type == OSB_EV_STDERR)
		f = stderr;
	else if (ev->type == OSB_EV_ERROR && ev->evalue &&
		 strcmp(ev->evalue, "-1") == 0)
		o->exit_status = signal_exit(ev);
	else if (ev->type == OSB_EV_ERROR && ev->ename &&
		 strcmp(ev->ename, "CommandExecError") != 0)
		fprintf(stderr, "osb: %s: %s\n", ev->ename,
			ev->evalue ? ev->evalue : "");
	if (f && ev->text) {
		if (strcmp(ev->text, "\n") == 0)
			fputc('\n', f);
		else
			fprintf(f, "%s\n", ev->text);
		fflush(f);
	}
	return 0;
}

struct run_args {
	struct osb_command_opts o;
	struct osb_kvlist envs;
	const char *timeout; /* as given: ms in the older spelling */
	bool background;
	char **cmd; /* the command's words */
	int ncmd;
};

/* Options of the commands that run something, in argv[0..@end). */
static int parse_run_opts(int end, char **argv, const char *shorts,
			  struct run_args *a)
{
	static const struct option opts[] = {
		{ "cwd", required_argument, NULL, 'w' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 't' },
		{ "env", required_argument, NULL, 'e' },
		{ "uid", required_argument, NULL, 'u' },
		{ "gid", required_argument, NULL, 'g' },
		{ "background", no_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	long v;
	int c;

	osb_command_opts_init(&a->o);
	while ((c = getopt_long(end, argv, shorts, opts, NULL)) != -1) {
		switch (c) {
		case 'w':
			a->o.cwd = optarg;
			break;
		case 't':
			a->timeout = optarg;
			break;
		case 'e':
			if (osb_kvlist_add_pair(&a->envs, optarg))
				return cli_usage("bad --env %s", optarg);
			break;
		case 'u':
			if (cli_parse_long(optarg, &v) || v < 0)
				return cli_usage("bad --uid %s", optarg);
			a->o.uid = (int)v;
			break;
		case 'g':
			if (cli_parse_long(optarg, &v) || v < 0)
				return cli_usage("bad --gid %s", optarg);
			a->o.gid = (int)v;
			break;
		case 'd':
			a->background = true;
			break;
		default:
			return 2;
		}
	}
	a->o.envs = &a->envs;
	return 0;
}

/* The timeout as given: a duration, or milliseconds in the older
 * spelling (no sandbox id before "--"). */
static int run_timeout(struct run_args *a, bool older)
{
	long v;
	if (!a->timeout)
		return 0;
	if (older && cli_parse_long(a->timeout, &v) == 0 && v >= 0) {
		a->o.timeout_ms = v;
		return 0;
	}
	if (osb_duration_parse(a->timeout, &v) || !v)
		return cli_usage("bad --timeout %s", a->timeout);
	a->o.timeout_ms = v * 1000;
	return 0;
}

/*
 * [SANDBOX_ID] [OPTIONS] -- COMMAND... : the official grammar, where the
 * options and the id come before "--" (which it requires); or the older
 * [OPTIONS] COMMAND..., with the sandbox of -s. @nbefore: how many other
 * arguments come before the command (a session id), into @before.
 */
static int parse_run(struct osb_cli *cli, int argc, char **argv, int nbefore,
		     char **before, struct run_args *a)
{
	int dd = 0, st;
	for (int i = 1; i < argc && !dd; i++)
		if (strcmp(argv[i], "--") == 0)
			dd = i;
	if (!dd) {
		/* older: the options, then the command */
		st = parse_run_opts(argc, argv, "+", a);
		a->cmd = argv + optind;
		a->ncmd = argc - optind;
		for (int i = 0; !st && i < nbefore && a->ncmd > 0; i++) {
			before[i] = *a->cmd++;
			a->ncmd--;
		}
		return st ? st : run_timeout(a, true);
	}
	/* options anywhere before "--" (getopt moves the others last) */
	st = parse_run_opts(dd, argv, "dw:t:e:", a);
	if (st)
		return st;
	int npos = dd - optind;
	char **pos = argv + optind;
	if (npos != nbefore && npos != nbefore + 1)
		return cli_usage("usage: osb %s SANDBOX_ID%s [OPTIONS] -- "
				 "COMMAND...",
				 argv[0], nbefore ? " SESSION_ID" : "");
	if (npos == nbefore + 1)
		cli->sandbox_id = *pos++;
	for (int i = 0; i < nbefore; i++)
		before[i] = *pos++;
	a->cmd = argv + dd + 1;
	a->ncmd = argc - dd - 1;
	return run_timeout(a, npos == nbefore);
}

static int start_background(struct osb_cli *cli, struct run_args *a,
			    const char *what)
{
	struct osb_error err;
	char id[OSB_ID_MAX];

	char *cmd = join_command(a->ncmd, a->cmd);
	struct osb_sandbox *sb = cmd ? cli_sandbox_fast(cli) : NULL;
	int rc = -ENOMEM, again = 1;
	while (sb && again > 0) {
		rc = osb_command_start(sb, cmd, &a->o, id, &err);
		again = cli_sandbox_settle(cli, rc, &err);
	}
	free(cmd);
	if (!sb || again < 0)
		return 1;
	if (rc)
		return cli_fail_unsure(what, rc, &err,
				       "the command may have started all the "
				       "same");
	if (cli->format == CLI_RAW) {
		printf("%s\n", id);
		return 0;
	}
	struct cli_rec *r = rec_object();
	rec_str(r, "execution_id", id);
	rec_str(r, "sandbox_id", osb_sandbox_id(sb));
	rec_str(r, "mode", "background");
	return cli_print(cli, r, NULL);
}

/* exec / command run: in the foreground, exiting with the command's
 * code (255: our own failure, as ssh), or -d in the background. */
int cmd_exec(struct osb_cli *cli, int argc, char **argv)
{
	struct run_args a = { 0 };
	struct exec_out out = { 0 };
	struct osb_error err;
	int code = 0, st;

	st = parse_run(cli, argc, argv, 0, NULL, &a);
	if (!st && a.ncmd < 1)
		st = cli_usage("no command given");
	if (st) {
		osb_kvlist_release(&a.envs);
		/* `exec` fails as ssh does (255: not the command's status);
		 * `command run` as the official CLI (2: a usage error) */
		return st == 2 && strcmp(argv[0], "exec") == 0 ? 255 : st;
	}
	if (a.background) {
		st = start_background(cli, &a, argv[0]);
		osb_kvlist_release(&a.envs);
		return st;
	}
	char *cmd = join_command(a.ncmd, a.cmd);
	struct osb_sandbox *sb = cmd ? cli_sandbox_fast(cli) : NULL;
	int rc = 0, again = 1;
	while (sb && again > 0) {
		rc = osb_command_run(sb, cmd, &a.o, exec_event, &out, &code,
				     NULL, &err);
		again = cli_sandbox_settle(cli, rc, &err);
	}
	free(cmd);
	osb_kvlist_release(&a.envs);
	if (!sb || again < 0)
		return 255;
	if (rc) {
		cli_fail_unsure("exec", rc, &err,
				"the command may have run all the same");
		return 255; /* like ssh: our own failure */
	}
	if (code < 0)
		return out.exit_status ? out.exit_status : 255;
	return code & 0xff;
}

int cmd_spawn(struct osb_cli *cli, int argc, char **argv)
{
	struct run_args a = { 0 };
	int st = parse_run(cli, argc, argv, 0, NULL, &a);
	if (!st && a.ncmd < 1)
		st = cli_usage("no command given");
	if (!st)
		st = start_background(cli, &a, "spawn");
	osb_kvlist_release(&a.envs);
	return st;
}

static void print_status(const struct osb_command_status *st)
{
	char when[64];
	printf("id: %s\n", st->id ? st->id : "");
	if (st->content)
		printf("command: %s\n", st->content);
	printf("running: %s\n", st->running ? "true" : "false");
	if (st->exited)
		printf("exit_code: %d\n", st->exit_code);
	if (st->error)
		printf("error: %s\n", st->error);
	if (st->started_at.tv_sec) {
		osb_time_format(st->started_at.tv_sec, when, sizeof(when));
		printf("started: %s\n", when);
	}
	if (st->finished_at.tv_sec) {
		osb_time_format(st->finished_at.tv_sec, when, sizeof(when));
		printf("finished: %s\n", when);
	}
}

/* [SANDBOX_ID] EXECUTION_ID, from argv[@first] on: the execution id. */
static const char *exec_id(struct osb_cli *cli, int argc, char **argv,
			   int first, const char *usage)
{
	first = cli_take_id(cli, argc, argv, first, 1);
	if (first + 1 != argc) {
		cli_usage("usage: osb %s", usage);
		return NULL;
	}
	return argv[first];
}

int cmd_status(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_command_status st;
	struct osb_error err;

	const char *id = exec_id(cli, argc, argv, 1, "status ID");
	if (!id)
		return 2;
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_command_status(sb, id, &st, &err);
	if (rc)
		return cli_fail("status", rc, &err);
	if (cli->format == CLI_RAW) {
		print_status(&st);
	} else {
		struct cli_rec *r = rec_object();
		rec_str(r, "id", st.id);
		rec_str(r, "content", st.content);
		rec_bool(r, "running", st.running);
		if (st.exited)
			rec_int(r, "exit_code", st.exit_code);
		else
			rec_str(r, "exit_code", NULL);
		rec_str(r, "error", st.error);
		rec_time(r, "started_at", st.started_at.tv_sec);
		rec_time(r, "finished_at", st.finished_at.tv_sec);
		rc = cli_print(cli, r, NULL);
	}
	osb_command_status_release(&st);
	return rc;
}

static int stdout_sink(void *arg, const void *data, size_t len)
{
	(void)arg;
	if (fwrite(data, 1, len, stdout) != len)
		return -EIO;
	return 0;
}

struct mem {
	char *s;
	size_t len;
};

static int mem_sink(void *arg, const void *data, size_t len)
{
	struct mem *m = arg;
	char *g = realloc(m->s, m->len + len + 1);
	if (!g)
		return -ENOMEM;
	memcpy(g + m->len, data, len);
	m->s = g;
	m->len += len;
	m->s[m->len] = '\0';
	return 0;
}

/* logs -o json: the output so far and the cursor after it */
static int logs_json(struct osb_cli *cli, struct osb_sandbox *sb,
		     const char *id, int64_t cur)
{
	struct osb_error err;
	struct mem m = { 0 };
	int rc = osb_command_logs(sb, id, cur, mem_sink, &m, &cur, &err);
	if (rc) {
		free(m.s);
		return cli_fail("logs", rc, &err);
	}
	struct cli_rec *r = rec_object();
	rec_str(r, "execution_id", id);
	rec_str(r, "content", m.s ? m.s : "");
	rec_int(r, "cursor", cur);
	free(m.s);
	return cli_print(cli, r, NULL);
}

int cmd_logs(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cursor", required_argument, NULL, 'c' },
		{ "follow", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_error err;
	bool follow = false;
	long cursor = 0;
	int c;

	while ((c = getopt_long(argc, argv, "f", opts, NULL)) != -1) {
		if (c == 'f')
			follow = true;
		else if (c == 'c') {
			if (cli_parse_long(optarg, &cursor) || cursor < 0)
				return cli_usage("bad --cursor %s", optarg);
		} else
			return 2;
	}
	const char *id =
		exec_id(cli, argc, argv, optind, "logs [-f] [--cursor N] ID");
	if (!id)
		return 2;
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int64_t cur = cursor;
	if (CLI_STRUCTURED(cli->format) && !follow)
		return logs_json(cli, sb, id, cur);
	for (;;) {
		struct osb_command_status st;
		bool running = false;
		int code = 0;
		/* status first, so the last read after the end sees all */
		if (follow) {
			int rc = osb_command_status(sb, id, &st, &err);
			if (rc)
				return cli_fail("logs", rc, &err);
			running = st.running;
			code = st.exited ? st.exit_code : 0;
			osb_command_status_release(&st);
		}
		int rc = osb_command_logs(sb, id, cur, stdout_sink, NULL, &cur,
					  &err);
		fflush(stdout);
		if (rc)
			return cli_fail("logs", rc, &err);
		if (!follow)
			return 0;
		if (!running)
			return code < 0 ? 255 : code & 0xff;
		usleep(300000);
	}
}

int cmd_interrupt(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	const char *id = exec_id(cli, argc, argv, 1, "interrupt ID");
	if (!id)
		return 2;
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_command_interrupt(sb, id, &err);
	if (rc)
		return cli_fail("interrupt", rc, &err);
	cli_done(cli, "interrupted %s", id);
	return 0;
}

#define SESSION_USAGE                                                          \
	"usage: osb command session create [SANDBOX_ID] [-w DIR] | run "       \
	"[SANDBOX_ID] SESSION_ID -- COMMAND | delete [SANDBOX_ID] SESSION_ID"

static int session_create(struct osb_cli *cli, int argc, char **argv)
{
	struct run_args a = { 0 };
	struct osb_error err;
	char id[OSB_ID_MAX];

	int st = parse_run_opts(argc, argv, "w:", &a);
	osb_kvlist_release(&a.envs);
	if (st)
		return st;
	if (cli_take_id(cli, argc, argv, optind, 0) != argc)
		return cli_usage(SESSION_USAGE);
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_session_create(sb, a.o.cwd, id, &err);
	if (rc)
		return cli_fail("session", rc, &err);
	if (cli->format == CLI_RAW) {
		printf("%s\n", id);
		return 0;
	}
	struct cli_rec *r = rec_object();
	rec_str(r, "sandbox_id", osb_sandbox_id(sb));
	rec_str(r, "session_id", id);
	rec_str(r, "working_directory", a.o.cwd);
	return cli_print(cli, r, NULL);
}

static int session_run(struct osb_cli *cli, int argc, char **argv)
{
	struct run_args a = { 0 };
	struct exec_out out = { 0 };
	struct osb_error err;
	char *sid = NULL;
	int code;

	int st = parse_run(cli, argc, argv, 1, &sid, &a);
	osb_kvlist_release(&a.envs);
	if (!st && (!sid || a.ncmd < 1))
		st = cli_usage(SESSION_USAGE);
	if (st)
		return st;
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	char *cmd = join_command(a.ncmd, a.cmd);
	int rc = cmd ? osb_session_run(sb, sid, cmd, a.o.cwd, a.o.timeout_ms,
				       exec_event, &out, &code, &err) :
		       -ENOMEM;
	free(cmd);
	if (rc) {
		cli_fail("session", rc, &err);
		return 255;
	}
	return code < 0 ? 255 : code & 0xff;
}

int cmd_session(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;

	if (argc < 2)
		return cli_usage(SESSION_USAGE);
	/* the verb's own arguments, with argv[0] = the verb */
	argc--;
	argv++;
	if (strcmp(argv[0], "create") == 0)
		return session_create(cli, argc, argv);
	if (strcmp(argv[0], "run") == 0)
		return session_run(cli, argc, argv);
	if (strcmp(argv[0], "delete") != 0)
		return cli_usage(SESSION_USAGE);
	int first = cli_take_id(cli, argc, argv, 1, 1);
	if (first + 1 != argc)
		return cli_usage(SESSION_USAGE);
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_session_delete(sb, argv[first], &err);
	if (rc)
		return cli_fail("session", rc, &err);
	cli_done(cli, "deleted session %s", argv[first]);
	return 0;
}

static int code_event(void *arg, const struct osb_event *ev)
{
	(void)arg;
	switch (ev->type) {
	case OSB_EV_STDOUT:
		fputs(ev->text ? ev->text : "", stdout);
		break;
	case OSB_EV_STDERR:
		fputs(ev->text ? ev->text : "", stderr);
		break;
	case OSB_EV_RESULT:
		if (ev->result_text)
			printf("%s\n", ev->result_text);
		else if (ev->results_json)
			printf("%s\n", ev->results_json);
		break;
	case OSB_EV_ERROR:
		if (ev->traceback)
			for (size_t i = 0; ev->traceback[i]; i++)
				fprintf(stderr, "%s\n", ev->traceback[i]);
		else
			fprintf(stderr, "%s: %s\n", ev->ename ? ev->ename : "",
				ev->evalue ? ev->evalue : "");
		break;
	default:
		break;
	}
	fflush(stdout);
	return 0;
}

static char *read_all_stdin(void)
{
	size_t cap = 4096, len = 0;
	char *s = malloc(cap);
	while (s) {
		ssize_t n = read(STDIN_FILENO, s + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len + 1 == cap) {
			char *p = realloc(s, cap * 2);
			if (!p) {
				free(s);
				return NULL;
			}
			s = p;
			cap *= 2;
		}
	}
	if (s)
		s[len] = '\0';
	return s;
}

/* osb code contexts [LANGUAGE]: the contexts, as a table (escaped) or
 * JSON, or for scripts a line "ID<TAB>LANGUAGE" each. */
static int code_contexts(struct osb_cli *cli, struct osb_sandbox *sb,
			 const char *language)
{
	static const char *const cols[] = { "id", "language", NULL };
	struct osb_code_context *ctx;
	struct osb_error err;
	size_t n;

	int rc = osb_code_context_list(sb, language, &ctx, &n, &err);
	if (rc)
		return cli_fail("code", rc, &err);
	struct cli_rec *r = cli->format == CLI_RAW ? NULL : rec_array();
	for (size_t i = 0; i < n; i++) {
		const char *lang = ctx[i].language ? ctx[i].language : "";
		if (!r) {
			printf("%s\t%s\n", ctx[i].id, lang);
			continue;
		}
		struct cli_rec *o = rec_add_object(r, NULL);
		rec_str(o, "id", ctx[i].id);
		rec_str(o, "language", lang);
	}
	osb_code_context_array_free(ctx, n);
	return r ? cli_print(cli, r, cols) : 0;
}

int cmd_code(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "language", required_argument, NULL, 'l' },
		{ "context", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	const char *language = "python", *context = NULL;
	struct osb_error err;
	int c, rc;

	while ((c = getopt_long(argc, argv, "+l:", opts, NULL)) != -1) {
		if (c == 'l')
			language = optarg;
		else if (c == 'c')
			context = optarg;
		else
			return 2;
	}
	if (optind >= argc)
		return cli_usage(
			"usage: osb code [--language L] [--context ID] CODE|-");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *verb = argv[optind];
	if (strcmp(verb, "contexts") == 0)
		return code_contexts(
			cli, sb, optind + 1 < argc ? argv[optind + 1] : NULL);
	if (strcmp(verb, "new") == 0 && optind + 2 == argc) {
		struct osb_code_context ctx;
		rc = osb_code_context_create(sb, argv[optind + 1], NULL, &ctx,
					     &err);
		if (rc)
			return cli_fail("code", rc, &err);
		printf("%s\n", ctx.id);
		osb_code_context_release(&ctx);
		return 0;
	}
	if (strcmp(verb, "delete") == 0 && optind + 2 == argc) {
		rc = osb_code_context_delete(sb, argv[optind + 1], &err);
		if (rc)
			return cli_fail("code", rc, &err);
		cli_done(cli, "deleted context %s", argv[optind + 1]);
		return 0;
	}
	if (strcmp(verb, "interrupt") == 0 && optind + 2 == argc) {
		rc = osb_code_interrupt(sb, argv[optind + 1], &err);
		if (rc)
			return cli_fail("code", rc, &err);
		cli_done(cli, "interrupted context %s", argv[optind + 1]);
		return 0;
	}
	if (optind + 1 != argc)
		return cli_usage(
			"usage: osb code [--language L] [--context ID] CODE|-");
	char *code = strcmp(verb, "-") == 0 ? read_all_stdin() : strdup(verb);
	if (!code)
		return cli_fail("code", -ENOMEM, NULL);
	bool failed = false;
	rc = osb_code_run(sb, context, language, code, code_event, NULL,
			  &failed, &err);
	free(code);
	if (rc)
		return cli_fail("code", rc, &err);
	return failed ? 1 : 0;
}

/* egress get [SANDBOX_ID] */
int cmd_egress_get(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	char *json;

	if (cli_take_id(cli, argc, argv, 1, 0) != argc)
		return cli_usage("usage: osb egress get SANDBOX_ID");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_egress_get(sb, &json, &err);
	if (rc)
		return cli_fail("egress", rc, &err);
	if (cli->format == CLI_RAW) {
		printf("%s\n", json);
		free(json);
		return 0;
	}
	struct cli_rec *r = rec_object();
	rc = rec_json(r, "egress", json);
	free(json);
	if (rc) {
		rec_free(r);
		return cli_fail("egress", -EPROTO, NULL);
	}
	return cli_print(cli, r, NULL);
}

/* egress patch [SANDBOX_ID] --rule ACTION=TARGET..., or the older
 * egress patch JSON */
int cmd_egress_patch(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rule", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_error err;
	struct cli_rec *rules = rec_array();
	int c, nrules = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *eq = c == 'r' ? strchr(optarg, '=') : NULL;
		if (eq)
			*eq = '\0';
		if (!eq ||
		    (strcmp(optarg, "allow") != 0 &&
		     strcmp(optarg, "deny") != 0) ||
		    !eq[1]) {
			rec_free(rules);
			return c == 'r' ?
				       cli_usage("bad --rule: ACTION=TARGET, "
						 "ACTION allow or deny") :
				       2;
		}
		struct cli_rec *rule = rec_add_object(rules, NULL);
		rec_str(rule, "action", optarg);
		rec_str(rule, "target", eq + 1);
		nrules++;
	}
	int first = cli_take_id(cli, argc, argv, optind, nrules ? 0 : 1);
	if (first + (nrules ? 0 : 1) != argc) {
		rec_free(rules);
		return cli_usage("usage: osb egress patch SANDBOX_ID --rule "
				 "ACTION=TARGET...");
	}
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb) {
		rec_free(rules);
		return 1;
	}
	char *json = nrules ? rec_to_json(rules) : strdup(argv[first]);
	int rc = json ? osb_egress_patch(sb, json, &err) : -ENOMEM;
	free(json);
	if (rc) {
		rec_free(rules);
		return cli_fail("egress", rc, &err);
	}
	if (cli->format == CLI_RAW) {
		rec_free(rules);
		cli_done(cli, "egress of %s patched", osb_sandbox_id(sb));
		return 0;
	}
	struct cli_rec *r = rec_object();
	rec_str(r, "sandbox_id", osb_sandbox_id(sb));
	rec_move(r, "patched_rules", rules);
	return cli_print(cli, r, NULL);
}

/* The older egress: [get] | patch JSON | allow HOST | deny HOST |
 * delete TARGET... (argv[0] = "egress") */
int cmd_egress(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	int rc;

	if (argc == 1)
		return cmd_egress_get(cli, argc, argv);
	if (strcmp(argv[1], "get") == 0)
		return cmd_egress_get(cli, argc - 1, argv + 1);
	if (strcmp(argv[1], "patch") == 0)
		return cmd_egress_patch(cli, argc - 1, argv + 1);
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	if (argc == 3 &&
	    (strcmp(argv[1], "allow") == 0 || strcmp(argv[1], "deny") == 0)) {
		rc = osb_egress_rule(sb, argv[1], argv[2], &err);
		if (rc)
			return cli_fail("egress", rc, &err);
		cli_done(cli, "egress of %s: %s %s", osb_sandbox_id(sb),
			 argv[1], argv[2]);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "delete") == 0) {
		rc = osb_egress_delete(sb, (const char *const *)argv + 2,
				       (size_t)(argc - 2), &err);
		if (rc)
			return cli_fail("egress", rc, &err);
		cli_done(cli, "egress of %s: %d rules deleted",
			 osb_sandbox_id(sb), argc - 2);
		return 0;
	}
	return cli_usage("usage: osb egress [get] | patch JSON | allow HOST | "
			 "deny HOST | delete TARGET...");
}

/*
 * osb_exec.c - `osb exec|spawn|status|logs|interrupt|session|code|egress`.
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
	const char *t = ev->traceback && ev->traceback[0] ? ev->traceback[0] :
							      "";
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

static int parse_cmd_opts(int argc, char **argv, struct osb_command_opts *o,
			  struct osb_kvlist *envs)
{
	static const struct option opts[] = {
		{ "cwd", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "env", required_argument, NULL, 'e' },
		{ "uid", required_argument, NULL, 'u' },
		{ "gid", required_argument, NULL, 'g' },
		{ NULL, 0, NULL, 0 },
	};
	long v;
	int c;

	osb_command_opts_init(o);
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->cwd = optarg;
			break;
		case 't':
			if (cli_parse_long(optarg, &v) || v < 0)
				return cli_usage("bad --timeout %s", optarg);
			o->timeout_ms = v;
			break;
		case 'e':
			if (osb_kvlist_add_pair(envs, optarg))
				return cli_usage("bad --env %s", optarg);
			break;
		case 'u':
			if (cli_parse_long(optarg, &v) || v < 0)
				return cli_usage("bad --uid %s", optarg);
			o->uid = (int)v;
			break;
		case 'g':
			if (cli_parse_long(optarg, &v) || v < 0)
				return cli_usage("bad --gid %s", optarg);
			o->gid = (int)v;
			break;
		default:
			return 2;
		}
	}
	o->envs = envs;
	if (optind >= argc)
		return cli_usage("no command given");
	return 0;
}

int cmd_exec(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_command_opts o;
	struct osb_kvlist envs = { 0 };
	struct exec_out out = { 0 };
	struct osb_error err;
	int code = 0;

	int st = parse_cmd_opts(argc, argv, &o, &envs);
	if (st) {
		osb_kvlist_release(&envs);
		return st == 2 ? 255 : st;
	}
	char *cmd = join_command(argc - optind, argv + optind);
	struct osb_sandbox *sb = cmd ? cli_sandbox(cli) : NULL;
	int rc = sb ? osb_command_run(sb, cmd, &o, exec_event, &out, &code,
				      NULL, &err) :
		      -ENOMEM;
	free(cmd);
	osb_kvlist_release(&envs);
	if (!sb)
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
	struct osb_command_opts o;
	struct osb_kvlist envs = { 0 };
	struct osb_error err;
	char id[OSB_ID_MAX];

	int st = parse_cmd_opts(argc, argv, &o, &envs);
	if (st) {
		osb_kvlist_release(&envs);
		return st;
	}
	char *cmd = join_command(argc - optind, argv + optind);
	struct osb_sandbox *sb = cmd ? cli_sandbox(cli) : NULL;
	int rc = sb ? osb_command_start(sb, cmd, &o, id, &err) : -ENOMEM;
	free(cmd);
	osb_kvlist_release(&envs);
	if (!sb)
		return 1;
	if (rc)
		return cli_fail_unsure("spawn", rc, &err,
				       "the command may have started all the "
				       "same");
	printf("%s\n", id);
	return 0;
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

int cmd_status(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_command_status st;
	struct osb_error err;

	if (argc != 2)
		return cli_usage("usage: osb status ID");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_command_status(sb, argv[1], &st, &err);
	if (rc)
		return cli_fail("status", rc, &err);
	print_status(&st);
	osb_command_status_release(&st);
	return 0;
}

static int stdout_sink(void *arg, const void *data, size_t len)
{
	(void)arg;
	if (fwrite(data, 1, len, stdout) != len)
		return -EIO;
	return 0;
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
	if (optind + 1 != argc)
		return cli_usage("usage: osb logs [-f] [--cursor N] ID");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *id = argv[optind];
	int64_t cur = cursor;
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
	if (argc != 2)
		return cli_usage("usage: osb interrupt ID");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_command_interrupt(sb, argv[1], &err);
	return rc ? cli_fail("interrupt", rc, &err) : 0;
}

int cmd_session(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	struct exec_out out = { 0 };
	char id[OSB_ID_MAX];
	int code;

	if (argc < 2)
		return cli_usage("usage: osb session create [--cwd DIR] | run ID COMMAND | delete ID");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	if (strcmp(argv[1], "create") == 0) {
		const char *cwd = NULL;
		if (argc == 4 && strcmp(argv[2], "--cwd") == 0)
			cwd = argv[3];
		else if (argc != 2)
			return cli_usage("usage: osb session create [--cwd DIR]");
		int rc = osb_session_create(sb, cwd, id, &err);
		if (rc)
			return cli_fail("session", rc, &err);
		printf("%s\n", id);
		return 0;
	}
	if (strcmp(argv[1], "run") == 0 && argc >= 4) {
		char *cmd = join_command(argc - 3, argv + 3);
		int rc = cmd ? osb_session_run(sb, argv[2], cmd, NULL, 0,
					       exec_event, &out, &code, &err) :
			       -ENOMEM;
		free(cmd);
		if (rc) {
			cli_fail("session", rc, &err);
			return 255;
		}
		return code < 0 ? 255 : code & 0xff;
	}
	if (strcmp(argv[1], "delete") == 0 && argc == 3) {
		int rc = osb_session_delete(sb, argv[2], &err);
		return rc ? cli_fail("session", rc, &err) : 0;
	}
	return cli_usage("usage: osb session create [--cwd DIR] | run ID COMMAND | delete ID");
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
		return cli_usage("usage: osb code [--language L] [--context ID] CODE|-");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *verb = argv[optind];
	if (strcmp(verb, "contexts") == 0) {
		struct osb_code_context *ctx;
		size_t n;
		rc = osb_code_context_list(sb,
					   optind + 1 < argc ? argv[optind + 1] :
							       NULL,
					   &ctx, &n, &err);
		if (rc)
			return cli_fail("code", rc, &err);
		for (size_t i = 0; i < n; i++)
			printf("%s\t%s\n", ctx[i].id,
			       ctx[i].language ? ctx[i].language : "");
		osb_code_context_array_free(ctx, n);
		return 0;
	}
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
		return rc ? cli_fail("code", rc, &err) : 0;
	}
	if (strcmp(verb, "interrupt") == 0 && optind + 2 == argc) {
		rc = osb_code_interrupt(sb, argv[optind + 1], &err);
		return rc ? cli_fail("code", rc, &err) : 0;
	}
	if (optind + 1 != argc)
		return cli_usage("usage: osb code [--language L] [--context ID] CODE|-");
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

int cmd_egress(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	int rc;

	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	if (argc == 1 || (argc == 2 && strcmp(argv[1], "get") == 0)) {
		char *json;
		rc = osb_egress_get(sb, &json, &err);
		if (rc)
			return cli_fail("egress", rc, &err);
		printf("%s\n", json);
		free(json);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "patch") == 0) {
		rc = osb_egress_patch(sb, argv[2], &err);
		return rc ? cli_fail("egress", rc, &err) : 0;
	}
	if (argc == 3 && (strcmp(argv[1], "allow") == 0 ||
			  strcmp(argv[1], "deny") == 0)) {
		rc = osb_egress_rule(sb, argv[1], argv[2], &err);
		return rc ? cli_fail("egress", rc, &err) : 0;
	}
	if (argc >= 3 && strcmp(argv[1], "delete") == 0) {
		rc = osb_egress_delete(sb, (const char *const *)argv + 2,
				       (size_t)(argc - 2), &err);
		return rc ? cli_fail("egress", rc, &err) : 0;
	}
	return cli_usage("usage: osb egress [get] | patch JSON | allow HOST | deny HOST | delete TARGET...");
}

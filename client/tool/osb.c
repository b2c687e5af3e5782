/*
 * osb.c - `osb`, a command-line tool on libosb with the official
 * OpenSandbox CLI's grammar: manage sandboxes, move files, run commands.
 * main() parses the global options, resolves the connection (flags >
 * environment > settings file > defaults, as the official CLI), and
 * hands over to a command of the table in osb_help.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "osb_tool.h"

/* "osb: @what: @msg; @maybe" on stderr, the message escaped (it may
 * quote the sandbox's names); @what and @maybe may be NULL. */
static void say(const char *what, const char *msg, const char *maybe)
{
	char *esc = osb_escape(msg, strlen(msg));
	fprintf(stderr, "osb: %s%s%s%s%s\n", what ? what : "", what ? ": " : "",
		esc ? esc : "(out of memory)", maybe ? "; " : "",
		maybe ? maybe : "");
	free(esc);
}

int cli_fail(const char *what, int rc, const struct osb_error *err)
{
	say(what, err && err->message[0] ? err->message : strerror(-rc), NULL);
	return 1;
}

int cli_fail_unsure(const char *what, int rc, const struct osb_error *err,
		    const char *maybe)
{
	if (rc != -ECONNRESET && rc != -ETIMEDOUT)
		return cli_fail(what, rc, err);
	say(what, err && err->message[0] ? err->message : strerror(-rc), maybe);
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

char *cli_slurp(const char *path, size_t *ret_len)
{
	FILE *f = path ? fopen(path, "re") : stdin;
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
	if (s && ret_len)
		*ret_len = len;
	if (path)
		fclose(f);
	return s;
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

int cli_take_id(struct osb_cli *cli, int argc, char **argv, int first, int n)
{
	int have = argc - first;
	/* no sandbox id starts with '/': such an argument is a path */
	bool id = (n >= 0 ? have == n + 1 : have >= 2) && argv[first][0] != '/';
	if (!id)
		return first;
	cli->sandbox_id = argv[first];
	return first + 1;
}

static int parse_format(const char *s, enum cli_format *ret)
{
	if (strcmp(s, "table") == 0)
		*ret = CLI_TABLE;
	else if (strcmp(s, "json") == 0)
		*ret = CLI_JSON;
	else if (strcmp(s, "yaml") == 0)
		*ret = CLI_YAML;
	else if (strcmp(s, "raw") == 0)
		*ret = CLI_RAW;
	else
		return cli_usage(
			"-o takes table, json, yaml or raw, not \"%s\"", s);
	return 0;
}

/*
 * Takes the options every command has out of its arguments (up to a
 * "--"): -o/--output FORMAT, -q/--quiet, and -h/--help, which prints the
 * command's help. Returns -1 to go on, else the exit status.
 */
static int common_opts(struct osb_cli *cli, const struct cli_cmd *c, int *argc,
		       char **argv)
{
	/* a command run without "--" (the older spelling) is all the
	 * command's from its first word on: `osb exec ls -h` runs ls -h */
	static const char *const runs[] = { "exec", "spawn", "code", "run" };
	bool session = strcmp(c->name, "session") == 0 && *argc > 1 &&
		       argv[1][0] != '-';
	bool stop_at_word = session && *argc > 1 && strcmp(argv[1], "run") == 0;
	for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++)
		stop_at_word |= strcmp(c->name, runs[k]) == 0;
	for (int i = 1; stop_at_word && i < *argc; i++)
		stop_at_word = strcmp(argv[i], "--") != 0;
	/* `osb exec ID --help` asks for help, though the older spelling
	 * runs its words: a -h or --help after no more words than the
	 * sandbox id (and a session's verb and id) */
	const char *last = *argc > 1 ? argv[*argc - 1] : "";
	if (stop_at_word && *argc <= (session ? 5 : 3) &&
	    (strcmp(last, "-h") == 0 || strcmp(last, "--help") == 0)) {
		cli_help_cmd(stdout, c);
		return 0;
	}
	int out = 1;
	for (int i = 1; i < *argc; i++) {
		const char *a = argv[i], *v = NULL;
		if (session && i == 1) { /* its verb */
			argv[out++] = argv[i];
			continue;
		}
		if (strcmp(a, "--") == 0 || (stop_at_word && a[0] != '-')) {
			for (; i < *argc; i++)
				argv[out++] = argv[i];
			break;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			cli_help_cmd(stdout, c);
			return 0;
		}
		if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
			cli->quiet = true;
			continue;
		}
		if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
			if (i + 1 >= *argc)
				return cli_usage("%s needs a value", a);
			v = argv[++i];
		} else if (strncmp(a, "--output=", 9) == 0) {
			v = a + 9;
		} else if (strncmp(a, "-o", 2) == 0) {
			v = a + 2;
		}
		if (!v) {
			argv[out++] = argv[i];
			continue;
		}
		if (parse_format(v, &cli->format))
			return 2;
	}
	argv[out] = NULL;
	*argc = out;
	return -1;
}

const struct cli_cmd *cli_find_cmd(const char *group, const char *name)
{
	for (size_t i = 0; i < cli_ncmds; i++) {
		const struct cli_cmd *c = &cli_cmds[i];
		if (strcmp(c->name, name) == 0 &&
		    (group ? c->group && strcmp(c->group, group) == 0 :
			     !c->group))
			return c;
	}
	return NULL;
}

bool cli_is_group(const char *name)
{
	for (size_t g = 0; g < cli_ngroups; g++)
		if (strcmp(cli_groups[g].name, name) == 0)
			return true;
	return false;
}

/* -v: a line per API call (osb.h: never a key or a header). */
static void trace_call(void *arg, const char *method, const char *path,
		       int status, const char *error, long ms, int attempt)
{
	(void)arg;
	char line[1200];
	osb_trace_format(line, sizeof(line), method, path, status, error, ms,
			 attempt);
	say(NULL, line, NULL); /* the path may be anything */
}

/* Overwrites the bytes of a secret given on the command line, so that
 * /proc/PID/cmdline no longer shows it; returns a copy. */
static char *take_secret(char *arg)
{
	char *copy = strdup(arg);
	memset(arg, '*', strlen(arg));
	return copy;
}

int cli_secret_opt(char **slot, bool from_file, char *arg)
{
	struct osb_error err;
	if (*slot)
		explicit_bzero(*slot, strlen(*slot));
	free(*slot);
	*slot = NULL;
	if (!from_file)
		*slot = take_secret(arg);
	else if (osb_read_key_file(arg, slot, &err))
		return cli_fail(NULL, -EINVAL, &err);
	return *slot ? 0 : cli_fail(NULL, -ENOMEM, NULL);
}

enum {
	OPT_DOMAIN = 256,
	OPT_PROTOCOL,
	OPT_API_KEY,
	OPT_API_KEY_FILE,
	OPT_CACERT,
	OPT_INSECURE,
	OPT_REQUEST_TIMEOUT,
	OPT_RETRIES,
	OPT_PROXY,
	OPT_NO_PROXY,
	OPT_CONFIG,
	OPT_VERSION,
	OPT_NO_COLOR,
	OPT_NO_CACHE,
};

struct globals {
	struct osb_config cfg;
	struct osb_header headers[32];
	char *key; /* from --api-key or --api-key-file */
	const char *config_path;
	bool no_proxy;
	bool verbose;
	bool format_given;
};

static int parse_globals(int argc, char **argv, struct globals *g,
			 struct osb_cli *cli)
{
	static const struct option opts[] = {
		{ "domain", required_argument, NULL, OPT_DOMAIN },
		{ "protocol", required_argument, NULL, OPT_PROTOCOL },
		{ "api-key", required_argument, NULL, OPT_API_KEY },
		{ "api-key-file", required_argument, NULL, OPT_API_KEY_FILE },
		{ "cacert", required_argument, NULL, OPT_CACERT },
		{ "insecure", no_argument, NULL, OPT_INSECURE },
		{ "request-timeout", required_argument, NULL,
		  OPT_REQUEST_TIMEOUT },
		{ "timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT },
		{ "retries", required_argument, NULL, OPT_RETRIES },
		{ "server-proxy", no_argument, NULL, OPT_PROXY },
		{ "use-server-proxy", no_argument, NULL, OPT_PROXY },
		{ "no-use-server-proxy", no_argument, NULL, OPT_NO_PROXY },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "output", required_argument, NULL, 'o' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "header", required_argument, NULL, 'H' },
		{ "sandbox", required_argument, NULL, 's' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "no-color", no_argument, NULL, OPT_NO_COLOR },
		{ "no-cache", no_argument, NULL, OPT_NO_CACHE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long v;
	int c, st;

	while ((c = getopt_long(argc, argv, "+hvqs:H:o:", opts, NULL)) != -1) {
		switch (c) {
		case OPT_DOMAIN:
			g->cfg.domain = optarg;
			break;
		case OPT_PROTOCOL:
			g->cfg.protocol = optarg;
			break;
		case OPT_API_KEY:
		case OPT_API_KEY_FILE:
			st = cli_secret_opt(&g->key, c == OPT_API_KEY_FILE,
					    optarg);
			if (st)
				return st;
			g->cfg.api_key = g->key;
			break;
		case OPT_CACERT:
			g->cfg.ca_file = optarg;
			break;
		case OPT_INSECURE:
			g->cfg.insecure = true;
			break;
		case OPT_REQUEST_TIMEOUT:
			if (cli_parse_long(optarg, &v) || v <= 0)
				return cli_usage("bad --request-timeout %s",
						 optarg);
			g->cfg.request_timeout_ms = v * 1000;
			break;
		case OPT_RETRIES:
			if (cli_parse_long(optarg, &v) || v < 0)
				return cli_usage("bad --retries %s", optarg);
			g->cfg.max_retries = v ? (int)v : -1;
			break;
		case OPT_PROXY:
			g->cfg.use_server_proxy = true;
			g->no_proxy = false;
			break;
		case OPT_NO_PROXY:
			g->cfg.use_server_proxy = false;
			g->no_proxy = true;
			break;
		case OPT_CONFIG:
			g->config_path = optarg;
			break;
		case 'o':
			if (parse_format(optarg, &cli->format))
				return 2;
			g->format_given = true;
			break;
		case 'v':
			g->verbose = true;
			break;
		case 'q':
			cli->quiet = true;
			break;
		case 'H': {
			char *colon = strchr(optarg, ':');
			if (!colon || g->cfg.n_headers >= 32)
				return cli_usage("bad header \"%s\"", optarg);
			*colon = '\0';
			g->headers[g->cfg.n_headers].name = optarg;
			g->headers[g->cfg.n_headers].value =
				colon + 1 + strspn(colon + 1, " ");
			g->cfg.n_headers++;
			g->cfg.headers = g->headers;
			break;
		}
		case 's':
			cli->sandbox_id = optarg;
			break;
		case OPT_VERSION:
			printf("osb %s\n", OSBFS_VERSION);
			return 0;
		case OPT_NO_COLOR:
			break; /* the official CLI's: osb has no colours */
		case OPT_NO_CACHE:
			cli->no_cache = true;
			break;
		case 'h':
			cli_help_main(stdout);
			return 0;
		default:
			cli_help_main(stderr);
			return 2;
		}
	}
	return -1;
}

/* The command at argv[optind] (and its group's next word): NULL when
 * there is none, with *status set (help printed, or a usage error). */
static const struct cli_cmd *pick_cmd(struct osb_cli *cli, int argc,
				      char **argv, int *shift, int *status)
{
	const char *name = argv[optind];
	if (!cli_is_group(name)) {
		const struct cli_cmd *c = cli_find_cmd(NULL, name);
		*shift = 0;
		if (!c)
			*status = cli_usage("unknown command \"%s\"", name);
		return c;
	}
	const char *sub = optind + 1 < argc ? argv[optind + 1] : NULL;
	*shift = 1;
	/* the older `osb egress`: the policy of the sandbox of -s */
	if (!sub && strcmp(name, "egress") == 0 && cli->sandbox_id) {
		*shift = 0;
		return cli_find_cmd(NULL, "egress");
	}
	if (!sub || strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
		cli_help_group(stdout, name);
		*status = 0;
		return NULL;
	}
	const struct cli_cmd *c = cli_find_cmd(name, sub);
	/* egress's older words (allow, deny, delete) */
	if (!c && strcmp(name, "egress") == 0) {
		*shift = 0;
		c = cli_find_cmd(NULL, "egress");
	}
	if (!c) {
		*status = cli_usage("unknown command \"%s %s\"", name, sub);
		return NULL;
	}
	return c;
}

void cli_warn_key_exposed(const struct osb_cfgfile *f)
{
	if (f->key_exposed)
		fprintf(stderr,
			"osb: warning: %s holds an API key and others may "
			"read it (chmod 600 %s)\n",
			f->path, f->path);
}

/* `osb __complete WORD...`, what the completion scripts run on TAB:
 * the connection from the environment and the settings file only (a
 * typed --domain is a word being completed). Quiet: a failure offers
 * nothing, and the shell offers file names. */
static int complete_main(int argc, char **argv)
{
	struct osb_cli cli = { 0 };
	struct osb_config cfg = { 0 };
	struct osb_cfgfile file = { .use_server_proxy = -1 };
	struct osb_error err;
	char path[4096];
	if (osb_cfgfile_default_path(path, sizeof(path)) == 0 &&
	    osb_cfgfile_load(path, &file, &err) == 0)
		osb_config_layer(&cfg, &file);
	cli.cfg = &cfg;
	cli.file = &file;
	int status = cmd_complete(&cli, argc, argv);
	osb_cfgfile_release(&file);
	return status;
}

int main(int argc, char **argv)
{
	struct globals g = { 0 };
	struct osb_cli cli = { 0 };
	struct osb_cfgfile file = { .use_server_proxy = -1 };
	struct osb_error err;
	char path[4096];
	int status, shift;

	if (argc >= 2 && strcmp(argv[1], "__complete") == 0)
		return complete_main(argc - 1, argv + 1);
	status = cli_complete_env();
	if (status >= 0)
		return status;
	cli.sandbox_id = getenv("OPEN_SANDBOX_ID");
	cli.format = isatty(STDOUT_FILENO) ? CLI_TABLE : CLI_RAW;
	cli.progress = isatty(STDERR_FILENO);
	status = parse_globals(argc, argv, &g, &cli);
	if (status >= 0)
		goto out;
	if (optind >= argc) {
		cli_help_main(stderr);
		status = 2;
		goto out;
	}
	const struct cli_cmd *c = pick_cmd(&cli, argc, argv, &shift, &status);
	if (!c)
		goto out;
	/* the command sees argv[0] = its name */
	argc -= optind + shift;
	argv += optind + shift;
	optind = 0; /* glibc: start getopt afresh */
	status = common_opts(&cli, c, &argc, argv);
	if (status >= 0)
		goto out;

	if (g.config_path) {
		cli.config_path = g.config_path;
	} else if (osb_cfgfile_default_path(path, sizeof(path)) == 0) {
		cli.config_path = path;
	}
	cli.cfg = &g.cfg;
	cli.file = &file;
	/* `config` edits the file: it may be the broken one to mend */
	if (!c->group || strcmp(c->group, "config") != 0) {
		int rc = cli.config_path ? osb_cfgfile_load(cli.config_path,
							    &file, &err) :
					   0;
		if (rc) {
			status = cli_fail(NULL, rc, &err);
			goto out;
		}
		cli_warn_key_exposed(&file);
		osb_config_layer(&g.cfg, &file);
		if (g.no_proxy)
			g.cfg.use_server_proxy = false;
		int crc = osb_client_new(&g.cfg, &cli.client, &err);
		if (crc) {
			status = cli_fail(NULL, crc, &err);
			goto out;
		}
		if (g.verbose)
			osb_client_set_trace(cli.client, trace_call, NULL);
	}
	status = c->fn(&cli, argc, argv);
	/* output lost on its way out (a full disk...) is a failure too */
	errno = 0;
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "osb: stdout: %s\n",
			errno ? strerror(errno) : "write error");
		if (!status)
			status = 1;
	}
out:
	cli_sandbox_release(&cli);
	osb_sandbox_close(cli.sb);
	osb_client_free(cli.client);
	osb_cfgfile_release(&file);
	if (g.key) {
		explicit_bzero(g.key, strlen(g.key));
		free(g.key);
	}
	return status;
}

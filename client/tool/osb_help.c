/*
 * osb_help.c - every command of `osb` in one table, with its help: the
 * official CLI's groups first (sandbox, command, file, egress, config,
 * exec), then what only osb has (ls, code, spawn), then the older
 * spellings, which stay for scripts.
 */
#include <stdio.h>
#include <string.h>

#include "osb_tool.h"

#define O_OUT "  -o, --output table|json|yaml|raw  how to print the result\n"

const struct cli_group cli_groups[] = {
	{ "sandbox",
	  "create, list, inspect, pause, resume, renew and kill sandboxes" },
	{ "command",
	  "run commands in a sandbox, in the foreground or the background" },
	{ "file", "read, write, move and inspect files of a sandbox" },
	{ "egress", "the network egress policy of a running sandbox" },
	{ "config", "the settings file (~/.opensandbox/config.toml)" },
};
const size_t cli_ngroups = sizeof(cli_groups) / sizeof(cli_groups[0]);

const struct cli_cmd cli_cmds[] = {
	{ "sandbox", "create", cmd_create, "[OPTIONS]",
	  "Creates a sandbox and waits until it runs and answers.\n\n"
	  "  -i, --image IMAGE           its image (else [defaults] image, "
	  "else\n"
	  "                              opensandbox/code-interpreter:latest)\n"
	  "  -t, --timeout DURATION      its TTL: 90s, 10m, 1h30m, or none "
	  "(else\n"
	  "                              [defaults] timeout, else 10m)\n"
	  "  -e, --env KEY=VALUE         its environment (repeatable)\n"
	  "  -m, --metadata KEY=VALUE    a label (repeatable)\n"
	  "      --entrypoint ARG        one argument of its entrypoint "
	  "(repeatable)\n"
	  "      --network-policy-file FILE  its egress policy (JSON)\n"
	  "      --resource cpu=N|memory=N   resource limits (repeatable)\n"
	  "      --skip-health-check     return once created, without waiting\n"
	  "      --ready-timeout DURATION    how long to wait (default "
	  "2m)\n" O_OUT },
	{ "sandbox", "list", cmd_list, "[OPTIONS]",
	  "Lists sandboxes, newest first.\n\n"
	  "  -s, --state STATE           only in this state (repeatable)\n"
	  "  -m, --metadata KEY=VALUE    only with this label (repeatable)\n"
	  "      --page N, --page-size N\n" O_OUT },
	{ "sandbox", "get", cmd_info, "SANDBOX_ID",
	  "Shows a sandbox: state, image, entrypoint, times, "
	  "labels.\n\n" O_OUT },
	{ "sandbox", "kill", cmd_kill, "SANDBOX_ID...",
	  "Deletes sandboxes.\n\n" O_OUT },
	{ "sandbox", "pause", cmd_pause, "SANDBOX_ID",
	  "Pauses a running sandbox.\n\n" O_OUT },
	{ "sandbox", "resume", cmd_resume, "SANDBOX_ID [OPTIONS]",
	  "Resumes a paused sandbox and waits until it runs.\n\n"
	  "      --skip-health-check     do not wait\n"
	  "      --resume-timeout DURATION   how long to wait (default "
	  "2m)\n" O_OUT },
	{ "sandbox", "renew", cmd_renew, "SANDBOX_ID --timeout DURATION",
	  "Makes a sandbox expire DURATION from now.\n\n"
	  "  -t, --timeout DURATION      90s, 10m, 2h...\n" O_OUT },
	{ "sandbox", "endpoint", cmd_endpoint, "SANDBOX_ID --port PORT",
	  "The URL (and headers) that reach a port of a sandbox.\n\n"
	  "  -p, --port PORT\n" O_OUT },

	{ "command", "run", cmd_exec, "SANDBOX_ID [OPTIONS] -- COMMAND...",
	  "Runs a command with bash, streaming its output; exits with its "
	  "code\n"
	  "(255 when osb itself fails). One word is a shell command line as "
	  "it\n"
	  "is; several are quoted word by word.\n\n"
	  "  -d, --background            start it and print its id\n"
	  "  -w, --workdir DIR           its working directory\n"
	  "  -t, --timeout DURATION      kill it after this long\n"
	  "  -e, --env KEY=VALUE         its environment (repeatable)\n"
	  "      --uid N, --gid N        run as this user and group\n" O_OUT },
	{ "command", "status", cmd_status, "SANDBOX_ID EXECUTION_ID",
	  "Shows a background command: running or its exit code.\n\n" O_OUT },
	{ "command", "logs", cmd_logs, "SANDBOX_ID EXECUTION_ID [OPTIONS]",
	  "The output of a background command.\n\n"
	  "      --cursor N              from byte N on\n"
	  "  -f, --follow                until it ends; exits with its "
	  "code\n" O_OUT },
	{ "command", "interrupt", cmd_interrupt, "SANDBOX_ID EXECUTION_ID",
	  "Stops a running command (SIGTERM, then SIGKILL).\n\n" O_OUT },
	{ "command", "session", cmd_session,
	  "create SANDBOX_ID [-w DIR] | run SANDBOX_ID SESSION_ID -- "
	  "COMMAND... | delete SANDBOX_ID SESSION_ID",
	  "Bash sessions that keep their state (cwd, variables) between "
	  "runs.\n\n"
	  "  -w, --workdir DIR           the session's (or this run's) "
	  "directory\n" O_OUT },

	{ "file", "cat", cmd_cat, "SANDBOX_ID PATH",
	  "Writes a file of the sandbox to stdout.\n" },
	{ "file", "write", cmd_write, "SANDBOX_ID PATH [OPTIONS]",
	  "Writes a file of the sandbox from --content or stdin.\n\n"
	  "  -c, --content TEXT          what to write (else stdin)\n"
	  "      --mode MODE             its mode (644...)\n"
	  "      --owner USER, --group GROUP\n" O_OUT },
	{ "file", "upload", cmd_put, "SANDBOX_ID LOCAL_PATH|- REMOTE_PATH",
	  "Uploads a local file (or stdin); progress on a terminal.\n\n"
	  "  -m, --mode MODE             its mode (else the local file's)\n"
	  "      --owner USER, --group GROUP\n" O_OUT },
	{ "file", "download", cmd_get, "SANDBOX_ID REMOTE_PATH LOCAL_PATH|-",
	  "Downloads a file (to stdout with -); progress on a terminal. A\n"
	  "failed download leaves no partial file under LOCAL_PATH.\n\n"
	  "      --offset N, --length N  a part of the file\n" O_OUT },
	{ "file", "rm", cmd_rm, "SANDBOX_ID PATH...",
	  "Removes files (-r: directories too).\n\n"
	  "  -r                          recursively\n" O_OUT },
	{ "file", "mv", cmd_mv, "SANDBOX_ID SOURCE DESTINATION",
	  "Renames a file or directory.\n\n" O_OUT },
	{ "file", "mkdir", cmd_mkdir, "SANDBOX_ID PATH... [OPTIONS]",
	  "Makes directories, with their parents.\n\n"
	  "      --mode MODE             the mode of each\n"
	  "      --owner USER, --group GROUP\n" O_OUT },
	{ "file", "rmdir", cmd_rmdir, "SANDBOX_ID PATH...",
	  "Removes directories with all they hold.\n\n" O_OUT },
	{ "file", "search", cmd_search, "SANDBOX_ID PATH --pattern GLOB",
	  "Files under PATH whose name matches GLOB.\n\n"
	  "  -p, --pattern GLOB\n" O_OUT },
	{ "file", "info", cmd_stat, "SANDBOX_ID PATH...",
	  "Type, size, mode, owner and times of paths.\n\n" O_OUT },
	{ "file", "chmod", cmd_chmod, "SANDBOX_ID PATH --mode MODE [OPTIONS]",
	  "Sets the mode (and owner) of a path.\n\n"
	  "      --mode MODE             755...\n"
	  "      --owner USER, --group GROUP (else kept)\n" O_OUT },
	{ "file", "replace", cmd_replace,
	  "SANDBOX_ID PATH --old TEXT --new TEXT",
	  "Replaces every TEXT in a file.\n\n" O_OUT },

	{ "egress", "get", cmd_egress_get, "SANDBOX_ID",
	  "The sandbox's egress policy: its rules and default "
	  "action.\n\n" O_OUT },
	{ "egress", "patch", cmd_egress_patch,
	  "SANDBOX_ID --rule ACTION=TARGET...",
	  "Merges rules into the policy (these first, then the old ones for\n"
	  "other targets).\n\n"
	  "      --rule allow=HOST|deny=HOST  a rule (repeatable); HOST may "
	  "be\n"
	  "                              *.domain, an IP or a CIDR\n" O_OUT },

	{ "config", "init", cmd_config_init, "[--force]",
	  "Writes a commented settings file (mode 0600).\n\n"
	  "      --force                 replace an existing one\n" O_OUT },
	{ "config", "show", cmd_config_show, "",
	  "The settings as resolved (flags > environment > file > defaults),\n"
	  "the key masked.\n\n" O_OUT },
	{ "config", "set", cmd_config_set, "SECTION.KEY VALUE",
	  "Sets a key of the settings file (made if missing, mode 0600),\n"
	  "keeping its comments. Keys: connection.api_key, .domain, "
	  ".protocol,\n"
	  ".request_timeout, .use_server_proxy; defaults.image, "
	  ".timeout.\n\n" O_OUT },

	{ NULL, "exec", cmd_exec, "SANDBOX_ID [OPTIONS] -- COMMAND...",
	  "The same as `osb command run`. Without SANDBOX_ID, the sandbox of\n"
	  "-s or OPEN_SANDBOX_ID (and --timeout in milliseconds, as "
	  "before).\n\n"
	  "  -d, --background            start it and print its id\n"
	  "  -w, --workdir DIR           its working directory (also --cwd)\n"
	  "  -t, --timeout DURATION      kill it after this long\n"
	  "  -e, --env KEY=VALUE         its environment (repeatable)\n"
	  "      --uid N, --gid N        run as this user and group\n" },
	{ NULL, "ls", cmd_ls, "[-l] [-d DEPTH|-R] PATH",
	  "Lists a directory of the sandbox (-s ID or OPEN_SANDBOX_ID).\n" },
	{ NULL, "code", cmd_code,
	  "[--language L] [--context ID] CODE|- | contexts [L] | new L | "
	  "delete ID | interrupt ID",
	  "Runs code in a code interpreter context of the sandbox, or manages\n"
	  "the contexts.\n" },
	{ NULL, "spawn", cmd_spawn,
	  "[--cwd DIR] [--timeout MS] [--env K=V]... -- COMMAND...",
	  "Starts a command in the background and prints its id.\n" },

	/* the older spellings, with -s ID or OPEN_SANDBOX_ID */
	{ NULL, "create", cmd_create,
	  "[--image IMG] [--entrypoint ARG]... [--timeout SECS|none] [--env "
	  "K=V]... [--metadata K=V]... [--network-policy FILE] [--cpu N] "
	  "[--memory N] [--no-wait]",
	  NULL },
	{ NULL, "list", cmd_list,
	  "[--state STATE]... [--metadata K=V]... [--page N] [--page-size N]",
	  NULL },
	{ NULL, "info", cmd_info, "[ID]", NULL },
	{ NULL, "pause", cmd_pause, "[ID]", NULL },
	{ NULL, "resume", cmd_resume, "[ID]", NULL },
	{ NULL, "renew", cmd_renew, "[ID] SECONDS", NULL },
	{ NULL, "kill", cmd_kill, "[ID]", NULL },
	{ NULL, "endpoint", cmd_endpoint, "PORT", NULL },
	{ NULL, "ls", cmd_ls, "[-l] [-a] [-d DEPTH] PATH", NULL },
	{ NULL, "stat", cmd_stat, "PATH", NULL },
	{ NULL, "get", cmd_get,
	  "[--offset N] [--length N] SANDBOX_PATH LOCAL_PATH|-", NULL },
	{ NULL, "put", cmd_put,
	  "[-m MODE] [--owner U] [--group G] LOCAL_PATH|- SANDBOX_PATH", NULL },
	{ NULL, "rm", cmd_rm, "[-r] PATH...", NULL },
	{ NULL, "mkdir", cmd_mkdir, "[-m MODE] PATH...", NULL },
	{ NULL, "mv", cmd_mv, "SRC DEST", NULL },
	{ NULL, "chmod", cmd_chmod, "[--owner U] [--group G] MODE PATH", NULL },
	{ NULL, "search", cmd_search, "DIR [PATTERN]", NULL },
	{ NULL, "replace", cmd_replace, "PATH OLD NEW", NULL },
	{ NULL, "exec", cmd_exec,
	  "[--cwd DIR] [--timeout MS] [--env K=V]... -- COMMAND...", NULL },
	{ NULL, "spawn", cmd_spawn,
	  "[--cwd DIR] [--timeout MS] [--env K=V]... -- COMMAND...", NULL },
	{ NULL, "status", cmd_status, "ID", NULL },
	{ NULL, "logs", cmd_logs, "[-f] [--cursor N] ID", NULL },
	{ NULL, "interrupt", cmd_interrupt, "ID", NULL },
	{ NULL, "session", cmd_session,
	  "create [--cwd DIR] | run ID COMMAND | delete ID", NULL },
	{ NULL, "code", cmd_code,
	  "[--language L] [--context ID] CODE|- | code contexts [L] | code new "
	  "L | code delete ID | code interrupt ID",
	  NULL },
	{ NULL, "egress", cmd_egress,
	  "[get] | patch JSON | allow HOST | deny HOST | delete TARGET...",
	  NULL },
};
const size_t cli_ncmds = sizeof(cli_cmds) / sizeof(cli_cmds[0]);

static const char global_help[] =
	"Global options (before the command):\n"
	"  --domain HOST[:PORT]      the server (OPEN_SANDBOX_DOMAIN; default\n"
	"                            localhost:8080)\n"
	"  --api-key KEY             the API key; visible to other users "
	"while\n"
	"                            osb starts: OPEN_SANDBOX_API_KEY, the "
	"settings\n"
	"                            file or --api-key-file FILE are better\n"
	"  --api-key-file FILE       the API key, first line of FILE\n"
	"  --protocol http|https     (OPEN_SANDBOX_PROTOCOL; default http)\n"
	"  --request-timeout SECS    per request (also --timeout;\n"
	"                            OPEN_SANDBOX_REQUEST_TIMEOUT; default "
	"30)\n"
	"  --use-server-proxy        reach execd through the server (also\n"
	"                            --server-proxy; --no-use-server-proxy)\n"
	"  --config FILE             settings file (default\n"
	"                            ~/.opensandbox/config.toml)\n"
	"  -o, --output table|json|yaml|raw  how results are printed "
	"(default:\n"
	"                            table on a terminal, else raw lines)\n"
	"  -q, --quiet               no line saying what a command did\n"
	"  -v, --verbose             a line on stderr per API call\n"
	"  --cacert FILE, --insecure     TLS: a CA bundle; or accept any "
	"certificate\n"
	"  --retries N               retries of transient failures (default "
	"5)\n"
	"  -H, --header 'Name: V'    an extra header on every request\n"
	"  -s, --sandbox ID          the sandbox when a command is not given "
	"one\n"
	"                            (OPEN_SANDBOX_ID)\n"
	"  --version, -h/--help\n"
	"\n"
	"Settings: flags > environment > settings file > defaults, as the\n"
	"official OpenSandbox CLI, whose file this is ([connection] api_key,\n"
	"domain, protocol, request_timeout, use_server_proxy; [defaults]\n"
	"image, timeout).\n";

static void print_cmd_line(FILE *out, const struct cli_cmd *c)
{
	fprintf(out, "  osb %s%s%s%s%s\n", c->group ? c->group : "",
		c->group ? " " : "", c->name, *c->synopsis ? " " : "",
		c->synopsis);
}

void cli_help_main(FILE *out)
{
	fprintf(out,
		"usage: osb [GLOBAL OPTIONS] GROUP COMMAND [ARGS] [OPTIONS]\n"
		"\n"
		"osb manages OpenSandbox sandboxes, with the official CLI's\n"
		"commands. `osb GROUP --help` and `osb GROUP COMMAND --help` "
		"say\n"
		"more.\n\n");
	for (size_t g = 0; g < cli_ngroups; g++) {
		fprintf(out, "%s: %s\n", cli_groups[g].name,
			cli_groups[g].help);
		for (size_t i = 0; i < cli_ncmds; i++)
			if (cli_cmds[i].group &&
			    strcmp(cli_cmds[i].group, cli_groups[g].name) == 0)
				print_cmd_line(out, &cli_cmds[i]);
		fputc('\n', out);
	}
	fprintf(out, "Also:\n");
	for (size_t i = 0; i < cli_ncmds; i++)
		if (!cli_cmds[i].group && cli_cmds[i].help)
			print_cmd_line(out, &cli_cmds[i]);
	fprintf(out,
		"\n%s\nOlder spellings (the sandbox from -s ID or "
		"OPEN_SANDBOX_ID):\n",
		global_help);
	for (size_t i = 0; i < cli_ncmds; i++)
		if (!cli_cmds[i].help)
			print_cmd_line(out, &cli_cmds[i]);
}

void cli_help_group(FILE *out, const char *group)
{
	for (size_t g = 0; g < cli_ngroups; g++)
		if (strcmp(cli_groups[g].name, group) == 0)
			fprintf(out,
				"usage: osb %s COMMAND [ARGS] [OPTIONS]\n\n"
				"%s.\n\nCommands:\n",
				group, cli_groups[g].help);
	for (size_t i = 0; i < cli_ncmds; i++)
		if (cli_cmds[i].group && strcmp(cli_cmds[i].group, group) == 0)
			print_cmd_line(out, &cli_cmds[i]);
	fprintf(out, "\n`osb %s COMMAND --help` for a command's options.\n",
		group);
}

void cli_help_cmd(FILE *out, const struct cli_cmd *c)
{
	fputs("usage:\n", out);
	print_cmd_line(out, c);
	fprintf(out, "\n%s", c->help ? c->help : "");
	fprintf(out, "\nGlobal options come before the command: osb --help.\n");
}

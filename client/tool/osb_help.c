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
	{ "sandbox", "create, list, inspect, pause, resume, renew and kill "
		     "sandboxes; their health and metrics" },
	{ "command",
	  "run commands in a sandbox, in the foreground or the background" },
	{ "file", "read, write, move and inspect files of a sandbox" },
	{ "egress", "the network egress policy of a running sandbox" },
	{ "config", "the settings file (~/.opensandbox/config.toml)" },
	{ "snapshot", "snapshots of sandboxes' files, to make sandboxes from "
		      "(osb's own: the official CLI has none)" },
};
const size_t cli_ngroups = sizeof(cli_groups) / sizeof(cli_groups[0]);

const struct cli_cmd cli_cmds[] = {
	{ "sandbox", "create", cmd_create, "[OPTIONS]",
	  "Creates a sandbox and waits until it runs and answers.\n\n"
	  "  -i, --image IMAGE           its image (else [defaults] image, "
	  "else\n"
	  "                              opensandbox/code-interpreter:latest)\n"
	  "      --snapshot SNAPSHOT     made from a snapshot's files "
	  "instead of an\n"
	  "                              image: its id or its name; one "
	  "still\n"
	  "                              Creating is waited for (osb's own)\n"
	  "  -t, --timeout DURATION      its TTL: 90s, 10m, 1h30m, or none "
	  "(else\n"
	  "                              [defaults] timeout, else 10m)\n"
	  "  -e, --env KEY=VALUE         its environment (repeatable)\n"
	  "  -m, --metadata KEY=VALUE    a label (repeatable)\n"
	  "      --entrypoint ARG        one argument of its entrypoint "
	  "(repeatable)\n"
	  "      --network-policy-file FILE  its egress policy (JSON)\n"
	  "      --credential-proxy      the credential vault's proxy (needs "
	  "a\n"
	  "                              network policy)\n"
	  "      --volumes-file FILE     its volumes (a JSON array)\n"
	  "      --extension KEY=VALUE   a server-defined setting "
	  "(repeatable)\n"
	  "      --resource cpu=N|memory=N   resource limits (repeatable)\n"
	  "      --image-auth-username USER  a private registry's login, "
	  "with\n"
	  "      --image-auth-password PASS  (visible to other users while "
	  "osb\n"
	  "                              starts: --image-auth-password-file "
	  "FILE\n"
	  "                              is better)\n"
	  "      --skip-health-check     return once created, without waiting\n"
	  "      --ready-timeout DURATION    how long to wait (default "
	  "2m)\n" O_OUT,
	  "ID=$(osb sandbox create)\n"
	  "osb sandbox create -i python:3.11 -t 30m -e DEBUG=1 -m project=demo "
	  "-o json\n"
	  "osb sandbox create --network-policy-file policy.json "
	  "--skip-health-check\n",
	  NULL },
	{ "sandbox", "list", cmd_list, "[OPTIONS]",
	  "Lists sandboxes, newest first.\n\n"
	  "  -s, --state STATE           only in this state (repeatable)\n"
	  "  -m, --metadata KEY=VALUE    only with this label (repeatable)\n"
	  "      --page N, --page-size N\n" O_OUT,
	  "osb sandbox list\n"
	  "osb sandbox list --state running -m project=demo -o json\n"
	  "osb sandbox list --page 2 --page-size 50\n",
	  NULL },
	{ "snapshot", "create", cmd_snap_create, "SANDBOX_ID [OPTIONS]",
	  "Snapshots a running sandbox's files; prints the snapshot's id "
	  "once the\nserver has accepted it (it is Creating). Sent once: "
	  "after a lost answer,\na --name tells whether it was made.\n\n"
	  "  -n, --name NAME             its name\n"
	  "  -w, --wait                  wait until it is Ready (fails if "
	  "it Failed)\n" O_OUT,
	  "osb snapshot create $ID --name before-upgrade --wait\n"
	  "SNAP=$(osb snapshot create $ID)\n",
	  NULL },
	{ "snapshot", "list", cmd_snap_list, "[OPTIONS]",
	  "Lists snapshots, newest first (up to 200).\n\n"
	  "  -s, --sandbox SANDBOX_ID    only of this sandbox\n"
	  "  -n, --name NAME             only of this name\n"
	  "      --state STATE           only in this state: Creating, "
	  "Ready, Failed,\n"
	  "                              Deleting (repeatable)\n" O_OUT,
	  "osb snapshot list --sandbox $ID\n"
	  "osb snapshot list --state Ready -o json\n",
	  NULL },
	{ "snapshot", "get", cmd_snap_get, "SNAPSHOT_ID",
	  "Shows a snapshot: its sandbox, name, state, time.\n\n" O_OUT,
	  "osb snapshot get $SNAP\n", NULL },
	{ "snapshot", "delete", cmd_snap_delete, "SNAPSHOT_ID",
	  "Deletes a snapshot (not one still Creating).\n",
	  "osb snapshot delete $SNAP\n", NULL },
	{ "sandbox", "get", cmd_info, "SANDBOX_ID",
	  "Shows a sandbox: state, image, entrypoint, times, "
	  "labels.\n\n" O_OUT,
	  "osb sandbox get $ID\n"
	  "osb sandbox get $ID -o yaml\n",
	  NULL },
	{ "sandbox", "kill", cmd_kill, "SANDBOX_ID...",
	  "Deletes sandboxes.\n\n" O_OUT,
	  "osb sandbox kill $ID\n"
	  "osb sandbox kill $ID $OTHER_ID -q\n",
	  NULL },
	{ "sandbox", "pause", cmd_pause, "SANDBOX_ID",
	  "Pauses a running sandbox.\n\n" O_OUT, "osb sandbox pause $ID\n",
	  NULL },
	{ "sandbox", "resume", cmd_resume, "SANDBOX_ID [OPTIONS]",
	  "Resumes a paused sandbox and waits until it runs.\n\n"
	  "      --skip-health-check     do not wait\n"
	  "      --resume-timeout DURATION   how long to wait (default "
	  "2m)\n" O_OUT,
	  "osb sandbox resume $ID\n"
	  "osb sandbox resume $ID --resume-timeout 5m\n",
	  NULL },
	{ "sandbox", "renew", cmd_renew, "SANDBOX_ID --timeout DURATION",
	  "Makes a sandbox expire DURATION from now.\n\n"
	  "  -t, --timeout DURATION      90s, 10m, 2h...\n" O_OUT,
	  "osb sandbox renew $ID --timeout 2h\n", NULL },
	{ "sandbox", "endpoint", cmd_endpoint, "SANDBOX_ID --port PORT",
	  "The URL (and headers) that reach a port of a sandbox.\n\n"
	  "  -p, --port PORT\n" O_OUT,
	  "osb sandbox endpoint $ID --port 8080\n"
	  "osb sandbox endpoint $ID -p 8080 -o json\n",
	  NULL },

	{ "sandbox", "health", cmd_health, "SANDBOX_ID",
	  "Says whether the sandbox's execd answers (one GET /ping); exits 1\n"
	  "when it does not.\n\n" O_OUT,
	  "osb sandbox health $ID\n"
	  "osb sandbox health $ID -q && echo up\n",
	  NULL },
	{ "sandbox", "metrics", cmd_metrics, "SANDBOX_ID [--watch]",
	  "CPU and memory of the sandbox, as execd measures them (it takes\n"
	  "about a second).\n\n"
	  "      --watch                 a sample a second until interrupted "
	  "(-o json:\n"
	  "                              a JSON object a line)\n" O_OUT,
	  "osb sandbox metrics $ID\n"
	  "osb sandbox metrics $ID -o json\n"
	  "osb sandbox metrics $ID --watch\n",
	  NULL },

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
	  "      --uid N, --gid N        run as this user and group\n" O_OUT,
	  "osb command run $ID -- python3 -c 'print(6 * 7)'\n"
	  "osb command run $ID -w /workspace -e MODE=fast -t 5m -- make test\n"
	  "EXEC_ID=$(osb command run $ID -d -- 'sleep 60; echo done')\n",
	  NULL },
	{ "command", "status", cmd_status, "SANDBOX_ID EXECUTION_ID",
	  "Shows a background command: running or its exit code.\n\n" O_OUT,
	  "osb command status $ID $EXEC_ID\n"
	  "osb command status $ID $EXEC_ID -o json\n",
	  NULL },
	{ "command", "logs", cmd_logs, "SANDBOX_ID EXECUTION_ID [OPTIONS]",
	  "The output of a background command.\n\n"
	  "      --cursor N              from byte N on\n"
	  "  -f, --follow                until it ends; exits with its "
	  "code\n" O_OUT,
	  "osb command logs $ID $EXEC_ID\n"
	  "osb command logs $ID $EXEC_ID --follow\n",
	  NULL },
	{ "command", "interrupt", cmd_interrupt, "SANDBOX_ID EXECUTION_ID",
	  "Stops a running command (SIGTERM, then SIGKILL).\n\n" O_OUT,
	  "osb command interrupt $ID $EXEC_ID\n", NULL },
	{ "command", "session", cmd_session,
	  "create SANDBOX_ID [-w DIR] | run SANDBOX_ID SESSION_ID -- "
	  "COMMAND... | delete SANDBOX_ID SESSION_ID",
	  "Bash sessions that keep their state (cwd, variables) between "
	  "runs.\n\n"
	  "  -w, --workdir DIR           the session's (or this run's) "
	  "directory\n"
	  "  -t, --timeout DURATION      (run) kill the run after this "
	  "long\n" O_OUT,
	  "S=$(osb command session create $ID -w /workspace)\n"
	  "osb command session run $ID $S -- 'export MODE=fast'\n"
	  "osb command session run $ID $S -- 'echo $MODE; pwd'\n"
	  "osb command session delete $ID $S\n",
	  NULL },

	{ "file", "cat", cmd_cat, "SANDBOX_ID PATH [OPTIONS]",
	  "Writes a file of the sandbox to stdout: its bytes as they are, or\n"
	  "decoded into UTF-8 from --encoding.\n\n"
	  "      --encoding ENCODING     the file's (latin1, utf-16, "
	  "cp1252...)\n"
	  "  -o, --output raw            the only way it prints\n",
	  "osb file cat $ID /workspace/hello.txt\n"
	  "osb file cat $ID /workspace/legacy.txt --encoding latin1\n",
	  NULL },
	{ "file", "write", cmd_write, "SANDBOX_ID PATH [OPTIONS]",
	  "Writes a file of the sandbox from --content or stdin.\n\n"
	  "  -c, --content TEXT          what to write (else stdin)\n"
	  "      --encoding ENCODING     written in this encoding (the text "
	  "is\n"
	  "                              UTF-8; default: as it is)\n"
	  "      --mode MODE             its mode (644...)\n"
	  "      --owner USER, --group GROUP\n" O_OUT,
	  "osb file write $ID /workspace/hello.txt -c 'hello'\n"
	  "date | osb file write $ID /workspace/now.txt --mode 600\n",
	  NULL },
	{ "file", "upload", cmd_put, "SANDBOX_ID LOCAL_PATH|- REMOTE_PATH",
	  "Uploads a local file (or stdin); progress on a terminal.\n\n"
	  "  -m, --mode MODE             its mode (else the local file's)\n"
	  "      --owner USER, --group GROUP\n" O_OUT,
	  "osb file upload $ID data.csv /workspace/data.csv\n"
	  "tar c src | osb file upload $ID - /tmp/src.tar\n",
	  NULL },
	{ "file", "download", cmd_get, "SANDBOX_ID REMOTE_PATH LOCAL_PATH|-",
	  "Downloads a file (to stdout with -); progress on a terminal. A\n"
	  "failed download leaves no partial file under LOCAL_PATH.\n\n"
	  "      --offset N, --length N  a part of the file\n" O_OUT,
	  "osb file download $ID /workspace/chart.png chart.png\n"
	  "osb file download $ID /workspace/build.log - | tail\n",
	  NULL },
	{ "file", "rm", cmd_rm, "SANDBOX_ID PATH...",
	  "Removes files (-r: directories too).\n\n"
	  "  -r                          recursively\n" O_OUT,
	  "osb file rm $ID /workspace/a.txt /workspace/b.txt\n"
	  "osb file rm $ID /workspace/build -r\n",
	  NULL },
	{ "file", "mv", cmd_mv, "SANDBOX_ID SOURCE DESTINATION",
	  "Renames a file or directory.\n\n" O_OUT,
	  "osb file mv $ID /workspace/draft.txt /workspace/final.txt\n", NULL },
	{ "file", "mkdir", cmd_mkdir, "SANDBOX_ID PATH... [OPTIONS]",
	  "Makes directories, with their parents.\n\n"
	  "      --mode MODE             the mode of each\n"
	  "      --owner USER, --group GROUP\n" O_OUT,
	  "osb file mkdir $ID /workspace/src/lib /workspace/tests --mode "
	  "750\n",
	  NULL },
	{ "file", "rmdir", cmd_rmdir, "SANDBOX_ID PATH...",
	  "Removes directories with all they hold.\n\n" O_OUT,
	  "osb file rmdir $ID /workspace/build\n", NULL },
	{ "file", "search", cmd_search, "SANDBOX_ID PATH --pattern GLOB",
	  "Files under PATH whose name matches GLOB.\n\n"
	  "  -p, --pattern GLOB\n" O_OUT,
	  "osb file search $ID /workspace --pattern '*.py'\n", NULL },
	{ "file", "info", cmd_stat, "SANDBOX_ID PATH...",
	  "Type, size, mode, owner and times of paths.\n\n" O_OUT,
	  "osb file info $ID /workspace/hello.txt\n"
	  "osb file info $ID /workspace /tmp -o json\n",
	  NULL },
	{ "file", "chmod", cmd_chmod, "SANDBOX_ID PATH --mode MODE [OPTIONS]",
	  "Sets the mode (and owner) of a path.\n\n"
	  "      --mode MODE             755...\n"
	  "      --owner USER, --group GROUP (else kept)\n" O_OUT,
	  "osb file chmod $ID /workspace/run.sh --mode 755\n", NULL },
	{ "file", "replace", cmd_replace,
	  "SANDBOX_ID PATH --old TEXT --new TEXT",
	  "Replaces every TEXT in a file.\n\n" O_OUT,
	  "osb file replace $ID /workspace/app.cfg --old debug=1 --new "
	  "debug=0\n",
	  NULL },

	{ "file", "ls", cmd_ls, "SANDBOX_ID PATH [-l] [-d DEPTH|-R]",
	  "Lists a directory: names, or with -l mode, owner, group, size, "
	  "mtime\n"
	  "and name (osb's own; not in the official CLI).\n\n"
	  "  -l                          the long form\n"
	  "  -d DEPTH                    DEPTH levels down (default 1)\n"
	  "  -R                          every level down\n" O_OUT,
	  "osb file ls $ID /workspace\n"
	  "osb file ls $ID /workspace -l -R\n",
	  NULL },

	{ "egress", "get", cmd_egress_get, "SANDBOX_ID",
	  "The sandbox's egress policy: its rules and default "
	  "action.\n\n" O_OUT,
	  "osb egress get $ID\n"
	  "osb egress get $ID -o json\n",
	  NULL },
	{ "egress", "patch", cmd_egress_patch,
	  "SANDBOX_ID --rule ACTION=TARGET...",
	  "Merges rules into the policy (these first, then the old ones for\n"
	  "other targets).\n\n"
	  "      --rule allow=HOST|deny=HOST  a rule (repeatable); HOST may "
	  "be\n"
	  "                              *.domain, an IP or a CIDR\n" O_OUT,
	  "osb egress patch $ID --rule allow=pypi.org --rule "
	  "'deny=*.example.com'\n",
	  NULL },

	{ "config", "init", cmd_config_init, "[--force]",
	  "Writes a commented settings file (mode 0600).\n\n"
	  "      --force                 replace an existing one\n" O_OUT,
	  "osb config init\n"
	  "osb config init --force\n",
	  NULL },
	{ "config", "show", cmd_config_show, "",
	  "The settings as resolved (flags > environment > file > defaults),\n"
	  "the key masked.\n\n" O_OUT,
	  "osb config show\n"
	  "OPEN_SANDBOX_DOMAIN=example.org:8080 osb config show -o json\n",
	  NULL },
	{ "config", "set", cmd_config_set, "SECTION.KEY VALUE",
	  "Sets a key of the settings file (made if missing, mode 0600),\n"
	  "keeping its comments. The keys, and what each takes:\n\n"
	  "  connection.api_key          the key (one word)\n"
	  "  connection.domain           HOST[:PORT] (one word)\n"
	  "  connection.protocol         http or https\n"
	  "  connection.request_timeout  seconds, a positive integer\n"
	  "  connection.use_server_proxy true or false\n"
	  "  defaults.image              the image of a new sandbox\n"
	  "  defaults.timeout            its TTL: 90s, 10m, 1h30m or none\n"
	  "  output.color                true or false (the official CLI's;\n"
	  "                              osb has no colours)\n\n" O_OUT,
	  "osb config set connection.domain localhost:8080\n"
	  "osb config set connection.api_key \"$(cat ~/.config/osbfs/key)\"\n"
	  "osb config set defaults.timeout 30m\n",
	  NULL },

	{ NULL, "completion", cmd_completion, "bash|zsh",
	  "Prints the shell's completion script: TAB then offers the\n"
	  "groups, commands, options, -o's formats, config set's keys and the\n"
	  "sandboxes' ids. `meson install` puts both where bash-completion\n"
	  "and zsh look; _OSB_COMPLETE=bash_source osb prints it too, as the\n"
	  "official CLI does.\n",
	  "source <(osb completion bash)\n"
	  "osb completion zsh > ~/.zfunc/_osb\n",
	  NULL },
	{ NULL, "exec", cmd_exec, "SANDBOX_ID [OPTIONS] -- COMMAND...",
	  "The same as `osb command run`. Without SANDBOX_ID, the sandbox of\n"
	  "-s or OPEN_SANDBOX_ID (and --timeout in milliseconds, as "
	  "before).\n"
	  "The sandbox's execd endpoint is kept in ~/.cache/osb: the next\n"
	  "exec sends its command at once, and asks the state beside it\n"
	  "(resuming a paused sandbox); a stale endpoint is looked up again.\n"
	  "\n"
	  "  -d, --background            start it and print its id\n"
	  "  -w, --workdir DIR           its working directory (also --cwd)\n"
	  "  -t, --timeout DURATION      kill it after this long\n"
	  "  -e, --env KEY=VALUE         its environment (repeatable)\n"
	  "      --uid N, --gid N        run as this user and group\n",
	  "osb exec $ID -- ls -l /workspace\n"
	  "osb exec $ID -w /workspace -- 'make && ./app'\n",
	  NULL },
	{ NULL, "ls", cmd_ls, "SANDBOX_ID PATH [-l] [-d DEPTH|-R]",
	  "The same as `osb file ls`. Without SANDBOX_ID, the sandbox of -s "
	  "or\n"
	  "OPEN_SANDBOX_ID.\n",
	  "osb ls $ID /workspace -l\n", NULL },
	{ NULL, "code", cmd_code,
	  "[--language L] [--context ID] CODE|- | contexts [L] | new L | "
	  "delete ID | interrupt ID",
	  "Runs code in a code interpreter context of the sandbox, or manages\n"
	  "the contexts.\n",
	  "osb -s $ID code 'print(6 * 7)'\n"
	  "echo 'x = 6 * 7' | osb -s $ID code -\n"
	  "osb -s $ID code --language javascript 'console.log(6 * 7)'\n"
	  "osb -s $ID code contexts python\n",
	  NULL },
	{ NULL, "spawn", cmd_spawn,
	  "[--cwd DIR] [--timeout MS] [--env K=V]... -- COMMAND...",
	  "Starts a command in the background and prints its id.\n",
	  "osb -s $ID spawn -- 'sleep 60; echo done'\n", NULL },

	/* the older spellings, with -s ID or OPEN_SANDBOX_ID */
	{ NULL, "create", cmd_create,
	  "[--image IMG] [--entrypoint ARG]... [--timeout SECS|none] [--env "
	  "K=V]... [--metadata K=V]... [--network-policy FILE] [--cpu N] "
	  "[--memory N] [--no-wait]",
	  NULL, NULL, "sandbox create" },
	{ NULL, "list", cmd_list,
	  "[--state STATE]... [--metadata K=V]... [--page N] [--page-size N]",
	  NULL, NULL, "sandbox list" },
	{ NULL, "info", cmd_info, "[ID]", NULL, NULL, "sandbox get" },
	{ NULL, "pause", cmd_pause, "[ID]", NULL, NULL, "sandbox pause" },
	{ NULL, "resume", cmd_resume, "[ID]", NULL, NULL, "sandbox resume" },
	{ NULL, "renew", cmd_renew, "[ID] SECONDS", NULL, NULL,
	  "sandbox renew" },
	{ NULL, "kill", cmd_kill, "[ID]", NULL, NULL, "sandbox kill" },
	{ NULL, "endpoint", cmd_endpoint, "PORT", NULL, NULL,
	  "sandbox endpoint" },
	{ NULL, "ls", cmd_ls, "[-l] [-a] [-d DEPTH] PATH", NULL, NULL,
	  "file ls" },
	{ NULL, "stat", cmd_stat, "PATH", NULL, NULL, "file info" },
	{ NULL, "get", cmd_get,
	  "[--offset N] [--length N] SANDBOX_PATH LOCAL_PATH|-", NULL, NULL,
	  "file download" },
	{ NULL, "put", cmd_put,
	  "[-m MODE] [--owner U] [--group G] LOCAL_PATH|- SANDBOX_PATH", NULL,
	  NULL, "file upload" },
	{ NULL, "rm", cmd_rm, "[-r] PATH...", NULL, NULL, "file rm" },
	{ NULL, "mkdir", cmd_mkdir, "[-m MODE] PATH...", NULL, NULL,
	  "file mkdir" },
	{ NULL, "mv", cmd_mv, "SRC DEST", NULL, NULL, "file mv" },
	{ NULL, "chmod", cmd_chmod, "[--owner U] [--group G] MODE PATH", NULL,
	  NULL, "file chmod" },
	{ NULL, "search", cmd_search, "DIR [PATTERN]", NULL, NULL,
	  "file search" },
	{ NULL, "replace", cmd_replace, "PATH OLD NEW", NULL, NULL,
	  "file replace" },
	{ NULL, "exec", cmd_exec,
	  "[--cwd DIR] [--timeout MS] [--env K=V]... -- COMMAND...", NULL, NULL,
	  "exec" },
	{ NULL, "spawn", cmd_spawn,
	  "[--cwd DIR] [--timeout MS] [--env K=V]... -- COMMAND...", NULL, NULL,
	  "spawn" },
	{ NULL, "status", cmd_status, "ID", NULL, NULL, "command status" },
	{ NULL, "logs", cmd_logs, "[-f] [--cursor N] ID", NULL, NULL,
	  "command logs" },
	{ NULL, "interrupt", cmd_interrupt, "ID", NULL, NULL,
	  "command interrupt" },
	{ NULL, "session", cmd_session,
	  "create [--cwd DIR] | run ID COMMAND | delete ID", NULL, NULL,
	  "command session" },
	{ NULL, "code", cmd_code,
	  "[--language L] [--context ID] CODE|- | code contexts [L] | code new "
	  "L | code delete ID | code interrupt ID",
	  NULL, NULL, "code" },
	{ NULL, "egress", cmd_egress,
	  "[get] | patch JSON | allow HOST | deny HOST | delete TARGET...",
	  NULL, NULL, "egress get" },
};
const size_t cli_ncmds = sizeof(cli_cmds) / sizeof(cli_cmds[0]);

const char cli_global_help[] =
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
	"  --no-color                accepted; osb prints no colours\n"
	"  --no-cache                look execd's endpoint up, not from\n"
	"                            ~/.cache/osb (also OSB_NO_CACHE=1)\n"
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

static void print_examples(FILE *out, const char *ex)
{
	fputs("\nExamples:\n", out);
	while (ex && *ex) {
		const char *nl = strchr(ex, '\n');
		int len = nl ? (int)(nl - ex) : (int)strlen(ex);
		fprintf(out, "  %.*s\n", len, ex);
		ex += len + (nl ? 1 : 0);
	}
}

/* The first example of each command of @group. */
static void group_examples(FILE *out, const char *group)
{
	fputs("\nExamples:\n", out);
	for (size_t i = 0; i < cli_ncmds; i++) {
		const char *ex = cli_cmds[i].examples;
		if (!ex || !cli_cmds[i].group ||
		    strcmp(cli_cmds[i].group, group) != 0)
			continue;
		fprintf(out, "  %.*s\n", (int)strcspn(ex, "\n"), ex);
	}
}

static const char main_examples[] =
	"osb config init && osb config set connection.domain localhost:8080\n"
	"ID=$(osb sandbox create -t 30m)\n"
	"osb exec $ID -- python3 -c 'print(6 * 7)'\n"
	"osb file write $ID /workspace/hello.txt -c 'hello'\n"
	"osb file cat $ID /workspace/hello.txt\n"
	"osb sandbox list -o yaml\n"
	"osb sandbox kill $ID\n";

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
		cli_global_help);
	for (size_t i = 0; i < cli_ncmds; i++)
		if (!cli_cmds[i].help)
			print_cmd_line(out, &cli_cmds[i]);
	print_examples(out, main_examples);
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
	group_examples(out, group);
	fprintf(out, "\n`osb %s COMMAND --help` for a command's options.\n",
		group);
}

static const struct cli_cmd *newer_cmd(const struct cli_cmd *c)
{
	const char *sp = strchr(c->newer, ' ');
	size_t gl = sp ? (size_t)(sp - c->newer) : 0;
	const char *name = sp ? sp + 1 : c->newer;
	for (size_t i = 0; i < cli_ncmds; i++) {
		const struct cli_cmd *n = &cli_cmds[i];
		if (n->help && strcmp(n->name, name) == 0 &&
		    (sp ? n->group && strlen(n->group) == gl &&
				     strncmp(n->group, c->newer, gl) == 0 :
			  !n->group))
			return n;
	}
	return NULL;
}

void cli_help_cmd(FILE *out, const struct cli_cmd *c)
{
	fputs("usage:\n", out);
	print_cmd_line(out, c);
	if (c->help) {
		fprintf(out, "\n%s", c->help);
		print_examples(out, c->examples);
	} else if (c->newer) {
		const struct cli_cmd *n = newer_cmd(c);
		fprintf(out,
			"\nAn older spelling of `osb %s`, with the sandbox of "
			"-s ID or\nOPEN_SANDBOX_ID. `osb %s --help` says "
			"more.\n",
			c->newer, c->newer);
		if (n)
			print_examples(out, n->examples);
	}
	fprintf(out, "\nGlobal options come before the command: osb --help.\n");
}

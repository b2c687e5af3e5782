/*
 * osb_tool.h - the pieces of the `osb` command-line tool.
 *
 * osb.c parses the connection options and dispatches to a subcommand;
 * osb_lifecycle.c, osb_files.c and osb_exec.c hold the subcommands.
 */
#ifndef OSB_TOOL_H
#define OSB_TOOL_H

#include "osb.h"

struct osb_cli {
	struct osb_client *client;
	const char *sandbox_id;    /* -s ID or OPEN_SANDBOX_ID */
	struct osb_sandbox *sb;    /* opened on first use */
};

/* The sandbox named by -s / OPEN_SANDBOX_ID, opened once. Prints the
 * error and returns NULL on failure. */
struct osb_sandbox *cli_sandbox(struct osb_cli *cli);
/* The sandbox id from an optional argument, else -s. NULL + message if
 * there is none. */
const char *cli_sandbox_id(struct osb_cli *cli, int argc, char **argv,
			   int optind_now);
/* Prints "osb: WHAT: MESSAGE" and returns 1. */
int cli_fail(const char *what, int rc, const struct osb_error *err);
/* The same for a call that is never resent (a create, a command): when
 * its answer was lost (-ECONNRESET, -ETIMEDOUT) it may have taken effect
 * all the same, which "; @maybe" after the message tells. */
int cli_fail_unsure(const char *what, int rc, const struct osb_error *err,
		    const char *maybe);
/* Prints a usage error and returns 2. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a number (with an optional unit for durations in seconds). */
int cli_parse_long(const char *s, long *ret);
/* Parses an octal mode. */
int cli_parse_mode(const char *s, mode_t *ret);

typedef int (*cli_cmd_fn)(struct osb_cli *cli, int argc, char **argv);

int cmd_create(struct osb_cli *cli, int argc, char **argv);
int cmd_list(struct osb_cli *cli, int argc, char **argv);
int cmd_info(struct osb_cli *cli, int argc, char **argv);
int cmd_pause(struct osb_cli *cli, int argc, char **argv);
int cmd_resume(struct osb_cli *cli, int argc, char **argv);
int cmd_renew(struct osb_cli *cli, int argc, char **argv);
int cmd_kill(struct osb_cli *cli, int argc, char **argv);
int cmd_endpoint(struct osb_cli *cli, int argc, char **argv);

int cmd_ls(struct osb_cli *cli, int argc, char **argv);
int cmd_stat(struct osb_cli *cli, int argc, char **argv);
int cmd_get(struct osb_cli *cli, int argc, char **argv);
int cmd_put(struct osb_cli *cli, int argc, char **argv);
int cmd_rm(struct osb_cli *cli, int argc, char **argv);
int cmd_mkdir(struct osb_cli *cli, int argc, char **argv);
int cmd_mv(struct osb_cli *cli, int argc, char **argv);
int cmd_chmod(struct osb_cli *cli, int argc, char **argv);
int cmd_search(struct osb_cli *cli, int argc, char **argv);
int cmd_replace(struct osb_cli *cli, int argc, char **argv);

int cmd_exec(struct osb_cli *cli, int argc, char **argv);
int cmd_spawn(struct osb_cli *cli, int argc, char **argv);
int cmd_status(struct osb_cli *cli, int argc, char **argv);
int cmd_logs(struct osb_cli *cli, int argc, char **argv);
int cmd_interrupt(struct osb_cli *cli, int argc, char **argv);
int cmd_session(struct osb_cli *cli, int argc, char **argv);
int cmd_code(struct osb_cli *cli, int argc, char **argv);
int cmd_egress(struct osb_cli *cli, int argc, char **argv);

#endif /* OSB_TOOL_H */

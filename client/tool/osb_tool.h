/*
 * osb_tool.h - the pieces of the `osb` command-line tool.
 *
 * osb.c parses the global options (flags, else the environment, else the
 * settings file) and dispatches; osb_help.c holds the command table with
 * every help text; osb_out.c prints results as a table, JSON or the raw
 * lines scripts read; osb_progress.c the progress line of transfers;
 * osb_lifecycle.c, osb_health.c, osb_files.c, osb_exec.c and
 * osb_config.c the commands.
 *
 * The official CLI's grammar names the sandbox first (`osb file cat ID
 * PATH`); the older spellings take it from -s ID or OPEN_SANDBOX_ID. The
 * commands accept both: cli_take_id() tells them apart by the count of
 * arguments.
 */
#ifndef OSB_TOOL_H
#define OSB_TOOL_H

#include <stdbool.h>
#include <stdio.h>

#include "osb.h"

/* How results are printed: the raw lines scripts read (the default when
 * stdout is no terminal), aligned columns, JSON or YAML. */
enum cli_format {
	CLI_RAW,
	CLI_TABLE,
	CLI_JSON,
	CLI_YAML,
};

/* JSON or YAML: a result is a record, printed whole. */
#define CLI_STRUCTURED(f) ((f) == CLI_JSON || (f) == CLI_YAML)

struct osb_cli {
	struct osb_client *client; /* NULL for `config` */
	const char *sandbox_id;    /* the command's, or -s / OPEN_SANDBOX_ID */
	struct osb_sandbox *sb;    /* opened on first use */
	struct cli_check *check;   /* its state, asked beside a call */
	bool no_cache;             /* --no-cache: endpoints looked up */
	enum cli_format format;
	const char *config_path;        /* --config, else the default */
	const struct osb_config *cfg;   /* the connection, as resolved */
	const struct osb_cfgfile *file; /* the settings file, as read */
	bool progress;               /* transfers show progress (a terminal) */
	bool quiet;                  /* -q: no line saying what was done */
	const char *const *cmd_path; /* e.g. {"file", "write"}, for help */
};

/* The sandbox named by the command or -s / OPEN_SANDBOX_ID, opened once.
 * Prints the error and returns NULL on failure. */
struct osb_sandbox *cli_sandbox(struct osb_cli *cli);
/*
 * cli_sandbox_fast() - the same for a call that runs something, on the
 * endpoint kept from an earlier run (osb_cache.c) when there is one:
 * then nothing is asked before the call, and the sandbox's state is asked
 * beside it (a paused sandbox is resumed meanwhile, a deleted one stops
 * the call). cli_sandbox_settle() must follow the call.
 */
struct osb_sandbox *cli_sandbox_fast(struct osb_cli *cli);
/*
 * cli_sandbox_settle() - after a call on cli_sandbox_fast()'s handle that
 * returned @rc and @err: waits for the state and keeps the endpoint for
 * next time. 1 when the call is to be made once more (the kept endpoint
 * was stale and the call surely did not run; the handle now has the
 * endpoint looked up again), 0 when @rc stands (to be said by the
 * caller), -1 when the failure was said already (the sandbox is gone, or
 * it stays paused).
 */
int cli_sandbox_settle(struct osb_cli *cli, int rc,
		       const struct osb_error *err);
/* Frees what cli_sandbox_fast() left (before the handle is closed). */
void cli_sandbox_release(struct osb_cli *cli);

/* Execd endpoints kept between runs (osb_cache.c), unless --no-cache or
 * OSB_NO_CACHE: 0 and *@ret, or -ENOENT when none is kept. */
int cli_cache_load(struct osb_cli *cli, const char *id,
		   struct osb_endpoint *ret);
void cli_cache_store(struct osb_cli *cli, const char *id,
		     const struct osb_endpoint *ep);
void cli_cache_drop(struct osb_cli *cli, const char *id);

/* The sandbox id from an optional argument, else -s. NULL + message if
 * there is none. */
const char *cli_sandbox_id(struct osb_cli *cli, int argc, char **argv,
			   int optind_now);
/*
 * cli_take_id() - a command that takes @n arguments (after its options,
 * from @first) may be given the sandbox id before them: with n + 1
 * arguments the first one is the id (it becomes cli->sandbox_id); with
 * @n < 0 (one or more sandbox paths) when another follows. An argument
 * that starts with '/' is never taken for an id. Returns the index of the first
 * argument after the id.
 */
int cli_take_id(struct osb_cli *cli, int argc, char **argv, int first, int n);
/* Warns, as ssh does, when the settings file holds a key others may
 * read. */
void cli_warn_key_exposed(const struct osb_cfgfile *f);
/* Prints "osb: WHAT: MESSAGE" and returns 1. */
int cli_fail(const char *what, int rc, const struct osb_error *err);
/* The same for a call that is never resent (a create, a command): when
 * its answer was lost (-ECONNRESET, -ETIMEDOUT) it may have taken effect
 * all the same, which "; @maybe" after the message tells. */
int cli_fail_unsure(const char *what, int rc, const struct osb_error *err,
		    const char *maybe);
/* A secret option into *@slot (malloc'd; the one before wiped): @arg
 * itself, starred out where ps shows it once osb has started, or the
 * first line of the file @arg (@from_file). 0, else the exit status
 * (said). */
int cli_secret_opt(char **slot, bool from_file, char *arg);
/* Prints a usage error and returns 2. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a number (with an optional unit for durations in seconds). */
int cli_parse_long(const char *s, long *ret);
/* Parses an octal mode. */
int cli_parse_mode(const char *s, mode_t *ret);
/* Reads all of a file (NULL: stdin) into a string (its length in
 * *ret_len, which may be NULL); NULL + errno. */
char *cli_slurp(const char *path, size_t *ret_len);

/* Text in another encoding (osb_text.c). An encoding is named as iconv
 * or Python name it (latin-1, utf_16...); NULL is UTF-8. */
bool cli_is_utf8(const char *encoding);
/* Encodes UTF-8 @text into @encoding, in *@ret (malloc'd; *@ret_len
 * bytes). Returns 0, else prints why (where the text does not convert)
 * and returns the exit status. */
int cli_encode_text(const char *encoding, const char *text, size_t len,
		    char **ret, size_t *ret_len);
/* Decodes all of @fd from @encoding into UTF-8 on @out; as above. */
int cli_decode_fd(const char *encoding, int fd, FILE *out);

typedef int (*cli_cmd_fn)(struct osb_cli *cli, int argc, char **argv);

/* One command of the table (osb_help.c). */
struct cli_cmd {
	const char *group; /* "sandbox", "file"...; NULL at the top */
	const char *name;
	cli_cmd_fn fn;
	const char *synopsis; /* the arguments, after "osb GROUP NAME" */
	const char *help;     /* what it does, then its options; NULL for
				 an older spelling (listed apart) */
	const char *examples; /* command lines, each ending in "\n" */
	const char *newer;    /* of an older spelling: the command it is,
				 "GROUP NAME" or "NAME" */
};
extern const struct cli_cmd cli_cmds[];
extern const size_t cli_ncmds;
/* The groups, with a line each. */
struct cli_group {
	const char *name;
	const char *help;
};
extern const struct cli_group cli_groups[];
extern const size_t cli_ngroups;
/* The command @name of @group (NULL: the top), the first in the table
 * (a command before its older spelling); NULL if none (osb.c). */
const struct cli_cmd *cli_find_cmd(const char *group, const char *name);
/* Whether @name is a group's. */
bool cli_is_group(const char *name);

/* `osb --help`, `osb GROUP --help`, `osb GROUP NAME --help` to @out. */
void cli_help_main(FILE *out);
void cli_help_group(FILE *out, const char *group);
void cli_help_cmd(FILE *out, const struct cli_cmd *c);

/* ---- output (osb_out.c): a result is built as a record, then
 * printed as the format says */
struct cli_rec;
struct cli_rec *rec_object(void);
struct cli_rec *rec_array(void);
void rec_free(struct cli_rec *r);
/* Members of an object (@v NULL: JSON null); each copies what it gets.
 * They do nothing on an earlier allocation failure (rec_print says). */
void rec_str(struct cli_rec *r, const char *key, const char *v);
void rec_int(struct cli_rec *r, const char *key, long long v);
void rec_num(struct cli_rec *r, const char *key, double v);
void rec_bool(struct cli_rec *r, const char *key, bool v);
void rec_time(struct cli_rec *r, const char *key, time_t t); /* 0: null */
void rec_kv(struct cli_rec *r, const char *key, const struct osb_kvlist *l);
/* @json parsed and added (-EINVAL if it is not JSON). */
int rec_json(struct cli_rec *r, const char *key, const char *json);
/* @r as compact JSON (malloc'd; NULL on ENOMEM). */
char *rec_to_json(const struct cli_rec *r);
/* Adds @v (taken) under @key. */
void rec_move(struct cli_rec *r, const char *key, struct cli_rec *v);
/* A new object or array added under @key (to an array: @key NULL). */
struct cli_rec *rec_add_object(struct cli_rec *r, const char *key);
struct cli_rec *rec_add_array(struct cli_rec *r, const char *key);
/*
 * cli_print() - @r to stdout: JSON, YAML, a table (an array of objects:
 * the columns @cols, NULL-terminated, with a header; an object: a KEY
 * VALUE row per member, nested ones as a.b), or raw lines (the same
 * without header or padding: a row's cells split by tabs, an object's
 * members as "key: value", values as they are). Frees @r. 0 or 1 (out
 * of memory, said).
 */
int cli_print(struct osb_cli *cli, struct cli_rec *r, const char *const *cols);
/* @r as one line of JSON (a stream of records: JSON Lines); frees it. */
int cli_print_line(struct cli_rec *r);
/* @r as YAML (osb_yaml.c); 0 or -ENOMEM. */
int yaml_print(const struct cli_rec *r);
/* One line of a listing (ls, code contexts): escaped for a terminal
 * (table), as it is for scripts (raw). */
void cli_line(const struct osb_cli *cli, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A command done that prints no result: a line saying what was done
 * (none with -q), or {"status":"ok","message":...} for JSON and YAML. */
void cli_done(struct osb_cli *cli, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- progress of a transfer (osb_progress.c) */
struct cli_progress;
/* Starts a line on stderr updated four times a second with the bytes
 * sent (@up) or received, out of @total (<0: unknown), and the rate;
 * NULL (nothing shown) unless cli->progress. */
struct cli_progress *progress_start(struct osb_cli *cli, bool up,
				    int64_t total);
/* Stops it, ending the line. NULL-safe. */
void progress_end(struct cli_progress *p);

/* ---- completion (osb_complete.c) */
/* `osb __complete WORD...`: the candidates for the last word, a line
 * each. */
int cmd_complete(struct osb_cli *cli, int argc, char **argv);
/* _OSB_COMPLETE=bash_source|zsh_source prints the script (the official
 * CLI's way): the status, or -1 when it is not set. */
int cli_complete_env(void);
/* The keys `config set` takes, a line each (osb_config.c). */
void cli_print_config_keys(FILE *out);
/* The global options' help (osb_help.c). */
extern const char cli_global_help[];

/* ---- commands */
int cmd_completion(struct osb_cli *cli, int argc, char **argv);
int cmd_create(struct osb_cli *cli, int argc, char **argv);
int cmd_list(struct osb_cli *cli, int argc, char **argv);
int cmd_info(struct osb_cli *cli, int argc, char **argv);
/* osb_snapshot.c */
int cmd_snap_create(struct osb_cli *cli, int argc, char **argv);
int cmd_snap_list(struct osb_cli *cli, int argc, char **argv);
int cmd_snap_get(struct osb_cli *cli, int argc, char **argv);
int cmd_snap_delete(struct osb_cli *cli, int argc, char **argv);
int cmd_pause(struct osb_cli *cli, int argc, char **argv);
int cmd_resume(struct osb_cli *cli, int argc, char **argv);
int cmd_renew(struct osb_cli *cli, int argc, char **argv);
int cmd_kill(struct osb_cli *cli, int argc, char **argv);
int cmd_endpoint(struct osb_cli *cli, int argc, char **argv);
int cmd_health(struct osb_cli *cli, int argc, char **argv);
int cmd_metrics(struct osb_cli *cli, int argc, char **argv);

int cmd_ls(struct osb_cli *cli, int argc, char **argv);
int cmd_stat(struct osb_cli *cli, int argc, char **argv);
int cmd_get(struct osb_cli *cli, int argc, char **argv);
int cmd_put(struct osb_cli *cli, int argc, char **argv);
int cmd_cat(struct osb_cli *cli, int argc, char **argv);
int cmd_write(struct osb_cli *cli, int argc, char **argv);
int cmd_rm(struct osb_cli *cli, int argc, char **argv);
int cmd_rmdir(struct osb_cli *cli, int argc, char **argv);
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
int cmd_egress_get(struct osb_cli *cli, int argc, char **argv);
int cmd_egress_patch(struct osb_cli *cli, int argc, char **argv);

int cmd_config_init(struct osb_cli *cli, int argc, char **argv);
int cmd_config_show(struct osb_cli *cli, int argc, char **argv);
int cmd_config_set(struct osb_cli *cli, int argc, char **argv);

#endif /* OSB_TOOL_H */

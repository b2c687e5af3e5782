/*
 * options.c - every osbfs option in one table, with its default.
 *
 * `-o` options are split by libfuse's fuse_opt; those not in the table
 * below (allow_other, fsname=...) pass through to libfuse.
 *
 * allow_other implies default_permissions: osbfs checks no permission
 * itself, so without the kernel checking the modes osbfs reports, every
 * local user could read every file of the mount and run commands in the
 * sandbox through .osb/run.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

enum opt_type {
	OPT_STR,  /* char * */
	OPT_BOOL, /* bool, no value */
	OPT_MS,   /* long: a duration -> ms */
	OPT_SECS, /* long: a duration -> seconds, or "none" = 0 */
	OPT_SIZE, /* int64_t */
	OPT_KV,   /* struct osb_kvlist: KEY=VALUE, repeatable */
};

struct opt_def {
	const char *name;
	enum opt_type type;
	size_t offset;
	const char *def; /* default, in the option's own syntax */
	const char *help;
};

#define O(f) offsetof(struct osbfs_options, f)

static const struct opt_def table[] = {
	/* connection */
	{ "config", OPT_STR, O(config), NULL,
	  "settings file of the official CLI, read for what options and env "
	  "leave out (default ~/.opensandbox/config.toml)" },
	{ "domain", OPT_STR, O(domain), NULL,
	  "server host[:port] (env OPEN_SANDBOX_DOMAIN, OPENSANDBOX_DOMAIN; "
	  "settings file; else localhost:8080)" },
	{ "protocol", OPT_STR, O(protocol), NULL,
	  "http or https (env OPEN_SANDBOX_PROTOCOL; settings file; else "
	  "http)" },
	{ "cacert", OPT_STR, O(cacert), NULL,
	  "CA bundle (PEM) to trust for https" },
	{ "insecure", OPT_BOOL, O(insecure), NULL,
	  "accept any TLS certificate" },
	{ "api_key_file", OPT_STR, O(api_key_file), NULL,
	  "file holding the API key (else env OPEN_SANDBOX_API_KEY, "
	  "OPENSANDBOX_API_KEY; else the settings file)" },
	{ "request_timeout", OPT_MS, O(request_timeout_ms), NULL,
	  "timeout of one request (env OPEN_SANDBOX_REQUEST_TIMEOUT; settings "
	  "file; else 30s)" },
	{ "server_proxy", OPT_BOOL, O(server_proxy), NULL,
	  "reach execd through the lifecycle server" },
	/* creation */
	{ "name", OPT_STR, O(name), NULL,
	  "find the sandbox labelled name=NAME, or create it" },
	{ "snapshot", OPT_STR, O(snapshot), NULL,
	  "make the new sandbox from this snapshot (its id, else its name), "
	  "not from an image: a fork" },
	{ "image", OPT_STR, O(image), NULL,
	  "image of a new sandbox (settings file's [defaults]; else "
	  "opensandbox/code-interpreter:latest)" },
	{ "entrypoint", OPT_STR, O(entrypoint), "tail -f /dev/null",
	  "entrypoint of a new sandbox" },
	{ "env", OPT_KV, O(env), NULL,
	  "KEY=VALUE in a new sandbox's environment (repeatable)" },
	{ "metadata", OPT_KV, O(metadata), NULL,
	  "KEY=VALUE label of a new sandbox (repeatable)" },
	{ "timeout", OPT_SECS, O(timeout_s), NULL,
	  "TTL of a new sandbox (seconds, or none; settings file's [defaults]; "
	  "else 600)" },
	{ "network_policy", OPT_STR, O(network_policy), NULL,
	  "JSON file: egress policy of a new sandbox" },
	{ "cpu", OPT_STR, O(cpu), NULL,
	  "CPU limit of a new sandbox (e.g. 500m)" },
	{ "memory", OPT_STR, O(memory), NULL,
	  "memory limit of a new sandbox (e.g. 512Mi)" },
	{ "setup", OPT_STR, O(setup), NULL,
	  "YAML file: software to install in the sandbox before any job "
	  "(job setup; reused while the declaration is unchanged)" },
	/* lifecycle */
	{ "keepalive", OPT_BOOL, O(keepalive), "1",
	  "renew the TTL while mounted, used or not (keepalive=no: let it "
	  "expire)" },
	{ "idle_pause", OPT_MS, O(idle_pause_ms), "0",
	  "pause the sandbox after this long idle (0 = never)" },
	{ "destroy_on_unmount", OPT_BOOL, O(destroy_on_unmount), NULL,
	  "delete the sandbox at unmount" },
	{ "restore_keeps", OPT_BOOL, O(restore_keeps), NULL,
	  "a restore (ctl: restore SNAPSHOT) keeps the sandbox it leaves "
	  "instead of deleting it" },
	{ "start_timeout", OPT_MS, O(start_timeout_ms), "2m",
	  "how long a sandbox may stay Pending (or resuming), or snapshot='s "
	  "Creating, before the mount gives up" },
	/* cache */
	{ "cache_dir", OPT_STR, O(cache_dir), NULL,
	  "local cache (default $XDG_CACHE_HOME/osbfs or ~/.cache/osbfs)" },
	{ "log_file", OPT_STR, O(log_file), NULL,
	  "append the log to FILE too (default: syslog once in the background; "
	  "CACHE_DIR/ID/log without one)" },
	{ "attr_timeout", OPT_MS, O(attr_timeout_ms), "1s",
	  "how long attributes are cached" },
	{ "dir_timeout", OPT_MS, O(dir_timeout_ms), "1s",
	  "how long listings are cached" },
	{ "negative_timeout", OPT_MS, O(negative_timeout_ms), "1s",
	  "how long a missing name is remembered" },
	{ "feed", OPT_BOOL, O(feed), "1",
	  "run a change feed in the sandbox: what the mount knows holds "
	  "until it reports a change, past the timeouts above" },
	{ "feed_interval", OPT_MS, O(feed_interval_ms), "500ms",
	  "how often the change feed looks for changes" },
	{ "feed_mode", OPT_STR, O(feed_mode), "auto",
	  "how the change feed learns of changes: auto (inotify where the "
	  "sandbox has inotifywait and its watches can be set, else "
	  "polling) or poll (a look over the tree every feed_interval)" },
	{ "writeback_delay", OPT_MS, O(writeback_delay_ms), "1s",
	  "upload this long after the last close" },
	{ "cache_max_size", OPT_SIZE, O(cache_max_size), "10G",
	  "cap on cached (clean) file data" },
	{ "xattr_max_size", OPT_SIZE, O(xattr_max_size), "16M",
	  "cap on the user.* extended attributes the mount keeps" },
	{ "control_dir", OPT_STR, O(control_dir), ".osb",
	  "name of the control tree" },
	/* symlinks */
	{ "symlinks", OPT_STR, O(symlinks), "safe",
	  "safe: link targets resolve inside the mount; raw: as stored (a "
	  "trusted sandbox only)" },
};

#define NOPTS (sizeof(table) / sizeof(table[0]))

int parse_duration_ms(const char *s, long *ret)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	/* !(v >= 0): NaN too */
	if (errno || end == s || !(v >= 0))
		return -EINVAL;
	double mult;
	if (!*end || strcmp(end, "s") == 0)
		mult = 1000;
	else if (strcmp(end, "ms") == 0)
		mult = 1;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		mult = 60000;
	else if (strcmp(end, "h") == 0)
		mult = 3600000;
	else if (strcmp(end, "d") == 0)
		mult = 86400000;
	else
		return -EINVAL;
	v *= mult;
	if (v > 1e15)
		return -EINVAL;
	*ret = (long)(v + 0.5);
	return 0;
}

int parse_size(const char *s, int64_t *ret)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	/* !(v >= 0): NaN too */
	if (errno || end == s || !(v >= 0))
		return -EINVAL;
	double mult = 1;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mult = 1024.0;
		break;
	case 'm':
	case 'M':
		mult = 1024.0 * 1024;
		break;
	case 'g':
	case 'G':
		mult = 1024.0 * 1024 * 1024;
		break;
	case 't':
	case 'T':
		mult = 1024.0 * 1024 * 1024 * 1024;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] && strcmp(end + 1, "B") != 0 &&
	    strcmp(end + 1, "iB") != 0 && strcmp(end + 1, "i") != 0)
		return -EINVAL;
	v *= mult;
	if (!(v < 0x1p62)) /* past what an int64_t holds, or NaN */
		return -EINVAL;
	*ret = (int64_t)v;
	return 0;
}

static int set_opt(struct osbfs_options *o, const struct opt_def *d,
		   const char *value, char *msg, size_t msg_size)
{
	char *field = (char *)o + d->offset;

	if (d->type == OPT_BOOL) {
		if (value && strcmp(value, "1") != 0 &&
		    strcmp(value, "true") != 0 && strcmp(value, "yes") != 0) {
			if (strcmp(value, "0") == 0 ||
			    strcmp(value, "false") == 0 ||
			    strcmp(value, "no") == 0) {
				*(bool *)field = false;
				return 0;
			}
			snprintf(msg, msg_size, "option %s takes no value",
				 d->name);
			return -EINVAL;
		}
		*(bool *)field = true;
		return 0;
	}
	if (!value) {
		snprintf(msg, msg_size, "option %s needs a value (%s=...)",
			 d->name, d->name);
		return -EINVAL;
	}
	switch (d->type) {
	case OPT_STR: {
		char **p = (char **)field;
		free(*p);
		*p = strdup(value);
		return *p ? 0 : -ENOMEM;
	}
	case OPT_MS:
		if (parse_duration_ms(value, (long *)field) == 0)
			return 0;
		break;
	case OPT_SECS: {
		long ms;
		if (strcmp(value, "none") == 0 || strcmp(value, "0") == 0) {
			*(long *)field = 0;
			return 0;
		}
		if (parse_duration_ms(value, &ms) == 0 && ms >= 1000) {
			*(long *)field = ms / 1000;
			return 0;
		}
		break;
	}
	case OPT_SIZE:
		if (parse_size(value, (int64_t *)field) == 0)
			return 0;
		break;
	case OPT_KV:
		if (osb_kvlist_add_pair((struct osb_kvlist *)field, value) == 0)
			return 0;
		snprintf(msg, msg_size, "option %s wants KEY=VALUE, not \"%s\"",
			 d->name, value);
		return -EINVAL;
	default:
		break;
	}
	snprintf(msg, msg_size, "bad value for %s: \"%s\"", d->name, value);
	return -EINVAL;
}

struct parse_ctx {
	struct osbfs_options *o;
	char *msg;
	size_t msg_size;
	int npos;
	char *pos[2];
	int rc;
	bool allow_other; /* libfuse options seen */
	bool default_permissions;
};

enum {
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_SINGLE,
	KEY_HELP,
	KEY_VERSION,
	KEY_UNMOUNT,
};

static const struct fuse_opt fuse_keys[] = {
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-s", KEY_SINGLE),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-u", KEY_UNMOUNT),
	FUSE_OPT_END,
};

static int proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct parse_ctx *ctx = data;
	(void)outargs;

	switch (key) {
	case KEY_FOREGROUND:
		ctx->o->foreground = true;
		return 0;
	case KEY_DEBUG:
		ctx->o->debug = true;
		ctx->o->foreground = true;
		return 1; /* libfuse prints its own trace too */
	case KEY_SINGLE:
		ctx->o->singlethread = true;
		return 0;
	case KEY_HELP:
		ctx->o->show_help = true;
		return 0;
	case KEY_VERSION:
		ctx->o->show_version = true;
		return 0;
	case KEY_UNMOUNT:
		ctx->o->unmount = true;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (ctx->npos >= 2) {
			snprintf(ctx->msg, ctx->msg_size,
				 "too many arguments: \"%s\"", arg);
			ctx->rc = -EINVAL;
			return -1;
		}
		ctx->pos[ctx->npos] = strdup(arg);
		if (!ctx->pos[ctx->npos]) {
			ctx->rc = -ENOMEM;
			return -1;
		}
		ctx->npos++;
		return 0;
	case FUSE_OPT_KEY_OPT: {
		const char *eq = strchr(arg, '=');
		size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
		for (size_t i = 0; i < NOPTS; i++) {
			if (strlen(table[i].name) == n &&
			    strncmp(table[i].name, arg, n) == 0) {
				int rc = set_opt(ctx->o, &table[i],
						 eq ? eq + 1 : NULL, ctx->msg,
						 ctx->msg_size);
				if (rc) {
					ctx->rc = rc;
					return -1;
				}
				return 0;
			}
		}
		if (arg[0] == '-' && arg[1] != 'o') {
			snprintf(ctx->msg, ctx->msg_size, "unknown flag \"%s\"",
				 arg);
			ctx->rc = -EINVAL;
			return -1;
		}
		if (strcmp(arg, "allow_other") == 0)
			ctx->allow_other = true;
		if (strcmp(arg, "default_permissions") == 0)
			ctx->default_permissions = true;
		return 1; /* a libfuse option */
	}
	default:
		return 1;
	}
}

static void free_pos(struct parse_ctx *ctx)
{
	for (int i = 0; i < ctx->npos; i++)
		free(ctx->pos[i]);
}

static int set_defaults(struct osbfs_options *o)
{
	char msg[256];
	for (size_t i = 0; i < NOPTS; i++) {
		if (!table[i].def)
			continue;
		int rc = set_opt(o, &table[i], table[i].def, msg, sizeof(msg));
		if (rc)
			return rc;
	}
	return 0;
}

/* A label value of the lifecycle API: what name= must be. */
static bool label_ok(const char *v)
{
	size_t n = strlen(v);
	bool ok = n >= 1 && n <= 63 && isalnum((unsigned char)v[0]) &&
		  isalnum((unsigned char)v[n - 1]);
	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)v[i]) || strchr("-_.", v[i]);
	return ok;
}

/* snapshot= makes a new sandbox, from the snapshot's files alone */
static int check_snapshot(const struct osbfs_options *o, char *msg,
			  size_t msg_size)
{
	if (!o->snapshot)
		return 0;
	if (!*o->snapshot)
		snprintf(msg, msg_size,
			 "snapshot= needs a snapshot's id or name");
	else if (o->sandbox_id)
		snprintf(msg, msg_size,
			 "snapshot= makes a new sandbox: give it or a "
			 "sandbox id to mount, not both");
	else if (o->image)
		snprintf(msg, msg_size,
			 "snapshot= and image=: a new sandbox is made from "
			 "one of them, not both");
	else
		return 0;
	return -EINVAL;
}

static char *default_cache_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char buf[4096];

	if (xdg && *xdg)
		snprintf(buf, sizeof(buf), "%s/osbfs", xdg);
	else if (home && *home)
		snprintf(buf, sizeof(buf), "%s/.cache/osbfs", home);
	else
		snprintf(buf, sizeof(buf), "/var/tmp/osbfs-%u",
			 (unsigned)getuid());
	return strdup(buf);
}

/*
 * The settings file, for what neither the options nor the environment
 * give (connect.c layers the connection): the image and TTL of a new
 * sandbox from its [defaults]. A file that cannot be read fails here,
 * before anything remote is asked.
 */
static int read_settings(struct osbfs_options *o, char *msg, size_t msg_size)
{
	struct osb_error err;
	char path[4096];
	const char *file = o->config;
	long secs;

	if (!file && osb_cfgfile_default_path(path, sizeof(path)) == 0)
		file = path;
	int rc = file ? osb_cfgfile_load(file, &o->cfgfile, &err) : 0;
	if (rc) {
		snprintf(msg, msg_size, "%s", err.message);
		return rc;
	}
	/* a fork has the snapshot's files: [defaults] image is not its */
	if (!o->image && !o->snapshot) {
		o->image =
			strdup(o->cfgfile.image ?
				       o->cfgfile.image :
				       "opensandbox/code-interpreter:latest");
		if (!o->image)
			return -ENOMEM;
	}
	if (o->timeout_s < 0 && o->cfgfile.timeout) {
		if (osb_duration_parse(o->cfgfile.timeout, &secs)) {
			snprintf(msg, msg_size,
				 "%s: [defaults] timeout \"%s\" is not a "
				 "duration (10m, 1h30m, none)",
				 file, o->cfgfile.timeout);
			return -EINVAL;
		}
		o->timeout_s = secs;
	}
	if (o->timeout_s < 0)
		o->timeout_s = 600;
	return 0;
}

/* "[SANDBOX][:DIR]" */
static int split_source(struct osbfs_options *o, const char *src, char *msg,
			size_t msg_size)
{
	const char *colon = strchr(src, ':');
	size_t idlen = colon ? (size_t)(colon - src) : strlen(src);

	if (idlen) {
		o->sandbox_id = strndup(src, idlen);
		if (!o->sandbox_id)
			return -ENOMEM;
	}
	if (colon && colon[1]) {
		free(o->dir);
		o->dir = strdup(colon + 1);
		if (!o->dir)
			return -ENOMEM;
	}
	if (o->dir[0] != '/') {
		snprintf(
			msg, msg_size,
			"the directory in the sandbox must be absolute: \"%s\"",
			o->dir);
		return -EINVAL;
	}
	/* "/workspace/" -> "/workspace"; "/" stays */
	size_t n = strlen(o->dir);
	while (n > 1 && o->dir[n - 1] == '/')
		o->dir[--n] = '\0';
	if (strstr(o->dir, "/../") ||
	    strcmp(o->dir + (n >= 3 ? n - 3 : 0), "/..") == 0) {
		snprintf(msg, msg_size, "the directory may not hold \"..\"");
		return -EINVAL;
	}
	return 0;
}

int options_parse(struct osbfs_options *o, int argc, char **argv, char *msg,
		  size_t msg_size)
{
	struct parse_ctx ctx = { .o = o, .msg = msg, .msg_size = msg_size };
	int rc;

	memset(o, 0, sizeof(*o));
	msg[0] = '\0';
	o->fuse_args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	o->dir = strdup("/workspace");
	if (!o->dir)
		return -ENOMEM;
	o->cfgfile.use_server_proxy = -1;
	rc = set_defaults(o);
	if (rc)
		return rc;
	o->timeout_s = -1; /* not given */
	if (fuse_opt_parse(&o->fuse_args, &ctx, fuse_keys, proc) == -1) {
		free_pos(&ctx);
		if (!msg[0])
			snprintf(msg, msg_size, "cannot parse the options");
		return ctx.rc ? ctx.rc : -EINVAL;
	}
	if (o->show_help || o->show_version) {
		free_pos(&ctx);
		return 0;
	}
	o->allow_other = ctx.allow_other;
	if (ctx.allow_other && !ctx.default_permissions &&
	    fuse_opt_add_arg(&o->fuse_args, "-odefault_permissions") != 0) {
		free_pos(&ctx);
		return -ENOMEM;
	}
	if (ctx.npos == 0) {
		snprintf(msg, msg_size, "no mount point given");
		return -EINVAL;
	}
	o->mountpoint = ctx.pos[ctx.npos - 1];
	if (o->unmount && ctx.npos != 1) {
		snprintf(msg, msg_size, "osbfs -u takes the mount point only");
		free(ctx.pos[0]);
		return -EINVAL;
	}
	if (ctx.npos == 2) {
		rc = split_source(o, ctx.pos[0], msg, msg_size);
		free(ctx.pos[0]);
		if (rc)
			return rc;
	}
	if (o->sandbox_id && o->name) {
		snprintf(msg, msg_size,
			 "give a sandbox id or -o name=..., not both");
		return -EINVAL;
	}
	rc = check_snapshot(o, msg, msg_size);
	if (rc)
		return rc;
	if (o->name && !label_ok(o->name)) {
		snprintf(msg, msg_size,
			 "name \"%s\" is not a valid label value (1-63 "
			 "letters, digits, '-', '_', '.'; alphanumeric at "
			 "both ends)",
			 o->name);
		return -EINVAL;
	}
	if (!o->cache_dir) {
		o->cache_dir = default_cache_dir();
		if (!o->cache_dir)
			return -ENOMEM;
	}
	if (!o->control_dir[0] || strchr(o->control_dir, '/') ||
	    strcmp(o->control_dir, ".") == 0 ||
	    strcmp(o->control_dir, "..") == 0) {
		snprintf(msg, msg_size, "bad control_dir \"%s\"",
			 o->control_dir);
		return -EINVAL;
	}
	o->symlinks_raw = strcmp(o->symlinks, "raw") == 0;
	if (!o->symlinks_raw && strcmp(o->symlinks, "safe") != 0) {
		snprintf(msg, msg_size,
			 "symlinks must be safe or raw, not \"%s\"",
			 o->symlinks);
		return -EINVAL;
	}
	if (strcmp(o->feed_mode, "auto") != 0 &&
	    strcmp(o->feed_mode, "poll") != 0) {
		snprintf(msg, msg_size,
			 "feed_mode must be auto or poll, not \"%s\"",
			 o->feed_mode);
		return -EINVAL;
	}
	if (o->protocol && strcmp(o->protocol, "http") != 0 &&
	    strcmp(o->protocol, "https") != 0) {
		snprintf(msg, msg_size, "protocol must be http or https");
		return -EINVAL;
	}
	if (o->unmount)
		return 0;
	return read_settings(o, msg, msg_size);
}

int options_read_setup(struct osbfs_options *o, char *msg, size_t msg_size)
{
	if (!o->setup)
		return 0;
	return setup_decl_load(o->setup, &o->setup_decl, msg, msg_size);
}

void options_release(struct osbfs_options *o)
{
	setup_decl_release(&o->setup_decl);
	for (size_t i = 0; i < NOPTS; i++) {
		char *field = (char *)o + table[i].offset;
		if (table[i].type == OPT_STR) {
			free(*(char **)field);
			*(char **)field = NULL;
		} else if (table[i].type == OPT_KV) {
			osb_kvlist_release((struct osb_kvlist *)field);
		}
	}
	osb_cfgfile_release(&o->cfgfile);
	free(o->sandbox_id);
	free(o->dir);
	free(o->mountpoint);
	o->sandbox_id = o->dir = o->mountpoint = NULL;
	fuse_opt_free_args(&o->fuse_args);
}

void options_usage(const char *prog)
{
	printf("usage: %s [options] [SANDBOX][:DIR] MOUNTPOINT\n\n"
	       "Mounts DIR (default /workspace) of an OpenSandbox sandbox at\n"
	       "MOUNTPOINT. SANDBOX is an id to reconnect to; without one a "
	       "new\n"
	       "sandbox is made (or, with -o name=NAME, found by its "
	       "label);\n"
	       "-o snapshot=SNAP makes it from a snapshot's files.\n\n"
	       "  -f            stay in the foreground\n"
	       "  -d            debug output (implies -f)\n"
	       "  -s            single-threaded\n"
	       "  -o OPT[,OPT]  options:\n",
	       prog);
	for (size_t i = 0; i < NOPTS; i++) {
		char left[64];
		snprintf(left, sizeof(left), "%s%s", table[i].name,
			 table[i].type == OPT_BOOL ? "" : "=...");
		printf("    %-22s %s%s%s%s\n", left, table[i].help,
		       table[i].def ? " [" : "",
		       table[i].def ? table[i].def : "",
		       table[i].def ? "]" : "");
	}
	printf("\n"
	       "allow_other (a libfuse option: other users may use the mount)\n"
	       "implies default_permissions: the kernel checks the file "
	       "modes.\n"
	       "\n"
	       "usage: %s -u [-o control_dir=NAME] MOUNTPOINT\n\n"
	       "Unmounts after uploading every file written (progress shown "
	       "if\n"
	       "it takes a while), waits for the daemon to exit, and names "
	       "what\n"
	       "did not reach the sandbox and where it is kept (the next "
	       "mount\n"
	       "of the sandbox with the same cache_dir uploads it). Exits 0\n"
	       "when the sandbox has everything. `fusermount3 -u MOUNTPOINT`\n"
	       "returns at once instead: the daemon uploads what is left in\n"
	       "the background, and logs what it could not to syslog.\n",
	       prog);
}

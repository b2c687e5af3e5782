/*
 * remote.c - the sandbox's files in POSIX terms (see remote.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/random.h>
#include <unistd.h>

#include "cache.h"
#include "hex.h"
#include "life.h"
#include "log.h"
#include "owners.h"
#include "remote.h"
#include "watch.h"

#define SHELL_OUT_MAX (64u << 20)
#define STR_(x) #x
#define STR(x) STR_(x)
#define ALIAS_DIR "/tmp/.osbfs"

int fs_errno(int rc)
{
	switch (-rc) {
	case 0:
		return 0;
	case ECONNREFUSED:
	case ECONNRESET:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case EPROTO:
	case EREMOTEIO:
	case ECANCELED:
	case EOPNOTSUPP:
	case EBUSY:
	case ERANGE:
	case EAGAIN:
		return -EIO;
	default:
		return rc;
	}
}

static bool quiet_errno(int rc)
{
	return rc == -ENOENT || rc == -EEXIST || rc == -ENOTEMPTY ||
	       rc == -ENOTDIR || rc == -EISDIR;
}

/* Logs once where an error becomes an errno; returns the FUSE errno. A
 * sandbox that is gone is named as the cause, not the refused
 * connection that showed it. */
static int fail_in(struct osbfs *fs, int rc, const struct osb_error *err,
		   const char *what, const char *path)
{
	watch_failed(fs, rc);
	int e = fs_errno(rc);
	if (quiet_errno(e))
		return e;
	if (fs->life && life_gone(fs))
		log_error("%s %s: sandbox %s no longer exists (expired or "
			  "deleted)",
			  what, path, fs->sandbox_id);
	else
		log_error("%s %s: %s", what, path,
			  err && err->message[0] ? err->message :
						   strerror(-rc));
	return e;
}

#define fail(rc, err, what, path) fail_in(fs, rc, err, what, path)

int remote_enter(struct osbfs *fs)
{
	remote_touch_activity(fs);
	if (watch_gate(fs))
		return -EIO; /* at once: it is asked when it is back */
	return fs->life ? life_ensure_running(fs) : 0;
}

void remote_touch_activity(struct osbfs *fs)
{
	atomic_store(&fs->last_activity, mono_ms());
}

/* After a failure: true when the sandbox was found paused (by someone
 * else) and is running again, so the call is worth repeating once. */
static bool again(struct osbfs *fs, int rc)
{
	if (rc == -ECANCELED)
		return watch_cancelled_resume(fs);
	if (rc != -ETIMEDOUT && rc != -ECONNRESET && rc != -ECONNREFUSED)
		return false;
	return fs->life && life_recheck(fs) == 1;
}

/* No request goes to a path that cannot be the sandbox's: not UTF-8, or
 * holding the U+FFFD that stands for another name's bytes (ops.h). */
static int path_check(const char *path)
{
	if (!osb_utf8_valid(path, strlen(path)) || strstr(path, "\xef\xbf\xbd"))
		return -EILSEQ;
	return 0;
}

void rdent_array_free(struct rdent *d, size_t n)
{
	if (!d)
		return;
	for (size_t i = 0; i < n; i++)
		free(d[i].name);
	free(d);
}

void fattr_from_stat(struct fattr *a, const struct osb_stat *st)
{
	memset(a, 0, sizeof(*a));
	a->type = st->type;
	a->size = st->size;
	a->mode = st->mode;
	a->mtime = st->mtime;
	a->ctime = st->ctime;
	snprintf(a->owner, sizeof(a->owner), "%s", st->owner);
	snprintf(a->group, sizeof(a->group), "%s", st->group);
}

/* ---- the shell route ---- */

/*
 * A command whose answer was lost may have run. One that may not run
 * twice (a rename, a symlink, a signal) is sent wrapped: it first claims
 * its operation id with an exclusive create in OPS_DIR, and records its
 * exit code and error text there; a repeat of the same wrapped command
 * finds the claim taken and reports what the first run recorded (waiting
 * for it if it still runs). So a lost answer is settled by sending the
 * command again, and the command takes effect at most once. Records are
 * swept once they are old enough that no repeat can come. A file or a
 * link the sandbox put in OPS_DIR's place is removed (a link is never
 * followed) and the directory made again; an ALIAS_DIR that is no
 * directory fails the command at once with ONCE_BROKEN, as does a claim
 * that could not be made, with the reason on stderr.
 */
#define OPS_DIR ALIAS_DIR "/ops"
#define OPS_SWEEP_EVERY 64
#define OPS_KEEP_MIN 30
#define SHELL_TRIES 8
#define SHELL_BACKOFF_MS 100
#define SHELL_BACKOFF_MAX_MS 2000
/* the exit code of a wrapped command that could not claim its id */
#define ONCE_BROKEN "76"

static atomic_uint ops_sent;

static const char once_fmt[] =
	"d=%1$s f=%1$s/%2$s\n"
	/* the records' directory is osbfs's: a file or a link the sandbox
	 * put in its place goes (a link is never followed); the one above
	 * it is not only the records', so it is named, not removed */
	"p=${d%%/*}\n"
	"if [ -L \"$p\" ] || { [ -e \"$p\" ] && [ ! -d \"$p\" ]; }; then\n"
	"echo \"osbfs: $p is a symbolic link or a file made in the sandbox, "
	"where osbfs keeps its records: operations that must run at most "
	"once cannot run (remove it in the sandbox)\" >&2\n"
	"exit " ONCE_BROKEN "\n"
	"fi\n"
	"if [ -L \"$d\" ] || { [ -e \"$d\" ] && [ ! -d \"$d\" ]; }; then\n"
	"rm -f \"$d\"\n"
	"fi\n"
	"%3$s"
	"set -C\n"
	/* `true`, not `:`: a failed redirection of a special builtin ends
	 * a POSIX shell (execd runs sh when a sandbox has no bash) */
	"m=$( { true >\"$f.c\" || { mkdir -p \"$d\" && true >\"$f.c\"; }; } "
	"2>&1 )\n"
	"c=$?\n"
	"set +C\n"
	"if [ $c = 0 ]; then\n"
	"(\n%4$s\n) 2>\"$f.e\"\n"
	"r=$?\n"
	"echo $r >\"$f.r\"\n"
	"[ $r = 0 ] || cat \"$f.e\" >&2\n"
	"exit $r\n"
	"fi\n"
	/* no claim made, and none there: say why, at once */
	"if [ ! -e \"$f.c\" ]; then\n"
	"echo \"osbfs: cannot record an operation in $d: $m\" >&2\n"
	"exit " ONCE_BROKEN "\n"
	"fi\n"
	/* claimed before: the first run's outcome */
	"i=0\n"
	"while [ ! -s \"$f.r\" ] && [ $i -lt 300 ]; do sleep 0.1; "
	"i=$((i+1)); done\n"
	"[ -s \"$f.r\" ] || { echo 'osbfs: an earlier attempt of this "
	"operation is still running' >&2; exit 75; }\n"
	"read -r r <\"$f.r\"\n"
	"[ \"$r\" = 0 ] || cat \"$f.e\" >&2\n"
	"exit $r\n";

char *remote_once_script(const char *ops_dir, const char *id,
			 const char *script, bool sweep)
{
	char *out = NULL;
	const char *sweep_cmd =
		sweep ? "find \"$d\" -type f -mmin +" STR(
				OPS_KEEP_MIN) " -delete 2>/dev/null\n" :
			"";
	if (asprintf(&out, once_fmt, ops_dir, id, sweep_cmd, script) < 0)
		return NULL;
	return out;
}

/* A new id for a name in the sandbox: an operation's record, an alias,
 * an archive. */
static unsigned long long random_id(void)
{
	uint64_t id = 0;
	if (getrandom(&id, sizeof(id), 0) != sizeof(id))
		id = (uint64_t)mono_ms() * 0x9e3779b97f4a7c15ULL;
	return (unsigned long long)id;
}

/* @script wrapped to run at most once, with a new id (malloc'd). */
static char *once_wrap(const char *script)
{
	char sid[24];
	snprintf(sid, sizeof(sid), "%016llx", random_id());
	/* now and then, the records nobody can ask about any more */
	bool sweep = atomic_fetch_add(&ops_sent, 1) % OPS_SWEEP_EVERY == 0;
	return remote_once_script(OPS_DIR, sid, script, sweep);
}

/* Failures after which the command may or may not have run, and a new
 * attempt may work: a broken connection or stream, a 5xx. Refused
 * connections and timeouts have had their retries in the client. */
static bool shell_retryable(int rc)
{
	return rc == -ECONNRESET || rc == -EIO || rc == -EPROTO ||
	       rc == -EAGAIN || rc == -EREMOTEIO;
}

int remote_shell(struct osbfs *fs, const char *script, enum shell_kind kind,
		 char **ret_out, char **ret_err, int *ret_exit)
{
	struct osb_command_opts o;
	struct osb_error err;
	char *wrapped = NULL;
	int rc;

	osb_command_opts_init(&o);
	o.cwd = "/";
	if (kind == SHELL_ONCE) {
		wrapped = once_wrap(script);
		if (!wrapped)
			return -ENOMEM;
		script = wrapped;
	}
	osb_error_clear(&err);
	rc = remote_enter(fs);
	long backoff = SHELL_BACKOFF_MS;
	for (int tries = 1; !rc && tries <= SHELL_TRIES; tries++) {
		rc = osb_command_capture(fs->sb, script, &o, SHELL_OUT_MAX,
					 ret_out, ret_err, ret_exit, &err);
		if (!rc)
			break;
		if (again(fs, rc)) {
			rc = 0; /* it was paused, and runs again */
			continue;
		}
		if (!shell_retryable(rc) || tries == SHELL_TRIES ||
		    kind == SHELL_OPTIONAL)
			break;
		log_debug("command in the sandbox: %s; trying again",
			  err.message);
		mono_sleep_ms(backoff);
		backoff = backoff * 2 > SHELL_BACKOFF_MAX_MS ?
				  SHELL_BACKOFF_MAX_MS :
				  backoff * 2;
		rc = remote_enter(fs);
	}
	free(wrapped);
	if (rc && kind == SHELL_OPTIONAL) {
		log_debug("command in the sandbox failed: %s",
			  err.message[0] ? err.message : strerror(-rc));
		return fs_errno(rc);
	}
	if (rc) {
		watch_failed(fs, rc);
		if (rc != -EIO || !watch_away(fs))
			log_error("command in the sandbox failed: %s",
				  err.message[0] ? err.message : strerror(-rc));
		return fs_errno(rc);
	}
	return 0;
}

/* The errno a failed shell command's stderr names (coreutils texts). */
static int shell_errno(const char *errout)
{
	int e = osb_errno_from_http(500, "", errout ? errout : "");
	return e ? -e : -EIO;
}

/* Runs @script; 0 if it exits 0, else the errno its stderr names. */
static int shell_do(struct osbfs *fs, const char *script, enum shell_kind kind,
		    const char *what, const char *path, char **ret_out)
{
	char *out = NULL, *errout = NULL;
	int code = 0;
	int rc = remote_shell(fs, script, kind, &out, &errout, &code);
	if (!rc && code != 0) {
		rc = shell_errno(errout);
		if (!quiet_errno(rc))
			log_error("%s %s: %s", what, path,
				  errout && *errout ? errout : "failed");
	}
	if (!rc && ret_out) {
		*ret_out = out;
		out = NULL;
	}
	free(out);
	free(errout);
	return rc;
}

/* "cmd -- 'a' 'b'"; malloc'd. */
static char *shell_cmd(const char *fmt, const char *a, const char *b)
{
	char *qa = a ? osb_shell_quote(a) : NULL;
	char *qb = b ? osb_shell_quote(b) : NULL;
	char *out = NULL;
	if ((!a || qa) && (!b || qb) &&
	    asprintf(&out, fmt, qa ? qa : "", qb ? qb : "") < 0)
		out = NULL;
	free(qa);
	free(qb);
	return out;
}

static void ts_parse(const char *s, struct timespec *ts)
{
	char *end;
	ts->tv_sec = (time_t)strtoll(s, &end, 10);
	ts->tv_nsec = 0;
	if (*end == '.') {
		long scale = 100000000L;
		for (end++; *end >= '0' && *end <= '9' && scale; end++) {
			ts->tv_nsec += (*end - '0') * scale;
			scale /= 10;
		}
	}
}

int remote_parse_stat(const char *line, struct fattr *a)
{
	char mtime[48], ctime[48];
	unsigned rawmode;
	long long size;

	memset(a, 0, sizeof(*a));
	if (sscanf(line, "%x %lld %47s %47s %31s %31s", &rawmode, &size, mtime,
		   ctime, a->owner, a->group) != 6)
		return -EPROTO;
	switch (rawmode & S_IFMT) {
	case S_IFDIR:
		a->type = OSB_DIR;
		break;
	case S_IFREG:
		a->type = OSB_FILE;
		break;
	case S_IFLNK:
		a->type = OSB_SYMLINK;
		break;
	default:
		a->type = OSB_OTHER;
	}
	a->mode = rawmode & 07777;
	a->mode_full = true;
	a->size = size;
	ts_parse(mtime, &a->mtime);
	ts_parse(ctime, &a->ctime);
	return 0;
}

/* for shell_cmd's printf: %% is one %; owners as numbers (stat prints
 * UNKNOWN for one without a name), which owners.h takes as execd's */
#define STAT_FMT "'%%f %%s %%.9Y %%.9Z %%u %%g'"

static int shell_stat(struct osbfs *fs, const char *path, struct fattr *ret)
{
	char *out = NULL;
	char *cmd = shell_cmd("stat -c " STAT_FMT " -- %s%s", path, NULL);
	if (!cmd)
		return -ENOMEM;
	int rc = shell_do(fs, cmd, SHELL_IDEMPOTENT, "stat", path, &out);
	free(cmd);
	if (!rc)
		rc = remote_parse_stat(out, ret);
	free(out);
	return rc;
}

static int shell_list(struct osbfs *fs, const char *dir, struct rdent **ret,
		      size_t *ret_n)
{
	char *out = NULL;
	/* names go hex-encoded: any byte survives the line-split output */
	char *cmd = shell_cmd(
		"cd -- %s%s || exit 1\n"
		"for f in * .[!.]* ..?*; do\n"
		"  [ -e \"$f\" ] || [ -L \"$f\" ] || continue\n"
		"  s=$(stat -c " STAT_FMT " -- \"$f\") || continue\n"
		"  n=$(printf '%%s' \"$f\" | od -An -v -tx1 | tr -d ' \\n')\n"
		"  printf '%%s %%s\\n' \"$n\" \"$s\"\n"
		"done\n",
		dir, NULL);
	if (!cmd)
		return -ENOMEM;
	int rc = shell_do(fs, cmd, SHELL_IDEMPOTENT, "list", dir, &out);
	free(cmd);
	if (rc)
		return rc;
	size_t cap = 16, n = 0;
	struct rdent *d = calloc(cap, sizeof(*d));
	for (char *line = out, *next; d && line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *sp = strchr(line, ' ');
		if (!sp)
			continue;
		if (n == cap) {
			struct rdent *g = realloc(d, cap * 2 * sizeof(*d));
			if (!g)
				break;
			d = g;
			cap *= 2;
		}
		d[n].name = hex_decode_dup(line, (size_t)(sp - line));
		if (!d[n].name)
			continue;
		d[n].name_len = (size_t)(sp - line) / 2;
		if (remote_parse_stat(sp + 1, &d[n].attr)) {
			free(d[n].name);
			continue;
		}
		n++;
	}
	free(out);
	if (!d)
		return -ENOMEM;
	*ret = d;
	*ret_n = n;
	return 0;
}

/* A symlink under ALIAS_DIR pointing at @path, for the file API calls
 * that follow links (download, upload). *ret is its path. The directory
 * @path is in is made if missing, as an upload by path would (one made
 * here may not be in the sandbox yet: writeback.c). */
static int alias_make(struct osbfs *fs, const char *path, char **ret)
{
	char alias[96];
	snprintf(alias, sizeof(alias), ALIAS_DIR "/a-%016llx", random_id());
	char *cmd = shell_cmd("p=%s; d=${p%%/*}; mkdir -p " ALIAS_DIR
			      " \"${d:-/}\" && ln -sfn -- \"$p\" %s",
			      path, alias);
	if (!cmd)
		return -ENOMEM;
	int rc = shell_do(fs, cmd, SHELL_IDEMPOTENT, "alias", path, NULL);
	free(cmd);
	if (rc)
		return rc;
	*ret = strdup(alias);
	return *ret ? 0 : -ENOMEM;
}

static void alias_drop(struct osbfs *fs, char *alias)
{
	const char *paths[1] = { alias };
	osb_dirs_remove(fs->sb, paths, 1, NULL);
	free(alias);
}

/* ---- the calls ---- */

/* Whether the sandbox's @path is a copy left behind by a resent file
 * (cache.h): the mount shows nothing there. */
static bool left_at(struct osbfs *fs, const char *path)
{
	return fs->cache && cache_left_at(fs->cache, path);
}

/* The copies left at or below @dir before a listing of it is asked for
 * (@t->n is 0 if none). */
static void lefts_before(struct osbfs *fs, const char *dir, struct left_take *t)
{
	t->n = 0;
	if (fs->cache && cache_lefts_count(fs->cache))
		cache_lefts_take(fs->cache, dir, 0, t);
}

static bool in_take(const struct left_take *t, const char *path)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->path[i], path) == 0)
			return true;
	return false;
}

/*
 * Leaves the copies left behind out of @d, entries of @dir: those left
 * now, and those of @before (left when the listing was asked for), which
 * may have been removed since and still be in the answer. Frees
 * @before's paths.
 */
static void drop_lefts(struct osbfs *fs, const char *dir, struct rdent *d,
		       size_t *n, struct left_take *before)
{
	size_t k = 0;
	if (!fs->cache || (!before->n && !cache_lefts_count(fs->cache))) {
		cache_lefts_release(before);
		return;
	}
	for (size_t i = 0; i < *n; i++) {
		char *path = NULL;
		bool left = false;
		if (asprintf(&path, "%s/%s", strcmp(dir, "/") ? dir : "",
			     d[i].name) >= 0)
			left = in_take(before, path) || left_at(fs, path);
		free(path);
		if (left)
			free(d[i].name);
		else
			d[k++] = d[i];
	}
	*n = k;
	cache_lefts_release(before);
}

int remote_stat(struct osbfs *fs, const char *path, struct fattr *ret)
{
	struct osb_error err;
	struct osb_stat st;
	int rc = path_check(path);
	if (rc)
		return rc;
	if (left_at(fs, path))
		return -ENOENT;
	if (!osb_path_is_safe(path))
		return shell_stat(fs, path, ret);
	rc = remote_enter(fs);
	if (rc)
		return rc;
	do {
		rc = osb_file_stat(fs->sb, path, &st, &err);
	} while (rc && again(fs, rc));
	if (rc)
		return fail(rc, &err, "stat", path);
	fattr_from_stat(ret, &st);
	osb_stat_release(&st);
	owners_learn(fs, ret->owner, ret->group);
	/* a rename left a copy there meanwhile */
	return left_at(fs, path) ? -ENOENT : 0;
}

int remote_stat_full(struct osbfs *fs, const char *path, struct fattr *ret)
{
	int rc = path_check(path);
	if (rc)
		return rc;
	if (left_at(fs, path))
		return -ENOENT;
	rc = shell_stat(fs, path, ret);
	if (!rc)
		owners_learn(fs, ret->owner, ret->group);
	return rc;
}

/*
 * The entries with special bits below the directory we are in, down to
 * %d levels, and the files with other names (hard links): one line each,
 * the raw mode, the link count, the inode number and the path below it
 * in hex (any byte survives). Only files and directories: the rest show
 * none. A find without -links (a busybox built without it) names the
 * first only. find's own status is not the answer (an entry gone during
 * the walk makes it 1): what it printed is.
 */
static const char specials_fmt[] =
	"command -v find >/dev/null || exit 127\n"
	"cd -- %s || exit 1\n"
	"set --\n"
	"find . -maxdepth 0 -links +0 >/dev/null 2>&1 && "
	"set -- -o \\( -type f -links +1 \\)\n"
	"find . -mindepth 1 -maxdepth %d \\( -type f -o -type d \\) "
	"\\( -perm -4000 -o -perm -2000 -o -perm -1000 \"$@\" \\) "
	"-exec sh -c 'for f do "
	"m=$(stat -c \"%%f %%h %%i\" -- \"$f\") || continue; "
	"printf \"%%s \" \"$m\"; "
	"printf %%s \"${f#./}\" | od -An -v -tx1 | tr -d \" \\n\"; echo; "
	"done' sh {} + 2>/dev/null\n"
	"exit 0\n";

int remote_specials_parse(char *out, struct rdent **ret, size_t *ret_n)
{
	size_t cap = 0, n = 0;
	struct rdent *d = NULL;
	for (char *line = out, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		/* "MODE NLINK INO HEX", or "MODE HEX" */
		unsigned rawmode, nlink = 0;
		unsigned long long ino = 0;
		char *sp = strrchr(line, ' ');
		if (!sp || sscanf(line, "%x", &rawmode) != 1 || !sp[1])
			continue;
		if (sp != strchr(line, ' ') &&
		    sscanf(line, "%*x %u %llu", &nlink, &ino) != 2)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct rdent *g = realloc(d, cap * sizeof(*d));
			if (!g) {
				rdent_array_free(d, n);
				return -ENOMEM;
			}
			d = g;
		}
		memset(&d[n], 0, sizeof(d[n]));
		d[n].name = hex_decode_dup(sp + 1, strlen(sp + 1));
		if (!d[n].name)
			continue;
		d[n].name_len = strlen(d[n].name);
		d[n].attr.mode = rawmode & 07777;
		d[n].attr.mode_full = true;
		if ((rawmode & S_IFMT) == S_IFREG && nlink > 1) {
			d[n].attr.type = OSB_FILE;
			d[n].nlink = nlink;
			d[n].ino = ino;
		}
		n++;
	}
	*ret = d;
	*ret_n = n;
	return 0;
}

int remote_specials(struct osbfs *fs, const char *dir, int depth,
		    struct rdent **ret, size_t *ret_n)
{
	char *out = NULL, *errout = NULL, *script = NULL;
	int code = 0;
	int rc = path_check(dir);
	if (rc)
		return rc;
	char *q = osb_shell_quote(dir);
	if (!q || asprintf(&script, specials_fmt, q, depth) < 0) {
		free(q);
		return -ENOMEM;
	}
	free(q);
	rc = remote_shell(fs, script, SHELL_IDEMPOTENT, &out, &errout, &code);
	free(script);
	free(errout);
	if (!rc && code == 127)
		rc = -ENOTSUP;
	else if (!rc && code)
		rc = -ENOENT; /* the directory is gone */
	if (!rc)
		rc = remote_specials_parse(out, ret, ret_n);
	free(out);
	return rc;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

const char *path_below(const char *dir, const char *path)
{
	size_t n = strcmp(dir, "/") == 0 ? 0 : strlen(dir);
	if (strncmp(path, dir, n) != 0 || path[n] != '/')
		return NULL;
	return path + n + 1;
}

/* The owners a listing names, known as numbers (owners.h). */
static void learn_owners(struct osbfs *fs, const struct rdent *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		owners_learn(fs, d[i].attr.owner, d[i].attr.group);
}

int remote_walk(struct osbfs *fs, const char *dir, int depth, size_t max,
		struct rdent **ret, size_t *ret_n, bool *ret_cut,
		int *ret_depth)
{
	struct osb_error err;
	struct osb_stat *ents;
	size_t n;
	bool cut = false;
	int rc = path_check(dir);
	if (ret_cut)
		*ret_cut = false;
	if (ret_depth)
		*ret_depth = 1;
	if (rc)
		return rc;
	struct left_take before;
	if (!osb_path_is_safe(dir)) {
		lefts_before(fs, dir, &before);
		rc = shell_list(fs, dir, ret, ret_n);
		if (!rc)
			drop_lefts(fs, dir, *ret, ret_n, &before);
		cache_lefts_release(&before);
		if (!rc)
			learn_owners(fs, *ret, *ret_n);
		return rc;
	}
	rc = remote_enter(fs);
	if (rc)
		return rc;
	lefts_before(fs, dir, &before);
	do {
		rc = osb_dir_walk(fs->sb, dir, depth, max, &ents, &n, &cut,
				  &err);
	} while (rc && again(fs, rc));
	/* an entry deleted while execd walked the directory makes the whole
	 * listing a 500 "no such file or directory": the tree changed under
	 * the walk, try again; only a 404 says the directory is missing */
	for (int tries = 0; rc && err.status == 500 && tries < 3; tries++)
		rc = osb_dir_walk(fs->sb, dir, depth, max, &ents, &n, &cut,
				  &err);
	if (rc == -ENOENT && err.status != 404)
		rc = -EIO;
	if (rc) {
		cache_lefts_release(&before);
		return fail(rc, &err, "list", dir);
	}
	struct rdent *d = calloc(n ? n : 1, sizeof(*d));
	if (!d) {
		osb_stat_array_free(ents, n);
		cache_lefts_release(&before);
		return -ENOMEM;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		/* one level: the base name, as a listing names it; deeper:
		 * the path below @dir, and nothing that is not below it */
		const char *name = depth > 1 ? path_below(dir, ents[i].path) :
					       base_name(ents[i].path);
		d[k].name = name ? strdup(name) : NULL;
		if (!d[k].name)
			continue;
		/* a "\u0000" in the JSON text already ended the string */
		d[k].name_len = strlen(d[k].name);
		fattr_from_stat(&d[k].attr, &ents[i]);
		k++;
	}
	osb_stat_array_free(ents, n);
	drop_lefts(fs, dir, d, &k, &before);
	learn_owners(fs, d, k);
	*ret = d;
	*ret_n = k;
	if (ret_cut)
		*ret_cut = cut;
	if (ret_depth)
		*ret_depth = depth;
	return 0;
}

int remote_list(struct osbfs *fs, const char *dir, struct rdent **ret,
		size_t *ret_n)
{
	return remote_walk(fs, dir, 1, 0, ret, ret_n, NULL, NULL);
}

/* A sink that counts what it passed on, so that a retry goes on from
 * there (the sink must not see a byte twice). */
struct counted {
	osb_sink_fn sink;
	void *arg;
	int64_t got;
};

static int counted_sink(void *arg, const void *data, size_t len)
{
	struct counted *c = arg;
	int rc = c->sink(c->arg, data, len);
	if (!rc)
		c->got += (int64_t)len;
	return rc;
}

static int download(struct osbfs *fs, const char *path, int64_t off,
		    int64_t len, int64_t size, osb_sink_fn sink, void *arg,
		    int64_t *ret_size)
{
	struct osb_error err;
	struct counted cs = { sink, arg, 0 };
	char *alias = NULL;
	int rc = path_check(path);
	if (rc)
		return rc;
	rc = remote_enter(fs);
	if (!rc && !osb_path_is_safe(path))
		rc = alias_make(fs, path, &alias);
	if (rc)
		return rc;
	const char *p = alias ? alias : path;
	rc = osb_file_download_sized(fs->sb, p, off, len, size, counted_sink,
				     &cs, ret_size, &err);
	if (rc && again(fs, rc) && (len < 0 || cs.got < len))
		rc = osb_file_download_sized(fs->sb, p, off + cs.got,
					     len < 0 ? len : len - cs.got, size,
					     counted_sink, &cs, ret_size, &err);
	if (alias)
		alias_drop(fs, alias);
	if (rc == -ESTALE && size >= 0)
		return rc; /* the caller asked for a version: it tells */
	return rc ? fail(rc, &err, "read", path) : 0;
}

int remote_download(struct osbfs *fs, const char *path, int64_t off,
		    int64_t len, osb_sink_fn sink, void *arg, int64_t *ret_size)
{
	return download(fs, path, off, len, OSB_SIZE_GROWS, sink, arg,
			ret_size);
}

int remote_fetch(struct osbfs *fs, const char *path, int64_t off, int64_t len,
		 int64_t size, osb_sink_fn sink, void *arg)
{
	return download(fs, path, off, len, size, sink, arg, NULL);
}

/* An owner or group name, or NULL for none ("" too). */
static const char *name_or_null(const char *s)
{
	return s && *s ? s : NULL;
}

/* Whether the file API can give a file owner @owner and group @group:
 * it looks names up, so a number (an owner without a name in the
 * sandbox) only a command sets (owners.h). */
static bool api_owner(const char *owner, const char *group)
{
	return !owners_numeric(owner) && !owners_numeric(group);
}

/* One line of a chown script: @path (not followed when @nofollow) given
 * @owner and @group ("" or NULL: root), names or numbers. */
static int chown_line(FILE *m, const char *path, const char *owner,
		      const char *group, bool nofollow)
{
	char *who = NULL;
	if (asprintf(&who, "%s:%s", owner && *owner ? owner : "root",
		     group && *group ? group : "root") < 0)
		return -ENOMEM;
	char *qw = osb_shell_quote(who), *qp = osb_shell_quote(path);
	free(who);
	if (qw && qp)
		fprintf(m, "chown %s-- %s %s || e=1\n", nofollow ? "-h " : "",
			qw, qp);
	free(qw);
	free(qp);
	return qw && qp ? 0 : -ENOMEM;
}

/* chown of @n paths to their @owners and @groups in one command; with
 * @nofollow, of symlinks themselves. */
static int chown_many(struct osbfs *fs, const char *const *paths,
		      const char *const *owners, const char *const *groups,
		      size_t n, bool nofollow)
{
	char *script = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&script, &len);
	if (!m)
		return -ENOMEM;
	int rc = 0;
	fputs("e=0\n", m);
	for (size_t i = 0; !rc && i < n; i++)
		rc = chown_line(m, paths[i], owners[i], groups[i], nofollow);
	fputs("exit $e\n", m);
	if (fclose(m) != 0 && !rc)
		rc = -ENOMEM;
	if (!rc && n)
		rc = shell_do(fs, script, SHELL_IDEMPOTENT, "chown", paths[0],
			      NULL);
	free(script);
	return rc;
}

int remote_chown(struct osbfs *fs, const char *path, const char *owner,
		 const char *group, bool nofollow)
{
	int rc = path_check(path);
	return rc ? rc : chown_many(fs, &path, &owner, &group, 1, nofollow);
}

static bool api_mode(const char *path, mode_t mode);

/* After files @u or directories @d (@n of them) went by the file API:
 * the owners it could not set (a number), or that the command making a
 * directory with a mode it cannot carry did not, set by one command. */
static int owners_after(struct osbfs *fs, size_t n, const struct rupload *u,
			const struct rdir *d)
{
	const char **p = calloc(n ? n : 1, sizeof(char *));
	const char **o = calloc(n ? n : 1, sizeof(char *));
	const char **g = calloc(n ? n : 1, sizeof(char *));
	int rc = p && o && g ? 0 : -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		const char *path = u ? u[i].path : d[i].path;
		const char *ow = u ? u[i].owner : d[i].owner;
		const char *gr = u ? u[i].group : d[i].group;
		bool cmd = d && !api_mode(d[i].path, d[i].mode) &&
			   ((ow && *ow) || (gr && *gr));
		if (!cmd && api_owner(ow, gr))
			continue;
		p[k] = path;
		o[k] = ow;
		g[k] = gr;
		k++;
	}
	if (!rc && k)
		rc = chown_many(fs, p, o, g, k, false);
	free(p);
	free(o);
	free(g);
	return rc;
}

int remote_upload(struct osbfs *fs, const struct rupload *u, size_t n)
{
	struct osb_error err;
	struct osb_upload *ups = calloc(n ? n : 1, sizeof(*ups));
	char **aliases = calloc(n ? n : 1, sizeof(char *));
	int rc = ups && aliases ? remote_enter(fs) : -ENOMEM;

	for (size_t i = 0; !rc && i < n; i++) {
		rc = path_check(u[i].path);
		if (!rc && !osb_path_is_safe(u[i].path))
			rc = alias_make(fs, u[i].path, &aliases[i]);
		ups[i].path = aliases[i] ? aliases[i] : u[i].path;
		ups[i].fd = u[i].fd;
		ups[i].size = u[i].size;
		ups[i].mode = u[i].mode & 0777;
		ups[i].owner = name_or_null(u[i].owner);
		ups[i].group = name_or_null(u[i].group);
	}
	if (!rc) {
		rc = osb_file_upload(fs->sb, ups, n, &err);
		if (rc && again(fs, rc))
			rc = osb_file_upload(fs->sb, ups, n, &err);
		/* -EAGAIN: a file changed under the upload; the caller
		 * sends its new content, nothing failed */
		if (rc && rc != -EAGAIN)
			rc = fail(rc, &err, "upload", u[0].path);
	}
	for (size_t i = 0; aliases && i < n; i++)
		if (aliases[i])
			alias_drop(fs, aliases[i]);
	free(aliases);
	free(ups);
	if (!rc)
		rc = owners_after(fs, n, u, NULL);
	return rc;
}

/* The archive of remote_unpack() (its size, or -errno). */
static int64_t pack(const struct rupload *u, const struct rtimes *t, size_t n,
		    int out)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		struct osb_tar_member m = {
			.path = u[i].path,
			.fd = u[i].fd,
			.size = u[i].size,
			.mode = t[i].do_chmod ? t[i].chmod : u[i].mode,
			.mtime = t[i].mtime,
			.atime = t[i].atime,
			.owner = name_or_null(u[i].owner),
			.group = name_or_null(u[i].group),
		};
		rc = osb_tar_add(out, &m);
	}
	if (!rc)
		rc = osb_tar_finish(out);
	off_t size = rc ? 0 : lseek(out, 0, SEEK_CUR);
	return rc ? rc : size < 0 ? -errno : (int64_t)size;
}

int remote_unpack(struct osbfs *fs, const struct rupload *u,
		  const struct rtimes *t, size_t n, int tmp_fd)
{
	int64_t size = pack(u, t, n, tmp_fd);
	if (size < 0)
		return (int)size;
	char path[64];
	snprintf(path, sizeof(path), ALIAS_DIR "/pack-%016llx.tar",
		 random_id());
	struct rupload up = {
		.path = path,
		.fd = tmp_fd,
		.size = size,
		.mode = 0600,
	};
	int rc = remote_upload(fs, &up, 1);
	if (rc)
		return rc;
	char *script = NULL;
	if (asprintf(&script,
		     "command -v tar >/dev/null || { rm -f %1$s; exit 127; }\n"
		     "tar -x -p -f %1$s -C / 2>&1 >/dev/null\n"
		     "r=$?\nrm -f %1$s\nexit $r\n",
		     path) < 0)
		return -ENOMEM;
	char *out = NULL, *errout = NULL;
	int code = 0;
	rc = remote_shell(fs, script, SHELL_ONCE, &out, &errout, &code);
	free(script);
	if (!rc && code == 127) {
		rc = -ENOTSUP;
	} else if (!rc && code) {
		log_error("unpacking %lld bytes of new files in the sandbox "
			  "failed (%d): %s; they go in an ordinary upload",
			  (long long)size, code,
			  out && *out       ? out :
			  errout && *errout ? errout :
					      "");
		rc = -EIO;
	}
	free(out);
	free(errout);
	return rc;
}

/* Whether the file API can give @path @mode: not a mode 0 or one with
 * special bits (they do not cross it), nor a path it cannot take; those
 * go by command. */
static bool api_mode(const char *path, mode_t mode)
{
	return osb_path_is_safe(path) && (mode & 07777) != 0 && !(mode & 07000);
}

static int mkdir_by_command(struct osbfs *fs, const char *path, mode_t mode)
{
	char m[16];
	snprintf(m, sizeof(m), "%o", (unsigned)(mode & 07777));
	char *full = NULL;
	char *q = osb_shell_quote(path);
	if (!q)
		return -ENOMEM;
	if (asprintf(&full, "mkdir -p -- %s && chmod %s -- %s", q, m, q) < 0) {
		free(q);
		return -ENOMEM;
	}
	free(q);
	int rc = shell_do(fs, full, SHELL_IDEMPOTENT, "mkdir", path, NULL);
	free(full);
	return rc;
}

/* Writes what it is given to a file, up to a limit. */
struct file_sink {
	int fd;
	int64_t got, max;
};

static int file_sink_write(void *arg, const void *data, size_t len)
{
	struct file_sink *s = arg;
	if (s->got + (int64_t)len > s->max)
		return -EFBIG;
	int rc = osb_write_all(s->fd, data, len);
	if (!rc)
		s->got += (int64_t)len;
	return rc;
}

int remote_pull(struct osbfs *fs, const char *dir, char *const *names, size_t n,
		int64_t max_bytes, int out, int64_t *ret_size)
{
	char path[64];
	snprintf(path, sizeof(path), ALIAS_DIR "/pull-%016llx.tar",
		 random_id());
	char *script = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&script, &len);
	if (!m)
		return -ENOMEM;
	char *qdir = osb_shell_quote(dir);
	int rc = qdir ? 0 : -ENOMEM;
	/* --ignore-failed-read: a file gone since its listing is left out;
	 * one that changes while read makes tar fail (exit 1) */
	fprintf(m,
		"command -v tar >/dev/null || exit 127\n"
		"mkdir -p " ALIAS_DIR " && cd -- %s || exit 3\n"
		"tar --format=posix --no-recursion --ignore-failed-read "
		"-c -f %s --",
		qdir ? qdir : "/", path);
	free(qdir);
	for (size_t i = 0; !rc && i < n; i++) {
		char *q = osb_shell_quote(names[i]);
		if (!q)
			rc = -ENOMEM;
		else
			fprintf(m, " %s", q);
		free(q);
	}
	fprintf(m, " 2>&1 >/dev/null || { r=$?; rm -f %s; exit $r; }\n", path);
	if (fclose(m) != 0)
		rc = -ENOMEM;
	char *outs = NULL, *errs = NULL;
	int code = 0;
	if (!rc)
		rc = remote_shell(fs, script, SHELL_OPTIONAL, &outs, &errs,
				  &code);
	free(script);
	if (!rc && code == 127) {
		rc = -ENOTSUP;
	} else if (!rc && code) {
		log_debug("packing %zu files of %s in the sandbox failed (%d): "
			  "%s; they are read one by one",
			  n, dir, code,
			  outs && *outs ? outs :
			  errs && *errs ? errs :
					  "");
		rc = -EIO;
	}
	free(outs);
	free(errs);
	if (rc)
		return rc;
	struct file_sink fsk = { out, 0, max_bytes };
	rc = remote_download(fs, path, 0, -1, file_sink_write, &fsk, NULL);
	int urc = remote_unlink(fs, path, false);
	if (urc && urc != -ENOENT)
		log_warn("could not remove %s in the sandbox: %s", path,
			 strerror(-urc));
	*ret_size = fsk.got;
	return rc;
}

int remote_dirs(struct osbfs *fs, const struct rdir *d, size_t n)
{
	struct osb_error err;
	struct osb_perm *p = calloc(n ? n : 1, sizeof(*p));
	size_t np = 0;
	int rc = p ? 0 : -ENOMEM;

	for (size_t i = 0; !rc && i < n; i++) {
		rc = path_check(d[i].path);
		if (!rc && !api_mode(d[i].path, d[i].mode))
			rc = mkdir_by_command(fs, d[i].path, d[i].mode);
		else if (!rc)
			p[np++] = (struct osb_perm){
				.path = d[i].path,
				.mode = d[i].mode & 0777,
				/* execd chowns on every call: the owner we
				 * know, or its own user for a new one */
				.owner = name_or_null(d[i].owner),
				.group = name_or_null(d[i].group),
			};
	}
	if (!rc && np)
		rc = remote_enter(fs);
	if (!rc && np) {
		do {
			rc = osb_dirs_make(fs->sb, p, np, &err);
		} while (rc && again(fs, rc));
		if (rc)
			rc = fail(rc, &err, "mkdir", p[0].path);
	}
	free(p);
	if (!rc)
		rc = owners_after(fs, n, NULL, d);
	return rc;
}

int remote_rmdir(struct osbfs *fs, const char *path)
{
	struct osb_error err;
	int rc = path_check(path);
	if (rc)
		return rc;
	if (!osb_path_is_safe(path)) {
		char *cmd = shell_cmd("rmdir -- %s%s", path, NULL);
		if (!cmd)
			return -ENOMEM;
		rc = shell_do(fs, cmd, SHELL_ONCE, "rmdir", path, NULL);
		free(cmd);
		return rc;
	}
	rc = remote_enter(fs);
	if (rc)
		return rc;
	const char *paths[1] = { path };
	do {
		rc = osb_dirs_remove(fs->sb, paths, 1, &err);
	} while (rc && again(fs, rc));
	return rc ? fail(rc, &err, "rmdir", path) : 0;
}

int remote_unlink(struct osbfs *fs, const char *path, bool symlink)
{
	struct osb_error err;
	int rc = path_check(path);
	if (rc)
		return rc;
	if (!osb_path_is_safe(path)) {
		char *cmd = shell_cmd("rm -f -- %s%s", path, NULL);
		if (!cmd)
			return -ENOMEM;
		rc = shell_do(fs, cmd, SHELL_IDEMPOTENT, "unlink", path, NULL);
		free(cmd);
		return rc;
	}
	rc = remote_enter(fs);
	if (rc)
		return rc;
	const char *paths[1] = { path };
	do {
		/* DELETE /files leaves a dangling symlink in place and
		 * refuses one to a directory; DELETE /directories unlinks a
		 * symlink without following it (docs/SERVER.md §6) */
		if (symlink)
			rc = osb_dirs_remove(fs->sb, paths, 1, &err);
		else
			rc = osb_files_remove(fs->sb, paths, 1, &err);
	} while (rc && again(fs, rc));
	return rc ? fail(rc, &err, "unlink", path) : 0;
}

int remote_unlink_many(struct osbfs *fs, char *const *paths, size_t n)
{
	struct osb_error err;
	const char *safe[64];
	size_t k = 0, bytes = 0;
	int rc = remote_enter(fs);

	for (size_t i = 0; !rc && i <= n; i++) {
		/* a query of a few KiB at most per request */
		bool send = k && (i == n || k == 64 ||
				  bytes + strlen(paths[i]) > 4096);
		if (send) {
			do {
				rc = osb_files_remove(fs->sb, safe, k, &err);
			} while (rc && again(fs, rc));
			if (rc)
				return fail(rc, &err, "unlink", safe[0]);
			k = bytes = 0;
		}
		if (i == n)
			break;
		rc = path_check(paths[i]);
		if (!rc && !osb_path_is_safe(paths[i])) {
			rc = remote_unlink(fs, paths[i], false);
		} else if (!rc) {
			safe[k++] = paths[i];
			bytes += strlen(paths[i]);
		}
	}
	return rc;
}

/* Whether a move of @src to @dst has happened: @src gone, @dst there. */
static bool moved(struct osbfs *fs, const char *src, const char *dst)
{
	struct osb_stat st;
	if (osb_file_stat(fs->sb, src, &st, NULL) == 0) {
		osb_stat_release(&st);
		return false;
	}
	if (osb_file_stat(fs->sb, dst, &st, NULL) != 0)
		return false;
	osb_stat_release(&st);
	return true;
}

int remote_rename(struct osbfs *fs, const char *src, const char *dst,
		  bool replace, bool symlink)
{
	struct osb_error err;
	int rc = path_check(src);
	if (!rc)
		rc = path_check(dst);
	if (rc)
		return rc;
	/* /files/mv follows a symlink at the source (a dangling one is
	 * "not found"): links move with mv -T */
	if (!replace && !symlink && osb_path_is_safe(src) &&
	    osb_path_is_safe(dst)) {
		struct osb_move m = { src, dst };
		rc = remote_enter(fs);
		if (rc)
			return rc;
		int tries = 0;
		do {
			rc = osb_file_move(fs->sb, &m, 1, &err);
			tries++;
		} while (rc && again(fs, rc));
		/* a "not found" after a repeat (a resume) may be our own
		 * first attempt's doing (the client settles its own resent
		 * requests so); after one request, the source is missing, and
		 * a file at the destination is someone else's */
		if (rc == -ENOENT && tries > 1 && moved(fs, src, dst))
			rc = 0;
		if (rc != -EEXIST)
			return rc ? fail(rc, &err, "rename", src) : 0;
		/* the destination exists after all: replace it below */
	}
	/* rename(2) replaces atomically; /files/mv refuses an existing
	 * destination, so this goes through mv -T */
	char *cmd = shell_cmd("mv -fT -- %s %s", src, dst);
	if (!cmd)
		return -ENOMEM;
	rc = shell_do(fs, cmd, SHELL_ONCE, "rename", src, NULL);
	free(cmd);
	return rc;
}

int remote_chmod(struct osbfs *fs, const char *path, mode_t mode,
		 const char *owner, const char *group)
{
	struct osb_error err;
	int rc = path_check(path);
	if (rc)
		return rc;
	if (!api_mode(path, mode) || !api_owner(owner, group)) {
		/* chmod alone: the owner stays */
		char m[16];
		snprintf(m, sizeof(m), "%o", (unsigned)(mode & 07777));
		char *q = osb_shell_quote(path), *cmd = NULL;
		if (!q || asprintf(&cmd, "chmod %s -- %s", m, q) < 0) {
			free(q);
			return -ENOMEM;
		}
		free(q);
		rc = shell_do(fs, cmd, SHELL_IDEMPOTENT, "chmod", path, NULL);
		free(cmd);
		return rc;
	}
	rc = remote_enter(fs);
	if (rc)
		return rc;
	do {
		/* execd chowns on every call: pass the owner we know */
		rc = osb_file_chmod(fs->sb, path, mode & 0777,
				    name_or_null(owner), name_or_null(group),
				    &err);
	} while (rc && again(fs, rc));
	return rc ? fail(rc, &err, "chmod", path) : 0;
}

static long long ts_ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

static void touch_lines(FILE *m, const struct rtimes *t, const char *q)
{
	const char *h = t->nofollow ? "-h " : "";
	fprintf(m, "touch -c %s-m -d @%lld.%09ld -- %s || f=1\n", h,
		(long long)t->mtime.tv_sec, t->mtime.tv_nsec, q);
	if (t->atime.tv_nsec != UTIME_OMIT)
		fprintf(m, "touch -c %s-a -d @%lld.%09ld -- %s || f=1\n", h,
			(long long)t->atime.tv_sec, t->atime.tv_nsec, q);
	if (t->do_chmod)
		fprintf(m, "chmod %o -- %s || f=1\n",
			(unsigned)(t->chmod & 07777), q);
	/* the ctime and mode all that left (remote.h) */
	fprintf(m, "stat -c '%%.9Z %%f' -- %s 2>/dev/null || echo -\n", q);
}

/*
 * Times (and modes) of many paths in one command. With python3 in the
 * sandbox, one process sets them all (a touch per file costs a fork and
 * an exec each: 64 files took 156 ms that way, 35 ms this way); without
 * it, or for at most TOUCH_MAX paths (python3 alone takes about 30 ms to
 * start), coreutils' touch. Paths travel hex-encoded, so any name is
 * safe.
 */
#define TOUCH_MAX 4
/* The python3 part of remote_times(): one process for all of @t. */
static void times_python(FILE *m, const struct rtimes *t, size_t n)
{
	fputs("if command -v python3 >/dev/null 2>&1; then\n"
	      "python3 - <<'OSBFS_TIMES'\n"
	      "import os, sys\n"
	      "f = 0\n"
	      "for h, m, a, nf, c in [\n",
	      m);
	for (size_t i = 0; i < n; i++) {
		fputs("(\"", m);
		hex_put(m, t[i].path);
		fprintf(m, "\", %lld, %lld, %d, %d),\n", ts_ns(&t[i].mtime),
			t[i].atime.tv_nsec == UTIME_OMIT ? -1LL :
							   ts_ns(&t[i].atime),
			t[i].nofollow ? 1 : 0,
			t[i].do_chmod ? (int)(t[i].chmod & 07777) : -1);
	}
	fputs("]:\n"
	      "    p = bytes.fromhex(h)\n"
	      "    try:\n"
	      "        if a < 0:\n"
	      "            a = (os.lstat(p) if nf else "
	      "os.stat(p)).st_atime_ns\n"
	      "        os.utime(p, ns=(a, m), follow_symlinks=not nf)\n"
	      "        if c >= 0:\n"
	      "            os.chmod(p, c)\n"
	      "        st = os.lstat(p)\n"
	      "        s, ns = divmod(st.st_ctime_ns, 10**9)\n"
	      "        print('%d.%09d %x' % (s, ns, st.st_mode))\n"
	      "    except FileNotFoundError:\n"
	      "        print('-')\n"
	      "    except OSError as e:\n"
	      "        f = 1\n"
	      "        print(e, file=sys.stderr)\n"
	      "        print('-')\n"
	      "sys.exit(f)\n"
	      "OSBFS_TIMES\n"
	      "else\n",
	      m);
}

/* The ctimes and modes remote_times()'s command printed in @out, one
 * line per path ("<ctime> <hex mode>"), into each ret_ctime and
 * ret_mode; all not known ({0, 0}, 0) if @out is NULL or not of that
 * form. */
static void times_ctimes(const struct rtimes *t, size_t n, char *out)
{
	size_t lines = 0;
	for (const char *p = out; p && *p; p++)
		lines += *p == '\n';
	for (size_t i = 0; i < n; i++) {
		if (t[i].ret_ctime)
			*t[i].ret_ctime = (struct timespec){ 0, 0 };
		if (t[i].ret_mode)
			*t[i].ret_mode = 0;
	}
	if (lines != n)
		return;
	char *line = out;
	for (size_t i = 0; i < n; i++) {
		char *end = strchr(line, '\n');
		*end = '\0';
		char ct[48];
		unsigned mode;
		if (t[i].ret_ctime && sscanf(line, "%47s %x", ct, &mode) == 2 &&
		    *ct >= '0' && *ct <= '9') {
			ts_parse(ct, t[i].ret_ctime);
			if (t[i].ret_mode)
				*t[i].ret_mode = (mode_t)mode;
		}
		line = end + 1;
	}
}

int remote_times(struct osbfs *fs, const struct rtimes *t, size_t n)
{
	char *script = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&script, &len);
	if (!m)
		return -ENOMEM;
	bool python = n > TOUCH_MAX;
	if (python)
		times_python(m, t, n);
	fputs("f=0\n", m);
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		char *q = osb_shell_quote(t[i].path);
		if (!q)
			rc = -ENOMEM;
		else
			touch_lines(m, &t[i], q);
		free(q);
	}
	fputs(python ? "exit $f\nfi\n" : "exit $f\n", m);
	if (fclose(m) != 0)
		rc = -ENOMEM;
	char *out = NULL;
	if (!rc)
		rc = shell_do(fs, script, SHELL_IDEMPOTENT, "set times of",
			      t[0].path, &out);
	free(script);
	times_ctimes(t, n, rc ? NULL : out);
	free(out);
	return rc;
}

int remote_symlink(struct osbfs *fs, const char *target, const char *path)
{
	int rc = path_check(target);
	if (!rc)
		rc = path_check(path);
	if (rc)
		return rc;
	char *cmd = shell_cmd("ln -s -- %s %s", target, path);
	if (!cmd)
		return -ENOMEM;
	rc = shell_do(fs, cmd, SHELL_ONCE, "symlink", path, NULL);
	free(cmd);
	return rc;
}

int remote_link(struct osbfs *fs, const char *src, const char *path)
{
	int rc = path_check(src);
	if (!rc)
		rc = path_check(path);
	if (rc)
		return rc;
	/* -T: a directory made at @path meanwhile is not linked into */
	char *cmd = shell_cmd("ln -T -- %s %s", src, path);
	if (!cmd)
		return -ENOMEM;
	rc = shell_do(fs, cmd, SHELL_ONCE, "link", path, NULL);
	free(cmd);
	return rc;
}

int remote_copy(struct osbfs *fs, const char *src, const char *path)
{
	int rc = path_check(src);
	if (!rc)
		rc = path_check(path);
	if (rc)
		return rc;
	char *cmd = shell_cmd("cp -pT -- %s %s", src, path);
	if (!cmd)
		return -ENOMEM;
	rc = shell_do(fs, cmd, SHELL_ONCE, "copy", path, NULL);
	free(cmd);
	return rc;
}

int remote_links_later(struct osbfs *fs, char *const *srcs, char *const *paths,
		       size_t n)
{
	char *script = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&script, &len);
	if (!f)
		return -ENOMEM;
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		rc = path_check(srcs[i]);
		if (!rc)
			rc = path_check(paths[i]);
		const char *slash = strrchr(paths[i], '/');
		char *dir = rc || !slash ? NULL :
					   strndup(paths[i],
						   (size_t)(slash - paths[i]));
		char *qd = dir ? osb_shell_quote(*dir ? dir : "/") : NULL;
		char *line = qd ? shell_cmd("[ %s -ef %s ] || { mkdir -p -- ",
					    paths[i], srcs[i]) :
				  NULL;
		char *tail = line ? shell_cmd(" && ln -fT -- %s %s; } || e=1\n",
					      srcs[i], paths[i]) :
				    NULL;
		if (!rc && !tail)
			rc = -ENOMEM;
		if (!rc)
			fprintf(f, "%s%s%s", line, qd, tail);
		free(dir);
		free(qd);
		free(line);
		free(tail);
	}
	if (!rc)
		fputs("exit ${e:-0}\n", f);
	if (fclose(f) && !rc)
		rc = -ENOMEM;
	if (!rc)
		rc = shell_do(fs, script, SHELL_ONCE, "link", paths[0], NULL);
	free(script);
	return rc;
}

int remote_readlink(struct osbfs *fs, const char *path, char **ret)
{
	char *out = NULL;
	int rc = path_check(path);
	if (rc)
		return rc;
	/* hex, so a target with a newline survives the line-split output */
	char *cmd = shell_cmd("t=$(readlink -- %s%s && echo x) || exit 1\n"
			      "printf '%%s' \"${t%%?x}\" | od -An -v -tx1 | "
			      "tr -d ' \\n'\n",
			      path, NULL);
	if (!cmd)
		return -ENOMEM;
	rc = shell_do(fs, cmd, SHELL_IDEMPOTENT, "readlink", path, &out);
	free(cmd);
	if (rc)
		return rc;
	size_t n = strcspn(out, "\n");
	*ret = hex_decode_dup(out, n);
	free(out);
	return *ret ? 0 : -EIO;
}

int remote_statfs(struct osbfs *fs, const char *path, struct statvfs *ret)
{
	char *out = NULL;
	unsigned long long bsize, blocks, bfree, bavail, files, ffree, namemax;
	char *cmd = shell_cmd(
		"stat -f -c '%%S %%b %%f %%a %%c %%d %%l' -- %s%s", path, NULL);
	if (!cmd)
		return -ENOMEM;
	int rc = shell_do(fs, cmd, SHELL_IDEMPOTENT, "statfs", path, &out);
	free(cmd);
	if (rc)
		return rc;
	if (sscanf(out, "%llu %llu %llu %llu %llu %llu %llu", &bsize, &blocks,
		   &bfree, &bavail, &files, &ffree, &namemax) != 7) {
		free(out);
		return -EIO;
	}
	free(out);
	memset(ret, 0, sizeof(*ret));
	ret->f_bsize = ret->f_frsize = bsize;
	ret->f_blocks = blocks;
	ret->f_bfree = bfree;
	ret->f_bavail = bavail;
	ret->f_files = files;
	ret->f_ffree = ffree;
	ret->f_favail = ffree;
	ret->f_namemax = namemax;
	return 0;
}

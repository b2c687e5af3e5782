/*
 * umount.c - `osbfs -u MOUNTPOINT`. `fusermount3 -u` returns at once,
 * while the daemon still uploads what was written, and a failure then
 * reaches syslog only (which may not exist). This command:
 *
 *   1. writes `sync` to MOUNTPOINT/.osb/ctl, from a child process so a
 *      deadline can end the wait, with a progress line (files and bytes
 *      left, from .osb/info) when it takes more than a moment;
 *   2. unmounts (fusermount3 -u);
 *   3. waits for that mount's daemon (its pid, from .osb/info) to exit,
 *      up to HOLDER_WAIT_MS: it uploads what was written meanwhile;
 *   4. reads the daemon's last record in its cache dir's lock file
 *      (holder.h): what never reached the sandbox, named on stderr with
 *      where it is kept.
 *
 * The only file here that parses JSON (.osb/info, our own output): it
 * is parsed, copied out and deleted in info_read().
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "holder.h"
#include "log.h"
#include "node.h"
#include "umount.h"

/* as long as the sync verb itself waits (ctl_root.c), and a little */
#define SYNC_WAIT_MS (10 * 60 * 1000 + 30000)
#define PROGRESS_AFTER_MS 1500
#define PROGRESS_EVERY_MS 5000
#define POLL_MS 100
#define INFO_MAX (4 << 20)

/* What .osb/info says. */
struct minfo {
	pid_t pid; /* 0 if not given */
	char sandbox_id[128];
	char cache_dir[PATH_MAX]; /* CACHE_DIR/<sandbox id> */
	long long dirty_files, dirty_bytes;
	bool away;          /* the server cannot be reached */
	long long silent_s; /* how long it has not answered, 0 if it does */
	struct pending pending;
};

static char *slurp(const char *path, int *ret_err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0, cap = 0;

	*ret_err = 0;
	if (fd < 0) {
		*ret_err = errno;
		return NULL;
	}
	for (;;) {
		if (len + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 16384;
			char *nb = cap <= INFO_MAX ? realloc(buf, cap) : NULL;
			if (!nb) {
				*ret_err = cap > INFO_MAX ? EFBIG : ENOMEM;
				break;
			}
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, 4096);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			*ret_err = errno;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (*ret_err) {
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

static void copy_str(const cJSON *o, const char *key, char *out, size_t size)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	snprintf(out, size, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static long long get_num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(v) && v->valuedouble >= 0 &&
			       v->valuedouble < 9e15 ?
		       (long long)v->valuedouble :
		       0;
}

/* Reads @path (.osb/info) into @ret. 0, or an errno. */
static int info_read(const char *path, struct minfo *ret)
{
	int err;
	char *text = slurp(path, &err);
	memset(ret, 0, sizeof(*ret));
	if (!text)
		return err;
	cJSON *root = cJSON_ParseWithOpts(text, NULL, 0);
	free(text);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return EINVAL;
	}
	ret->pid = (pid_t)get_num(root, "pid");
	char server[32];
	copy_str(root, "server", server, sizeof(server));
	ret->away = strcmp(server, "away") == 0;
	ret->silent_s = get_num(root, "server_silent_s");
	copy_str(root, "sandbox_id", ret->sandbox_id, sizeof(ret->sandbox_id));
	const cJSON *cache = cJSON_GetObjectItemCaseSensitive(root, "cache");
	copy_str(cache, "dir", ret->cache_dir, sizeof(ret->cache_dir));
	ret->dirty_files = get_num(cache, "dirty_files");
	ret->dirty_bytes = get_num(cache, "dirty_bytes");
	ret->pending.total = (size_t)ret->dirty_files;
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(cache, "pending");
	size_t n = cJSON_IsArray(p) ? (size_t)cJSON_GetArraySize(p) : 0;
	ret->pending.paths = n ? calloc(n, sizeof(char *)) : NULL;
	const cJSON *e;
	cJSON_ArrayForEach(e, p)
	{
		if (ret->pending.paths && cJSON_IsString(e) &&
		    ret->pending.n < n) {
			char *s = strdup(e->valuestring);
			if (s)
				ret->pending.paths[ret->pending.n++] = s;
		}
	}
	cJSON_Delete(root);
	return 0;
}

/* "12.3 MiB" */
static void human_size(long long n, char *buf, size_t size)
{
	static const char *const units[] = { "bytes", "KiB", "MiB", "GiB",
					     "TiB" };
	double v = (double)n;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(*units)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%lld bytes", n);
	else
		snprintf(buf, size, "%.1f %s", v, units[u]);
}

/* What the last progress line said. */
struct told {
	bool any;
	long long files, bytes;
	int server; /* 0 answers, 1 silent, 2 away */
};

/* A progress line: on a terminal each time; elsewhere (a log, a pipe)
 * only when what it says changed. With a server that does not answer,
 * it says so, and since when. */
static void progress(const char *mp, const char *info_path, struct told *t)
{
	struct minfo mi;
	char sz[32], quiet[160] = "";
	if (info_read(info_path, &mi) != 0)
		return;
	human_size(mi.dirty_bytes, sz, sizeof(sz));
	int server = mi.away ? 2 : mi.silent_s ? 1 : 0;
	if (server) {
		time_t since = time(NULL) - (time_t)mi.silent_s;
		struct tm tm;
		char at[16] = "?";
		if (localtime_r(&since, &tm))
			strftime(at, sizeof(at), "%H:%M:%S", &tm);
		snprintf(quiet, sizeof(quiet),
			 "; the server %s since %s (%lld s)",
			 mi.away ? "cannot be reached" : "has not answered", at,
			 mi.silent_s);
	}
	bool same = t->any && t->files == mi.dirty_files &&
		    t->bytes == mi.dirty_bytes && t->server == server;
	if (!same || isatty(STDERR_FILENO))
		log_stderr("osbfs: %s: uploading to sandbox %s: %lld file(s), "
			   "%s to go%s",
			   mp, mi.sandbox_id, mi.dirty_files, sz, quiet);
	*t = (struct told){ true, mi.dirty_files, mi.dirty_bytes, server };
	pending_release(&mi.pending);
}

/*
 * Writes `sync` to @ctl_path and waits for it, at most SYNC_WAIT_MS,
 * with a progress line now and then (*ret_told set then). 0, or the
 * errno of the write (EIO: some file could not be uploaded), or
 * ETIMEDOUT.
 */
static int sync_mount(const char *mp, const char *ctl_path,
		      const char *info_path, bool *ret_told)
{
	fflush(stderr);
	pid_t child = fork();
	if (child < 0)
		return errno;
	if (child == 0) {
		int e = 0;
		int fd = open(ctl_path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			e = errno;
		else if (write(fd, "sync\n", 5) != 5)
			e = errno ? errno : EIO;
		if (fd >= 0 && close(fd) != 0 && !e)
			e = errno;
		_exit(e & 0xff);
	}
	long long start = mono_ms();
	long long next = start + PROGRESS_AFTER_MS;
	struct told t = { 0 };
	for (;;) {
		int st;
		pid_t r = waitpid(child, &st, WNOHANG);
		if (r == child)
			return WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
		if (r < 0 && errno != EINTR)
			return errno;
		long long now = mono_ms();
		if (now - start >= SYNC_WAIT_MS) {
			kill(child, SIGKILL);
			waitpid(child, NULL, 0);
			return ETIMEDOUT;
		}
		if (now >= next) {
			progress(mp, info_path, &t);
			*ret_told = true;
			next = now + PROGRESS_EVERY_MS;
		}
		mono_sleep_ms(POLL_MS);
	}
}

/* fusermount3 -u @mp (umount(2) if there is no fusermount3). 0 or -1. */
static int unmount(const char *mp)
{
	fflush(stderr);
	pid_t child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		execlp("fusermount3", "fusermount3", "-u", mp, (char *)NULL);
		_exit(errno == ENOENT ? 127 : 126);
	}
	int st;
	while (waitpid(child, &st, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return umount2(mp, 0) == 0 ? 0 : -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Whether process @pid has ended (gone, or a zombie nobody reaped). */
static bool pid_ended(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return true;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')'); /* "PID (COMM) STATE ..." */
	return rp && (rp[2] == 'Z' || rp[2] == 'X');
}

/* Whether the daemon @pid no longer holds the lock at @lock_path. */
static bool lock_let_go(const char *lock_path, pid_t pid)
{
	struct holder_record r;
	bool other = false;
	if (holder_read(lock_path, &r) == 0) {
		other = pid > 0 && r.pid != pid;
		holder_record_release(&r);
	}
	int fd = open(lock_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	bool free_now = flock(fd, LOCK_SH | LOCK_NB) == 0;
	close(fd); /* and the lock with it */
	return free_now || other;
}

/* Waits for the daemon to exit. true if it did. */
static bool wait_daemon(const char *mp, pid_t pid, const char *lock_path)
{
	long long start = mono_ms();
	bool told = false;
	for (;;) {
		if ((pid > 0 && pid_ended(pid)) || lock_let_go(lock_path, pid))
			return true;
		long long now = mono_ms();
		if (now - start >= HOLDER_WAIT_MS)
			return false;
		if (!told && now - start >= PROGRESS_AFTER_MS) {
			log_stderr("osbfs: %s unmounted; waiting for osbfs "
				   "(pid %d) to finish uploading",
				   mp, (int)pid);
			told = true;
		}
		mono_sleep_ms(POLL_MS);
	}
}

static void name_pending(const struct pending *p)
{
	for (size_t i = 0; i < p->n; i++)
		log_stderr("  %s", p->paths[i]);
	if (p->total > p->n)
		log_stderr("  ... and %zu more", p->total - p->n);
}

/* The report once the daemon is gone; the exit status. */
static int report(const char *mp, const struct minfo *mi, const char *lock)
{
	struct holder_record r;
	int rc = holder_read(lock, &r);
	const struct pending *p = &mi->pending;
	bool known = !rc && r.pid == mi->pid && r.state == HOLDER_EXITED;

	if (known)
		p = &r.pending;
	if (!known && !rc && r.pid != mi->pid)
		log_stderr(
			"osbfs: osbfs (pid %d) has taken over %s and uploads "
			"what was left",
			(int)r.pid, mi->cache_dir);
	else if (!known)
		log_stderr(
			"osbfs: osbfs (pid %d) ended before it could say what "
			"it uploaded; at unmount this was pending:",
			(int)mi->pid);
	int status = 0;
	if (p->total) {
		if (known)
			log_stderr("osbfs: %zu file(s) written to %s did not "
				   "reach "
				   "sandbox %s:",
				   p->total, mp, mi->sandbox_id);
		name_pending(p);
		log_stderr(
			"osbfs: kept in %s; the next mount of sandbox %s with "
			"the same cache_dir uploads them",
			mi->cache_dir, mi->sandbox_id);
		status = 1;
	} else if (!known) {
		log_stderr("  (nothing)");
	}
	if (!rc)
		holder_record_release(&r);
	return status;
}

int umount_run(const struct osbfs_options *o)
{
	char mp[PATH_MAX], ctl_dir[PATH_MAX + 256];
	char info_path[PATH_MAX + 300], ctl_path[PATH_MAX + 300];
	char lock[PATH_MAX + 8];
	struct minfo mi;

	if (!realpath(o->mountpoint, mp)) {
		log_stderr("osbfs: %s: %s", o->mountpoint, strerror(errno));
		return 2;
	}
	if (!holder_is_mounted(mp, NULL)) {
		log_stderr("osbfs: %s is not mounted", mp);
		return 2;
	}
	snprintf(ctl_dir, sizeof(ctl_dir), "%s/%s",
		 strcmp(mp, "/") == 0 ? "" : mp, o->control_dir);
	snprintf(info_path, sizeof(info_path), "%s/info", ctl_dir);
	snprintf(ctl_path, sizeof(ctl_path), "%s/ctl", ctl_dir);
	int err = info_read(info_path, &mi);
	if (err || !mi.cache_dir[0]) {
		log_stderr(
			"osbfs: %s is not an osbfs mount: %s: %s (for a mount "
			"made with -o control_dir=NAME, give that option "
			"too)",
			mp, info_path, err ? strerror(err) : "no cache dir");
		if (!err)
			pending_release(&mi.pending);
		return 2;
	}
	snprintf(lock, sizeof(lock), "%s/lock", mi.cache_dir);

	bool told = false;
	int sync_err = sync_mount(mp, ctl_path, info_path, &told);
	if (sync_err == ETIMEDOUT)
		log_stderr("osbfs: %s: the uploads did not finish within %d s; "
			   "unmounting anyway",
			   mp, SYNC_WAIT_MS / 1000);
	else if (sync_err && sync_err != EIO)
		log_stderr("osbfs: %s: sync: %s", ctl_path, strerror(sync_err));
	/* what is pending after the sync, should the daemon not say */
	struct minfo after;
	if (info_read(info_path, &after) == 0) {
		pending_release(&mi.pending);
		mi.pending = after.pending;
	}

	int status;
	if (unmount(mp) != 0) {
		log_stderr("osbfs: %s stays mounted (see above); %s", mp,
			   sync_err ? "some files are not in the sandbox yet" :
				      "the sandbox has every file written");
		status = 1;
	} else if (!wait_daemon(mp, mi.pid, lock)) {
		log_stderr(
			"osbfs: osbfs (pid %d) is still uploading after %d s; "
			"it goes on in the background (its log: syslog)",
			(int)mi.pid, HOLDER_WAIT_MS / 1000);
		status = 1;
	} else {
		status = report(mp, &mi, lock);
		if (!status && told)
			log_stderr("osbfs: %s unmounted; sandbox %s has every "
				   "file "
				   "written",
				   mp, mi.sandbox_id);
	}
	pending_release(&mi.pending);
	return status;
}

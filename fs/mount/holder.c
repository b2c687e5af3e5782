/*
 * holder.c - the cache dir's lock file: who holds it, and waiting for a
 * daemon that was unmounted and is finishing its uploads (see holder.h).
 *
 * The record is rewritten in place (pwrite, then ftruncate), never
 * truncated first, and ends with an "end" line: a reader that finds no
 * "end" read it half-written and reads again.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hex.h"
#include "holder.h"
#include "log.h"
#include "node.h"

#define MAGIC "osbfs-holder 1"
/* a record bigger than this is not one of ours */
#define RECORD_MAX (4 << 20)
#define POLL_MS 100
/* how long an unreadable record may stay so before we give up on it
 * (another program's lock, or an osbfs that writes none) */
#define UNKNOWN_POLLS 20

static const char *const state_names[] = {
	[HOLDER_STARTING] = "starting",
	[HOLDER_MOUNTED] = "mounted",
	[HOLDER_UNMOUNTED] = "unmounted",
	[HOLDER_EXITED] = "exited",
};

const char *holder_state_name(enum holder_state st)
{
	return state_names[st];
}

/* ---- /proc/self/mountinfo ---- */

/* Undoes mountinfo's octal escapes (\040 for a space...) in place. */
static void unescape_octal(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' &&
		    r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 +
				      (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* The device of the topmost mount at @mountpoint, if @dev is NULL; or
 * whether one of device @dev is there. */
static bool find_mount(const char *mountpoint, const char *dev, char *ret_dev,
		       size_t dev_size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	while (getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJOR:MINOR ROOT MOUNTPOINT ... */
		char *save = NULL;
		char *fld[5];
		int n = 0;
		for (char *t = strtok_r(line, " ", &save); t && n < 5;
		     t = strtok_r(NULL, " ", &save))
			fld[n++] = t;
		if (n < 5)
			continue;
		unescape_octal(fld[4]);
		if (strcmp(fld[4], mountpoint) != 0)
			continue;
		if (dev && strcmp(fld[2], dev) == 0) {
			found = true;
			break;
		}
		if (!dev) {
			found = true;
			if (ret_dev)
				snprintf(ret_dev, dev_size, "%s", fld[2]);
		}
	}
	free(line);
	fclose(f);
	return found;
}

bool holder_is_mounted(const char *mountpoint, const char *dev)
{
	return mountpoint && find_mount(mountpoint, dev, NULL, 0);
}

/* ---- the record ---- */

void holder_record_release(struct holder_record *r)
{
	free(r->mountpoint);
	r->mountpoint = NULL;
	pending_release(&r->pending);
}

static int parse_state(const char *s, enum holder_state *ret)
{
	for (size_t i = 0; i < sizeof(state_names) / sizeof(*state_names);
	     i++) {
		if (strcmp(s, state_names[i]) == 0) {
			*ret = (enum holder_state)i;
			return 0;
		}
	}
	return -EINVAL;
}

static int pending_add(struct pending *p, char *path)
{
	char **v = realloc(p->paths, (p->n + 1) * sizeof(*v));
	if (!v) {
		free(path);
		return -ENOMEM;
	}
	p->paths = v;
	p->paths[p->n++] = path;
	return 0;
}

/* One "KEY VALUE" line into @r. */
static int parse_line(struct holder_record *r, char *key, char *val)
{
	char *path;
	if (strcmp(key, "pid") == 0) {
		r->pid = (pid_t)strtol(val, NULL, 10);
	} else if (strcmp(key, "state") == 0) {
		return parse_state(val, &r->state);
	} else if (strcmp(key, "mountpoint") == 0) {
		free(r->mountpoint);
		r->mountpoint = hex_decode_dup(val, strlen(val));
		return r->mountpoint ? 0 : -EINVAL;
	} else if (strcmp(key, "dev") == 0) {
		snprintf(r->dev, sizeof(r->dev), "%s", val);
	} else if (strcmp(key, "pending") == 0) {
		path = hex_decode_dup(val, strlen(val));
		if (!path)
			return -EINVAL;
		r->pending.total++;
		return pending_add(&r->pending, path);
	} else if (strcmp(key, "more") == 0) {
		r->pending.total += strtoul(val, NULL, 10);
	}
	return 0; /* an unknown key: from a later version */
}

int holder_read(const char *path, struct holder_record *ret)
{
	memset(ret, 0, sizeof(*ret));
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0, total = 0;
	ssize_t n;
	int rc = -EINVAL, lines = 0;
	while (rc == -EINVAL && (n = getline(&line, &cap, f)) > 0) {
		total += (size_t)n;
		if (total > RECORD_MAX || line[n - 1] != '\n')
			break;
		line[n - 1] = '\0';
		if (lines++ == 0) {
			if (strcmp(line, MAGIC) != 0)
				break;
			continue;
		}
		if (strcmp(line, "end") == 0) {
			rc = 0;
			break;
		}
		char *sp = strchr(line, ' ');
		if (!sp)
			break;
		*sp = '\0';
		int prc = parse_line(ret, line, sp + 1);
		if (prc == -ENOMEM) {
			rc = prc;
			break;
		}
		if (prc)
			break;
	}
	free(line);
	fclose(f);
	if (rc)
		holder_record_release(ret);
	return rc;
}

int holder_set(struct holder *h, enum holder_state st, const struct pending *p)
{
	char *buf = NULL;
	size_t len = 0;

	if (h->fd < 0)
		return 0;
	if (st == HOLDER_MOUNTED && h->mountpoint_abs)
		find_mount(h->mountpoint_abs, NULL, h->dev, sizeof(h->dev));
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return -ENOMEM;
	fprintf(f, MAGIC "\npid %d\nstate %s\n", (int)getpid(),
		state_names[st]);
	if (h->mountpoint_abs) {
		fputs("mountpoint ", f);
		hex_put(f, h->mountpoint_abs);
		fputc('\n', f);
	}
	if (h->dev[0])
		fprintf(f, "dev %s\n", h->dev);
	for (size_t i = 0; p && i < p->n; i++) {
		fputs("pending ", f);
		hex_put(f, p->paths[i]);
		fputc('\n', f);
	}
	if (p && p->total > p->n)
		fprintf(f, "more %zu\n", p->total - p->n);
	fputs("end\n", f);
	if (fclose(f) != 0) {
		free(buf);
		return -ENOMEM;
	}
	int rc = 0;
	ssize_t w = pwrite(h->fd, buf, len, 0);
	if (w >= 0 && (size_t)w != len)
		rc = -EIO;
	else if (w < 0 || ftruncate(h->fd, (off_t)len) != 0)
		rc = -errno;
	free(buf);
	return rc;
}

/* ---- taking it ---- */

/* Whether the daemon of @r still serves a mount (or is about to). */
static bool record_is_live(const struct holder_record *r)
{
	if (r->state == HOLDER_STARTING)
		return true;
	return r->state == HOLDER_MOUNTED &&
	       holder_is_mounted(r->mountpoint, r->dev[0] ? r->dev : NULL);
}

/*
 * One look at who holds the lock at @path: 0 to wait for it (it is
 * finishing), -EBUSY (with @msg) when it is live, or when it has written
 * nothing readable for a while (*unknown counts the looks).
 */
static int judge_holder(const char *dir, const char *path, pid_t *told,
			long wait_ms, int *unknown, char *msg, size_t msg_size)
{
	struct holder_record r;
	int rc = holder_read(path, &r);
	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		if (++*unknown < UNKNOWN_POLLS)
			return 0;
		snprintf(msg, msg_size,
			 "cache dir %s is in use by another osbfs process",
			 dir);
		return -EBUSY;
	}
	*unknown = 0;
	const char *mp = r.mountpoint ? r.mountpoint : "?";
	if (record_is_live(&r)) {
		snprintf(msg, msg_size,
			 "cache dir %s is in use by osbfs (pid %d), %s at %s "
			 "(unmount it first, or give this mount another "
			 "cache_dir)",
			 dir, (int)r.pid,
			 r.state == HOLDER_STARTING ? "mounting" : "mounted",
			 mp);
		rc = -EBUSY;
	} else if (r.pid != *told) {
		*told = r.pid;
		log_info(
			"waiting for osbfs (pid %d) to exit: it was unmounted "
			"from %s and is still uploading what was written there "
			"from cache dir %s (waiting at most %ld s)",
			(int)r.pid, mp, dir, wait_ms / 1000);
	}
	holder_record_release(&r);
	return rc;
}

/*
 * Takes the lock of the slot at @dir: waits (up to h->wait_ms) while its
 * holder is finishing, fails with -EBUSY when it is live (judge_holder).
 */
static int take_slot(struct holder *h, const char *dir, char *msg,
		     size_t msg_size)
{
	char path[PATH_MAX + 8];
	pid_t told = 0;
	int unknown = 0, rc = 0;

	snprintf(path, sizeof(path), "%s/lock", dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(msg, msg_size, "cache dir %s: %s", dir, strerror(-rc));
		return rc;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(msg, msg_size, "cache dir %s: cannot open %s: %s", dir,
			 path, strerror(-rc));
		return rc;
	}
	long long deadline = mono_ms() + h->wait_ms;
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			rc = -errno;
			snprintf(msg, msg_size,
				 "cache dir %s: cannot lock %s: %s", dir, path,
				 strerror(-rc));
			break;
		}
		rc = judge_holder(dir, path, &told, h->wait_ms, &unknown, msg,
				  msg_size);
		if (!rc && mono_ms() >= deadline) {
			snprintf(msg, msg_size,
				 "cache dir %s is still in use by osbfs (pid "
				 "%d) "
				 "after %ld s: it was unmounted and is still "
				 "uploading; mount again once it has exited",
				 dir, (int)told, h->wait_ms / 1000);
			rc = -EBUSY;
		}
		if (rc)
			break;
		mono_sleep_ms(POLL_MS);
	}
	if (rc) {
		close(fd);
		return rc;
	}
	h->fd = fd;
	if (told)
		log_info("osbfs (pid %d) has exited; going on", (int)told);
	rc = holder_set(h, HOLDER_STARTING, NULL);
	if (rc)
		snprintf(msg, msg_size, "cache dir %s: cannot write %s: %s",
			 dir, path, strerror(-rc));
	return rc;
}

void holder_slot_dir(const char *base, int i, char *buf, size_t size)
{
	if (i == 0)
		snprintf(buf, size, "%s", base);
	else
		snprintf(buf, size, "%s/" HOLDER_SLOTS_DIR "/%d", base, i);
}

int holder_try(const char *dir)
{
	char path[PATH_MAX + 8];

	snprintf(path, sizeof(path), "%s/lock", dir);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno == EINTR)
			continue;
		int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(fd);
		return rc;
	}
	return fd;
}

enum slot_kind { SLOT_FREE, SLOT_LIVE, SLOT_FINISHING };

/* What slot @dir is now: free (no lock, or nobody holds it), live (a
 * mount, one starting, or a holder that wrote nothing readable yet) or
 * finishing (unmounted, uploading what is left). */
static enum slot_kind slot_kind(const char *dir, pid_t *ret_pid,
				char **ret_mountpoint)
{
	char path[PATH_MAX + 8];
	struct holder_record r;

	int fd = holder_try(dir);
	if (fd >= 0 || fd == -ENOENT) {
		if (fd >= 0)
			close(fd);
		return SLOT_FREE;
	}
	snprintf(path, sizeof(path), "%s/lock", dir);
	if (holder_read(path, &r) != 0)
		return SLOT_LIVE;
	enum slot_kind k = record_is_live(&r) ? SLOT_LIVE : SLOT_FINISHING;
	*ret_pid = r.pid;
	if (ret_mountpoint && !*ret_mountpoint) {
		*ret_mountpoint = r.mountpoint;
		r.mountpoint = NULL;
	}
	holder_record_release(&r);
	return k;
}

/* Makes BASE/mounts for the slots past the first. */
static int make_slots_dir(const char *base, char *msg, size_t msg_size)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/" HOLDER_SLOTS_DIR, base);
	if (mkdir(path, 0700) == 0 || errno == EEXIST)
		return 0;
	int rc = -errno;
	snprintf(msg, msg_size, "cache dir %s: %s", path, strerror(-rc));
	return rc;
}

/*
 * One look at every slot: waits for (and takes) the first one whose
 * daemon is finishing, else takes the first free one. -EAGAIN when
 * another mount took that one first; -EBUSY when all are live.
 */
static int take_any(struct holder *h, const char *base, int *ret_slot,
		    char *msg, size_t msg_size)
{
	char dir[PATH_MAX];
	char *live_mp = NULL;
	pid_t live_pid = 0, pid;
	int free_slot = -1, finishing = -1, rc;

	for (int i = 0; i < HOLDER_SLOTS && finishing < 0; i++) {
		holder_slot_dir(base, i, dir, sizeof(dir));
		pid = 0;
		switch (slot_kind(dir, &pid, &live_mp)) {
		case SLOT_FREE:
			if (free_slot < 0)
				free_slot = i;
			break;
		case SLOT_FINISHING:
			finishing = i;
			break;
		case SLOT_LIVE:
			if (!live_pid)
				live_pid = pid;
			break;
		}
	}
	int slot = finishing >= 0 ? finishing : free_slot;
	if (slot < 0) {
		snprintf(msg, msg_size,
			 "cache dir %s is in use by %d mounts of this sandbox "
			 "already (the most at once), one by osbfs (pid %d) at "
			 "%s; unmount one first, or give this mount another "
			 "cache_dir",
			 base, HOLDER_SLOTS, (int)live_pid,
			 live_mp ? live_mp : "?");
		free(live_mp);
		return -EBUSY;
	}
	free(live_mp);
	rc = slot ? make_slots_dir(base, msg, msg_size) : 0;
	holder_slot_dir(base, slot, dir, sizeof(dir));
	if (!rc)
		rc = take_slot(h, dir, msg, msg_size);
	/* a free slot another mount took meanwhile: look again */
	if (rc == -EBUSY && slot != finishing)
		rc = -EAGAIN;
	*ret_slot = slot;
	return rc;
}

int holder_take(struct holder *h, const char *base, char **ret_dir, char *msg,
		size_t msg_size)
{
	char abs[PATH_MAX];
	char dir[PATH_MAX];
	int rc = -EAGAIN, slot = 0;

	h->fd = -1;
	h->dev[0] = '\0';
	*ret_dir = NULL;
	if (h->mountpoint && !h->mountpoint_abs) {
		h->mountpoint_abs = strdup(
			realpath(h->mountpoint, abs) ? abs : h->mountpoint);
		if (!h->mountpoint_abs)
			return -ENOMEM;
	}
	for (int tries = 0; rc == -EAGAIN && tries < 2 * HOLDER_SLOTS; tries++)
		rc = take_any(h, base, &slot, msg, msg_size);
	if (rc == -EAGAIN) {
		snprintf(msg, msg_size,
			 "cache dir %s: other mounts of this sandbox kept "
			 "taking each free slot first",
			 base);
		rc = -EBUSY;
	}
	if (rc)
		return rc;
	holder_slot_dir(base, slot, dir, sizeof(dir));
	*ret_dir = strdup(dir);
	if (!*ret_dir) {
		holder_release(h);
		return -ENOMEM;
	}
	return 0;
}

void holder_release(struct holder *h)
{
	if (!h)
		return;
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	free(h->mountpoint_abs);
	h->mountpoint_abs = NULL;
}

/* ---- what is pending ---- */

void pending_release(struct pending *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->paths[i]);
	free(p->paths);
	memset(p, 0, sizeof(*p));
}

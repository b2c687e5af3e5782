/*
 * holder.h - who uses a cache dir: the daemon that holds its lock file,
 * CACHE_DIR/<sandbox id>/lock.
 *
 * One daemon at a time works on a cache dir's journal and files: it holds
 * an flock on the lock file from cache_init() to its exit, and writes in
 * it who it is and how far it got, so that a new mount, or `osbfs -u`,
 * can tell a live mount from a daemon that was unmounted and is finishing
 * its last uploads:
 *
 *   osbfs-holder 1
 *   pid 1234
 *   state mounted            starting, mounted, unmounted or exited
 *   mountpoint 2f6d6e74      (hex) where it is or was mounted
 *   dev 0:53                 the mount's device, once mounted
 *   pending 2f776f726b...    (hex, once exited) a file that never reached
 *                            the sandbox; at most HOLDER_PENDING_MAX
 *   more 3                   how many more there were
 *   end
 *
 * A later change that lets several live mounts share one sandbox, each
 * with its own journal, gives each its own directory and lock file: the
 * functions here take the directory, and know nothing of the sandbox.
 */
#ifndef OSBFS_HOLDER_H
#define OSBFS_HOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* how long a daemon's last uploads may take once it is unmounted */
#define HOLDER_FINISH_MS 60000
/* how long a new mount, or osbfs -u, waits for such a daemon to exit */
#define HOLDER_WAIT_MS (HOLDER_FINISH_MS + 30000)
/* the most pending paths the lock file and .osb/info name */
#define HOLDER_PENDING_MAX 100

enum holder_state {
	HOLDER_STARTING,  /* lock taken, not mounted yet */
	HOLDER_MOUNTED,
	HOLDER_UNMOUNTED, /* the mount is gone; uploading what is left */
	HOLDER_EXITED,    /* done: what is pending stays for the next mount */
};

/* This daemon's hold on a cache dir. */
struct holder {
	/* set by the caller before holder_take() */
	const char *mountpoint; /* where this daemon mounts, or NULL */
	long wait_ms;           /* how long to wait for a finishing daemon */
	/* set by holder_take() */
	int fd;                 /* the lock file, flock'ed; -1 if not held */
	char *mountpoint_abs;   /* @mountpoint made absolute */
	char dev[32];           /* the mount's "major:minor", once mounted */
};

/* Dirty files' sandbox paths: the first HOLDER_PENDING_MAX. */
struct pending {
	char **paths;
	size_t n;
	size_t total;           /* how many there are in all */
};

/*
 * holder_take() - takes DIR/lock for this process and records it as
 * starting. When another daemon holds it: if its mount is gone (it is
 * finishing its last uploads), waits up to h->wait_ms for it to exit,
 * saying on stderr which pid it waits for and why; if it is still
 * mounted (or mounting), fails at once. -EBUSY then, with a message
 * naming its pid and mount point in @msg; another -errno if the file
 * cannot be made. Not thread-safe (called once, at start).
 */
int holder_take(struct holder *h, const char *dir, char *msg,
		size_t msg_size);
/*
 * holder_set() - records this process (its pid: call it again after a
 * fork) in state @st; with HOLDER_MOUNTED, also the mount's device; with
 * @p, what is pending. 0 or -errno.
 */
int holder_set(struct holder *h, enum holder_state st,
	       const struct pending *p);
/* Lets the lock go (closes it). NULL-safe, idempotent. */
void holder_release(struct holder *h);

/* What a lock file says. */
struct holder_record {
	pid_t pid;
	enum holder_state state;
	char *mountpoint;       /* malloc'd, or NULL */
	char dev[32];
	struct pending pending;
};

/* Reads the lock file at @path (without locking it). -ENOENT, -EINVAL
 * (not a complete record: none yet, or being rewritten), -ENOMEM. */
int holder_read(const char *path, struct holder_record *ret);
void holder_record_release(struct holder_record *r);
/* "starting", "mounted"... */
const char *holder_state_name(enum holder_state st);

/* Whether @mountpoint (absolute) is a mount point in this mount
 * namespace; with @dev, one of that device. */
bool holder_is_mounted(const char *mountpoint, const char *dev);

void pending_release(struct pending *p);

#endif /* OSBFS_HOLDER_H */

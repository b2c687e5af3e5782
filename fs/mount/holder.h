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
 * Several mounts of one sandbox may share a cache dir, each with its own
 * slot: a directory with its own lock file, journal and files. The first
 * slot is CACHE_DIR/<sandbox id> itself, the others are its mounts/1 ...
 * mounts/15. A new mount takes the slot of a daemon that is finishing
 * (waiting for it), else the first free one; it also takes up what any
 * other free slot's journal still holds (cache_recover). The functions
 * here know nothing of the sandbox, nor of journals.
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
/* how many mounts of one sandbox may use one cache dir at once */
#define HOLDER_SLOTS 16
/* where the slots past the first are, below the first */
#define HOLDER_SLOTS_DIR "mounts"
/* the most pending paths the lock file and .osb/info name */
#define HOLDER_PENDING_MAX 100

enum holder_state {
	HOLDER_STARTING, /* lock taken, not mounted yet */
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
	int fd;               /* the lock file, flock'ed; -1 if not held */
	char *mountpoint_abs; /* @mountpoint made absolute */
	char dev[32];         /* the mount's "major:minor", once mounted */
};

/* Dirty files' sandbox paths: the first HOLDER_PENDING_MAX. */
struct pending {
	char **paths;
	size_t n;
	size_t total; /* how many there are in all */
};

/*
 * holder_take() - takes a slot of the cache dir @base for this process
 * and records it as starting; *@ret_dir (malloc'd) is the slot's
 * directory. A slot whose daemon was unmounted and is finishing its last
 * uploads comes first: it waits up to h->wait_ms for that daemon to exit,
 * saying on stderr which pid it waits for and why. Else the first slot
 * nobody holds. -EBUSY when every slot is held by a live mount (or the
 * wait ran out), with a message in @msg; another -errno if the slot
 * cannot be made. Not thread-safe (called once, at start).
 */
int holder_take(struct holder *h, const char *base, char **ret_dir, char *msg,
		size_t msg_size);
/* The directory of slot @i (0 .. HOLDER_SLOTS-1) of cache dir @base. */
void holder_slot_dir(const char *base, int i, char *buf, size_t size);
/*
 * holder_try() - the lock of the slot at @dir, flock'ed, if nobody holds
 * it: an fd to close when done. -EBUSY if someone does, -ENOENT if the
 * slot has no lock file.
 */
int holder_try(const char *dir);
/*
 * holder_set() - records this process (its pid: call it again after a
 * fork) in state @st; with HOLDER_MOUNTED, also the mount's device; with
 * @p, what is pending. 0 or -errno.
 */
int holder_set(struct holder *h, enum holder_state st, const struct pending *p);
/* Lets the lock go (closes it). NULL-safe, idempotent. */
void holder_release(struct holder *h);

/* What a lock file says. */
struct holder_record {
	pid_t pid;
	enum holder_state state;
	char *mountpoint; /* malloc'd, or NULL */
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

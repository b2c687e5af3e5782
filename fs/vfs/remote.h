/*
 * remote.h - the sandbox's files in POSIX terms, for the FUSE ops.
 *
 * Each call takes full sandbox paths and returns 0 or a negative errno
 * ready for FUSE (network trouble is EIO; the cause is logged with the
 * path). What execd's file API cannot do, or cannot reach, goes through a
 * shell command here: names holding '$' (execd expands it in every file
 * path), symlinks, times, statfs, a rename over an existing name (made
 * atomic with mv -T), special mode bits. Names that are not UTF-8 cannot
 * cross the JSON APIs: EILSEQ.
 */
#ifndef OSBFS_REMOTE_H
#define OSBFS_REMOTE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/statvfs.h>

#include "osbfs.h"

struct rdent {
	char *name;
	size_t name_len; /* bytes the sandbox sent for it: more than
			  * strlen(name) if they held a NUL */
	struct fattr attr;
	/* a scan's (remote_specials): the link count and the sandbox's
	 * inode number of a file with other names, else 0 */
	unsigned nlink;
	uint64_t ino;
};
void rdent_array_free(struct rdent *d, size_t n);

void fattr_from_stat(struct fattr *a, const struct osb_stat *st);
/* One line of `stat -c '%f %s %.9Y %.9Z %u %g'` into @a: 0 or -EPROTO
 * (owners as numbers: owners.h). */
int remote_parse_stat(const char *line, struct fattr *a);

/* @path's part below directory @dir ("a/b"; "" for "@dir/"), or NULL if
 * it is not below it (@dir itself is not). */
const char *path_below(const char *dir, const char *path);

int remote_stat(struct osbfs *fs, const char *path, struct fattr *ret);
/* The same by a command: slower, but the mode has the special bits
 * (mode_full), which the file API never reports. */
int remote_stat_full(struct osbfs *fs, const char *path, struct fattr *ret);
/*
 * remote_specials() - the files and directories below @dir, down to
 * @depth levels, that have setuid, setgid or sticky set: one command.
 * Each rdent's name is its path below @dir, its attr.mode the bits.
 * -ENOTSUP: the sandbox has no find; -ENOENT: @dir is gone.
 */
int remote_specials(struct osbfs *fs, const char *dir, int depth,
		    struct rdent **ret, size_t *ret_n);
/* Its command's output @out (changed in place), read: lines of a hex
 * mode and a hex path; any other line is skipped. For the tests. */
int remote_specials_parse(char *out, struct rdent **ret, size_t *ret_n);
int remote_list(struct osbfs *fs, const char *dir, struct rdent **ret,
		size_t *ret_n);
/*
 * remote_walk() - the entries of @dir down to @depth levels, cut after
 * @max of them (0: never; *ret_cut says if it was); each rdent's name is
 * then its path below @dir ("a/b"). A directory the file API cannot be
 * given is listed one level deep, with commands: *ret_depth is the depth
 * the answer covers.
 */
int remote_walk(struct osbfs *fs, const char *dir, int depth, size_t max,
		struct rdent **ret, size_t *ret_n, bool *ret_cut,
		int *ret_depth);
/*
 * remote_pull() - the regular files @names (relative to directory @dir)
 * packed into one tar archive by a command in the sandbox, downloaded
 * into @out (at most @max_bytes; *ret_size how many) and removed there:
 * a command, a download and a removal for many small files. A file gone
 * meanwhile is left out. -ENOTSUP: the sandbox has no tar; -EIO: tar
 * failed (a file changed while it was read); -errno.
 */
int remote_pull(struct osbfs *fs, const char *dir, char *const *names, size_t n,
		int64_t max_bytes, int out, int64_t *ret_size);
/* Bytes of a file that is only appended to (a job's output): a part of
 * the download may see it grow, not shrink. */
int remote_download(struct osbfs *fs, const char *path, int64_t off,
		    int64_t len, osb_sink_fn sink, void *arg,
		    int64_t *ret_size);
/* Bytes of the version of @path that is @size bytes long: -ESTALE (not
 * logged: the caller says what it means) if the sandbox has another. */
int remote_fetch(struct osbfs *fs, const char *path, int64_t off, int64_t len,
		 int64_t size, osb_sink_fn sink, void *arg);

struct rupload {
	const char *path;
	int fd;
	int64_t size;
	mode_t mode;
	const char *owner; /* NULL or "" = execd's user */
	const char *group;
};
/* Whole files, in one request when all paths are plain. */
int remote_upload(struct osbfs *fs, const struct rupload *u, size_t n);

/* A directory to make (mkdir -p) or give a mode, with its owner. */
struct rdir {
	const char *path;
	mode_t mode;
	const char *owner; /* NULL or "" = execd's user */
	const char *group;
};
/* Makes each directory (those that exist are given the mode and owner),
 * in one request when all paths and modes are plain; no EEXIST. */
int remote_dirs(struct osbfs *fs, const struct rdir *d, size_t n);
/* Removes an (empty, checked by the caller) directory. */
int remote_rmdir(struct osbfs *fs, const char *path);
int remote_unlink(struct osbfs *fs, const char *path, bool symlink);
/* Removes the files at @paths, many in one request. */
int remote_unlink_many(struct osbfs *fs, char *const *paths, size_t n);
/* rename(2); @replace: the destination may exist and is replaced;
 * @symlink: the source is a symlink (moved itself, even dangling). */
int remote_rename(struct osbfs *fs, const char *src, const char *dst,
		  bool replace, bool symlink);
int remote_chmod(struct osbfs *fs, const char *path, mode_t mode,
		 const char *owner, const char *group);
/* chown of @path to @owner and @group (names or numbers, as execd
 * reports them: owners.h), by command; @nofollow: a symlink itself. */
int remote_chown(struct osbfs *fs, const char *path, const char *owner,
		 const char *group, bool nofollow);

struct rtimes {
	const char *path;
	struct timespec mtime;
	struct timespec atime; /* tv_nsec UTIME_OMIT: leave it */
	bool nofollow;         /* a symlink itself */
	mode_t chmod;          /* mode to set after, or 0 */
	bool do_chmod;
	/* if not NULL: the ctime the path has after all that (as a stat or
	 * listing would say it), {0, 0} when not known */
	struct timespec *ret_ctime;
	/* if not NULL (and ret_ctime is not): the mode it has then, type
	 * and all twelve bits (special.h), 0 when not known */
	mode_t *ret_mode;
};
/* Sets times (and modes) of many paths with one command, which also says
 * the ctime and mode each is left with (ret_ctime, ret_mode). */
int remote_times(struct osbfs *fs, const struct rtimes *t, size_t n);

/*
 * remote_unpack() - new files @u, with their times @t (the same order),
 * sent as one tar archive written into @tmp_fd (an empty temporary file
 * here): one upload of it, one command (at most once) that unpacks it
 * with the modes, owners and times and removes it. 0; -ENOTSUP when the
 * sandbox has no tar; -EAGAIN if a file got shorter meanwhile; else an
 * error after which nothing is known of what was unpacked.
 */
int remote_unpack(struct osbfs *fs, const struct rupload *u,
		  const struct rtimes *t, size_t n, int tmp_fd);

int remote_symlink(struct osbfs *fs, const char *target, const char *path);
/* A hard link @path to the file @src, by a command run at most once. */
int remote_link(struct osbfs *fs, const char *src, const char *path);
/* Hard links @paths[i] to the files @srcs[i], made after those files'
 * upload, in one command run at most once: a name that is a link to its
 * file already is left, anything else there is replaced, and missing
 * directories on the way are made. */
int remote_links_later(struct osbfs *fs, char *const *srcs, char *const *paths,
		       size_t n);
/* A copy of the file @src at the new name @path (mode and times kept),
 * by a command run at most once. */
int remote_copy(struct osbfs *fs, const char *src, const char *path);
int remote_readlink(struct osbfs *fs, const char *path, char **ret);
int remote_statfs(struct osbfs *fs, const char *path, struct statvfs *ret);

/* How a command may be sent again after a failure that may have come
 * after it ran (a lost answer, a broken stream, a 5xx). */
enum shell_kind {
	SHELL_IDEMPOTENT, /* reads, or an effect that is the same twice */
	SHELL_ONCE,       /* takes effect at most once, whatever happens:
			     wrapped with an operation id (remote.c) */
	SHELL_OPTIONAL,   /* a read that only saves time: tried once, and a
			     failure says nothing of the server's health */
};
/* The text of @script wrapped to run at most once under operation @id,
 * its records in @ops_dir (remote.c says how); @sweep also removes old
 * records. malloc'd; NULL on ENOMEM. For SHELL_ONCE, and the tests. */
char *remote_once_script(const char *ops_dir, const char *id,
			 const char *script, bool sweep);
/* Runs @script with bash in the sandbox; output captured (up to 64 MiB).
 * Transient failures are retried (a few seconds at most). Returns 0 and
 * the exit code, or a negative errno (EIO) if it could not run. */
int remote_shell(struct osbfs *fs, const char *script, enum shell_kind kind,
		 char **ret_out, char **ret_err, int *ret_exit);

/* Called before every sandbox request: resumes a paused sandbox. */
int remote_enter(struct osbfs *fs);
/* Marks activity (for idle_pause and keepalive). */
void remote_touch_activity(struct osbfs *fs);

#endif /* OSBFS_REMOTE_H */

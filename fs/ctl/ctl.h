/*
 * ctl.h - the control tree MOUNTPOINT/.osb/ (README.md, "Running
 * commands: the control tree"): virtual files that drive the sandbox, its jobs
 * and its code contexts. Its inodes live in their own range; ops.c hands every
 * request on one of them to the functions below.
 */
#ifndef OSBFS_CTL_H
#define OSBFS_CTL_H

#include <fuse_lowlevel.h>
#include <stdbool.h>

struct osbfs;

int ctl_init(struct osbfs *fs);
/* Starts the job monitor (after daemonizing). */
int ctl_start(struct osbfs *fs);
void ctl_stop(struct osbfs *fs);
void ctl_release_all(struct osbfs *fs);
/* Whether a job in the mount's table runs: a use of the sandbox that
 * idle_pause waits for. */
bool ctl_jobs_running(struct osbfs *fs);

bool ctl_is_ino(fuse_ino_t ino);
fuse_ino_t ctl_root_ino(void);

/* Lookup of the control dir's name in the mount's root. The root's
 * listing leaves the control dir out, as ZFS its .zfs: a program that
 * walks the mount (grep -r, tar, find, indexers, backups) never enters
 * it, while a path naming it (cd, ls, cat) works. */
void ctl_lookup_root(fuse_req_t req);
void ctl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void ctl_forget(fuse_ino_t ino, uint64_t nlookup);
void ctl_getattr(fuse_req_t req, fuse_ino_t ino);
void ctl_access(fuse_req_t req, fuse_ino_t ino, int mask);
void ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set);
void ctl_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ctl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		 struct fuse_file_info *fi, bool plus);
void ctl_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ctl_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode);
void ctl_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ctl_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
/* Both parents in the control tree (one outside it: EXDEV, the caller's). */
void ctl_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		fuse_ino_t newparent, const char *newname, unsigned int flags);
void ctl_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		mode_t mode, struct fuse_file_info *fi);
void ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ctl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	      struct fuse_file_info *fi);
void ctl_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
	       off_t off, struct fuse_file_info *fi);
void ctl_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ctl_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ctl_readlink(fuse_req_t req, fuse_ino_t ino);

#endif /* OSBFS_CTL_H */

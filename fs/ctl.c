/*
 * ctl.c - the control tree (placeholder until the control tree lands:
 * the directory exists and is empty).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl.h"
#include "osbfs.h"

#define CTL_INO_BASE (1ull << 48)

int ctl_init(struct osbfs *fs) { (void)fs; return 0; }
int ctl_start(struct osbfs *fs) { (void)fs; return 0; }
void ctl_stop(struct osbfs *fs) { (void)fs; }
void ctl_release_all(struct osbfs *fs) { (void)fs; }
bool ctl_is_ino(fuse_ino_t ino) { return ino >= CTL_INO_BASE; }
fuse_ino_t ctl_root_ino(void) { return CTL_INO_BASE; }
static void root_stat(struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = CTL_INO_BASE;
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
}
void ctl_root_entry(struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = CTL_INO_BASE;
	root_stat(&e->attr);
}
void ctl_root_entry_taken(void) {}
void ctl_lookup_root(fuse_req_t req)
{
	struct fuse_entry_param e;
	ctl_root_entry(&e);
	fuse_reply_entry(req, &e);
}
void ctl_lookup(fuse_req_t req, fuse_ino_t p, const char *n) { (void)p; (void)n; fuse_reply_err(req, ENOENT); }
void ctl_forget(fuse_ino_t ino, uint64_t n) { (void)ino; (void)n; }
void ctl_getattr(fuse_req_t req, fuse_ino_t ino)
{
	struct stat st;
	(void)ino;
	root_stat(&st);
	fuse_reply_attr(req, &st, 1.0);
}
void ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int t) { (void)ino; (void)a; (void)t; fuse_reply_err(req, EPERM); }
void ctl_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) { (void)ino; fuse_reply_open(req, fi); }
void ctl_readdir(fuse_req_t req, fuse_ino_t ino, size_t s, off_t o, struct fuse_file_info *fi, bool p) { (void)ino; (void)s; (void)o; (void)fi; (void)p; fuse_reply_buf(req, NULL, 0); }
void ctl_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) { (void)ino; (void)fi; fuse_reply_err(req, 0); }
void ctl_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m) { (void)p; (void)n; (void)m; fuse_reply_err(req, EPERM); }
void ctl_rmdir(fuse_req_t req, fuse_ino_t p, const char *n) { (void)p; (void)n; fuse_reply_err(req, EPERM); }
void ctl_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, struct fuse_file_info *fi) { (void)p; (void)n; (void)m; (void)fi; fuse_reply_err(req, EPERM); }
void ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) { (void)ino; (void)fi; fuse_reply_err(req, EISDIR); }
void ctl_read(fuse_req_t req, fuse_ino_t ino, size_t s, off_t o, struct fuse_file_info *fi) { (void)ino; (void)s; (void)o; (void)fi; fuse_reply_err(req, EIO); }
void ctl_write(fuse_req_t req, fuse_ino_t ino, const char *b, size_t s, off_t o, struct fuse_file_info *fi) { (void)ino; (void)b; (void)s; (void)o; (void)fi; fuse_reply_err(req, EIO); }
void ctl_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) { (void)ino; (void)fi; fuse_reply_err(req, 0); }
void ctl_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) { (void)ino; (void)fi; fuse_reply_err(req, 0); }
void ctl_readlink(fuse_req_t req, fuse_ino_t ino) { (void)ino; fuse_reply_err(req, EINVAL); }

/*
 * ops_xattr.c - setxattr, getxattr, listxattr, removexattr.
 *
 * The sandbox's API has no extended attributes, so the mount keeps those
 * of the user.* namespace itself (xattr.h), and no call here sends a
 * request, but a setxattr on a name whose type is not known yet (one
 * stat). security.*, trusted.* and system.* (POSIX ACLs) are refused
 * with ENOTSUP at once, as by a filesystem without them: ls -l, cp -a
 * and tar ask for them on every file. So are the control tree's files.
 * As on Linux, user.* is for regular files and directories only: a
 * symlink's is EPERM to set (the kernel says so before asking us too).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ops.h"
#include "xattr.h"

#define USER_PREFIX "user."

/* 0 if @name is one the mount keeps, else the errno to answer. */
static int name_ours(const char *name)
{
	size_t n = strlen(USER_PREFIX);
	if (strncmp(name, USER_PREFIX, n) != 0)
		return ENOTSUP;
	if (!name[n])
		return EINVAL;
	return strlen(name) > XATTR_NAME_LEN_MAX ? ERANGE : 0;
}

void xattr_name_gone(struct osbfs *fs, struct node *n)
{
	if (xattrs_empty(fs->xattrs))
		return;
	char *path = node_path(&fs->nodes, n);
	if (path)
		xattrs_drop(fs->xattrs, path);
	free(path);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct osbfs *fs = req_fs(req);
	struct held h = { 0 };
	struct fattr a;
	int e = ctl_is_ino(ino) ? ENOTSUP : name_ours(name);
	if (!e && size > XATTR_VALUE_MAX)
		e = E2BIG;
	int rc = e ? -e : held_get(fs, ino, &h);
	if (!rc)
		rc = node_attr(fs, &h, &a);
	if (!rc && a.type != OSB_FILE && a.type != OSB_DIR)
		rc = -EPERM;
	if (!rc)
		rc = xattrs_set(fs->xattrs, h.path, name, value, size, flags);
	fuse_reply_err(req, rc == -ESTALE ? ENOENT : -rc);
	held_put(fs, &h);
}

/* The path of @ino if it may have extended attributes: 0, 1 when it has
 * none for sure (nothing is kept), or -errno. */
static int xattr_target(struct osbfs *fs, fuse_ino_t ino, struct held *h)
{
	if (ctl_is_ino(ino))
		return -ENOTSUP;
	if (xattrs_empty(fs->xattrs))
		return 1;
	int rc = held_get(fs, ino, h);
	return rc == -ESTALE ? -ENOENT : rc;
}

/* Replies to a getxattr or listxattr asked with a buffer of @size bytes:
 * the size @rc (@size 0), @buf's @rc bytes, or the error -@rc. */
static void reply_sized(fuse_req_t req, ssize_t rc, size_t size,
			const char *buf)
{
	if (rc < 0)
		fuse_reply_err(req, (int)-rc);
	else if (!size)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct osbfs *fs = req_fs(req);
	struct held h = { 0 };
	char *buf = NULL;
	int e = name_ours(name);
	ssize_t rc = e ? -e : xattr_target(fs, ino, &h);
	if (rc == 1)
		rc = -ENODATA;
	if (!rc && size) {
		size = size < XATTR_VALUE_MAX ? size : XATTR_VALUE_MAX;
		buf = malloc(size);
		rc = buf ? 0 : -ENOMEM;
	}
	if (!rc)
		rc = xattrs_get(fs->xattrs, h.path, name, buf, size);
	reply_sized(req, rc, size, buf);
	free(buf);
	held_put(fs, &h);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct osbfs *fs = req_fs(req);
	struct held h = { 0 };
	char *buf = NULL;
	ssize_t rc = xattr_target(fs, ino, &h);
	if (!rc && size) {
		size = size < XATTR_NAMES_MAX ? size : XATTR_NAMES_MAX;
		buf = malloc(size);
		rc = buf ? 0 : -ENOMEM;
	}
	if (!rc)
		rc = xattrs_list(fs->xattrs, h.path, buf, size);
	else if (rc == 1)
		rc = 0;
	reply_sized(req, rc, size, buf);
	free(buf);
	held_put(fs, &h);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct osbfs *fs = req_fs(req);
	struct held h = { 0 };
	int e = name_ours(name);
	int rc = e ? -e : xattr_target(fs, ino, &h);
	if (rc == 1)
		rc = -ENODATA;
	if (!rc)
		rc = xattrs_remove(fs->xattrs, h.path, name);
	fuse_reply_err(req, -rc);
	held_put(fs, &h);
}

void op_xattr_register(struct fuse_lowlevel_ops *ops)
{
	ops->setxattr = op_setxattr;
	ops->getxattr = op_getxattr;
	ops->listxattr = op_listxattr;
	ops->removexattr = op_removexattr;
}

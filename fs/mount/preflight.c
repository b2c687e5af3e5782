/*
 * preflight.c - the local checks of a mount, before anything remote
 * (preflight.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "preflight.h"

static int check_mountpoint(const char *mp, char *msg, size_t size)
{
	struct stat st;
	if (stat(mp, &st) < 0) {
		int e = errno;
		snprintf(msg, size, "mountpoint %s: %s%s", mp, strerror(e),
			 e == ENOENT ? " (make it first: mkdir -p)" : "");
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(msg, size, "mountpoint %s is not a directory", mp);
		return -ENOTDIR;
	}
	if (geteuid() != 0 && access(mp, W_OK) < 0) {
		int e = errno;
		snprintf(msg, size,
			 "mountpoint %s: %s (a user mounts only on a directory "
			 "they may write to)",
			 mp, strerror(e));
		return -e;
	}
	return 0;
}

static int check_dev_fuse(char *msg, size_t size)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	int e = errno;
	if (e == ENOENT)
		snprintf(msg, size,
			 "/dev/fuse is missing: load the fuse module "
			 "(modprobe fuse), or give the container the device "
			 "(docker run --device /dev/fuse --cap-add SYS_ADMIN)");
	else
		snprintf(msg, size,
			 "/dev/fuse: %s (the user needs read and write access "
			 "to it; in a container, --device /dev/fuse)",
			 strerror(e));
	return -e;
}

int preflight_check(const struct osbfs_options *o, char *msg, size_t size)
{
	int rc = check_mountpoint(o->mountpoint, msg, size);
	if (!rc)
		rc = check_dev_fuse(msg, size);
	if (!rc)
		rc = cache_dir_check(o->cache_dir, msg, size);
	return rc;
}

/*
 * preflight.h - what a mount checks on this machine before it asks the
 * server for anything: a failure found later would leave a new sandbox
 * behind.
 */
#ifndef OSBFS_PREFLIGHT_H
#define OSBFS_PREFLIGHT_H

#include <stddef.h>

#include "options.h"

/*
 * preflight_check() - the mountpoint (a directory; writable by a user
 * who is not root, as fusermount3 wants), /dev/fuse (there, and open to
 * us) and the cache dir (made if missing, writable). 0, or a negative
 * errno with a one-line reason and what to do in @msg.
 */
int preflight_check(const struct osbfs_options *o, char *msg, size_t size);

#endif /* OSBFS_PREFLIGHT_H */

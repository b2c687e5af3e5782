/*
 * notify.h - the thread that tells the kernel what to forget (see
 * notify.c); fs_invalidate_all() (ops.h) feeds it.
 */
#ifndef OSBFS_NOTIFY_H
#define OSBFS_NOTIFY_H

#include "osbfs.h"

int notify_start(struct osbfs *fs);
void notify_stop(struct osbfs *fs);

#endif /* OSBFS_NOTIFY_H */

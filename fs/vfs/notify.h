/*
 * notify.h - the thread that tells the kernel what to forget (see
 * notify.c); fs_invalidate_all() (ops.h) and notify_inode() feed it.
 */
#ifndef OSBFS_NOTIFY_H
#define OSBFS_NOTIFY_H

#include "osbfs.h"

int notify_start(struct osbfs *fs);
/* Has the kernel drop its cached pages and attributes of inode @ino
 * (queued for the notifier's thread: safe inside a request handler). */
void notify_inode(struct osbfs *fs, fuse_ino_t ino);
/* Has the kernel forget the name @name in directory @parent (queued, as
 * notify_inode). */
void notify_entry(struct osbfs *fs, fuse_ino_t parent, const char *name);
void notify_stop(struct osbfs *fs);
/* Waits until the kernel was told everything queued so far, two seconds
 * at most (called from a request handler, the notifications could wait
 * on that very request: the bound keeps that from hanging). */
void notify_drain(struct osbfs *fs);

#endif /* OSBFS_NOTIFY_H */

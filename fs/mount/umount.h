/*
 * umount.h - `osbfs -u MOUNTPOINT`: unmount, and say whether the sandbox
 * has everything that was written (umount.c).
 */
#ifndef OSBFS_UMOUNT_H
#define OSBFS_UMOUNT_H

#include "options.h"

/* Runs the command; its exit status (0: everything reached the sandbox;
 * 1: something did not, or the mount stays; 2: not an osbfs mount).
 * Writes to stderr. */
int umount_run(const struct osbfs_options *o);

#endif /* OSBFS_UMOUNT_H */

/*
 * pull.h - the small files below a directory in one archive when reads
 * walk it (pull.c).
 */
#ifndef OSBFS_PULL_H
#define OSBFS_PULL_H

#include <stdbool.h>

#include "osbfs.h"

struct node;

/* Small file @n (held by the caller), of which nothing is cached, is to
 * be read: if this read and the one before show a walk of its directory,
 * the small files below the directory come in one archive, maybe @n's
 * among them. Whether an archive was asked for. Takes the node lock and
 * the cache's (the caller holds neither). */
bool pull_for_read(struct osbfs *fs, struct node *n);

#endif /* OSBFS_PULL_H */

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
 * be read: if a pull under way has it, waits for that; if this read and
 * the one before show a walk of its directory, the small files around
 * it come in one archive, maybe @n's among them, and if there are more,
 * a background puller goes on with them. Whether it may be here now.
 * Takes the node lock and the cache's (the caller holds neither). */
bool pull_for_read(struct osbfs *fs, struct node *n);
/* Stops the background puller (at unmount, before the nodes and the
 * cache go). */
void pull_stop(struct osbfs *fs);

#endif /* OSBFS_PULL_H */

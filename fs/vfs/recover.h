/*
 * recover.h - uploading what an earlier mount of this cache dir left
 * unsaved (recover.c).
 */
#ifndef OSBFS_RECOVER_H
#define OSBFS_RECOVER_H

struct osbfs;

/* Replays the journal left in the cache dir: each dirty file goes back
 * into the tree, due for upload now. Called once, before mounting. */
void recover_journal(struct osbfs *fs);

#endif /* OSBFS_RECOVER_H */

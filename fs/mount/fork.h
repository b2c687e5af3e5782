/*
 * fork.h - a mount's new sandbox made from a snapshot (-o snapshot=).
 */
#ifndef OSBFS_FORK_H
#define OSBFS_FORK_H

#include "osbfs.h"

/* The snapshot @ref names (-o snapshot=, or a restore's), into *@ret,
 * Ready: its id, else its name (one snapshot of it); one still Creating
 * is waited for (logged), within start_timeout. 0, or a negative errno
 * with a one-line reason in @msg, which starts with @what and @ref.
 * *@ret is released by the caller either way. */
int fork_snapshot(struct osbfs *fs, const char *what, const char *ref,
		  struct osb_snapshot *ret, char *msg, size_t msg_size);

/*
 * fork_check_found() - name= found sandbox @sb, there before: snapshot= is
 * not applied to it. 0 (logged) when it was made from that snapshot (its
 * id, or its name while the snapshot is there to ask; one gone cannot
 * be asked, and is taken, with a warning); -EEXIST with the reason in
 * @msg when it was made from an image or another snapshot.
 */
int fork_check_found(struct osbfs *fs, const struct osb_sandbox_info *sb,
		     char *msg, size_t msg_size);

#endif /* OSBFS_FORK_H */

/*
 * connect.h - the client and the sandbox a mount works on.
 */
#ifndef OSBFS_CONNECT_H
#define OSBFS_CONNECT_H

#include "osbfs.h"

/* A client from the options (API key from api_key_file or the
 * environment). 0, or a negative errno with the reason in @msg. */
int connect_client(struct osbfs_options *o, struct osb_client **ret, char *msg,
		   size_t msg_size);

/*
 * connect_sandbox() - the sandbox to mount: by id, by name label, or a
 * new one; waits until it runs and its execd answers, and makes the
 * mounted directory if missing. Sets fs->sb. *ret_info holds its last
 * known state; *ret_created whether this call made the sandbox (not by
 * name=: another mount may have found it since). 0, or a negative errno
 * with a one-line reason in @msg; a sandbox it made is deleted then.
 */
int connect_sandbox(struct osbfs *fs, struct osb_sandbox_info *ret_info,
		    bool *ret_created, char *msg, size_t msg_size);

/* The labels of a sandbox a restore made: the id of the sandbox it
 * replaced (a mount by name= takes it over that one, and deletes that
 * one unless restore_keeps: the restore's daemon ended before it did),
 * and a random token that tells whether a create whose answer was lost
 * made it. */
#define RESTORED_FROM "osbfs-restored-from"
#define RESTORE_TOKEN "osbfs-restore"

/*
 * connect_restored() - a new sandbox made from Ready snapshot @snap_id
 * as a fork of this mount would be (image options, timeout, resources,
 * network policy, metadata, name=), labelled RESTORED_FROM the mount's
 * sandbox; returned in *@ret_id (malloc'd) once it runs and its execd
 * answers. The create is sent once; its answer lost, a listing by the
 * restore's own token settles whether it made one. On a failure nothing
 * is left: a sandbox made that does not come up is deleted. 0, or a
 * negative errno with a one-line reason in @msg.
 */
int connect_restored(struct osbfs *fs, const char *snap_id, char **ret_id,
		     char *msg, size_t msg_size);

#endif /* OSBFS_CONNECT_H */

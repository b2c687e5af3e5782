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

#endif /* OSBFS_CONNECT_H */

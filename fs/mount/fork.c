/*
 * fork.c - -o snapshot=: which snapshot the new sandbox is made from (by
 * id, else by name, waited for while Creating), and, when name= found a
 * sandbox already there, whether it was made from that snapshot.
 * connect.c makes the sandbox.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fork.h"
#include "log.h"

int fork_snapshot(struct osbfs *fs, const char *what, const char *ref,
		  struct osb_snapshot *ret, char *msg, size_t msg_size)
{
	struct osbfs_options *o = fs->opt;
	struct osb_error err;

	int rc = osb_snapshot_find(fs->client, ref, ret, &err);
	if (rc) {
		snprintf(msg, msg_size, "%s%s: %s%s%s", what, ref, err.message,
			 rc == -ENOENT ? " at " : "",
			 rc == -ENOENT ? osb_client_base_url(fs->client) : "");
		return rc;
	}
	if (strcmp(ret->state, "Creating") == 0)
		log_info("snapshot %s (%s) is still Creating: waiting until it "
			 "is Ready, at most %ld s (start_timeout)",
			 ref, ret->id, (o->start_timeout_ms + 999) / 1000);
	rc = osb_snapshot_wait(fs->client, ret, o->start_timeout_ms, &err);
	if (rc)
		snprintf(msg, msg_size, "%s%s: %s%s", what, ref, err.message,
			 rc == -ETIMEDOUT ? " (start_timeout)" : "");
	return rc;
}

int fork_check_found(struct osbfs *fs, const struct osb_sandbox_info *sb,
		     char *msg, size_t msg_size)
{
	const char *want = fs->opt->snapshot, *name = fs->opt->name;
	struct osb_snapshot snap = { 0 };
	struct osb_error err;
	int rc = 0;

	if (!sb->snapshot_id) {
		snprintf(msg, msg_size,
			 "sandbox %s named %s exists and was made from image "
			 "%s, not from snapshot %s: mount it without "
			 "snapshot=, or give another name",
			 sb->id, name, sb->image ? sb->image : "(unknown)",
			 want);
		return -EEXIST;
	}
	if (strcmp(sb->snapshot_id, want) != 0)
		rc = osb_snapshot_get(fs->client, sb->snapshot_id, &snap, &err);
	if (rc == -ENOENT) {
		log_warn("sandbox %s named %s exists; it was made from "
			 "snapshot %s, which is gone, so whether that was %s "
			 "cannot be told: mounting it as it is",
			 sb->id, name, sb->snapshot_id, want);
		return 0;
	}
	if (rc) {
		snprintf(msg, msg_size, "snapshot %s: %s", sb->snapshot_id,
			 err.message);
		return rc;
	}
	if (snap.id && !(snap.name && strcmp(snap.name, want) == 0)) {
		snprintf(msg, msg_size,
			 "sandbox %s named %s exists and was made from "
			 "snapshot %s%s%s, not from %s: mount it without "
			 "snapshot=, or give another name",
			 sb->id, name, snap.id, snap.name ? " named " : "",
			 snap.name ? snap.name : "", want);
		osb_snapshot_release(&snap);
		return -EEXIST;
	}
	osb_snapshot_release(&snap);
	log_info("sandbox %s named %s exists, made from snapshot %s: "
		 "mounting it (no new sandbox is made from the snapshot)",
		 sb->id, name, want);
	return 0;
}

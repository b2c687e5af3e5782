/*
 * snaps_make.c - mkdir and rmdir in snapshots/ (snaps.h): making a
 * snapshot after everything written through the mount is in the
 * sandbox, and deleting one.
 *
 * One request, one effect: a create is sent once. When its answer is
 * lost (no answer, or a gateway's 5xx), the sandbox's snapshots of that
 * name are listed: the name was free before, so one found is this
 * create's; none found means none was made. It is never sent again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_i.h"
#include "log.h"
#include "remote.h"
#include "snaps_i.h"

/* how old the table may be when mkdir checks that the name is free: the
 * kernel's lookup of the name has just listed them */
#define MAKE_REFRESH_MS 2000

/* Whether the create's answer was lost: it may have been done. */
static bool maybe_done(int rc, const struct osb_error *err)
{
	if (rc == -ENOMEM || rc == -EINVAL || rc == -EOPNOTSUPP)
		return false;
	return err->status == 0 || err->status >= 500;
}

/* The create of @name was sent and its answer lost: the snapshot it
 * made, if any, into *@o. 0, -ENOENT (none was made), or another error
 * (not known). */
static int settle(struct snaps *s, const char *name, struct osb_snapshot *o)
{
	struct osb_snapshot_list l = { 0 };
	struct osb_error err;
	osb_error_clear(&err);
	int rc = snaps_fetch(s, name, &l, &err);
	if (!rc && !l.n)
		rc = -ENOENT;
	if (!rc) {
		/* newest first: a newer one of that name is not ours either
		 * way, the name was free; take the oldest */
		*o = l.items[l.n - 1];
		memset(&l.items[l.n - 1], 0, sizeof(*o));
	}
	osb_snapshot_list_release(&l);
	return rc;
}

/* Logs why the create of @name failed; its errno. */
static int make_failed(struct snaps *s, const char *name, int rc,
		       const struct osb_error *err)
{
	const char *why = err->message[0] ? err->message : strerror(-rc);
	if (rc == -EOPNOTSUPP) {
		log_error("mkdir snapshots/%s: the server has no snapshots "
			  "(its runtime, e.g. Docker, does not make them): %s",
			  name, why);
		return rc;
	}
	if (rc == -EBUSY) {
		log_error("mkdir snapshots/%s: sandbox %s is not running "
			  "(only a running sandbox is snapshotted): %s",
			  name, s->fs->sandbox_id, why);
		return rc;
	}
	log_error("mkdir snapshots/%s: %s", name, why);
	return rc == -EINVAL ? rc : fs_errno(rc);
}

/* Sends the create, settling a lost answer: 0 and *@o, or an errno
 * (logged). */
static int create_once(struct snaps *s, const char *name,
		       struct osb_snapshot *o)
{
	struct osb_error err;
	osb_error_clear(&err);
	int rc = remote_enter(s->fs);
	if (!rc)
		rc = osb_snapshot_create(s->fs->client, s->fs->sandbox_id, name,
					 o, &err);
	if (!rc || !maybe_done(rc, &err))
		return rc ? make_failed(s, name, rc, &err) : 0;
	int st = settle(s, name, o);
	if (!st) {
		log_info("mkdir snapshots/%s: the create's answer was lost "
			 "(%s); the snapshot it made was found",
			 name, err.message);
		return 0;
	}
	if (st == -ENOENT)
		log_error("mkdir snapshots/%s: the create's answer was lost "
			  "(%s) and no snapshot of that name exists: none was "
			  "made; make it again",
			  name, err.message);
	else
		log_error("mkdir snapshots/%s: the create's answer was lost "
			  "(%s) and listing the snapshots to see whether it "
			  "was made failed too: ls snapshots/ later shows it "
			  "if it was",
			  name, err.message);
	return -EIO;
}

int snaps_make(struct snaps *s, const char *name, uint64_t *ret_serial)
{
	struct osb_snapshot o = { 0 };
	char msg[1200] = "";

	if (!snaps_name_valid(name)) {
		log_error("mkdir snapshots/%s: a snapshot's name is 1 to %d "
			  "of A-Z a-z 0-9 . _ - starting and ending with a "
			  "letter or digit",
			  name, SNAP_NAME_MAX);
		return -EINVAL;
	}
	snaps_refresh(s, MAKE_REFRESH_MS);
	if (snaps_taken(s, name)) {
		log_error("mkdir snapshots/%s: a snapshot of this sandbox has "
			  "that name already: give another, or remove it "
			  "first (rmdir)",
			  name);
		return -EEXIST;
	}
	/* what the snapshot keeps: everything written so far */
	int rc = ctl_sync(s->fs, msg, sizeof(msg));
	if (rc) {
		log_error("mkdir snapshots/%s: nothing was made: %s", name,
			  msg);
		return rc;
	}
	rc = create_once(s, name, &o);
	if (!rc)
		rc = snaps_add(s, &o, ret_serial);
	if (!rc)
		log_info("snapshots: %s made (%s), %s", name, o.id ? o.id : "",
			 o.state ? o.state : "");
	osb_snapshot_release(&o);
	return rc;
}

int snaps_remove(struct snaps *s, const char *dir)
{
	struct osb_error err;
	char id[SNAP_DIR_MAX];

	int rc = snaps_id_of(s, dir, id);
	if (rc == -ENOENT) {
		snaps_refresh(s, 0);
		rc = snaps_id_of(s, dir, id);
	}
	if (rc)
		return rc;
	osb_error_clear(&err);
	rc = osb_snapshot_delete(s->fs->client, id, &err);
	if (!rc || rc == -ENOENT) {
		snaps_drop(s, id);
		if (!rc)
			log_info("snapshots: %s (%s) deleted", dir, id);
		return rc;
	}
	if (rc == -EBUSY) {
		log_error(
			"rmdir snapshots/%s: the snapshot is still being "
			"made (Creating): wait for it (cat snapshots/%s/wait), "
			"then remove it",
			dir, dir);
		return rc;
	}
	log_error("rmdir snapshots/%s: %s", dir,
		  err.message[0] ? err.message : strerror(-rc));
	return fs_errno(rc);
}

/*
 * ctl_restore.c - `restore SNAPSHOT [force]` written to ctl: the mount
 * moves onto a new sandbox made from the snapshot, and the one it leaves
 * goes (docs/ARCHITECTURE.md, "A restore").
 *
 * In order: what is written is sent (as sync), the snapshot is found and
 * waited for, the new sandbox is made and comes up (connect_restored:
 * one create, a lost answer settled by a listing), and only then is the
 * mount moved, under fs->path_lock held for writing, so no upload batch
 * is under way: the sandbox handle is switched in place (every thread
 * holding it reaches the new sandbox from its next call), the cache slot
 * is renamed after the new id, and every cache is dropped. The feed, the
 * jobs' monitor and the code runs, which follow the old sandbox, are
 * stopped before and started again after. A failure before the switch
 * leaves the mount on the old sandbox as it was, and deletes the new one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code.h"
#include "connect.h"
#include "ctl_i.h"
#include "feed.h"
#include "fork.h"
#include "life.h"
#include "log.h"
#include "notify.h"
#include "ops.h"
#include "snaps.h"
#include "writeback.h"

/* a sync, then a look for files written meanwhile, this many times */
#define RESTORE_SYNC_TRIES 3
#define RESTORE_JOB_ENDED                                                      \
	"ended by a restore: the mount left the sandbox the job ran in"

/* one restore at a time */
static pthread_mutex_t restore_lock = PTHREAD_MUTEX_INITIALIZER;

/* Everything written is in the sandbox, and fs->path_lock is held for
 * writing (no upload batch under way). A file written after the sync
 * has it sent again, RESTORE_SYNC_TRIES times at most. */
static int quiesce(struct osbfs *fs, char *msg, size_t msg_size)
{
	for (int i = 0;; i++) {
		int rc = ctl_sync(fs, msg, msg_size);
		if (rc)
			return rc;
		struct wb_stats st;
		pthread_rwlock_wrlock(&fs->path_lock);
		wb_get_stats(fs, &st);
		if (!st.dirty_files && !st.dirty_dirs)
			return 0;
		pthread_rwlock_unlock(&fs->path_lock);
		if (i + 1 == RESTORE_SYNC_TRIES) {
			snprintf(msg, msg_size,
				 "files kept being written through the mount "
				 "while it synced (%zu not yet sent)",
				 st.dirty_files + st.dirty_dirs);
			return -EBUSY;
		}
	}
}

/* What info shows of the sandbox, from @info (the new one's). */
static void about_set(struct ctl *c, const struct osb_sandbox_info *info,
		      const char *old_id)
{
	pthread_mutex_lock(&c->about_lock);
	snprintf(c->image, sizeof(c->image), "%s",
		 info->image ? info->image : "");
	snprintf(c->snapshot_id, sizeof(c->snapshot_id), "%s",
		 info->snapshot_id ? info->snapshot_id : "");
	c->created_at = info->created_at;
	snprintf(c->restored_from, sizeof(c->restored_from), "%s", old_id);
	pthread_mutex_unlock(&c->about_lock);
}

/* The move itself, onto running sandbox @id. 0; or a negative errno
 * with the reason in @msg, the mount still on the old sandbox. */
static int move(struct ctl *c, const char *id,
		const struct osb_sandbox_info *info, char *msg, size_t msg_size)
{
	struct osbfs *fs = c->fs;
	const char *old = fs->sandbox_id;
	struct osb_error err;
	char cmsg[1200];

	/* what follows the old sandbox stops first */
	feed_stop(fs);
	jobs_monitor_stop(c->jobs);
	int rc = quiesce(fs, msg, msg_size);
	if (!rc) {
		rc = osb_sandbox_switch(fs->sb, id, &err);
		if (rc)
			snprintf(msg, msg_size, "sandbox %s: %s", id,
				 err.message);
		else
			fs->sandbox_id = osb_sandbox_id(fs->sb);
		if (!rc && cache_move(fs->cache, id, cmsg, sizeof(cmsg)))
			log_warn("restore: %s: what is written from now on "
				 "is recovered after a crash only by a mount "
				 "of sandbox %s with this cache dir",
				 cmsg, old);
		if (!rc) {
			/* nothing known of the old sandbox holds */
			fs_invalidate_all(fs);
			cache_drop_clean(fs->cache);
		}
		pthread_rwlock_unlock(&fs->path_lock);
	}
	if (!rc) {
		life_reset(fs, "Running", info->expires_at);
		about_set(c, info, old);
		code_reset(c->code);
		snaps_restored(c->snaps, old);
	}
	if (jobs_monitor_restart(c->jobs, rc ? NULL : RESTORE_JOB_ENDED))
		log_error("jobs: cannot start the monitor again");
	if (feed_restart(fs))
		log_error("cannot start the change feed again");
	if (!rc)
		notify_drain(fs);
	return rc;
}

/* The errno of a failed step: the client's, with network trouble EIO. */
static int step_errno(int rc)
{
	return rc == -ENOENT || rc == -EBUSY || rc == -ENOTUNIQ ||
			       rc == -ETIMEDOUT ?
		       rc :
		       fs_errno(rc);
}

int ctl_restore(struct ctl *c, const char *ref, bool force, char *msg,
		size_t msg_size)
{
	struct osbfs *fs = c->fs;
	struct osb_snapshot snap = { 0 };
	struct osb_sandbox_info info = { 0 };
	struct osb_error err;
	size_t running = 0, total;
	char why[1200] = "";
	char *id = NULL;
	int rc = 0;

	if (pthread_mutex_trylock(&restore_lock) != 0) {
		snprintf(msg, msg_size,
			 "restore %s: another restore is under way", ref);
		return -EBUSY;
	}
	const char *old = fs->sandbox_id;
	jobs_counts(c->jobs, &running, &total);
	if (running && !force) {
		snprintf(why, sizeof(why),
			 "%zu job%s running (.osb/jobs): wait for %s end, or "
			 "write \"restore %s force\" to end %s",
			 running, running == 1 ? " is" : "s are",
			 running == 1 ? "its" : "their", ref,
			 running == 1 ? "it" : "them");
		rc = -EBUSY;
	}
	/* nothing written is lost, whatever comes after */
	if (!rc)
		rc = ctl_sync(fs, why, sizeof(why));
	if (!rc)
		rc = fork_snapshot(fs, "snapshot ", ref, &snap, why,
				   sizeof(why));
	if (!rc)
		rc = connect_restored(fs, snap.id, &id, why, sizeof(why));
	if (!rc && osb_sandbox_get(fs->client, id, &info, &err) != 0) {
		/* only what info shows, and the expiry keepalive renews */
		log_warn("restore: sandbox %s: %s", id, err.message);
		memset(&info, 0, sizeof(info));
	}
	if (!rc) {
		rc = move(c, id, &info, why, sizeof(why));
		if (rc && osb_sandbox_delete(fs->client, id, &err) != 0)
			log_error("restore: sandbox %s, made for it, is left: "
				  "%s",
				  id, err.message);
	}
	if (rc) {
		snprintf(msg, msg_size,
			 "restore %s: %s; the mount stays on sandbox %s", ref,
			 why, old);
		rc = step_errno(rc);
	} else if (fs->opt->restore_keeps) {
		log_info("restored snapshot %s (%s) into sandbox %s; sandbox "
			 "%s is kept (restore_keeps)",
			 ref, snap.id, id, old);
	} else if (osb_sandbox_delete(fs->client, old, &err) != 0) {
		log_warn("restored snapshot %s (%s) into sandbox %s; sandbox "
			 "%s, left, could not be deleted: %s",
			 ref, snap.id, id, old, err.message);
	} else {
		log_info("restored snapshot %s (%s) into sandbox %s; sandbox "
			 "%s deleted",
			 ref, snap.id, id, old);
	}
	osb_sandbox_info_release(&info);
	osb_snapshot_release(&snap);
	free(id);
	pthread_mutex_unlock(&restore_lock);
	return rc;
}

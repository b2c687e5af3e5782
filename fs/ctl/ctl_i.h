/*
 * ctl_i.h - what the ctl*.c files share: the control tree's inodes, the
 * state behind fs->ctl, and open-file handles.
 *
 * Inodes: CTL_INO_BASE + kind for the fixed entries (the root and its
 * files, jobs/, jobs/latest, snapshots/); CTL_INO_BASE + 16 * serial +
 * job kind for the files of the job with that serial (jobs.h); ranges
 * of their own for code contexts, scratch files and snapshots (below). Nothing
 * is allocated per inode, so lookups and forgets need no bookkeeping.
 */
#ifndef OSBFS_CTL_I_H
#define OSBFS_CTL_I_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "code.h"
#include "ctl.h"
#include "ctl_text.h"
#include "jobs.h"
#include "osbfs.h"
#include "snaps.h"

#define CTL_INO_BASE (1ull << 48)
#define CTL_JOB_SHIFT 4

enum ctl_kind {
	/* fixed */
	K_ROOT,
	K_README,
	K_INFO,
	K_CTL,
	K_EGRESS,
	K_LOG,
	K_RUN,
	K_JOBS,
	K_LATEST,
	K_CODE,
	K_WAITALL, /* jobs/wait-all */
	K_SNAPS,   /* snapshots/ */
	/* in jobs/ID/ */
	K_JOB,
	K_JCMD,
	K_JSTATUS,
	K_JEXIT,
	K_JSTDOUT,
	K_JSTDERR,
	K_JWAIT,
	K_JCTL,
	K_JINFO,
	/* a code context's directory (code/LANG/, code/LANG/NAME/), its
	 * files */
	K_CDIR,
	K_CINPUT,
	K_COUTPUT,
	K_CRESULT,
	K_CCTL,
	/* a writer's temporary file (ctl_scratch.c) */
	K_SCRATCH,
	/* an image of a code run, beside its output (serial: its index) */
	K_CIMAGE,
	/* a snapshot's directory and its files (serial: the snapshot's,
	 * snaps.h) */
	K_SDIR,
	K_SINFO,
	K_SWAIT,
};
#define K_JOB_FIRST K_JOB
/* A code context's inodes: CTL_INO_BASE + CODE_INO_BIT + 16 * its
 * serial + (kind - K_CDIR). */
#define CODE_INO_BIT (1ull << 45)
/* A code run's images' inodes: CTL_INO_BASE + IMAGE_INO_BIT + 256 * its
 * context's serial + its index. */
#define IMAGE_INO_BIT (1ull << 44)
/* Scratch files' inodes: CTL_INO_BASE + SCRATCH_INO_BIT + serial. */
#define SCRATCH_INO_BIT (1ull << 46)
#define SCRATCH_MAX 64
/* A snapshot's inodes: CTL_INO_BASE + SNAP_INO_BIT + 16 * its serial +
 * (kind - K_SDIR). */
#define SNAP_INO_BIT (1ull << 43)

/* fs->ctl. Set up by ctl_init() and read-only afterwards, but for the
 * atomics; the jobs have their own lock (jobs_i.h). */
struct ctl {
	struct osbfs *fs;
	struct jobs *jobs;
	char mountpoint[PATH_MAX]; /* absolute */
	struct text readme;        /* made once, read-only after */
	/* the sandbox's, from the lifecycle server at init and after a
	 * restore (ctl_restore.c), under about_lock (a leaf) */
	pthread_mutex_t about_lock;
	char image[256];
	char snapshot_id[256]; /* what it was made from, else "" */
	time_t created_at;
	char restored_from[256]; /* the sandbox a restore left, else "" */
	struct timespec mounted_at;
	atomic_llong egress_size; /* the last egress text's length */
	atomic_bool no_sidecar;   /* the sandbox was found to have no
				     egress sidecar (it never gets one) */
	struct scratch_table *scratch;
	struct code *code;   /* code/ (code.h) */
	struct setup *setup; /* jobs/setup (setup.h); NULL without one */
	struct snaps *snaps; /* snapshots/ (snaps.h) */
	/* the open control files, freed at the end if their release never
	 * came (a lazy unmount: the kernel may drop the last ones) */
	pthread_mutex_t fh_lock; /* a leaf */
	struct ctl_fh *fhs;
};

/* A decoded inode: its kind, and its job (with a reference) for job
 * kinds. */
struct ctl_node {
	enum ctl_kind kind;
	struct job *job;
	uint64_t serial;     /* of a scratch file; an image's index */
	struct code_ctx *cx; /* code kinds: lives as long as the mount */
};
/* -ENOENT for an inode that names nothing (any more). */
int ctl_node_get(struct ctl *c, fuse_ino_t ino, struct ctl_node *ret);
void ctl_node_put(struct ctl *c, struct ctl_node *n);
fuse_ino_t ctl_ino(enum ctl_kind kind, const struct job *job);
/* The inode of any node. */
fuse_ino_t ctl_node_ino(const struct ctl_node *n);
/* Its mode: S_IF* and the owner's bits (0444 readable, 0200 writable). */
mode_t ctl_node_mode(struct ctl *c, const struct ctl_node *n);
/* The attributes of @n. */
void ctl_node_stat(struct ctl *c, const struct ctl_node *n, struct stat *st);

/* An open control file. */
struct ctl_fh {
	struct ctl_fh *prev, *next; /* in ctl->fhs, under ctl->fh_lock */
	pthread_mutex_t lock;       /* the fields below: one fd may be used
				       by several threads at once */
	struct ctl_node node;
	bool writer;
	struct text out; /* what reads return (a snapshot) */
	bool have_out;
	size_t out_pos;   /* run: where the next read goes on */
	struct text in;   /* what was written, not yet used */
	bool started;     /* run, cmd, input: the job was started (the
			     code run) */
	int start_rc;     /* run: how starting went */
	struct job **set; /* wait-all: the jobs running at the open
			     (references) */
	size_t nset;
	char job_id[JOB_ID_MAX]; /* run: the job started */
};

/* The names in the root and in a job's directory (ctl.c). */
struct ctl_named {
	const char *name;
	enum ctl_kind kind;
	bool unlisted; /* found by lookup, left out of readdir
			  (a read that blocks: a tree walker must
			  not come across it) */
};
extern const struct ctl_named ctl_root_files[];
extern const size_t ctl_nroot;
extern const struct ctl_named ctl_job_files[];
extern const size_t ctl_njob;
extern const struct ctl_named ctl_code_files[];
extern const size_t ctl_ncode;
extern const struct ctl_named ctl_snap_files[];
extern const size_t ctl_nsnap;

static inline struct ctl *ctl_of(fuse_req_t req)
{
	return ((struct osbfs *)fuse_req_userdata(req))->ctl;
}
/* The entry (attributes, timeouts) for @n; and the reply with it. */
void ctl_entry_fill(struct ctl *c, const struct ctl_node *n,
		    struct fuse_entry_param *e);
void ctl_reply_entry(fuse_req_t req, struct ctl *c, const struct ctl_node *n);
/* What @name in the control dir @parent is (a reference in *ret, for
 * ctl_node_put): -ENOENT, -ENOTDIR. */
int ctl_resolve(struct ctl *c, fuse_ino_t parent, const char *name,
		struct ctl_node *ret);
/* The newest job's id into @buf; false when there is none. */
bool ctl_latest_id(struct ctl *c, char *buf, size_t size);

/* ---- ctl_scratch.c: a writer's temporary files ---- */

int scratch_init(struct ctl *c);
void scratch_free(struct ctl *c);
fuse_ino_t scratch_ino(uint64_t serial);
bool scratch_exists(struct ctl *c, uint64_t serial);
/* The scratch file @name in the control dir @parent: 0 or -ENOENT. */
int scratch_find(struct ctl *c, fuse_ino_t parent, const char *name,
		 uint64_t *ret_serial);
/* In .osb/, a job's or a code context's directory, named as a temporary
 * file of one of its control files (elsewhere or else -EACCES, logged
 * with the names that are control files); -EEXIST, -ENOSPC
 * (SCRATCH_MAX of them), -ENAMETOOLONG, -ENOMEM. */
int scratch_create(struct ctl *c, fuse_ino_t parent, const char *name,
		   uint64_t *ret_serial);
/* pwrite-like; -EFBIG past TEXT_MAX, -ENOENT when it is gone. */
int scratch_write(struct ctl *c, uint64_t serial, const void *buf, size_t size,
		  uint64_t off);
int scratch_truncate(struct ctl *c, uint64_t serial, uint64_t size);
/* A copy of its bytes into @out. */
int scratch_read(struct ctl *c, uint64_t serial, struct text *out);
/* Its size and times into @st (the rest is the caller's). */
void scratch_stat(struct ctl *c, uint64_t serial, struct stat *st);
int scratch_unlink(struct ctl *c, fuse_ino_t parent, const char *name);
/* Removes it and hands its bytes to the caller (*ret, to release). */
int scratch_take(struct ctl *c, fuse_ino_t parent, const char *name,
		 struct text *ret);
/* To another scratch name, in a dir that takes them (one there goes,
 * unless @noreplace: -EEXIST). */
int scratch_rename(struct ctl *c, fuse_ino_t parent, const char *name,
		   fuse_ino_t newparent, const char *newname, bool noreplace);
/* A JSON array of the scratch files' paths under the control dir (for
 * info). */
int scratch_list_json(struct ctl *c, struct text *out);
/* Every scratch file in @parent goes (its job was removed). */
void scratch_drop_dir(struct ctl *c, fuse_ino_t parent);

/* ---- ctl_dir.c ---- */

/* Forgets the job @id that has ended: its records in the sandbox (one
 * request) and its directory here, with the temporary files in it.
 * -EBUSY while it runs (logged, prefixed with @what), -ENOENT, -EIO. */
int ctl_job_forget(struct ctl *c, const char *id, const char *what);

/* ---- ctl_file.c ---- */

/* Logs why @job's cmd takes no command: it has one (its name is used
 * again). */
void ctl_log_cmd_taken(struct ctl *c, struct job *job);

/* Frees the handles still open (at the end, after the FUSE session). */
void ctl_fh_free_all(struct ctl *c);

/* Writes @len bytes to the control file @target as one open for
 * writing, write at offset 0 and close would: the close's result. */
int ctl_apply(struct ctl *c, const struct ctl_node *target, const char *buf,
	      size_t len);

/* ---- ctl_root.c: the files at the top ---- */

/* info's JSON. */
int ctl_info_json(struct ctl *c, struct text *out);
/* egress's text (the policy, or why there is none). */
int ctl_egress_text(struct ctl *c, struct text *out);
/* Sends everything written through the mount (ctl's sync): 0, or -EIO
 * and why in @msg. */
int ctl_sync(struct osbfs *fs, char *msg, size_t msg_size);
/*
 * ctl_restore() - ctl's `restore @ref [force]` (ctl_restore.c): the mount
 * moves onto a new sandbox made from snapshot @ref (a name or an id), and
 * the sandbox it leaves is deleted (kept with restore_keeps). -EBUSY
 * while a job runs (unless @force) or another restore is under way,
 * -ENOENT for an unknown snapshot, -EIO...; the reason in @msg, the
 * mount then on its sandbox as before.
 */
int ctl_restore(struct ctl *c, const char *ref, bool force, char *msg,
		size_t msg_size);
/* Runs the ctl verbs in @buf (one per line). 0 or a negative errno
 * (logged: info's last_error says why). */
int ctl_exec(struct ctl *c, const char *buf, size_t len);
/* Takes what was written to egress into @fh->in and applies the rules
 * complete so far; @final at close. 0 or a negative errno (logged). */
int ctl_egress_apply(struct ctl *c, struct ctl_fh *fh, bool final);
/* Runs the verbs written to jobs/ID/ctl for @job. */
int ctl_job_exec(struct ctl *c, struct job *job, const char *buf, size_t len);

/* ---- ctl_readme.c ---- */

int ctl_readme_make(struct ctl *c, struct text *out);

#endif /* OSBFS_CTL_I_H */

/*
 * ctl.c - the control tree MOUNTPOINT/.osb/ (ctl.h): its life (init, start,
 * stop), its inodes and their attributes, lookup, getattr, setattr and readlink
 * of jobs/latest. Directories (readdir, mkdir/rmdir of jobs and code
 * contexts) are in ctl_dir.c, open files in ctl_file.c, the top files'
 * contents and verbs in ctl_root.c, jobs in jobs*.c, code contexts in
 * code*.c.
 *
 * Errors: EPERM for a change of names the tree does not allow (mkdir
 * outside jobs/ and code/LANG/, rmdir of a fixed entry); EACCES for
 * writing a read-only file, or creating one that is not a writer's
 * temporary file (ctl_scratch.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ctl_i.h"
#include "log.h"
#include "setup.h"

/* attributes of files whose size changes: never cached by the kernel */
#define LIVE_TIMEOUT 0.0
#define FIXED_TIMEOUT 1.0
/* how old the table may be when a name in jobs/ is missing (another
 * mount may have made it): not at all */
#define LOOKUP_REFRESH_MS 0

const struct ctl_named ctl_root_files[] = {
	{ "README", K_README, false },   { "info", K_INFO, false },
	{ "ctl", K_CTL, false },         { "egress", K_EGRESS, false },
	{ "log", K_LOG, false },         { "run", K_RUN, false },
	{ "jobs", K_JOBS, false },       { "code", K_CODE, false },
	{ "snapshots", K_SNAPS, false },
};

/* in a snapshot's directory; wait is not listed: its read blocks */
const struct ctl_named ctl_snap_files[] = {
	{ "info", K_SINFO, false },
	{ "wait", K_SWAIT, true },
};
const size_t ctl_nsnap = sizeof(ctl_snap_files) / sizeof(ctl_snap_files[0]);

/* wait is not listed: its read blocks while the job runs */
const struct ctl_named ctl_job_files[] = {
	{ "cmd", K_JCMD, false },        { "status", K_JSTATUS, false },
	{ "exit_code", K_JEXIT, false }, { "stdout", K_JSTDOUT, false },
	{ "stderr", K_JSTDERR, false },  { "wait", K_JWAIT, true },
	{ "ctl", K_JCTL, false },        { "info", K_JINFO, false },
};

/* in code/LANG/ and code/LANG/NAME/ */
const struct ctl_named ctl_code_files[] = {
	{ "input", K_CINPUT, false },
	{ "output", K_COUTPUT, false },
	{ "result.json", K_CRESULT, false },
	{ "ctl", K_CCTL, false },
};

const size_t ctl_ncode = sizeof(ctl_code_files) / sizeof(ctl_code_files[0]);
const size_t ctl_nroot = sizeof(ctl_root_files) / sizeof(ctl_root_files[0]);
const size_t ctl_njob = sizeof(ctl_job_files) / sizeof(ctl_job_files[0]);

/* ---- life ---- */

int ctl_init(struct osbfs *fs)
{
	struct osb_sandbox_info info;
	struct ctl *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fs = fs;
	pthread_mutex_init(&c->fh_lock, NULL);
	pthread_mutex_init(&c->about_lock, NULL);
	if (!realpath(fs->opt->mountpoint, c->mountpoint))
		snprintf(c->mountpoint, sizeof(c->mountpoint), "%s",
			 fs->opt->mountpoint);
	clock_gettime(CLOCK_REALTIME, &c->mounted_at);
	/* what info shows of the sandbox and never changes */
	if (osb_sandbox_get(fs->client, fs->sandbox_id, &info, NULL) == 0) {
		snprintf(c->image, sizeof(c->image), "%s",
			 info.image ? info.image : "");
		snprintf(c->snapshot_id, sizeof(c->snapshot_id), "%s",
			 info.snapshot_id ? info.snapshot_id : "");
		c->created_at = info.created_at;
		osb_sandbox_info_release(&info);
	}
	int rc = jobs_new(fs, &c->jobs);
	if (!rc)
		rc = ctl_readme_make(c, &c->readme);
	if (!rc)
		rc = scratch_init(c);
	if (!rc)
		rc = code_new(fs, &c->code);
	if (!rc)
		rc = setup_new(fs, c->jobs, &fs->opt->setup_decl, &c->setup);
	if (!rc)
		rc = snaps_new(fs, &c->snaps);
	if (rc) {
		setup_free(c->setup);
		code_free(c->code);
		scratch_free(c);
		jobs_free(c->jobs);
		text_release(&c->readme);
		pthread_mutex_destroy(&c->fh_lock);
		pthread_mutex_destroy(&c->about_lock);
		free(c);
		return rc;
	}
	fs->ctl = c;
	return 0;
}

int ctl_start(struct osbfs *fs)
{
	if (!fs->ctl)
		return 0;
	int rc = jobs_monitor_start(fs->ctl->jobs);
	return rc ? rc : setup_start(fs->ctl->setup);
}

void ctl_stop(struct osbfs *fs)
{
	if (!fs->ctl)
		return;
	/* the code runs' followers first: they drop caches through the
	 * notifier and answer closes waiting for them */
	code_stop(fs->ctl->code);
	/* the setup follows its job through the monitor */
	setup_stop(fs->ctl->setup);
	jobs_monitor_stop(fs->ctl->jobs);
	snaps_stop(fs->ctl->snaps);
}

void ctl_release_all(struct osbfs *fs)
{
	struct ctl *c = fs->ctl;
	if (!c)
		return;
	code_stop(c->code);
	setup_free(c->setup);
	c->setup = NULL;
	jobs_monitor_stop(c->jobs);
	snaps_stop(c->snaps);
	ctl_fh_free_all(c);
	pthread_mutex_destroy(&c->fh_lock);
	pthread_mutex_destroy(&c->about_lock);
	code_free(c->code);
	jobs_free(c->jobs);
	text_release(&c->readme);
	scratch_free(c);
	snaps_free(c->snaps);
	free(c);
	fs->ctl = NULL;
}

/* ---- inodes ---- */

bool ctl_jobs_running(struct osbfs *fs)
{
	size_t running = 0, total;
	if (fs->ctl && fs->ctl->jobs)
		jobs_counts(fs->ctl->jobs, &running, &total);
	return running > 0;
}

bool ctl_is_ino(fuse_ino_t ino)
{
	return ino >= CTL_INO_BASE;
}

fuse_ino_t ctl_root_ino(void)
{
	return CTL_INO_BASE;
}

fuse_ino_t ctl_ino(enum ctl_kind kind, const struct job *job)
{
	if (kind < K_JOB_FIRST || !job)
		return CTL_INO_BASE + kind;
	return CTL_INO_BASE + (job_serial(job) << CTL_JOB_SHIFT) +
	       (kind - K_JOB_FIRST);
}

fuse_ino_t ctl_node_ino(const struct ctl_node *n)
{
	if (n->kind == K_SCRATCH)
		return scratch_ino(n->serial);
	if (n->kind >= K_SDIR && n->kind <= K_SWAIT)
		return CTL_INO_BASE + SNAP_INO_BIT +
		       (n->serial << CTL_JOB_SHIFT) + (n->kind - K_SDIR);
	if (n->kind == K_CIMAGE)
		return CTL_INO_BASE + IMAGE_INO_BIT +
		       (code_ctx_serial(n->cx) << 8) + n->serial;
	if (n->kind >= K_CDIR && n->kind <= K_CCTL && n->cx)
		return CTL_INO_BASE + CODE_INO_BIT +
		       (code_ctx_serial(n->cx) << CTL_JOB_SHIFT) +
		       (n->kind - K_CDIR);
	return ctl_ino(n->kind, n->job);
}

int ctl_node_get(struct ctl *c, fuse_ino_t ino, struct ctl_node *ret)
{
	if (!ctl_is_ino(ino))
		return -ENOENT;
	uint64_t v = ino - CTL_INO_BASE;
	uint64_t serial = v >> CTL_JOB_SHIFT;
	uint64_t k = v & ((1u << CTL_JOB_SHIFT) - 1);
	ret->job = NULL;
	ret->serial = 0;
	ret->cx = NULL;
	if (v & SCRATCH_INO_BIT) {
		ret->kind = K_SCRATCH;
		ret->serial = v - SCRATCH_INO_BIT;
		return scratch_exists(c, ret->serial) ? 0 : -ENOENT;
	}
	if (v & SNAP_INO_BIT) {
		v -= SNAP_INO_BIT;
		if ((v & ((1u << CTL_JOB_SHIFT) - 1)) > K_SWAIT - K_SDIR)
			return -ENOENT;
		ret->kind = (enum ctl_kind)(K_SDIR +
					    (v & ((1u << CTL_JOB_SHIFT) - 1)));
		ret->serial = v >> CTL_JOB_SHIFT;
		return snaps_exists(c->snaps, ret->serial) ? 0 : -ENOENT;
	}
	if (v & IMAGE_INO_BIT) {
		v -= IMAGE_INO_BIT;
		char name[32];
		ret->kind = K_CIMAGE;
		ret->cx = code_by_serial(c->code, v >> 8);
		ret->serial = v & 0xff;
		return ret->cx && code_image_name(c->code, ret->cx,
						  (size_t)ret->serial, name,
						  sizeof(name)) ?
			       0 :
			       -ENOENT;
	}
	if (v & CODE_INO_BIT) {
		v -= CODE_INO_BIT;
		if ((v & ((1u << CTL_JOB_SHIFT) - 1)) > K_CCTL - K_CDIR)
			return -ENOENT;
		ret->cx = code_by_serial(c->code, v >> CTL_JOB_SHIFT);
		ret->kind = (enum ctl_kind)(K_CDIR +
					    (v & ((1u << CTL_JOB_SHIFT) - 1)));
		return ret->cx ? 0 : -ENOENT;
	}
	if (!serial) {
		if (k >= K_JOB_FIRST)
			return -ENOENT;
		ret->kind = (enum ctl_kind)k;
		return 0;
	}
	if (k > K_JINFO - K_JOB_FIRST)
		return -ENOENT;
	ret->job = jobs_by_serial(c->jobs, serial);
	if (!ret->job)
		return -ENOENT;
	ret->kind = (enum ctl_kind)(K_JOB_FIRST + k);
	return 0;
}

void ctl_node_put(struct ctl *c, struct ctl_node *n)
{
	job_put(c->jobs, n->job);
	n->job = NULL;
}

bool ctl_latest_id(struct ctl *c, char *buf, size_t size)
{
	struct job_entry *e = NULL;
	size_t n = 0;
	if (jobs_list(c->jobs, &e, &n) || !n) {
		free(e);
		return false;
	}
	snprintf(buf, size, "%s", e[n - 1].id);
	free(e);
	return true;
}

/* The mode of each kind. Under allow_other the kernel checks these
 * (options.c adds default_permissions) against the mount's user, who
 * owns every node: nothing here is writable but by the owner, so no
 * other user runs a command, signals a job or changes the sandbox; and
 * nothing that shows what the sandbox holds or prints, or what the mount
 * has not uploaded yet, is readable but by the owner (info's pending
 * paths and last error, the log, a job's command, output and info, a
 * context's code and results). code/ is the owner's alone: listing it
 * or naming a language there makes the sandbox start an interpreter.
 * Other users may walk the rest of the tree and read the README, the
 * network policy and each job's status, exit_code and wait. Without
 * allow_other nobody else reaches the mount at all. */
static const mode_t modes[] = {
	[K_ROOT] = S_IFDIR | 0755,    [K_README] = S_IFREG | 0444,
	[K_INFO] = S_IFREG | 0400,    [K_CTL] = S_IFREG | 0200,
	[K_EGRESS] = S_IFREG | 0644,  [K_LOG] = S_IFREG | 0400,
	[K_RUN] = S_IFREG | 0644,     [K_JOBS] = S_IFDIR | 0755,
	[K_LATEST] = S_IFLNK | 0777,  [K_JOB] = S_IFDIR | 0755,
	[K_JCMD] = S_IFREG | 0400,    [K_JSTATUS] = S_IFREG | 0444,
	[K_JEXIT] = S_IFREG | 0444,   [K_JSTDOUT] = S_IFREG | 0400,
	[K_JSTDERR] = S_IFREG | 0400, [K_JWAIT] = S_IFREG | 0444,
	[K_JCTL] = S_IFREG | 0200,    [K_JINFO] = S_IFREG | 0400,
	[K_CODE] = S_IFDIR | 0700,    [K_CDIR] = S_IFDIR | 0755,
	[K_CINPUT] = S_IFREG | 0600,  [K_COUTPUT] = S_IFREG | 0400,
	[K_CRESULT] = S_IFREG | 0400, [K_CCTL] = S_IFREG | 0200,
	[K_SCRATCH] = S_IFREG | 0600, [K_WAITALL] = S_IFREG | 0444,
	[K_CIMAGE] = S_IFREG | 0400,  [K_SNAPS] = S_IFDIR | 0755,
	[K_SDIR] = S_IFDIR | 0755,    [K_SINFO] = S_IFREG | 0400,
	[K_SWAIT] = S_IFREG | 0444,
};

mode_t ctl_node_mode(struct ctl *c, const struct ctl_node *n)
{
	struct job_view v;
	if (n->kind != K_JCMD)
		return modes[n->kind];
	/* a named job's cmd takes a command until it has one */
	job_view(c->jobs, n->job, &v);
	return S_IFREG | (v.state == JOB_CREATED ? 0600 : 0400);
}

/* The length of what @make writes. */
static off_t len_of(struct ctl *c, struct job *j,
		    int (*make_ctl)(struct ctl *, struct text *),
		    int (*make_job)(struct jobs *, struct job *, struct text *))
{
	struct text t = { 0 };
	int rc = make_ctl ? make_ctl(c, &t) : make_job(c->jobs, j, &t);
	off_t n = rc ? 0 : (off_t)t.len;
	text_release(&t);
	return n;
}

/* The length of what @make says of @cx. */
static off_t len_of_code(struct ctl *c, struct code_ctx *cx,
			 int (*make)(struct code *, struct code_ctx *,
				     struct text *))
{
	struct text t = { 0 };
	off_t n = make(c->code, cx, &t) ? 0 : (off_t)t.len;
	text_release(&t);
	return n;
}

/* The length of the image @n. */
static off_t len_of_image(struct ctl *c, const struct ctl_node *n)
{
	struct text t = { 0 };
	off_t len = code_image_text(c->code, n->cx, (size_t)n->serial, &t) ?
			    0 :
			    (off_t)t.len;
	text_release(&t);
	return len;
}

/* A context's files change when a run starts and ends. */
static void code_stat_times(struct ctl *c, struct code_ctx *cx, struct stat *st)
{
	struct timespec t = code_mtime(c->code, cx);
	if (t.tv_sec)
		st->st_mtim = st->st_ctim = t;
}

/* Sizes and times of a job's files. */
static void job_stat(struct ctl *c, const struct ctl_node *n, struct stat *st)
{
	struct job_view v;
	job_view(c->jobs, n->job, &v);
	struct timespec when = v.started_at.tv_sec ? v.started_at :
			       v.created_at.tv_sec ? v.created_at :
						     c->mounted_at;
	struct timespec end = v.finished_at.tv_sec ? v.finished_at : when;
	int k = n->kind == K_JSTDOUT ? JOB_STDOUT : JOB_STDERR;

	st->st_mtim = st->st_ctim = st->st_atim = when;
	switch (n->kind) {
	case K_JCMD:
		st->st_size = v.cmd_size > 0 ? v.cmd_size : 0;
		break;
	case K_JSTDOUT:
	case K_JSTDERR:
		st->st_size = v.size[k];
		if (v.mtime[k].tv_sec)
			st->st_mtim = st->st_ctim = v.mtime[k];
		break;
	case K_JWAIT:
	case K_JSTATUS:
		if (n->kind == K_JSTATUS || v.state == JOB_DONE)
			st->st_size = len_of(c, n->job, NULL, job_status_text);
		st->st_mtim = st->st_ctim = end;
		break;
	case K_JEXIT:
		st->st_size = len_of(c, n->job, NULL, job_exit_code_text);
		st->st_mtim = st->st_ctim = end;
		break;
	case K_JINFO: /* its size needs the command, maybe remote: 0 */
		st->st_mtim = st->st_ctim = end;
		break;
	default:
		break;
	}
}

void ctl_node_stat(struct ctl *c, const struct ctl_node *n, struct stat *st)
{
	char id[JOB_ID_MAX];
	char *log;

	memset(st, 0, sizeof(*st));
	st->st_ino = ctl_node_ino(n);
	st->st_mode = ctl_node_mode(c, n);
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = c->fs->uid;
	st->st_gid = c->fs->gid;
	st->st_blksize = 4096;
	st->st_mtim = st->st_ctim = st->st_atim = c->mounted_at;
	switch (n->kind) {
	case K_README:
		st->st_size = (off_t)c->readme.len;
		break;
	case K_INFO:
		st->st_size = len_of(c, NULL, ctl_info_json, NULL);
		break;
	case K_LOG:
		log = log_recent();
		st->st_size = log ? (off_t)strlen(log) : 0;
		free(log);
		break;
	case K_EGRESS:
		st->st_size = (off_t)atomic_load(&c->egress_size);
		break;
	case K_LATEST:
		if (ctl_latest_id(c, id, sizeof(id)))
			st->st_size = (off_t)strlen(id);
		break;
	case K_SCRATCH:
		scratch_stat(c, n->serial, st);
		break;
	case K_CINPUT:
		code_stat_times(c, n->cx, st);
		st->st_size = len_of_code(c, n->cx, code_input_text);
		break;
	case K_COUTPUT:
		code_stat_times(c, n->cx, st);
		st->st_size = len_of_code(c, n->cx, code_output_text);
		break;
	case K_CRESULT:
		code_stat_times(c, n->cx, st);
		st->st_size = len_of_code(c, n->cx, code_result_json);
		break;
	case K_CIMAGE:
		code_stat_times(c, n->cx, st);
		st->st_size = len_of_image(c, n);
		break;
	case K_SDIR:
	case K_SINFO: /* its size would cost a request: 0 */
	case K_SWAIT:
		if (snaps_created(c->snaps, n->serial).tv_sec)
			st->st_mtim = st->st_ctim = st->st_atim =
				snaps_created(c->snaps, n->serial);
		break;
	default:
		if (n->job)
			job_stat(c, n, st);
		break;
	}
}

static bool is_live_kind(enum ctl_kind k)
{
	return k != K_ROOT && k != K_JOBS && k != K_JOB && k != K_README &&
	       k != K_CODE && k != K_CDIR && k != K_SNAPS && k != K_SDIR;
}

void ctl_entry_fill(struct ctl *c, const struct ctl_node *n,
		    struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	ctl_node_stat(c, n, &e->attr);
	e->ino = e->attr.st_ino;
	e->attr_timeout = is_live_kind(n->kind) ? LIVE_TIMEOUT : FIXED_TIMEOUT;
	/* a scratch file's name is asked again at once: renamed over a
	 * control file, the kernel's entry would name the gone file */
	e->entry_timeout = n->kind == K_LATEST || n->kind == K_SCRATCH ?
				   0.0 :
				   FIXED_TIMEOUT;
}

void ctl_reply_entry(fuse_req_t req, struct ctl *c, const struct ctl_node *n)
{
	struct fuse_entry_param e;
	ctl_entry_fill(c, n, &e);
	fuse_reply_entry(req, &e);
}

void ctl_lookup_root(fuse_req_t req)
{
	struct ctl_node n = { K_ROOT, NULL, 0, NULL };
	ctl_reply_entry(req, ctl_of(req), &n);
}

static int find_named(const struct ctl_named *t, size_t n, const char *name,
		      enum ctl_kind *ret)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(t[i].name, name) == 0) {
			*ret = t[i].kind;
			return 0;
		}
	}
	return -ENOENT;
}

/* The job named @name, loading or refreshing the table when needed. */
static struct job *job_named(struct ctl *c, const char *name)
{
	jobs_ensure_loaded(c->jobs);
	struct job *j = jobs_find(c->jobs, name);
	if (!j && job_name_valid(name)) {
		/* made by another mount meanwhile? */
		jobs_refresh(c->jobs, LOOKUP_REFRESH_MS);
		j = jobs_find(c->jobs, name);
	}
	return j;
}

/* The snapshot shown as @name, listing them again when it is not known
 * (made by another mount, or with osb). */
static int snap_named(struct ctl *c, const char *name, uint64_t *ret)
{
	int rc = snaps_find(c->snaps, name, ret);
	if (rc == -ENOENT) {
		snaps_refresh(c->snaps, LOOKUP_REFRESH_MS);
		rc = snaps_find(c->snaps, name, ret);
	}
	return rc;
}

int ctl_resolve(struct ctl *c, fuse_ino_t parent, const char *name,
		struct ctl_node *ret)
{
	struct ctl_node p, n = { K_ROOT, NULL, 0, NULL };
	char id[JOB_ID_MAX];
	int rc = ctl_node_get(c, parent, &p);

	if (!rc) {
		switch (p.kind) {
		case K_ROOT:
			rc = find_named(ctl_root_files, ctl_nroot, name,
					&n.kind);
			break;
		case K_JOB:
			rc = find_named(ctl_job_files, ctl_njob, name, &n.kind);
			if (!rc) {
				n.job = p.job;
				p.job = NULL; /* the reference moves to n */
			}
			break;
		case K_JOBS:
			if (strcmp(name, JOBS_WAIT_ALL) == 0) {
				n.kind = K_WAITALL; /* not listed: it blocks */
				rc = 0;
			} else if (strcmp(name, "latest") == 0) {
				jobs_ensure_loaded(c->jobs);
				n.kind = K_LATEST;
				rc = ctl_latest_id(c, id, sizeof(id)) ? 0 :
									-ENOENT;
			} else {
				n.kind = K_JOB;
				n.job = job_named(c, name);
				rc = n.job ? 0 : -ENOENT;
			}
			break;
		case K_CODE:
			n.kind = K_CDIR;
			rc = code_lang_open(c->code, name, &n.cx);
			break;
		case K_SNAPS:
			n.kind = K_SDIR;
			rc = snap_named(c, name, &n.serial);
			break;
		case K_SDIR:
			n.serial = p.serial;
			rc = find_named(ctl_snap_files, ctl_nsnap, name,
					&n.kind);
			break;
		case K_CDIR:
			n.cx = p.cx;
			rc = find_named(ctl_code_files, ctl_ncode, name,
					&n.kind);
			if (rc && code_name_is_image(name)) {
				int i = code_image_find(c->code, p.cx, name);
				n.kind = K_CIMAGE;
				n.serial = i < 0 ? 0 : (uint64_t)i;
				rc = i < 0 ? -ENOENT : 0;
			} else if (rc && code_ctx_is_lang(p.cx)) {
				n.kind = K_CDIR;
				n.cx = code_find_named(c->code, p.cx, name);
				rc = n.cx ? 0 : -ENOENT;
			}
			break;
		default:
			rc = -ENOTDIR;
		}
		if (rc == -ENOENT &&
		    (p.kind == K_ROOT || p.kind == K_JOB || p.kind == K_CDIR) &&
		    !scratch_find(c, parent, name, &n.serial)) {
			n.kind = K_SCRATCH;
			rc = 0;
		}
		ctl_node_put(c, &p);
	}
	if (rc)
		ctl_node_put(c, &n);
	else
		*ret = n;
	return rc;
}

void ctl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node n;
	int rc = ctl_resolve(c, parent, name, &n);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	ctl_reply_entry(req, c, &n);
	ctl_node_put(c, &n);
}

void ctl_forget(fuse_ino_t ino, uint64_t nlookup)
{
	/* inodes are computed, not allocated */
	(void)ino;
	(void)nlookup;
}

void ctl_getattr(fuse_req_t req, fuse_ino_t ino)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node n;
	struct stat st;

	if (ctl_node_get(c, ino, &n)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n.kind == K_JSTDOUT || n.kind == K_JSTDERR)
		job_watch(c->jobs, n.job); /* tail -f: keep the size fresh */
	ctl_node_stat(c, &n, &st);
	fuse_reply_attr(req, &st,
			is_live_kind(n.kind) ? LIVE_TIMEOUT : FIXED_TIMEOUT);
	ctl_node_put(c, &n);
}

void ctl_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node n;
	struct stat st;

	if (ctl_node_get(c, ino, &n)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	ctl_node_stat(c, &n, &st);
	ctl_node_put(c, &n);
	/* what open() would allow: the owner's bits of each file */
	int rc = 0;
	if (((mask & R_OK) && !(st.st_mode & S_IRUSR)) ||
	    ((mask & W_OK) && !(st.st_mode & S_IWUSR)) ||
	    ((mask & X_OK) && !(st.st_mode & S_IXUSR)))
		rc = EACCES;
	fuse_reply_err(req, rc);
}

void ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node n;
	struct stat st;

	if (ctl_node_get(c, ino, &n)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	int err = 0;
	if (n.kind == K_SCRATCH) {
		/* a writer may give its temporary file the mode and owner
		 * of the file it replaces: kept as the control file's */
		uid_t uid = c->fs->uid;
		gid_t gid = c->fs->gid;
		if (((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != uid) ||
		    ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != gid))
			err = EPERM;
		else if (to_set & FUSE_SET_ATTR_SIZE)
			err = -scratch_truncate(c, n.serial,
						(uint64_t)attr->st_size);
	} else if (to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME |
			      FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
			      FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)) {
		err = EPERM;
	} else if (!(ctl_node_mode(c, &n) & 0200)) {
		err = EACCES;
	}
	/* a truncation (O_TRUNC) of a file that keeps nothing: done */
	if (err) {
		fuse_reply_err(req, err);
	} else {
		ctl_node_stat(c, &n, &st);
		fuse_reply_attr(req, &st, LIVE_TIMEOUT);
	}
	ctl_node_put(c, &n);
}

void ctl_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ctl *c = ctl_of(req);
	char id[JOB_ID_MAX];
	if (ino != ctl_ino(K_LATEST, NULL)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!ctl_latest_id(c, id, sizeof(id)))
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_readlink(req, id);
}

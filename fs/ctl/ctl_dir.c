/*
 * ctl_dir.c - the control tree's directories: listings (a snapshot made
 * at opendir, jobs oldest first; code/ the languages the sandbox
 * offers), mkdir/rmdir in jobs/ (named jobs; forgetting a job, as
 * `forget` in its ctl does: ctl_job_forget), and in code/LANG/ (another
 * context; removing it). Other directories refuse changes with EPERM.
 *
 * A job's `wait` is reachable by name but not listed (ctl_named's
 * unlisted), as the control dir itself is left out of the mount's root
 * listing (ZFS hides its .zfs so): a program that walks the tree and
 * reads every file (grep -r, backups, indexers) never comes across the
 * one file whose read blocks while the job runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl_i.h"
#include "log.h"

/* how old the table may be when jobs/ is listed (another mount may have
 * made or removed jobs) */
#define LIST_REFRESH_MS 2000

struct dent {
	char name[JOB_ID_MAX];
	fuse_ino_t ino;
	mode_t type;
};

struct dirsnap {
	struct dent *e;
	size_t n;
};

static int snap_add(struct dirsnap *d, size_t *cap, const char *name,
		    fuse_ino_t ino, mode_t type)
{
	if (d->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct dent *e = realloc(d->e, nc * sizeof(*e));
		if (!e)
			return -ENOMEM;
		d->e = e;
		*cap = nc;
	}
	snprintf(d->e[d->n].name, sizeof(d->e[d->n].name), "%s", name);
	d->e[d->n].ino = ino;
	d->e[d->n].type = type;
	d->n++;
	return 0;
}

/* code/: the languages the sandbox offers. */
static int snap_code(struct ctl *c, struct dirsnap *d, size_t *cap)
{
	unsigned mask = code_langs_offered(c->code);
	int rc = 0;
	for (int i = 0; !rc && i < CODE_NLANG; i++) {
		struct ctl_node n = { K_CDIR, NULL, 0, NULL };
		if (!(mask & (1u << i)) ||
		    code_lang_open(c->code, code_langs[i], &n.cx))
			continue;
		rc = snap_add(d, cap, code_langs[i], ctl_node_ino(&n), S_IFDIR);
	}
	return rc;
}

/* code/LANG/ or code/LANG/NAME/: the files, and in the first the
 * contexts made by mkdir. */
static int snap_cdir(struct ctl *c, const struct ctl_node *dir,
		     struct dirsnap *d, size_t *cap)
{
	struct code_entry *e = NULL;
	size_t n = 0;
	int rc = 0;
	for (size_t i = 0; !rc && i < ctl_ncode; i++) {
		struct ctl_node f = { ctl_code_files[i].kind, NULL, 0,
				      dir->cx };
		rc = snap_add(d, cap, ctl_code_files[i].name, ctl_node_ino(&f),
			      S_IFREG);
	}
	char name[32];
	for (size_t i = 0;
	     !rc && code_image_name(c->code, dir->cx, i, name, sizeof(name));
	     i++) {
		struct ctl_node f = { K_CIMAGE, NULL, i, dir->cx };
		rc = snap_add(d, cap, name, ctl_node_ino(&f), S_IFREG);
	}
	if (!rc && code_ctx_is_lang(dir->cx))
		rc = code_list_named(c->code, dir->cx, &e, &n);
	for (size_t i = 0; !rc && i < n; i++) {
		struct ctl_node f = { K_CDIR, NULL, 0,
				      code_by_serial(c->code, e[i].serial) };
		if (f.cx)
			rc = snap_add(d, cap, e[i].name, ctl_node_ino(&f),
				      S_IFDIR);
	}
	free(e);
	return rc;
}

/* The inode of @n's parent directory. */
static fuse_ino_t parent_ino(struct ctl *c, const struct ctl_node *n)
{
	struct ctl_node p = { K_CDIR, NULL, 0, NULL };
	switch (n->kind) {
	case K_ROOT:
		return NODE_ROOT_INO;
	case K_JOBS:
	case K_CODE:
	case K_SNAPS:
		return ctl_root_ino();
	case K_SDIR:
		return ctl_ino(K_SNAPS, NULL);
	case K_CDIR:
		if (code_ctx_is_lang(n->cx))
			return ctl_ino(K_CODE, NULL);
		p.cx = code_ctx_lang(c->code, n->cx);
		return ctl_node_ino(&p);
	case K_CIMAGE:
		p.cx = n->cx;
		return ctl_node_ino(&p);
	default:
		return ctl_ino(K_JOBS, NULL);
	}
}

static int snap_jobs(struct ctl *c, struct dirsnap *d, size_t *cap)
{
	struct job_entry *e = NULL;
	size_t n = 0;

	jobs_refresh(c->jobs, LIST_REFRESH_MS);
	int rc = jobs_list(c->jobs, &e, &n);
	for (size_t i = 0; !rc && i < n; i++)
		rc = snap_add(d, cap, e[i].id,
			      CTL_INO_BASE + (e[i].serial << CTL_JOB_SHIFT),
			      S_IFDIR);
	if (!rc && n)
		rc = snap_add(d, cap, "latest", ctl_ino(K_LATEST, NULL),
			      S_IFLNK);
	free(e);
	return rc;
}

/* snapshots/: newest first; and a snapshot's directory */
static int snap_snaps(struct ctl *c, const struct ctl_node *dir,
		      struct dirsnap *d, size_t *cap)
{
	struct snap_entry *e = NULL;
	size_t n = 0;
	int rc = 0;

	for (size_t i = 0; dir->kind == K_SDIR && !rc && i < ctl_nsnap; i++) {
		struct ctl_node f = { ctl_snap_files[i].kind, NULL, dir->serial,
				      NULL };
		if (!ctl_snap_files[i].unlisted)
			rc = snap_add(d, cap, ctl_snap_files[i].name,
				      ctl_node_ino(&f), S_IFREG);
	}
	if (dir->kind == K_SDIR)
		return rc;
	snaps_refresh(c->snaps, LIST_REFRESH_MS);
	rc = snaps_list(c->snaps, &e, &n);
	for (size_t i = 0; !rc && i < n; i++) {
		struct ctl_node f = { K_SDIR, NULL, e[i].serial, NULL };
		rc = snap_add(d, cap, e[i].dir, ctl_node_ino(&f), S_IFDIR);
	}
	free(e);
	return rc;
}

static bool is_dir_kind(enum ctl_kind k)
{
	return k == K_ROOT || k == K_JOBS || k == K_JOB || k == K_CODE ||
	       k == K_CDIR || k == K_SNAPS || k == K_SDIR;
}

void ctl_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node n;
	size_t cap = 0;

	if (ctl_node_get(c, ino, &n)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct dirsnap *d = calloc(1, sizeof(*d));
	int rc = d ? 0 : -ENOMEM;
	if (!rc && !is_dir_kind(n.kind))
		rc = -ENOTDIR;
	if (!rc)
		rc = snap_add(d, &cap, ".", ino, S_IFDIR);
	if (!rc)
		rc = snap_add(d, &cap, "..", parent_ino(c, &n), S_IFDIR);
	for (size_t i = 0; !rc && n.kind == K_ROOT && i < ctl_nroot; i++)
		rc = snap_add(d, &cap, ctl_root_files[i].name,
			      ctl_ino(ctl_root_files[i].kind, NULL),
			      is_dir_kind(ctl_root_files[i].kind) ? S_IFDIR :
								    S_IFREG);
	for (size_t i = 0; !rc && n.kind == K_JOB && i < ctl_njob; i++) {
		if (ctl_job_files[i].unlisted)
			continue;
		rc = snap_add(d, &cap, ctl_job_files[i].name,
			      ctl_ino(ctl_job_files[i].kind, n.job), S_IFREG);
	}
	if (!rc && n.kind == K_JOBS)
		rc = snap_jobs(c, d, &cap);
	if (!rc && n.kind == K_CODE)
		rc = snap_code(c, d, &cap);
	if (!rc && n.kind == K_CDIR)
		rc = snap_cdir(c, &n, d, &cap);
	if (!rc && (n.kind == K_SNAPS || n.kind == K_SDIR))
		rc = snap_snaps(c, &n, d, &cap);
	ctl_node_put(c, &n);
	if (rc) {
		if (d)
			free(d->e);
		free(d);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		free(d->e);
		free(d);
	}
}

void ctl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		 struct fuse_file_info *fi, bool plus)
{
	struct ctl *c = ctl_of(req);
	struct dirsnap *d = (struct dirsnap *)(uintptr_t)fi->fh;
	char *buf = calloc(1, size ? size : 1);
	size_t used = 0;
	(void)ino;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = (size_t)off; i < d->n; i++) {
		struct dent *de = &d->e[i];
		size_t need;
		if (!plus) {
			struct stat st = { .st_ino = de->ino,
					   .st_mode = de->type };
			need = fuse_add_direntry(req, buf + used, size - used,
						 de->name, &st, (off_t)(i + 1));
		} else {
			struct fuse_entry_param e;
			struct ctl_node n;
			memset(&e, 0, sizeof(e));
			if (i >= 2 && ctl_node_get(c, de->ino, &n) == 0) {
				ctl_entry_fill(c, &n, &e);
				ctl_node_put(c, &n);
			} else {
				e.attr.st_ino = de->ino;
				e.attr.st_mode = de->type;
			}
			need = fuse_add_direntry_plus(req, buf + used,
						      size - used, de->name, &e,
						      (off_t)(i + 1));
		}
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

void ctl_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dirsnap *d = (struct dirsnap *)(uintptr_t)fi->fh;
	(void)ino;
	if (d)
		free(d->e);
	free(d);
	fuse_reply_err(req, 0);
}

void ctl_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node p;
	struct job *j = NULL;
	(void)mode;

	int rc = ctl_node_get(c, parent, &p);
	if (!rc && p.kind == K_CDIR && code_ctx_is_lang(p.cx)) {
		struct code_ctx *cx = NULL;
		rc = code_make_named(c->code, p.cx, name, &cx);
		if (!rc) {
			struct ctl_node n = { K_CDIR, NULL, 0, cx };
			ctl_reply_entry(req, c, &n);
		} else {
			fuse_reply_err(req, -rc);
		}
		ctl_node_put(c, &p);
		return;
	}
	if (!rc && p.kind == K_SNAPS) {
		struct ctl_node n = { K_SDIR, NULL, 0, NULL };
		rc = snaps_make(c->snaps, name, &n.serial);
		if (!rc)
			ctl_reply_entry(req, c, &n);
		else
			fuse_reply_err(req, -rc);
		ctl_node_put(c, &p);
		return;
	}
	if (!rc && p.kind != K_JOBS)
		rc = -EPERM;
	if (!rc && strcmp(name, "latest") == 0)
		rc = -EEXIST;
	if (!rc && !job_name_valid(name)) {
		log_error("mkdir jobs/%s: a job name is 1 to %d of A-Z a-z "
			  "0-9 . _ - (not starting with . or -)",
			  name, JOB_NAME_MAX);
		rc = -EINVAL;
	}
	if (!rc)
		rc = jobs_make_named(c->jobs, name, &j);
	if (!rc) {
		struct ctl_node n = { K_JOB, j, 0, NULL };
		ctl_reply_entry(req, c, &n);
		job_put(c->jobs, j);
	} else {
		fuse_reply_err(req, -rc);
	}
	ctl_node_put(c, &p);
}

int ctl_job_forget(struct ctl *c, const char *id, const char *what)
{
	jobs_ensure_loaded(c->jobs);
	struct job *j = jobs_find(c->jobs, id);
	fuse_ino_t dir = j ? ctl_ino(K_JOB, j) : 0;
	job_put(c->jobs, j);
	int rc = jobs_remove(c->jobs, id);
	if (rc == -EBUSY)
		log_error("%s: the job is running: kill it first (echo kill > "
			  "%s/jobs/%s/ctl), then forget it",
			  what, c->fs->opt->control_dir, id);
	if (!rc && dir)
		scratch_drop_dir(c, dir);
	return rc;
}

/* rmdir code/LANG/@name, @lang being code/LANG/'s context. */
static void rmdir_context(fuse_req_t req, struct ctl *c, struct code_ctx *lang,
			  const char *name)
{
	struct ctl_node n = { K_CDIR, NULL, 0,
			      code_find_named(c->code, lang, name) };
	int rc = 0;
	for (size_t i = 0; i < ctl_ncode; i++)
		if (strcmp(ctl_code_files[i].name, name) == 0)
			rc = -ENOTDIR;
	if (!rc)
		rc = code_remove_named(c->code, lang, name);
	if (!rc && n.cx)
		scratch_drop_dir(c, ctl_node_ino(&n));
	fuse_reply_err(req, -rc);
}

void ctl_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node p;

	int rc = ctl_node_get(c, parent, &p);
	if (!rc && p.kind == K_CDIR && code_ctx_is_lang(p.cx)) {
		rmdir_context(req, c, p.cx, name);
		ctl_node_put(c, &p);
		return;
	}
	if (!rc && p.kind == K_SNAPS) {
		fuse_reply_err(req, -snaps_remove(c->snaps, name));
		ctl_node_put(c, &p);
		return;
	}
	if (!rc && p.kind != K_JOBS)
		rc = p.kind == K_JOB || p.kind == K_SDIR ? -ENOTDIR : -EPERM;
	if (!rc && strcmp(name, "latest") == 0)
		rc = -ENOTDIR;
	if (!rc) {
		char what[JOB_ID_MAX + 16];
		snprintf(what, sizeof(what), "rmdir jobs/%s", name);
		rc = ctl_job_forget(c, name, what);
	}
	fuse_reply_err(req, -rc);
	ctl_node_put(c, &p);
}

/* ---- a writer's temporary files: unlink, and rename over a file ---- */

void ctl_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node n;
	int rc = ctl_resolve(c, parent, name, &n);
	if (!rc) {
		/* the tree's own names stay (rmdir forgets a job) */
		rc = n.kind == K_SCRATCH ? scratch_unlink(c, parent, name) :
					   -EPERM;
		ctl_node_put(c, &n);
	}
	fuse_reply_err(req, -rc);
}

/* Renames the scratch file @name of @parent to @newname of @newparent:
 * over a control file, it is written to that file. */
static int rename_scratch(struct ctl *c, fuse_ino_t parent, const char *name,
			  fuse_ino_t newparent, const char *newname,
			  unsigned int flags)
{
	struct ctl_node dst;
	int rc = ctl_resolve(c, newparent, newname, &dst);
	if (rc == -ENOENT || (!rc && dst.kind == K_SCRATCH)) {
		if (!rc)
			ctl_node_put(c, &dst);
		/* to another temporary name */
		return scratch_rename(c, parent, name, newparent, newname,
				      flags & RENAME_NOREPLACE);
	}
	if (rc)
		return rc;
	mode_t m = ctl_node_mode(c, &dst);
	if (flags & RENAME_NOREPLACE)
		rc = -EEXIST;
	else if (S_ISDIR(m))
		rc = -EISDIR;
	else if (!(m & 0200))
		rc = -EACCES;
	if (rc == -EACCES && dst.kind == K_JCMD)
		ctl_log_cmd_taken(c, dst.job);
	struct text data = { 0 };
	if (!rc)
		rc = scratch_take(c, parent, name, &data);
	if (!rc)
		rc = ctl_apply(c, &dst, data.s ? data.s : "", data.len);
	text_release(&data);
	ctl_node_put(c, &dst);
	return rc;
}

void ctl_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node src;
	int rc = flags & RENAME_EXCHANGE ? -EINVAL : 0;
	if (!rc)
		rc = ctl_resolve(c, parent, name, &src);
	if (!rc) {
		/* only a writer's temporary file moves */
		bool scratch = src.kind == K_SCRATCH;
		ctl_node_put(c, &src);
		rc = scratch ? rename_scratch(c, parent, name, newparent,
					      newname, flags) :
			       -EPERM;
	}
	fuse_reply_err(req, -rc);
}

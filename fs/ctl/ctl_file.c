/*
 * ctl_file.c - open control files: open, read, write, flush, release.
 *
 * Every control file is opened direct_io (its size changes; no page
 * cache). What a read returns is made when a read at offset 0 comes (so
 * `cat` sees one consistent value, and re-reading from the start gives a
 * fresh one), except stdout/stderr (ranged downloads) and wait (answered
 * when the job ends, see jobs_wait.c).
 *
 * `run` and a named job's `cmd` collect what is written and start the
 * job at the first flush (close) after a write, so close() reports a
 * failed start, or at the first read of the same open file (which then
 * returns the new job's id, whatever the file offset: after the write it
 * is past the command). Closing without writing starts nothing.
 *
 * A writer's temporary file (ctl_scratch.c) is made by create in .osb/
 * or a job's directory, under a temporary name of one of its files, and
 * read and written like a file; renamed over a control file, it is
 * written to it by ctl_apply().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl_i.h"
#include "log.h"
#include "setup.h"

static struct ctl_fh *fh_of(struct fuse_file_info *fi)
{
	return (struct ctl_fh *)(uintptr_t)fi->fh;
}

/* Links a new handle into c->fhs. */
static void fh_track(struct ctl *c, struct ctl_fh *fh)
{
	pthread_mutex_lock(&c->fh_lock);
	fh->prev = NULL;
	fh->next = c->fhs;
	if (c->fhs)
		c->fhs->prev = fh;
	c->fhs = fh;
	pthread_mutex_unlock(&c->fh_lock);
}

static void fh_free(struct ctl *c, struct ctl_fh *fh)
{
	if (!fh)
		return;
	pthread_mutex_lock(&c->fh_lock);
	if (fh->prev)
		fh->prev->next = fh->next;
	else if (c->fhs == fh)
		c->fhs = fh->next;
	if (fh->next)
		fh->next->prev = fh->prev;
	pthread_mutex_unlock(&c->fh_lock);
	ctl_node_put(c, &fh->node);
	jobs_put_set(c->jobs, fh->set, fh->nset);
	text_release(&fh->out);
	text_release(&fh->in);
	pthread_mutex_destroy(&fh->lock);
	free(fh);
}

/* Whether @n may be opened so: 0 or the errno. */
static int open_check(struct ctl *c, const struct ctl_node *n, bool rd, bool wr)
{
	mode_t m = ctl_node_mode(c, n);
	if (S_ISDIR(m))
		return EISDIR;
	if (S_ISLNK(m))
		return ELOOP;
	if ((rd && !(m & 0444)) || (wr && !(m & 0200)))
		return EACCES;
	return 0;
}

void ctl_log_cmd_taken(struct ctl *c, struct job *job)
{
	struct text st = { 0 };
	if (job_status_text(c->jobs, job, &st) == 0 && st.len &&
	    st.s[st.len - 1] == '\n')
		st.s[--st.len] = '\0';
	log_error("jobs/%s/cmd: the job has a command already (status: %s); "
		  "a job runs one command: name a new job, or forget this "
		  "one first (echo forget > %s/jobs/%s/ctl)",
		  job_id(job), st.s ? st.s : "?", c->fs->opt->control_dir,
		  job_id(job));
	text_release(&st);
}

void ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node n;
	int acc = fi->flags & O_ACCMODE;

	if (ctl_node_get(c, ino, &n)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	int err = open_check(c, &n, acc != O_WRONLY, acc != O_RDONLY);
	if (err == EACCES && n.kind == K_JCMD && acc != O_RDONLY)
		ctl_log_cmd_taken(c, n.job); /* a name used again */
	struct ctl_fh *fh = err ? NULL : calloc(1, sizeof(*fh));
	if (!err && !fh)
		err = ENOMEM;
	if (!err && n.kind == K_SCRATCH && (fi->flags & O_TRUNC) &&
	    acc != O_RDONLY)
		err = -scratch_truncate(c, n.serial, 0);
	if (err) {
		ctl_node_put(c, &n);
		free(fh);
		fuse_reply_err(req, err);
		return;
	}
	pthread_mutex_init(&fh->lock, NULL);
	fh->node = n;
	fh->writer = acc != O_RDONLY;
	/* what it waits for: the jobs running now, for each read of it */
	if (n.kind == K_WAITALL) {
		jobs_ensure_loaded(c->jobs);
		err = -jobs_running(c->jobs, &fh->set, &fh->nset);
	}
	if (err) {
		pthread_mutex_destroy(&fh->lock);
		free(fh);
		fuse_reply_err(req, err);
		return;
	}
	fh_track(c, fh);
	fi->fh = (uint64_t)(uintptr_t)fh;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	if (fuse_reply_open(req, fi) == -ENOENT)
		fh_free(c, fh); /* interrupted: no release will come */
}

void ctl_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		mode_t mode, struct fuse_file_info *fi)
{
	struct ctl *c = ctl_of(req);
	struct ctl_node n = { K_SCRATCH, NULL, 0, NULL };
	(void)mode;

	/* a writer's temporary file, in .osb/ or a job's directory; nothing
	 * else can be made here (mkdir jobs/NAME makes jobs) */
	int rc = scratch_create(c, parent, name, &n.serial);
	if (rc == -ENOSPC)
		log_error("%s: %d temporary files wait to be renamed over a "
			  "control file already: info's \"scratch\" lists "
			  "them; remove them (rm) or rename them over their "
			  "files",
			  c->fs->opt->control_dir, SCRATCH_MAX);
	struct ctl_fh *fh = rc ? NULL : calloc(1, sizeof(*fh));
	if (!rc && !fh) {
		scratch_unlink(c, parent, name);
		rc = -ENOMEM;
	}
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	pthread_mutex_init(&fh->lock, NULL);
	fh->node = n;
	fh->writer = true;
	fh_track(c, fh);
	fi->fh = (uint64_t)(uintptr_t)fh;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	struct fuse_entry_param e;
	ctl_entry_fill(c, &n, &e);
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		fh_free(c, fh);
}

/* ---- starting a job from run or cmd ---- */

static const char *file_name(const struct ctl_fh *fh)
{
	return fh->node.kind == K_RUN    ? "run" :
	       fh->node.kind == K_CINPUT ? "input" :
					   "cmd";
}

/* Starts the job written to @fh, once. Locked (fh). */
static int start_pending(struct ctl *c, struct ctl_fh *fh)
{
	if (fh->started)
		return fh->start_rc;
	if (!fh->in.len)
		return 0; /* nothing written (yet): a dup'd fd's close */
	fh->started = true;
	int rc = 0;
	if (text_blank(fh->in.s, fh->in.len)) {
		log_error("%s: the %s is empty", file_name(fh),
			  fh->node.kind == K_CINPUT ? "code" : "command");
		rc = -EINVAL;
	} else if (text_check_command(fh->in.s, fh->in.len, false)) {
		log_error("%s: the command is not text (binary data, or not "
			  "UTF-8)",
			  file_name(fh));
		rc = -EINVAL;
	} else if ((rc = setup_gate(c->setup, file_name(fh))) != 0) {
		/* a setup that runs holds the start back; a failed one
		 * refuses it (setup.h) */
	} else if (fh->node.kind == K_CINPUT) {
		rc = code_run(c->code, fh->node.cx, fh->in.s, fh->in.len);
	} else if (fh->node.kind == K_RUN) {
		struct job *j = NULL;
		rc = jobs_run(c->jobs, fh->in.s, fh->in.len, &j);
		if (!rc) {
			snprintf(fh->job_id, sizeof(fh->job_id), "%s",
				 job_id(j));
			job_put(c->jobs, j);
		}
	} else {
		rc = job_start(c->jobs, fh->node.job, fh->in.s, fh->in.len);
		if (rc == -EACCES)
			ctl_log_cmd_taken(c, fh->node.job);
	}
	fh->start_rc = rc;
	text_release(&fh->in);
	return rc;
}

/* ---- read ---- */

/* Makes what a read of @fh returns. Locked (fh). */
static int make_out(struct ctl *c, struct ctl_fh *fh)
{
	struct jobs *js = c->jobs;
	struct job *j = fh->node.job;
	struct text *t = &fh->out;
	char *log;
	int rc;

	text_clear(t);
	switch (fh->node.kind) {
	case K_README:
		return text_add(t, c->readme.s, c->readme.len);
	case K_INFO:
		return ctl_info_json(c, t);
	case K_LOG:
		log = log_recent();
		rc = log ? text_adds(t, log) : -ENOMEM;
		free(log);
		return rc;
	case K_EGRESS:
		return ctl_egress_text(c, t);
	case K_RUN:
		rc = start_pending(c, fh);
		if (!rc && fh->job_id[0])
			rc = text_printf(t, "%s\n", fh->job_id);
		return rc;
	case K_JCMD:
		rc = job_cmd_text(js, j, t);
		return rc == -ENOENT ? 0 : rc;
	case K_JSTATUS:
		return job_status_text(js, j, t);
	case K_JEXIT:
		return job_exit_code_text(js, j, t);
	case K_JINFO:
		return job_info_json(js, j, t);
	case K_SCRATCH:
		return scratch_read(c, fh->node.serial, t);
	case K_CINPUT:
		return code_input_text(c->code, fh->node.cx, t);
	case K_COUTPUT:
		return code_output_text(c->code, fh->node.cx, t);
	case K_CRESULT:
		return code_result_json(c->code, fh->node.cx, t);
	case K_CIMAGE:
		return code_image_text(c->code, fh->node.cx,
				       (size_t)fh->node.serial, t);
	case K_SINFO:
		return snaps_info_json(c->snaps, fh->node.serial, t);
	default:
		return -EACCES;
	}
}

static void read_output(fuse_req_t req, struct ctl *c, struct ctl_fh *fh,
			size_t size, off_t off)
{
	struct text t = { 0 };
	int rc = job_read_output(c->jobs, fh->node.job,
				 fh->node.kind == K_JSTDOUT ? JOB_STDOUT :
							      JOB_STDERR,
				 size, off, &t);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, t.s, t.len < size ? t.len : size);
	text_release(&t);
}

void ctl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	      struct fuse_file_info *fi)
{
	struct ctl *c = ctl_of(req);
	struct ctl_fh *fh = fh_of(fi);
	(void)ino;

	switch (fh->node.kind) {
	case K_JWAIT:
		job_wait(c->jobs, fh->node.job, req, size, off);
		return;
	case K_WAITALL:
		jobs_wait_all(c->jobs, fh->set, fh->nset, req, size, off);
		return;
	case K_SWAIT:
		snaps_wait(c->snaps, fh->node.serial, req, size, off);
		return;
	case K_JSTDOUT:
	case K_JSTDERR:
		read_output(req, c, fh, size, off);
		return;
	default:
		break;
	}
	pthread_mutex_lock(&fh->lock);
	int rc = 0;
	if (fh->node.kind == K_RUN) {
		/* the id, to whoever reads first: after a write, the file
		 * offset is past what was written */
		off = fh->out_pos;
	}
	if (!fh->have_out || (off == 0 && fh->node.kind != K_RUN)) {
		rc = make_out(c, fh);
		fh->have_out = !rc;
	}
	if (rc) {
		pthread_mutex_unlock(&fh->lock);
		fuse_reply_err(req, -rc);
		return;
	}
	size_t len = fh->out.len;
	size_t from = off < 0 || (size_t)off > len ? len : (size_t)off;
	size_t n = len - from < size ? len - from : size;
	fh->out_pos = from + n;
	fuse_reply_buf(req, n ? fh->out.s + from : NULL, n);
	pthread_mutex_unlock(&fh->lock);
}

/* ---- write ---- */

/* Collects a piece of the command written to run or cmd. Locked (fh). */
static int collect_command(struct ctl_fh *fh, const char *buf, size_t size,
			   off_t off)
{
	if (fh->started) {
		log_error("%s: the job was already started from this open "
			  "file; open it again for another",
			  file_name(fh));
		return -EBUSY;
	}
	int rc = memchr(buf, '\0', size) ? -EINVAL : 0;
	if (!rc)
		rc = text_put(&fh->in, (uint64_t)off, buf, size);
	if (!rc)
		rc = text_check_command(fh->in.s, fh->in.len, true);
	if (rc == -EFBIG)
		log_error("%s: a command may hold at most %u bytes",
			  file_name(fh), TEXT_MAX);
	else if (rc == -EINVAL)
		log_error("%s: the command is not text (binary data, or not "
			  "UTF-8)",
			  file_name(fh));
	if (rc) {
		/* the command is spoiled: nothing starts from this file */
		text_release(&fh->in);
		fh->started = true;
		fh->start_rc = rc;
	}
	return rc;
}

/* A write to @fh: 0 or -errno. */
static int fh_write(struct ctl *c, struct ctl_fh *fh, const char *buf,
		    size_t size, off_t off)
{
	int rc;
	switch (fh->node.kind) {
	case K_CTL:
		rc = ctl_exec(c, buf, size);
		break;
	case K_JCTL:
		rc = ctl_job_exec(c, fh->node.job, buf, size);
		break;
	case K_EGRESS:
		pthread_mutex_lock(&fh->lock);
		rc = text_add(&fh->in, buf, size);
		if (!rc && text_check_command(fh->in.s, fh->in.len, true)) {
			log_error("egress: not text (binary data, or not "
				  "UTF-8)");
			rc = -EINVAL;
		}
		if (!rc)
			rc = ctl_egress_apply(c, fh, false);
		if (rc)
			text_release(&fh->in);
		pthread_mutex_unlock(&fh->lock);
		break;
	case K_CINPUT:
		if (code_busy(c->code, fh->node.cx)) {
			log_error("input: a run is in progress in this context "
				  "(read output; write interrupt to ctl to "
				  "stop it)");
			rc = -EBUSY;
			break;
		}
		/* fall through */
	case K_RUN:
	case K_JCMD:
		pthread_mutex_lock(&fh->lock);
		rc = collect_command(fh, buf, size, off);
		pthread_mutex_unlock(&fh->lock);
		break;
	case K_CCTL:
		rc = code_ctl(c->code, fh->node.cx, buf, size);
		break;
	case K_SCRATCH:
		rc = off < 0 ? -EINVAL :
			       scratch_write(c, fh->node.serial, buf, size,
					     (uint64_t)off);
		break;
	default:
		rc = -EACCES;
	}
	return rc;
}

void ctl_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
	       off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	int rc = fh_write(ctl_of(req), fh_of(fi), buf, size, off);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

/* A close (flush) of @fh: what close() returns. */
static int fh_flush(struct ctl *c, struct ctl_fh *fh)
{
	int rc = 0;
	pthread_mutex_lock(&fh->lock);
	if (fh->node.kind == K_RUN || fh->node.kind == K_JCMD ||
	    fh->node.kind == K_CINPUT) {
		if (fh->writer)
			rc = start_pending(c, fh);
	} else if (fh->node.kind == K_EGRESS && fh->in.len) {
		rc = ctl_egress_apply(c, fh, true);
		text_release(&fh->in);
	}
	pthread_mutex_unlock(&fh->lock);
	return rc;
}

void ctl_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, -fh_flush(ctl_of(req), fh_of(fi)));
}

int ctl_apply(struct ctl *c, const struct ctl_node *target, const char *buf,
	      size_t len)
{
	struct ctl_fh fh = { .node = *target, .writer = true };
	int rc = -open_check(c, target, false, true);
	if (rc)
		return rc;
	pthread_mutex_init(&fh.lock, NULL);
	if (len)
		rc = fh_write(c, &fh, buf, len, 0);
	int frc = fh_flush(c, &fh);
	if (!rc)
		rc = frc;
	text_release(&fh.out);
	text_release(&fh.in);
	pthread_mutex_destroy(&fh.lock);
	return rc;
}

void ctl_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fh_free(ctl_of(req), fh_of(fi));
	fuse_reply_err(req, 0);
}

void ctl_fh_free_all(struct ctl *c)
{
	while (c->fhs)
		fh_free(c, c->fhs);
}

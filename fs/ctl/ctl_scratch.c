/*
 * ctl_scratch.c - files a writer makes in a control directory to rename
 * over a control file: the way editors, agents' file tools and
 * write-file-atomic libraries write a file (a temporary file in the same
 * directory, then a rename over the target).
 *
 * Only a name plainly on its way to such a rename is taken: the name of
 * one of the directory's files with a prefix (. # .#) and/or a suffix
 * starting with . ~ - _ # or + (run.tmp, .run.swp, run~, .#run,
 * cmd.tmp.42), or a name starting with tmp or .tmp (Python's tempfile,
 * mktemp). Any other create (a misspelled control file: runs, cmnd) is
 * EACCES, logged with the names of the directory's files, so a mistake
 * is an error and not a file that nobody reads.
 *
 * A scratch file lives in memory only, in the control directory it was
 * made in (.osb/, a job's or a code context's directory), up to TEXT_MAX
 * bytes; at most SCRATCH_MAX exist at once, and none outlives the mount.
 * Renamed over a writable control file, its bytes are written to that
 * file as one open, write and close would (ctl_apply), and it is gone,
 * whether that write worked or not: the rename returns what the close
 * would have. Renamed over another scratch name, it is renamed. Scratch
 * files are found by name but not listed in their directory (a tree
 * walker never comes across them); info's "scratch" lists them all.
 *
 * They are looked up by serial under their own lock (a leaf: nothing is
 * taken under it), so a handle holds no pointer into the table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ctl_i.h"
#include "log.h"

struct scratch {
	uint64_t serial;
	fuse_ino_t parent;
	char *name;
	struct text data;
	struct timespec mtime;
};

struct scratch_table {
	pthread_mutex_t lock;
	struct scratch *e[SCRATCH_MAX];
	size_t n;
	uint64_t next_serial;
};

int scratch_init(struct ctl *c)
{
	struct scratch_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->next_serial = 1;
	c->scratch = t;
	return 0;
}

static void entry_free(struct scratch *s)
{
	text_release(&s->data);
	free(s->name);
	free(s);
}

void scratch_free(struct ctl *c)
{
	struct scratch_table *t = c->scratch;
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		entry_free(t->e[i]);
	pthread_mutex_destroy(&t->lock);
	free(t);
	c->scratch = NULL;
}

fuse_ino_t scratch_ino(uint64_t serial)
{
	return CTL_INO_BASE + SCRATCH_INO_BIT + serial;
}

/* Locks the table: the scratch file @serial, or NULL. The caller
 * unlocks. */
static struct scratch *lock_serial(struct scratch_table *t, uint64_t serial)
{
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n; i++)
		if (t->e[i]->serial == serial)
			return t->e[i];
	return NULL;
}

static ssize_t by_name(struct scratch_table *t, fuse_ino_t parent,
		       const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->e[i]->parent == parent &&
		    strcmp(t->e[i]->name, name) == 0)
			return (ssize_t)i;
	return -1;
}

/* Removes entry @i from the table and returns it. Locked. */
static struct scratch *take(struct scratch_table *t, size_t i)
{
	struct scratch *s = t->e[i];
	t->e[i] = t->e[--t->n];
	return s;
}

bool scratch_exists(struct ctl *c, uint64_t serial)
{
	bool found = lock_serial(c->scratch, serial) != NULL;
	pthread_mutex_unlock(&c->scratch->lock);
	return found;
}

int scratch_find(struct ctl *c, fuse_ino_t parent, const char *name,
		 uint64_t *ret_serial)
{
	struct scratch_table *t = c->scratch;
	pthread_mutex_lock(&t->lock);
	ssize_t i = by_name(t, parent, name);
	if (i >= 0)
		*ret_serial = t->e[i]->serial;
	pthread_mutex_unlock(&t->lock);
	return i >= 0 ? 0 : -ENOENT;
}

/* A control directory that takes scratch files: its path under the
 * control dir ("" for the top) and its files. */
struct sdir {
	char path[JOB_ID_MAX + CODE_NAME_MAX + 32];
	const struct ctl_named *files;
	size_t n;
};

/* Whether the control dir @parent takes scratch files: .osb/ and a
 * job's or a code context's directory do; 0 or -EACCES (-ENOENT: it is
 * gone). */
static int takes_scratch(struct ctl *c, fuse_ino_t parent, struct sdir *d)
{
	struct ctl_node p;
	int rc = ctl_node_get(c, parent, &p);
	if (rc)
		return rc;
	d->path[0] = '\0';
	if (p.kind == K_ROOT) {
		d->files = ctl_root_files;
		d->n = ctl_nroot;
	} else if (p.kind == K_JOB) {
		snprintf(d->path, sizeof(d->path), "jobs/%s", job_id(p.job));
		d->files = ctl_job_files;
		d->n = ctl_njob;
	} else if (p.kind == K_CDIR) {
		code_ctx_path(p.cx, d->path, sizeof(d->path));
		d->files = ctl_code_files;
		d->n = ctl_ncode;
	} else {
		rc = -EACCES;
	}
	ctl_node_put(c, &p);
	return rc;
}

/* Whether @name is a temporary name for the file @file: [PREFIX]FILE
 * [SEP...], PREFIX one of . # .# and SEP one of . ~ - _ # + (at least
 * one of the two present): run.tmp, run~, .run.swp, .#run, #run#,
 * cmd.tmp.1234, .ctl.XXXXXX. */
static bool temp_of(const char *name, const char *file)
{
	static const char *const prefixes[] = { "", ".", "#", ".#" };
	size_t fl = strlen(file);
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);
		const char *rest = name + pl;
		if (strncmp(name, prefixes[i], pl) != 0 ||
		    strncmp(rest, file, fl) != 0)
			continue;
		if (rest[fl] ? strchr(".~-_#+", rest[fl]) != NULL : pl > 0)
			return true;
	}
	return false;
}

/* Whether @k is a control file, not a directory of them. */
static bool file_kind(enum ctl_kind k)
{
	return k != K_JOBS && k != K_CODE && k != K_SNAPS;
}

/* Whether @name in @d is plainly a temporary file on its way to a
 * rename over one of its control files: named for one (temp_of), or
 * tmp... / .tmp... (Python's tempfile, mktemp). */
static bool temp_name(const struct sdir *d, const char *name)
{
	if (strncmp(name, "tmp", 3) == 0 || strncmp(name, ".tmp", 4) == 0)
		return true;
	for (size_t i = 0; i < d->n; i++)
		if (file_kind(d->files[i].kind) &&
		    temp_of(name, d->files[i].name))
			return true;
	return false;
}

/* Logs why @name may not be made in @d (@how: "create", "rename to"). */
static void log_refused(struct ctl *c, const struct sdir *d, const char *how,
			const char *name)
{
	char files[160] = "";
	size_t used = 0;
	for (size_t i = 0; i < d->n && used < sizeof(files); i++)
		if (file_kind(d->files[i].kind))
			used += (size_t)snprintf(
				files + used, sizeof(files) - used, "%s%s",
				used ? " " : "", d->files[i].name);
	log_error("%s %s%s%s/%s: no such control file (the files here "
		  "are: %s); a new file here may only be a temporary one to "
		  "rename over one of them, named like FILE.tmp, FILE~, "
		  ".FILE.swp, .#FILE or tmp*",
		  how, c->fs->opt->control_dir, d->path[0] ? "/" : "", d->path,
		  name, files);
}

int scratch_create(struct ctl *c, fuse_ino_t parent, const char *name,
		   uint64_t *ret_serial)
{
	struct scratch_table *t = c->scratch;
	if (strlen(name) > 255)
		return -ENAMETOOLONG;
	struct sdir d;
	int rc = takes_scratch(c, parent, &d);
	if (!rc && !temp_name(&d, name)) {
		log_refused(c, &d, "create", name);
		rc = -EACCES;
	}
	if (rc)
		return rc;
	struct scratch *s = calloc(1, sizeof(*s));
	if (!s || !(s->name = strdup(name))) {
		free(s);
		return -ENOMEM;
	}
	s->parent = parent;
	clock_gettime(CLOCK_REALTIME, &s->mtime);
	pthread_mutex_lock(&t->lock);
	if (by_name(t, parent, name) >= 0)
		rc = -EEXIST;
	else if (t->n == SCRATCH_MAX)
		rc = -ENOSPC;
	if (!rc) {
		s->serial = t->next_serial++;
		t->e[t->n++] = s;
		*ret_serial = s->serial;
	}
	pthread_mutex_unlock(&t->lock);
	if (rc)
		entry_free(s);
	return rc;
}

int scratch_write(struct ctl *c, uint64_t serial, const void *buf, size_t size,
		  uint64_t off)
{
	struct scratch *f = lock_serial(c->scratch, serial);
	int rc = f ? text_put(&f->data, off, buf, size) : -ENOENT;
	if (!rc)
		clock_gettime(CLOCK_REALTIME, &f->mtime);
	pthread_mutex_unlock(&c->scratch->lock);
	return rc;
}

int scratch_truncate(struct ctl *c, uint64_t serial, uint64_t size)
{
	struct scratch *f = lock_serial(c->scratch, serial);
	int rc = f ? 0 : -ENOENT;
	if (f && size <= f->data.len) {
		f->data.len = size;
		if (f->data.s)
			f->data.s[size] = '\0';
	} else if (f) {
		rc = text_put(&f->data, size, "", 0); /* zeros up to @size */
	}
	if (!rc)
		clock_gettime(CLOCK_REALTIME, &f->mtime);
	pthread_mutex_unlock(&c->scratch->lock);
	return rc;
}

int scratch_read(struct ctl *c, uint64_t serial, struct text *out)
{
	text_clear(out);
	struct scratch *f = lock_serial(c->scratch, serial);
	int rc = f ? text_add(out, f->data.s ? f->data.s : "", f->data.len) :
		     -ENOENT;
	pthread_mutex_unlock(&c->scratch->lock);
	return rc;
}

void scratch_stat(struct ctl *c, uint64_t serial, struct stat *st)
{
	struct scratch *f = lock_serial(c->scratch, serial);
	if (f) {
		st->st_size = (off_t)f->data.len;
		st->st_mtim = st->st_ctim = f->mtime;
	}
	pthread_mutex_unlock(&c->scratch->lock);
}

int scratch_take(struct ctl *c, fuse_ino_t parent, const char *name,
		 struct text *ret)
{
	struct scratch_table *t = c->scratch;
	pthread_mutex_lock(&t->lock);
	ssize_t i = by_name(t, parent, name);
	struct scratch *s = i >= 0 ? take(t, (size_t)i) : NULL;
	pthread_mutex_unlock(&t->lock);
	if (!s)
		return -ENOENT;
	*ret = s->data;
	s->data = (struct text){ 0 };
	entry_free(s);
	return 0;
}

int scratch_unlink(struct ctl *c, fuse_ino_t parent, const char *name)
{
	struct text data;
	int rc = scratch_take(c, parent, name, &data);
	if (!rc)
		text_release(&data);
	return rc;
}

int scratch_rename(struct ctl *c, fuse_ino_t parent, const char *name,
		   fuse_ino_t newparent, const char *newname, bool noreplace)
{
	struct scratch_table *t = c->scratch;
	struct sdir d;
	int rc = takes_scratch(c, newparent, &d);
	if (!rc && !temp_name(&d, newname)) {
		log_refused(c, &d, "rename to", newname);
		rc = -EACCES;
	}
	if (rc)
		return rc;
	char *n = strdup(newname);
	if (!n)
		return -ENOMEM;
	struct scratch *old = NULL;
	pthread_mutex_lock(&t->lock);
	ssize_t i = by_name(t, parent, name);
	ssize_t j = by_name(t, newparent, newname);
	if (i < 0)
		rc = -ENOENT;
	else if (j >= 0 && noreplace)
		rc = -EEXIST;
	if (!rc && i != j) {
		struct scratch *s = t->e[i];
		free(s->name);
		s->name = n;
		n = NULL;
		s->parent = newparent;
		if (j >= 0)
			old = take(t, (size_t)j);
	}
	pthread_mutex_unlock(&t->lock);
	free(n);
	if (old)
		entry_free(old);
	return rc;
}

void scratch_drop_dir(struct ctl *c, fuse_ino_t parent)
{
	struct scratch_table *t = c->scratch;
	struct scratch *gone[SCRATCH_MAX];
	size_t n = 0;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n;) {
		if (t->e[i]->parent == parent)
			gone[n++] = take(t, i);
		else
			i++;
	}
	pthread_mutex_unlock(&t->lock);
	for (size_t i = 0; i < n; i++)
		entry_free(gone[i]);
}

int scratch_list_json(struct ctl *c, struct text *out)
{
	struct scratch_table *t = c->scratch;
	struct {
		fuse_ino_t parent;
		char name[256];
	} e[SCRATCH_MAX];
	size_t n = 0;
	pthread_mutex_lock(&t->lock);
	for (; n < t->n; n++) {
		e[n].parent = t->e[n]->parent;
		snprintf(e[n].name, sizeof(e[n].name), "%s", t->e[n]->name);
	}
	pthread_mutex_unlock(&t->lock);
	/* the directories' names outside the lock (a job's is under the
	 * jobs' lock) */
	int rc = text_adds(out, "[");
	bool first = true;
	for (size_t i = 0; !rc && i < n; i++) {
		struct sdir d;
		struct text p = { 0 };
		if (takes_scratch(c, e[i].parent, &d))
			continue; /* its directory went meanwhile */
		rc = text_printf(&p, "%s%s%s", d.path, d.path[0] ? "/" : "",
				 e[i].name);
		rc = rc ? rc : text_adds(out, first ? "" : ",");
		first = false;
		rc = rc ? rc : text_json_str(out, p.s);
		text_release(&p);
	}
	return rc ? rc : text_adds(out, "]");
}

/*
 * jobs_recs.c - job records in the sandbox (layout in jobs.h): listing
 * JOBS_DIR and LIVE_DIR and parsing the listings into struct rec, and
 * the small files read or written outside a job's wrapper (error).
 *
 * Anything in the sandbox may write there. A directory whose name is no
 * job id (job_id_valid: too long, "latest", a byte outside the names'
 * set) is no record: it is skipped, named once in the log (the monitor
 * lists live/ several times a second), and hides nothing else.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_i.h"
#include "log.h"

#define ERROR_MAX 1000
/* listings retried at once when they raced with a removal */
#define LIST_TRIES 5

/* ---- listings ---- */

static int rec_cmp(const void *a, const void *b)
{
	return strcmp(((const struct rec *)a)->id, ((const struct rec *)b)->id);
}

struct rec *recs_find(struct rec *recs, size_t n, const char *id)
{
	struct rec key;
	if (strlen(id) >= sizeof(key.id))
		return NULL; /* no record has it */
	snprintf(key.id, sizeof(key.id), "%s", id);
	return n ? bsearch(&key, recs, n, sizeof(*recs), rec_cmp) : NULL;
}

/* The record @id (@idlen bytes, a valid id) of *recs, added if new.
 * NULL on ENOMEM. */
static struct rec *rec_get(struct rec **recs, size_t *n, size_t *cap,
			   const char *id, size_t idlen)
{
	/* a directory's entries come together: look at the last first */
	for (size_t i = *n; i-- > 0;) {
		if (strlen((*recs)[i].id) == idlen &&
		    memcmp((*recs)[i].id, id, idlen) == 0)
			return &(*recs)[i];
		if (i + 1 < *n)
			break;
	}
	for (size_t i = 0; i < *n; i++)
		if (strlen((*recs)[i].id) == idlen &&
		    memcmp((*recs)[i].id, id, idlen) == 0)
			return &(*recs)[i];
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 32;
		struct rec *r = realloc(*recs, c * sizeof(*r));
		if (!r)
			return NULL;
		*recs = r;
		*cap = c;
	}
	struct rec *r = &(*recs)[(*n)++];
	memset(r, 0, sizeof(*r));
	memcpy(r->id, id, idlen);
	return r;
}

static void rec_file(struct rec *r, const char *name, const struct osb_stat *st)
{
	char *end;
	if (strcmp(name, "cmd") == 0) {
		r->has_cmd = true;
		r->cmd_size = st->size;
		r->cmd_mtime = st->mtime;
	} else if (strcmp(name, "error") == 0) {
		r->has_error = true;
	} else if (strcmp(name, "alive") == 0) {
		r->has_alive = true;
		r->alive_mtime = st->mtime;
	} else if (strncmp(name, "exit.", 5) == 0) {
		long code = strtol(name + 5, &end, 10);
		if (end != name + 5 && !*end && code >= 0 && code <= 255) {
			r->has_exit = true;
			r->exit_code = (int)code;
			r->exit_mtime = st->mtime;
		}
	} else {
		int k = strcmp(name, "stdout") == 0 ? JOB_STDOUT :
			strcmp(name, "stderr") == 0 ? JOB_STDERR :
						      -1;
		if (k >= 0) {
			r->has_out[k] = true;
			r->size[k] = st->size;
			r->mtime[k] = st->mtime;
		}
	}
}

int recs_parse(const char *dir, const struct osb_stat *ents, size_t n,
	       recs_skip_fn skip, void *arg, struct rec **ret, size_t *ret_n)
{
	struct rec *recs = NULL;
	size_t nr = 0, cap = 0;
	size_t plen = strlen(dir);
	const char *last_bad = NULL; /* its entries come together */
	size_t last_bad_len = 0;

	for (size_t i = 0; i < n; i++) {
		const char *p = ents[i].path;
		if (!p || strncmp(p, dir, plen) != 0 || p[plen] != '/')
			continue;
		const char *id = p + plen + 1;
		const char *slash = strchr(id, '/');
		size_t idlen = slash ? (size_t)(slash - id) : strlen(id);
		if (!idlen)
			continue;
		if (!job_id_valid(id, idlen)) {
			if (skip && (idlen != last_bad_len ||
				     memcmp(id, last_bad, idlen) != 0))
				skip(arg, id, idlen);
			last_bad = id;
			last_bad_len = idlen;
			continue;
		}
		struct rec *r = rec_get(&recs, &nr, &cap, id, idlen);
		if (!r) {
			free(recs);
			return -ENOMEM;
		}
		if (!slash)
			r->dir_mtime = ents[i].mtime;
		else if (!strchr(slash + 1, '/'))
			rec_file(r, slash + 1, &ents[i]);
	}
	if (nr)
		qsort(recs, nr, sizeof(*recs), rec_cmp);
	*ret = recs;
	*ret_n = nr;
	return 0;
}

/* FNV-1a of @len bytes at @s, on from @h */
static uint64_t name_hash(uint64_t h, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511627211ull;
	return h;
}

struct skip_ctx {
	struct jobs *js;
	const char *dir;
};

/* recs_skip_fn of recs_list(): the log names each skipped record once
 * (the first RECS_SKIPPED_MAX of them; then one line for the rest). */
static void skip_logged(void *arg, const char *name, size_t len)
{
	struct skip_ctx *sc = arg;
	struct jobs *js = sc->js;
	uint64_t h = name_hash(14695981039346656037ull, sc->dir,
			       strlen(sc->dir) + 1);
	h = name_hash(h, name, len);
	bool seen = false;

	pthread_mutex_lock(&js->lock);
	for (size_t i = 0; i < js->nskipped && !seen; i++)
		seen = js->skipped[i] == h;
	if (!seen && js->nskipped < RECS_SKIPPED_MAX) {
		js->skipped[js->nskipped++] = h;
		/* (the log's lock is a leaf) */
		log_warn("skipped \"%s/%.*s\" in sandbox %s: no job's "
			 "record (a job's name is 1 to %d of A-Z a-z 0-9 . _ "
			 "-, not starting with . or -, not latest or wait-all)",
			 sc->dir, (int)len, name, js->fs->sandbox_id,
			 JOB_NAME_MAX);
		if (js->nskipped == RECS_SKIPPED_MAX)
			log_warn("records of bad names in sandbox %s are "
				 "skipped without a word from now on",
				 js->fs->sandbox_id);
	}
	pthread_mutex_unlock(&js->lock);
}

/*
 * list_dir() - osb_dir_list() for the job directories. execd fails a
 * whole listing (500, "no such file") when an entry goes while it walks,
 * and wrappers remove live/ID all the time: such a listing is tried
 * again at once, and reported as -EAGAIN if it keeps failing. -ENOENT
 * only when @dir itself is missing (404).
 */
static int list_dir(struct jobs *js, const char *dir, int depth,
		    struct osb_stat **ret, size_t *ret_n)
{
	struct osb_error err;
	int rc;

	for (int tries = 0;; tries++) {
		osb_error_clear(&err);
		rc = osb_dir_list(js->fs->sb, dir, depth, ret, ret_n, &err);
		if (rc != -ENOENT || err.status == 404 || tries == LIST_TRIES)
			break;
	}
	if (rc == -ENOENT && err.status != 404)
		rc = -EAGAIN;
	if (rc && rc != -ENOENT)
		log_debug("listing %s: %s", dir, err.message);
	return rc;
}

int recs_list(struct jobs *js, const char *dir, struct rec **ret, size_t *ret_n)
{
	struct osb_stat *ents = NULL;
	size_t n = 0;

	int rc = list_dir(js, dir, 2, &ents, &n);
	if (rc == -ENOENT) {
		*ret = NULL;
		*ret_n = 0;
		return 0;
	}
	if (rc)
		return rc;
	struct skip_ctx sc = { js, dir };
	rc = recs_parse(dir, ents, n, skip_logged, &sc, ret, ret_n);
	osb_stat_array_free(ents, n);
	return rc;
}

/* ---- small files ---- */

char *job_read_error(struct jobs *js, const char *id)
{
	struct text t = { 0 };
	char path[128];
	snprintf(path, sizeof(path), JOBS_DIR "/%s/error", id);
	int rc = osb_file_download(js->fs->sb, path, 0, ERROR_MAX, text_sink,
				   &t, NULL, NULL);
	if (rc || !t.s) {
		text_release(&t);
		return strdup("the job failed (its error message is gone)");
	}
	/* the sandbox's text: escaped, as status and wait show it to
	 * terminals */
	t.s[strcspn(t.s, "\r\n")] = '\0';
	char *msg = osb_escape(t.s, strlen(t.s));
	text_release(&t);
	return msg;
}

void job_persist_error(struct jobs *js, const char *id, const char *msg)
{
	char path[128];
	char body[ERROR_MAX + 2];
	struct osb_error err;

	snprintf(path, sizeof(path), JOBS_DIR "/%s/error", id);
	int n = snprintf(body, sizeof(body), "%s\n", msg);
	struct osb_upload u = { .path = path,
				.data = body,
				.fd = -1,
				.size = n < (int)sizeof(body) ?
						n :
						(int)sizeof(body) - 1,
				.mode = 0644 };
	if (osb_file_upload(js->fs->sb, &u, 1, &err))
		log_warn("could not record the failure of job %s in the "
			 "sandbox: %s",
			 id, err.message);
}

int rec_read(struct jobs *js, const char *id, struct rec *ret)
{
	char dir[128];
	struct osb_stat *ents = NULL;
	struct rec *recs = NULL;
	size_t n = 0, nr = 0;

	snprintf(dir, sizeof(dir), JOBS_DIR "/%s", id);
	int rc = list_dir(js, dir, 1, &ents, &n);
	if (!rc)
		rc = recs_parse(JOBS_DIR, ents, n, NULL, NULL, &recs, &nr);
	osb_stat_array_free(ents, n);
	struct rec *r = rc ? NULL : recs_find(recs, nr, id);
	if (r)
		*ret = *r;
	free(recs);
	return rc ? rc : r ? 0 : -ENOENT;
}

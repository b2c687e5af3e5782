/*
 * code.c - the code contexts' table: languages learned from execd, the
 * contexts of code/LANG/ and of mkdir code/LANG/NAME, and their records
 * in the sandbox.
 *
 * A language is learned the first time code/LANG is named: execd is
 * asked for a context of it (POST /code/context, in DIR). An answer that
 * refuses (an image without that kernel) makes the name ENOENT for the
 * rest of the mount, with the reason logged, as does no answer within
 * request_timeout; a connection that failed is asked again next time.
 * Listing code/ asks for every language not known yet, all at once.
 *
 * Each context's id is recorded as an empty file CODE_REC_DIR/LANG@NAME@ID.
 * The first language learned loads the records (one listing, and one
 * GET /code/contexts when there are any): a context execd still lists is
 * taken again, so a variable set before an unmount is there after a new
 * mount; records of contexts execd no longer has are removed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code_i.h"
#include "jobs.h"
#include "log.h"
#include "osbfs.h"
#include "remote.h"

const char *const code_langs[CODE_NLANG] = {
	"python", "javascript", "typescript", "java", "go", "bash",
};

int code_lang_index(const char *name)
{
	for (int i = 0; i < CODE_NLANG; i++)
		if (strcmp(code_langs[i], name) == 0)
			return i;
	return -1;
}

int code_new(struct osbfs *fs, struct code **ret)
{
	pthread_condattr_t ca;
	struct code *cd = calloc(1, sizeof(*cd));
	if (!cd)
		return -ENOMEM;
	cd->fs = fs;
	cd->next_serial = 1;
	pthread_mutex_init(&cd->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cd->cond, &ca);
	pthread_condattr_destroy(&ca);
	*ret = cd;
	return 0;
}

void code_free(struct code *cd)
{
	if (!cd)
		return;
	for (size_t i = 0; i < cd->n; i++) {
		code_result_release(&cd->cx[i]->r);
		text_release(&cd->cx[i]->code);
		free(cd->cx[i]);
	}
	free(cd->recs);
	pthread_cond_destroy(&cd->cond);
	pthread_mutex_destroy(&cd->lock);
	free(cd);
}

/* ---- the table ---- */

struct code_ctx *code_by_serial(struct code *cd, uint64_t serial)
{
	struct code_ctx *r = NULL;
	pthread_mutex_lock(&cd->lock);
	for (size_t i = 0; i < cd->n && !r; i++)
		if (cd->cx[i]->serial == serial && !cd->cx[i]->gone)
			r = cd->cx[i];
	pthread_mutex_unlock(&cd->lock);
	return r;
}

uint64_t code_ctx_serial(const struct code_ctx *cx)
{
	return cx->serial;
}

void code_ctx_path(const struct code_ctx *cx, char *buf, size_t size)
{
	snprintf(buf, size, "code/%s%s%s", code_langs[cx->lang],
		 cx->name[0] ? "/" : "", cx->name);
}

bool code_ctx_is_lang(const struct code_ctx *cx)
{
	return !cx->name[0];
}

struct code_ctx *code_ctx_lang(struct code *cd, const struct code_ctx *cx)
{
	pthread_mutex_lock(&cd->lock);
	struct code_ctx *r = cd->by_lang[cx->lang];
	pthread_mutex_unlock(&cd->lock);
	return r;
}

/* Locked. */
static struct code_ctx *find_locked(struct code *cd, int lang, const char *name)
{
	for (size_t i = 0; i < cd->n; i++)
		if (cd->cx[i]->lang == lang && !cd->cx[i]->gone &&
		    strcmp(cd->cx[i]->name, name) == 0)
			return cd->cx[i];
	return NULL;
}

struct code_ctx *code_find_named(struct code *cd, const struct code_ctx *lang,
				 const char *name)
{
	if (!*name)
		return NULL;
	pthread_mutex_lock(&cd->lock);
	struct code_ctx *r = find_locked(cd, lang->lang, name);
	pthread_mutex_unlock(&cd->lock);
	return r;
}

/* A new entry in the table. Locked. NULL when it is full (-ENOSPC) or
 * out of memory. */
static struct code_ctx *add_locked(struct code *cd, int lang, const char *name,
				   const char *id)
{
	size_t live = 0;
	for (size_t i = 0; i < cd->n; i++)
		live += !cd->cx[i]->gone;
	if (live == CODE_MAX || cd->n == CODE_SLOTS)
		return NULL;
	struct code_ctx *cx = calloc(1, sizeof(*cx));
	if (!cx)
		return NULL;
	cx->serial = cd->next_serial++;
	cx->lang = lang;
	snprintf(cx->name, sizeof(cx->name), "%s", name);
	snprintf(cx->id, sizeof(cx->id), "%s", id);
	cd->cx[cd->n++] = cx;
	return cx;
}

int code_list_named(struct code *cd, const struct code_ctx *lang,
		    struct code_entry **ret, size_t *ret_n)
{
	pthread_mutex_lock(&cd->lock);
	struct code_entry *e = calloc(cd->n + 1, sizeof(*e));
	size_t n = 0;
	for (size_t i = 0; e && i < cd->n; i++) {
		const struct code_ctx *cx = cd->cx[i];
		if (cx->lang != lang->lang || !cx->name[0] || cx->gone)
			continue;
		snprintf(e[n].name, sizeof(e[n].name), "%s", cx->name);
		e[n++].serial = cx->serial;
	}
	pthread_mutex_unlock(&cd->lock);
	if (!e)
		return -ENOMEM;
	*ret = e;
	*ret_n = n;
	return 0;
}

/* ---- records in the sandbox ---- */

static void rec_path(char *buf, size_t size, int lang, const char *name,
		     const char *id)
{
	snprintf(buf, size, CODE_REC_DIR "/%s@%s@%s", code_langs[lang], name,
		 id);
}

void code_rec_write(struct code *cd, const struct code_ctx *cx,
		    const char *old_id)
{
	char path[256], old[256];
	struct osb_error err;
	rec_path(path, sizeof(path), cx->lang, cx->name, cx->id);
	struct osb_upload u = {
		.path = path, .data = "", .fd = -1, .size = 0, .mode = 0644
	};
	if (osb_file_upload(cd->fs->sb, &u, 1, &err))
		log_warn("code/%s%s%s: cannot record its context in the "
			 "sandbox (a new mount will not find it): %s",
			 code_langs[cx->lang], cx->name[0] ? "/" : "", cx->name,
			 err.message);
	if (old_id && *old_id) {
		const char *p = old;
		rec_path(old, sizeof(old), cx->lang, cx->name, old_id);
		osb_files_remove(cd->fs->sb, &p, 1, NULL);
	}
}

bool code_name_valid(const char *name)
{
	/* the files of code/LANG/, beside which the contexts are listed */
	static const char *const files[] = { "input", "output", "ctl",
					     "result.json" };
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++)
		if (strcmp(name, files[i]) == 0)
			return false;
	return !code_name_is_image(name) && job_name_valid(name);
}

bool code_rec_parse(const char *base, struct code_rec *ret)
{
	struct code_rec r = { 0 };
	const char *a = strchr(base, '@');
	const char *b = strrchr(base, '@');
	char lang[32];

	if (!a || a == b || (size_t)(a - base) >= sizeof(lang))
		return false;
	snprintf(lang, sizeof(lang), "%.*s", (int)(a - base), base);
	r.lang = code_lang_index(lang);
	size_t nl = (size_t)(b - a - 1);
	/* execd's ids are hex; nothing that could leave a path or a URL */
	size_t idl = strspn(b + 1, "0123456789abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ-_");
	if (r.lang < 0 || nl > CODE_NAME_MAX || !idl || b[1 + idl] ||
	    idl >= sizeof(r.id))
		return false;
	snprintf(r.name, sizeof(r.name), "%.*s", (int)nl, a + 1);
	snprintf(r.id, sizeof(r.id), "%s", b + 1);
	if (r.name[0] && !code_name_valid(r.name))
		return false;
	*ret = r;
	return true;
}

/* Reads the records and which of them execd still has. Unlocked; sets
 * nothing shared. */
static void recs_read(struct code *cd, struct code_rec **ret, size_t *ret_n)
{
	struct osb_stat *st = NULL;
	struct osb_code_context *live = NULL;
	size_t n = 0, nlive = 0, nr = 0;
	struct code_rec *r = NULL;
	struct osb_error err;

	*ret = NULL;
	*ret_n = 0;
	if (osb_dir_list(cd->fs->sb, CODE_REC_DIR, 1, &st, &n, &err) || !n)
		goto out;
	r = calloc(n, sizeof(*r));
	for (size_t i = 0; r && i < n; i++) {
		const char *base = strrchr(st[i].path, '/');
		if (st[i].type == OSB_FILE && base &&
		    code_rec_parse(base + 1, &r[nr]))
			nr++;
	}
	if (!nr ||
	    osb_code_context_list(cd->fs->sb, NULL, &live, &nlive, &err)) {
		nr = 0; /* nothing known to be alive: keep the records */
		goto out;
	}
	const char **gone = calloc(nr, sizeof(*gone));
	char(*paths)[256] = calloc(nr, sizeof(*paths));
	size_t ngone = 0;
	for (size_t i = 0; i < nr; i++) {
		for (size_t j = 0; j < nlive && !r[i].alive; j++)
			r[i].alive =
				live[j].id && strcmp(live[j].id, r[i].id) == 0;
		if (!r[i].alive && gone && paths) {
			rec_path(paths[ngone], sizeof(paths[ngone]), r[i].lang,
				 r[i].name, r[i].id);
			gone[ngone] = paths[ngone];
			ngone++;
		}
	}
	if (ngone)
		osb_files_remove(cd->fs->sb, gone, ngone, NULL);
	free(gone);
	free(paths);
out:
	osb_stat_array_free(st, n);
	osb_code_context_array_free(live, nlive);
	if (!nr) {
		free(r);
		r = NULL;
	}
	*ret = r;
	*ret_n = nr;
}

/* Loads the records once (another thread may be at it: waits). */
static void recs_ensure(struct code *cd)
{
	pthread_mutex_lock(&cd->lock);
	while (cd->recs_loading)
		pthread_cond_wait(&cd->cond, &cd->lock);
	if (cd->recs_loaded) {
		pthread_mutex_unlock(&cd->lock);
		return;
	}
	cd->recs_loading = true;
	pthread_mutex_unlock(&cd->lock);
	struct code_rec *r;
	size_t n;
	recs_read(cd, &r, &n);
	pthread_mutex_lock(&cd->lock);
	cd->recs = r;
	cd->nrecs = n;
	cd->recs_loading = false;
	cd->recs_loaded = true;
	pthread_cond_broadcast(&cd->cond);
	pthread_mutex_unlock(&cd->lock);
}

/* ---- languages ---- */

int code_ctx_delete(struct code *cd, const char *id, struct osb_error *err)
{
	osb_error_clear(err);
	int rc = remote_enter(cd->fs);
	if (rc) {
		snprintf(err->message, sizeof(err->message),
			 "the sandbox is not running");
		return rc;
	}
	rc = osb_code_context_delete(cd->fs->sb, id, err);
	return rc == -ENOENT ? 0 : rc;
}

int code_ctx_create(struct code *cd, int lang, char *id, struct osb_error *err)
{
	struct osb_code_context ctx;
	int rc = osb_code_context_create(cd->fs->sb, code_langs[lang],
					 cd->fs->root, &ctx, err);
	if (rc)
		return rc;
	if (!ctx.id || !*ctx.id || strlen(ctx.id) >= OSB_ID_MAX) {
		err->status = 200;
		snprintf(err->message, sizeof(err->message),
			 "POST /code/context: no context id in the answer");
		rc = -EPROTO;
	} else {
		snprintf(id, OSB_ID_MAX, "%s", ctx.id);
	}
	osb_code_context_release(&ctx);
	return rc;
}

/* Settles @lang: its context retaken or made, and its named contexts
 * retaken. Called by the one thread that set LANG_ASKING. */
static int lang_settle(struct code *cd, int lang)
{
	struct osb_error err;
	char id[OSB_ID_MAX] = "";
	bool made = false;
	int rc = 0;

	osb_error_clear(&err);
	if (remote_enter(cd->fs)) {
		pthread_mutex_lock(&cd->lock);
		cd->lang[lang] = LANG_UNKNOWN;
		pthread_cond_broadcast(&cd->cond);
		pthread_mutex_unlock(&cd->lock);
		log_error("code/%s: the sandbox is not running",
			  code_langs[lang]);
		return -EIO;
	}
	recs_ensure(cd);
	pthread_mutex_lock(&cd->lock);
	for (size_t i = 0; i < cd->nrecs && !id[0]; i++) {
		struct code_rec *r = &cd->recs[i];
		if (r->lang == lang && r->alive && !r->taken && !r->name[0]) {
			r->taken = true;
			snprintf(id, sizeof(id), "%s", r->id);
		}
	}
	pthread_mutex_unlock(&cd->lock);
	if (!id[0]) {
		rc = code_ctx_create(cd, lang, id, &err);
		made = !rc;
	}
	/* an answer that refuses is for good, and so is none at all within
	 * request_timeout (an execd without a Jupyter server retries for
	 * ever: docs/SERVER.md, section 10); a connection that failed is
	 * asked again */
	bool refused = rc && (err.status || rc == -ETIMEDOUT);
	if (rc) {
		char why[sizeof(cd->refused[0])];
		snprintf(why, sizeof(why), "%s: %s",
			 err.status ? "the sandbox offers no such language" :
			 refused    ? "no answer in time (no code interpreter "
				      "in the sandbox?)" :
				      "cannot ask the sandbox",
			 err.message);
		pthread_mutex_lock(&cd->lock);
		cd->lang[lang] = refused ? LANG_REFUSED : LANG_UNKNOWN;
		if (refused)
			memcpy(cd->refused[lang], why, sizeof(why));
		pthread_cond_broadcast(&cd->cond);
		pthread_mutex_unlock(&cd->lock);
		log_error("code/%s: %s", code_langs[lang], why);
		return refused ? -ENOENT : -EIO;
	}
	pthread_mutex_lock(&cd->lock);
	struct code_ctx *cx = add_locked(cd, lang, "", id);
	/* the contexts made by mkdir before, still alive */
	for (size_t i = 0; cx && i < cd->nrecs; i++) {
		struct code_rec *r = &cd->recs[i];
		if (r->lang == lang && r->alive && !r->taken && r->name[0] &&
		    !find_locked(cd, lang, r->name)) {
			r->taken = true;
			add_locked(cd, lang, r->name, r->id);
		}
	}
	cd->lang[lang] = cx ? LANG_OK : LANG_UNKNOWN;
	cd->by_lang[lang] = cx;
	pthread_cond_broadcast(&cd->cond);
	pthread_mutex_unlock(&cd->lock);
	if (!cx) {
		log_error("code/%s: too many contexts", code_langs[lang]);
		if (made)
			osb_code_context_delete(cd->fs->sb, id, NULL);
		return -ENOSPC;
	}
	if (made)
		code_rec_write(cd, cx, NULL);
	else
		log_info("code/%s: context %s taken again", code_langs[lang],
			 id);
	return 0;
}

/* Whether @name looks like a language's name (not a file an editor or
 * a shell looks for): letters, digits, '+', '#' and '-'. */
static bool lang_like(const char *name)
{
	size_t n = strlen(name);
	return n && n < 32 &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789+#-") == n;
}

int code_lang_open(struct code *cd, const char *name, struct code_ctx **ret)
{
	int lang = code_lang_index(name);
	if (lang < 0) {
		/* said each time it is named: last_error is about it */
		if (lang_like(name)) {
			char known[128] = "";
			size_t k = 0;
			for (int i = 0; i < CODE_NLANG && k < sizeof(known);
			     i++)
				k += (size_t)snprintf(
					known + k, sizeof(known) - k, "%s%s",
					i ? ", " : "", code_langs[i]);
			log_error("code/%s: not a language osbfs runs code in "
				  "(%s)",
				  name, known);
		}
		return -ENOENT;
	}
	pthread_mutex_lock(&cd->lock);
	while (cd->lang[lang] == LANG_ASKING)
		pthread_cond_wait(&cd->cond, &cd->lock);
	enum lang_state s = cd->lang[lang];
	if (s == LANG_UNKNOWN)
		cd->lang[lang] = LANG_ASKING;
	char why[sizeof(cd->refused[0])];
	if (s == LANG_REFUSED)
		memcpy(why, cd->refused[lang], sizeof(why));
	pthread_mutex_unlock(&cd->lock);
	if (s == LANG_REFUSED) {
		log_error("code/%s: %s", name, why);
		return -ENOENT;
	}
	if (s == LANG_UNKNOWN) {
		int rc = lang_settle(cd, lang);
		if (rc)
			return rc;
	}
	pthread_mutex_lock(&cd->lock);
	*ret = cd->by_lang[lang];
	pthread_mutex_unlock(&cd->lock);
	return *ret ? 0 : -ENOENT;
}

struct probe {
	struct code *cd;
	int lang;
};

static void *probe_main(void *arg)
{
	struct probe *p = arg;
	struct code_ctx *cx;
	code_lang_open(p->cd, code_langs[p->lang], &cx);
	return NULL;
}

unsigned code_langs_offered(struct code *cd)
{
	struct probe p[CODE_NLANG];
	pthread_t t[CODE_NLANG];
	bool started[CODE_NLANG] = { false };
	unsigned mask = 0;

	recs_ensure(cd); /* once, before the threads race for it */
	for (int i = 0; i < CODE_NLANG; i++) {
		pthread_mutex_lock(&cd->lock);
		bool ask = cd->lang[i] == LANG_UNKNOWN;
		pthread_mutex_unlock(&cd->lock);
		p[i].cd = cd;
		p[i].lang = i;
		if (ask)
			started[i] =
				!pthread_create(&t[i], NULL, probe_main, &p[i]);
		if (ask && !started[i])
			probe_main(&p[i]);
	}
	for (int i = 0; i < CODE_NLANG; i++)
		if (started[i])
			pthread_join(t[i], NULL);
	pthread_mutex_lock(&cd->lock);
	for (int i = 0; i < CODE_NLANG; i++)
		if (cd->lang[i] == LANG_OK)
			mask |= 1u << i;
	pthread_mutex_unlock(&cd->lock);
	return mask;
}

int code_make_named(struct code *cd, struct code_ctx *lang, const char *name,
		    struct code_ctx **ret)
{
	struct osb_error err;
	char id[OSB_ID_MAX];

	if (!code_name_valid(name)) {
		log_error("mkdir code/%s/%s: a context's name is 1 to %d of "
			  "A-Z a-z 0-9 . _ - (not starting with . or -), and "
			  "not one of the files' names",
			  code_langs[lang->lang], name, JOB_NAME_MAX);
		return -EINVAL;
	}
	if (code_find_named(cd, lang, name))
		return -EEXIST;
	if (remote_enter(cd->fs)) {
		log_error("mkdir code/%s/%s: the sandbox is not running",
			  code_langs[lang->lang], name);
		return -EIO;
	}
	int rc = code_ctx_create(cd, lang->lang, id, &err);
	if (rc) {
		log_error("mkdir code/%s/%s: %s", code_langs[lang->lang], name,
			  err.message);
		return fs_errno(rc);
	}
	pthread_mutex_lock(&cd->lock);
	struct code_ctx *cx = find_locked(cd, lang->lang, name) ?
				      NULL :
				      add_locked(cd, lang->lang, name, id);
	pthread_mutex_unlock(&cd->lock);
	if (!cx) {
		osb_code_context_delete(cd->fs->sb, id, NULL);
		rc = code_find_named(cd, lang, name) ? -EEXIST : -ENOSPC;
		if (rc == -ENOSPC)
			log_error("mkdir code/%s/%s: %d contexts already",
				  code_langs[lang->lang], name, CODE_MAX);
		return rc;
	}
	code_rec_write(cd, cx, NULL);
	*ret = cx;
	return 0;
}

int code_remove_named(struct code *cd, struct code_ctx *lang, const char *name)
{
	struct osb_error err;
	char id[OSB_ID_MAX], path[256];
	const char *p = path;

	pthread_mutex_lock(&cd->lock);
	struct code_ctx *cx = *name ? find_locked(cd, lang->lang, name) : NULL;
	int rc = 0;
	if (!cx)
		rc = -ENOENT;
	else if (cx->running || cx->resetting)
		rc = -EBUSY;
	if (!rc) {
		cx->resetting = true; /* no run starts meanwhile */
		snprintf(id, sizeof(id), "%s", cx->id);
	}
	pthread_mutex_unlock(&cd->lock);
	if (rc == -EBUSY)
		log_error("rmdir code/%s/%s: code is running in it (write "
			  "interrupt to its ctl first)",
			  code_langs[lang->lang], name);
	if (rc)
		return rc;
	rc = code_ctx_delete(cd, id, &err);
	if (rc)
		log_error("rmdir code/%s/%s: %s", code_langs[lang->lang], name,
			  err.message);
	pthread_mutex_lock(&cd->lock);
	cx->resetting = false;
	cx->gone = !rc;
	if (cx->gone) {
		code_result_release(&cx->r);
		text_release(&cx->code);
	}
	pthread_mutex_unlock(&cd->lock);
	if (rc)
		return fs_errno(rc);
	rec_path(path, sizeof(path), lang->lang, name, id);
	osb_files_remove(cd->fs->sb, &p, 1, NULL);
	return 0;
}

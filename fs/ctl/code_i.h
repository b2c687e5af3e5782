/*
 * code_i.h - what code.c, code_run.c and code_show.c share: the table
 * of contexts and each one's last run.
 *
 * One lock, cd->lock, guards everything below but the fields marked
 * fixed; it is a leaf but for the log's lock (osbfs.h), and never held
 * across a request to the sandbox. cd->cond is signalled when a run
 * ends, a language's context is settled or the records are loaded.
 */
#ifndef OSBFS_CODE_I_H
#define OSBFS_CODE_I_H

#include <pthread.h>
#include <stdatomic.h>

#include "code.h"
#include "osb.h"

/* where the contexts' ids are recorded in the sandbox, one empty file
 * LANG@NAME@ID each (NAME empty for code/LANG/ itself), so that a later
 * mount retakes a context execd still has */
#define CODE_REC_DIR "/tmp/.osbfs/code"
/* contexts at most, all languages together; and entries, those removed
 * by rmdir included (they are kept, hidden, until the unmount: open
 * handles may name them) */
#define CODE_MAX 64
#define CODE_SLOTS 1024

enum code_status {
	CODE_IDLE,    /* nothing run yet */
	CODE_RUNNING, /* a run in progress */
	CODE_OK,      /* ended without an error */
	CODE_ERROR,   /* the code raised an error (the result says which) */
	CODE_FAILED,  /* it could not run to its end (why: failure) */
	CODE_RAN,     /* its answer was lost, but it ran (code_settle.c) */
	CODE_UNKNOWN, /* its answer was lost; whether it ran is not known
			 (why: failure) */
};

/* An image of a run's results, decoded (code_images.c). */
struct code_image {
	char ext[8];
	char *data;
	size_t len;
};
/* the bytes of a run's images at most, all together */
#define CODE_IMAGES_BYTES (16u << 20)

/* The last run of a context. */
struct code_result {
	enum code_status status;
	char *failure; /* CODE_FAILED, CODE_UNKNOWN: why */
	long count;    /* execution_count, 0 if none came */
	struct text out, err;
	struct text value;   /* the results' text/plain, one per line */
	struct text bundles; /* the results' MIME bundles, JSON, comma-joined */
	struct code_image *images; /* their images, decoded */
	size_t nimages;
	char *ename, *evalue;
	struct text traceback; /* a JSON array */
	struct text tb_plain;  /* its lines, each ending with a newline */
	bool truncated;        /* some output went past TEXT_MAX */
	bool context_lost;     /* run in a new context: execd had lost
				  the old one, and its state */
	bool answer_lost;      /* settled by code_settle.c */
	struct timespec started_at, finished_at;
};

struct code_ctx {
	uint64_t serial;              /* fixed */
	int lang;                     /* fixed: an index of code_langs */
	char name[CODE_NAME_MAX + 1]; /* fixed: "" for code/LANG/ */
	char id[OSB_ID_MAX];          /* execd's context id */
	bool running;                 /* a run's follower thread is at work */
	bool resetting;               /* a reset is in progress */
	bool has_thread;              /* thread is to be joined */
	bool gone;                    /* removed by rmdir: found by nothing */
	pthread_t thread;
	atomic_int cancel; /* set by code_stop: the stream stops */
	struct text code;  /* the code of the last run */
	struct code_result r;
	int run_rc; /* the last run's errno (0: it ran) */
	/* execd's execution count of the context: the last one seen
	 * (exact), or a bound below it (0 for a context made or taken
	 * again; code_settle.c) */
	long count_low;
	bool count_exact;
};

enum lang_state { LANG_UNKNOWN, LANG_ASKING, LANG_OK, LANG_REFUSED };

/* A record found in the sandbox: LANG@NAME@ID. */
struct code_rec {
	int lang;
	char name[CODE_NAME_MAX + 1];
	char id[OSB_ID_MAX];
	bool alive; /* execd lists the id */
	bool taken;
};

struct code {
	struct osbfs *fs; /* fixed */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* on CLOCK_MONOTONIC */
	enum lang_state lang[CODE_NLANG];
	char refused[CODE_NLANG][1152]; /* why, for LANG_REFUSED: said again
					  at each open, for last_error */
	struct code_ctx *by_lang[CODE_NLANG];
	struct code_ctx *cx[CODE_SLOTS];
	size_t n;
	uint64_t next_serial;
	/* the records, loaded once */
	bool recs_loading, recs_loaded;
	struct code_rec *recs;
	size_t nrecs;
	bool stopping;
};

/* code.c */
int code_lang_index(const char *name);
/* Whether @name can name a context of code/LANG/: a job's name
 * (job_id_valid), and none of the files' there. */
bool code_name_valid(const char *name);
/* A record's file name LANG@NAME@ID, from the sandbox (anything may be
 * there): true when it is one, *ret then filled (alive and taken
 * false). */
bool code_rec_parse(const char *base, struct code_rec *ret);
/* Writes @cx's record (LANG@NAME@ID); removes @old_id's if given. */
void code_rec_write(struct code *cd, const struct code_ctx *cx,
		    const char *old_id);
/* A new execd context for @lang into @id (OSB_ID_MAX bytes): 0 or a
 * negative errno, with @err filled. */
int code_ctx_create(struct code *cd, int lang, char *id, struct osb_error *err);

/* Deletes execd's context @id (resuming a paused sandbox first); one
 * already gone is no error. 0 or a negative errno, @err filled. */
int code_ctx_delete(struct code *cd, const char *id, struct osb_error *err);

/* code_run.c */
void code_result_release(struct code_result *r);
/* @dl: @ms from now on CLOCK_MONOTONIC (cd->cond's clock). */
void code_deadline(struct timespec *dl, long ms);

/* code_settle.c */
/* Whether a run that failed with @rc (and @err) may have run: its
 * request may have reached execd, and no answer of execd said it did
 * not. */
bool code_maybe_ran(int rc, const struct osb_error *err);
/* After such a failure of a run in context @id of @cx, whose execution
 * count was @low before (exactly or at least): CODE_RAN, CODE_FAILED (it
 * did not run) or CODE_UNKNOWN, with the reason of the last two in @why.
 * Sends one probe (more while the context is busy with the lost run);
 * never runs the code again. Unlocked; updates the count it learns. */
enum code_status code_settle(struct code *cd, struct code_ctx *cx,
			     const char *id, long low, bool exact, char *why,
			     size_t why_size);

/* ---- code_images.c ---- */

/* Adds the images of MIME bundle @bundle_json (cd->lock held). 0 or
 * -ENOMEM; past the limits the rest is left out (r->truncated). */
int code_images_take(struct code_result *r, const char *bundle_json);
void code_images_release(struct code_result *r);
/* "image-N.EXT" of image @i of @r into @buf. */
void code_image_file_name(const struct code_result *r, size_t i, char *buf,
			  size_t size);

#endif /* OSBFS_CODE_I_H */

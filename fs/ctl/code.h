/*
 * code.h - the code interpreter under MOUNTPOINT/.osb/code/: one
 * directory per language the sandbox's execd offers, each a code
 * context of execd's (a kernel keeping its state between runs), with
 * more contexts of a language made by mkdir (docs/ARCHITECTURE.md,
 * "Code contexts").
 *
 * A context is a struct code_ctx, made once and kept until code_free():
 * a pointer to one stays valid for the whole mount, so the control
 * tree's nodes hold them without references. Every function is safe
 * from any thread; those that talk to the sandbox block, and none holds
 * a lock while it does.
 */
#ifndef OSBFS_CODE_H
#define OSBFS_CODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ctl_text.h"

#define CODE_NLANG 6
#define CODE_NAME_MAX 64

struct osbfs;
struct code;
struct code_ctx;

/* The languages execd names, in the order code/ lists them. */
extern const char *const code_langs[CODE_NLANG];

int code_new(struct osbfs *fs, struct code **ret);
/* Stops every run in progress (interrupting its code in the sandbox)
 * and waits for the threads that follow them; later runs are refused
 * with -ESHUTDOWN. Before the FUSE session ends. */
void code_stop(struct code *cd);
/* The mount moved to another sandbox (a restore): runs stop as at
 * code_stop(), every context is forgotten (code/ lists none; a language
 * opened again gets a context of the new sandbox), and runs are taken
 * again. */
void code_reset(struct code *cd);
/* After code_stop(). NULL-safe. */
void code_free(struct code *cd);

/*
 * code_lang_open() - the context of code/@lang/: the first call for a
 * language asks execd for it (a context this sandbox kept from an
 * earlier mount, else a new one). -ENOENT for a name that is no
 * language, or one the sandbox refused (for the rest of the mount, the
 * reason logged); -EIO when the sandbox could not be asked.
 */
int code_lang_open(struct code *cd, const char *lang, struct code_ctx **ret);
/* Which languages the sandbox offers (bit i: code_langs[i]), asking for
 * every one not known yet at once. */
unsigned code_langs_offered(struct code *cd);

struct code_ctx *code_by_serial(struct code *cd, uint64_t serial);
uint64_t code_ctx_serial(const struct code_ctx *cx);
/* "code/LANG" or "code/LANG/NAME": @cx's directory under the control
 * dir. */
void code_ctx_path(const struct code_ctx *cx, char *buf, size_t size);
/* code/LANG/ itself, or a context made by mkdir code/LANG/NAME. */
bool code_ctx_is_lang(const struct code_ctx *cx);
/* The context of code/LANG/ for any context of LANG. */
struct code_ctx *code_ctx_lang(struct code *cd, const struct code_ctx *cx);
/* code/LANG/@name, where @lang is code/LANG/'s context; NULL if none. */
struct code_ctx *code_find_named(struct code *cd, const struct code_ctx *lang,
				 const char *name);

struct code_entry {
	char name[CODE_NAME_MAX + 1];
	uint64_t serial;
};
/* The contexts made by mkdir in @lang's directory (*ret malloc'd). */
int code_list_named(struct code *cd, const struct code_ctx *lang,
		    struct code_entry **ret, size_t *ret_n);
/* mkdir code/LANG/@name: a new context. -EINVAL (a bad name), -EEXIST,
 * -EIO, -ENOSPC (too many). */
int code_make_named(struct code *cd, struct code_ctx *lang, const char *name,
		    struct code_ctx **ret);
/* rmdir code/LANG/@name: its context goes, in the sandbox too. -ENOENT,
 * -EBUSY (a run in it), -EIO. */
int code_remove_named(struct code *cd, struct code_ctx *lang, const char *name);

/*
 * code_run() - runs @len bytes of code in @cx: returns when the run has
 * ended, or after request_timeout with the run going on (its output
 * then says `status: running`). 0 also for code that raised an error
 * (the error is the result); -EBUSY while another run (or a reset) is
 * in progress; -EIO, -ENOENT... when it could not run (logged).
 */
int code_run(struct code *cd, struct code_ctx *cx, const char *src, size_t len);
/* Whether a run or a reset of @cx is in progress. */
bool code_busy(struct code *cd, struct code_ctx *cx);
/* The verbs written to a context's ctl: `reset`, `interrupt`. 0 or a
 * negative errno (logged): -ESRCH for interrupt with nothing running,
 * -EINVAL for an unknown verb. */
int code_ctl(struct code *cd, struct code_ctx *cx, const char *buf, size_t len);

/* A run's images, as files beside its output (code_images.c): at most
 * CODE_IMAGES_MAX, named image-N.EXT. */
#define CODE_IMAGES_MAX 64
/* The name of image @i of @cx's last run, into @buf; false if none. */
bool code_image_name(struct code *cd, struct code_ctx *cx, size_t i, char *buf,
		     size_t size);
/* The index of @cx's image named @name, or -1. */
int code_image_find(struct code *cd, struct code_ctx *cx, const char *name);
/* Image @i's bytes, into @out. 0, -ENOENT (gone: another run came) or
 * -ENOMEM. */
int code_image_text(struct code *cd, struct code_ctx *cx, size_t i,
		    struct text *out);
/* Whether @name is one an image could have (no context may). */
bool code_name_is_image(const char *name);

/* What output, result.json and input of @cx hold; their mtime. */
int code_output_text(struct code *cd, struct code_ctx *cx, struct text *out);
int code_result_json(struct code *cd, struct code_ctx *cx, struct text *out);
int code_input_text(struct code *cd, struct code_ctx *cx, struct text *out);
struct timespec code_mtime(struct code *cd, struct code_ctx *cx);

#endif /* OSBFS_CODE_H */

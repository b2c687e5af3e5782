/*
 * setup.h - the software the mount's setup= file declares, installed in
 * the sandbox by the job `jobs/setup` before any other job starts.
 *
 * A thread of its own reads the sandbox's marker (setup_script.h): when
 * it holds the declaration's hash, nothing runs. Otherwise it starts the
 * named job "setup" with the script setup_script() writes (only the
 * items the marker lacks), or, when a setup job is already running (a
 * mount killed during its setup, another mount of the sandbox), follows
 * that one instead of starting a second: the wrapper's claim makes a job
 * run once. Until the setup is over, setup_gate() holds back the start
 * of every other job, of `run` and of code runs; after a failed setup it
 * refuses them with a message pointing at jobs/setup/stderr.
 */
#ifndef OSBFS_SETUP_H
#define OSBFS_SETUP_H

#include <stddef.h>

#include "ctl_text.h"

struct osbfs;
struct jobs;
struct setup;
struct setup_decl;

/* the name of the setup job in jobs/ */
#define SETUP_JOB "setup"
/* the longest a job's start waits for the setup to end */
#define SETUP_GATE_MS (10L * 60 * 1000)

/* A setup for @decl (owned by the options; NULL or empty: none).
 * *ret is NULL when there is nothing to set up. */
int setup_new(struct osbfs *fs, struct jobs *js, const struct setup_decl *decl,
	      struct setup **ret);
/* Starts the thread (after the jobs monitor). NULL-safe. */
int setup_start(struct setup *s);
/* Stops the thread (before the jobs monitor) and releases waiting
 * gates with -EIO. NULL-safe. */
void setup_stop(struct setup *s);
void setup_free(struct setup *s);

/*
 * setup_gate() - called before a job, a `run` or a code run starts
 * (@what names it in messages). Returns 0 at once without a setup or
 * after one that succeeded; blocks while one runs (up to SETUP_GATE_MS:
 * then -EAGAIN); -ENOPKG after one that failed. Logs the reason
 * (info's last_error).
 */
int setup_gate(struct setup *s, const char *what);

/* ,"setup":{...} for .osb/info (state, job, reused, error), or
 * ,"setup":null. */
int setup_info_json(struct setup *s, struct text *out);

#endif /* OSBFS_SETUP_H */

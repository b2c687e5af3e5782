/*
 * jobs.h - background jobs in the sandbox, as the control tree's `run`
 * and `jobs/` show them (README.md, "Running commands: the control
 * tree"; the path of a job is in docs/ARCHITECTURE.md).
 *
 * A job's record and output live in the sandbox, not in this daemon, so
 * another mount of the same sandbox (after a crash, on another machine)
 * lists the same jobs with their status and output:
 *
 *   /tmp/.osbfs/jobs/ID/       the record, kept until `rmdir jobs/ID`
 *       claim                  made by the wrapper, first: the job is
 *                              taken (a start sent again runs nothing)
 *       cmd                    the command (its mtime is the start time)
 *       cwd                    the working directory
 *       stdout, stderr         the output
 *       pid                    the job's pid (inside the sandbox)
 *       exit.N                 made when the command ended with status N
 *                              (bash's $?: 128+S means killed by signal
 *                              S); its mtime is the end time
 *       error                  why the job failed without an exit status
 *   /tmp/.osbfs/live/ID/       exists while the job's wrapper runs
 *       stdout, stderr         hard links to the record's output, so one
 *                              listing of live/ gives every running job's
 *                              output sizes
 *       alive                  touched every 2 s by the wrapper
 *       ctl                    a FIFO the wrapper reads signal names from
 *       ready                  made once the wrapper holds ctl open
 *       exit.N                 as in the record, just before live/ID goes
 *
 * The wrapper (jobs_script.c) is an execd command that makes the record
 * (or finds it uploaded, for a long command), runs the command with bash
 * in its own session, waits for it and writes the exit marker. Sent as
 * a foreground command, its stream tells the job's end (jobs_stream.c);
 * otherwise a monitor thread (jobs_monitor.c) lists live/ to follow
 * running jobs and notices the ends. Every cache is dropped when one
 * ends.
 *
 * Every function is safe from any thread. Functions that talk to the
 * sandbox block; none holds a lock while it does.
 */
#ifndef OSBFS_JOBS_H
#define OSBFS_JOBS_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "ctl_text.h"

/* A job's id and a named job's name are one thing, bounded once: 1 to
 * JOB_NAME_MAX bytes (job_id_valid); JOB_ID_MAX holds one and its NUL. */
#define JOB_NAME_MAX 64
#define JOB_ID_MAX (JOB_NAME_MAX + 1)

struct osbfs;
struct jobs;
struct job;

enum job_state {
	JOB_CREATED,  /* named, no command yet */
	JOB_STARTING, /* being started by this mount */
	JOB_RUNNING,
	JOB_DONE, /* exited, killed, or failed (error) */
};

enum job_stream { JOB_STDOUT, JOB_STDERR };

/* What ctl shows of a job, copied out under the lock. */
struct job_view {
	enum job_state state;
	bool failed;      /* DONE with an error, no exit code */
	int exit_code;    /* DONE and !failed */
	int64_t cmd_size; /* -1: not known yet */
	int64_t size[2];  /* output bytes known to exist */
	struct timespec mtime[2];
	struct timespec created_at, started_at, finished_at;
};

int jobs_new(struct osbfs *fs, struct jobs **ret);
/* Frees the table (after jobs_monitor_stop). NULL-safe. */
void jobs_free(struct jobs *js);
/* The monitor thread: loads the sandbox's jobs, follows running ones. */
int jobs_monitor_start(struct jobs *js);
/*
 * jobs_monitor_restart() - the monitor again after jobs_monitor_stop().
 * With @why, the mount moved to another sandbox (a restore): first the
 * jobs still running end as failed with @why, and the table is emptied,
 * read again from the new sandbox at the next access. 0 or -errno.
 */
int jobs_monitor_restart(struct jobs *js, const char *why);
/* Stops it and answers every pending `wait` read with EINTR. */
void jobs_monitor_stop(struct jobs *js);

/* Reads the records from the sandbox once (at the first access). */
int jobs_ensure_loaded(struct jobs *js);
/* Reads them again if the last reading is older than @max_age_ms (jobs
 * started or removed by another mount appear), unless the sandbox is
 * paused. Errors are logged. */
void jobs_refresh(struct jobs *js, long long max_age_ms);

/* A job by id or by serial (its inode group), with a reference; NULL
 * if unknown. Drop it with job_put(). */
struct job *jobs_find(struct jobs *js, const char *id);
struct job *jobs_by_serial(struct jobs *js, uint64_t serial);
void job_put(struct jobs *js, struct job *j);
/* Immutable: valid while the reference is held. */
const char *job_id(const struct job *j);
uint64_t job_serial(const struct job *j);

struct job_entry {
	char id[JOB_ID_MAX];
	uint64_t serial;
	struct timespec when; /* start time, or creation time */
};
/* Every job, oldest first. *ret is malloc'd (may be NULL when empty). */
int jobs_list(struct jobs *js, struct job_entry **ret, size_t *ret_n);
void jobs_counts(struct jobs *js, size_t *ret_running, size_t *ret_total);
void job_view(struct jobs *js, struct job *j, struct job_view *ret);

/*
 * job_id_valid() - whether the @len bytes at @s can be a job's id: 1 to
 * JOB_NAME_MAX of [A-Za-z0-9._-], not starting with '.' or '-', and not
 * "latest" (jobs/latest is the link to the newest). The one rule for
 * every id: the names of mkdir jobs/NAME, the ids this mount makes, the
 * records read from the sandbox (a record of another name is skipped),
 * the table, and code contexts' names (code.c).
 */
bool job_id_valid(const char *s, size_t len);
/* job_id_valid() of a string. */
bool job_name_valid(const char *name);
/* mkdir jobs/NAME: an empty named job, recorded in the sandbox.
 * -EINVAL (bad name), -EEXIST, -EIO. *ret has a reference. */
int jobs_make_named(struct jobs *js, const char *name, struct job **ret);
/* rmdir jobs/ID: forgets a job that is not running, and deletes its
 * record in the sandbox. -ENOENT, -EBUSY (running), -EIO. */
int jobs_remove(struct jobs *js, const char *id);

/*
 * jobs_run() - a new job running @cmd (@len bytes) in the mounted DIR.
 * Every dirty file is uploaded first (-EIO if that fails). On success
 * *ret (with a reference) is the job. Errors are logged.
 */
int jobs_run(struct jobs *js, const char *cmd, size_t len, struct job **ret);
/* Starts a named job that has no command yet; -EACCES if it has one. */
int job_start(struct jobs *js, struct job *j, const char *cmd, size_t len);

/*
 * job_signal() - sends signal @name ("TERM", "SIGINT", "9"...) to the
 * job's process group. With @escalate (the `kill` verb), SIGKILL follows
 * if it still runs a few seconds later. -EINVAL (unknown signal), -ESRCH
 * (the job is not running), -EIO. Errors are logged.
 */
int job_signal(struct jobs *js, struct job *j, const char *name, bool escalate);

/* The status line ("running\n", "exited 3\n", "killed SIGTERM\n",
 * "error: ...\n", "created\n"). */
int job_status_text(struct jobs *js, struct job *j, struct text *out);
/* The exit code and a newline; empty while running or after an error. */
int job_exit_code_text(struct jobs *js, struct job *j, struct text *out);
/* The command, fetched from the sandbox if this mount has not seen it. */
int job_cmd_text(struct jobs *js, struct job *j, struct text *out);
/* JSON: id, cmd, cwd, started_at, finished_at, exit_code, status... */
int job_info_json(struct jobs *js, struct job *j, struct text *out);
/* Up to @size bytes of the output at @off, downloaded from the sandbox;
 * at or past the end of a finished job's output, 0 bytes at once. */
int job_read_output(struct jobs *js, struct job *j, enum job_stream which,
		    size_t size, int64_t off, struct text *out);
/* Somebody follows the job's output: poll it quickly for a while. */
void job_watch(struct jobs *js, struct job *j);

/*
 * job_wait() - answers the read @req of `wait` when the job has ended,
 * with the status line from @off (up to @size bytes); at once if it has.
 * Does not block the calling thread: the monitor replies later. An
 * interrupt (Ctrl-C) answers EINTR.
 */
void job_wait(struct jobs *js, struct job *j, fuse_req_t req, size_t size,
	      off_t off);

/* The name of the file that waits for every running job (jobs/wait-all):
 * no job may have it. */
#define JOBS_WAIT_ALL "wait-all"
/* The jobs running now, a reference each, in *@ret (malloc'd, NULL when
 * none; jobs_put_set() lets them go): what jobs/wait-all waits for.
 * 0 or -ENOMEM. */
int jobs_running(struct jobs *js, struct job ***ret, size_t *ret_n);
void jobs_put_set(struct jobs *js, struct job **set, size_t n);
/*
 * jobs_wait_all() - answers the read @req of jobs/wait-all when every job
 * of @set has ended: a line "ID STATUS" each, as `wait` says it, from
 * @off (up to @size bytes); at once if they have. As job_wait(), it does
 * not block the calling thread.
 */
void jobs_wait_all(struct jobs *js, struct job *const *set, size_t n,
		   fuse_req_t req, size_t size, off_t off);

#endif /* OSBFS_JOBS_H */

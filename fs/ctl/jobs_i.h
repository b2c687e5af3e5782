/*
 * jobs_i.h - what the jobs*.c files share: the table, a job's fields,
 * the sandbox paths, and the records as read from the sandbox.
 *
 * Locking: js->lock guards the table, every mutable field of every
 * struct job, the pending waits and the monitor's schedule. It is never
 * held across a request to the sandbox, a FUSE reply, or a call into
 * another module that takes its own locks (fs_invalidate_all...), with
 * two exceptions whose locks are leaves: the log (log_*) and the
 * lifecycle (life_get, from the monitor).
 */
#ifndef OSBFS_JOBS_I_H
#define OSBFS_JOBS_I_H

#include <pthread.h>
#include <stdatomic.h>

#include "jobs.h"
#include "osbfs.h"

#define JOBS_DIR "/tmp/.osbfs/jobs"
#define LIVE_DIR "/tmp/.osbfs/live"

/* the wrapper touches live/ID/alive this often (jobs_script.c) */
#define JOB_HEARTBEAT_S 2
/* a streamed start (jobs_stream.c): the wrapper's lines, and the longest
 * command carried in the wrapper itself (longer ones are uploaded) */
#define JOB_LINE_STARTED "osbfs-job: started"
#define JOB_LINE_TAKEN "osbfs-job: taken"
#define JOB_LINE_END "osbfs-job: end"
#define JOB_INLINE_MAX ((size_t)64 * 1024)
/* at most this many starts' streams are read at once */
#define JOB_STREAMS_MAX 4
/* a stream is read this long at most; then the monitor follows the job */
#define JOB_STREAM_HOLD_MS 30000
/* records of bad names remembered, so that each is logged once */
#define RECS_SKIPPED_MAX 64
/* without a heartbeat this long (while the sandbox runs), a job's
 * process is taken for gone */
#define JOB_STALE_MS 12000
/* `kill`: SIGTERM, then SIGKILL after this */
#define JOB_KILL_GRACE_MS 5000

struct job {
	/* immutable */
	uint64_t serial;
	char id[JOB_ID_MAX];

	/* guarded by js->lock */
	unsigned refs;
	bool in_table;
	bool removing;         /* rmdir under way: do not start */
	long long recorded_ms; /* monotonic: its record was in the
				  sandbox by then (0: not yet known) */
	enum job_state state;
	int exit_code;    /* DONE, error == NULL */
	char *error;      /* DONE: why it failed, or NULL */
	char *cmd;        /* NULL until known */
	int64_t cmd_size; /* -1 until known */
	char *cwd;        /* NULL until known */
	struct timespec created_at, started_at, finished_at;
	int64_t size[2];
	bool size_final[2]; /* DONE, and a read found the end */
	struct timespec mtime[2];

	/* the monitor's (also under js->lock) */
	struct timespec alive_mtime;
	long long alive_seen_ms; /* when alive_mtime last changed; 0 =
				    no baseline yet */
	long long kill_at_ms;    /* send SIGKILL then; 0 = no */
	long long watched_until_ms;
	/* its start's stream tells its end (jobs_stream.c): the monitor
	 * leaves it alone */
	bool streamed;
};

struct waiter {
	fuse_req_t req;
	struct job *job;  /* a reference; NULL for jobs/wait-all */
	struct job **set; /* jobs/wait-all's: references, malloc'd */
	size_t nset;
	size_t size;
	off_t off;
	struct waiter *next;
};

struct jobs {
	struct osbfs *fs;
	pthread_mutex_t lock; /* see above */
	pthread_cond_t cond;  /* monitor wake-ups, loading done */

	struct job **all; /* the table, in no order */
	size_t n, cap;
	size_t nrunning; /* STARTING or RUNNING */
	uint64_t next_serial;
	struct timespec last_id; /* ids strictly increase */

	bool loaded, loading;
	long long synced_ms; /* when the last reading began */

	/* the records skipped as no job's, each named in the log once:
	 * hashes of their names (jobs_recs.c) */
	uint64_t skipped[RECS_SKIPPED_MAX];
	size_t nskipped;

	struct waiter *waiters;
	long long last_event_ms; /* start, end, new waiter: poll fast */
	int poll_failures;
	bool kick, stop, started;
	pthread_t thread;

	size_t nstreams;           /* streams being read (jobs_stream.c) */
	atomic_int streams_cancel; /* set at unmount: they stop */
};

/* One job's record as the sandbox holds it (jobs_sync.c). */
struct rec {
	char id[JOB_ID_MAX];
	struct timespec dir_mtime;
	bool has_cmd;
	int64_t cmd_size;
	struct timespec cmd_mtime;
	bool has_exit;
	int exit_code;
	struct timespec exit_mtime;
	bool has_error;
	bool has_out[2];
	int64_t size[2];
	struct timespec mtime[2];
	bool has_alive;
	struct timespec alive_mtime;
	bool live; /* live/ID exists */
	bool gone; /* removed while it was being read */
};

/* ---- jobs.c: the table (js->lock held where it says "locked") ---- */

/* A new job @id in state @st, put in the table; a reference for the
 * caller. Locked. NULL on ENOMEM, or when @id is no job id. */
struct job *job_add_locked(struct jobs *js, const char *id, enum job_state st);
/* Takes @j out of the table (it lives on while referenced). Locked. */
void job_drop_locked(struct jobs *js, struct job *j);
struct job *job_find_locked(struct jobs *js, const char *id);
void job_get_locked(struct job *j);
void job_put_locked(struct jobs *js, struct job *j);
/* Sets the job's state, keeping js->nrunning right. Locked. */
void job_set_state_locked(struct jobs *js, struct job *j, enum job_state st);
/*
 * job_end_locked() - the job ended: with exit status @code, or (@error
 * not NULL) failed. Returns true if that changed what is known. Locked.
 * The caller then calls jobs_after_end() without the lock.
 */
bool job_end_locked(struct jobs *js, struct job *j, int code, const char *error,
		    struct timespec finished);
/* After one or more jobs ended: drops every cache (a job may have
 * changed any file), then answers the waits of ended jobs. */
void jobs_after_end(struct jobs *js);
/* Wakes the monitor and makes it poll quickly. Locked. */
void jobs_kick_locked(struct jobs *js);
/* A new job id: UTC start time to the millisecond and random bits,
 * e.g. 20261129T085700.123Z-3f2a9c (sorts by start time). Locked. */
void jobs_new_id_locked(struct jobs *js, char *buf, size_t size,
			struct timespec *ret_when);

/* ---- jobs_show.c ---- */

/* The status line of @j into @buf. Locked. */
void job_status_locked(const struct job *j, char *buf, size_t size);

/* ---- jobs_wait.c ---- */

/* Answers every wait whose job has ended or left the table. */
void jobs_wake_waiters(struct jobs *js);
/* Answers every pending wait with EINTR (at unmount). */
void jobs_cancel_waiters(struct jobs *js);

/* ---- jobs_recs.c: records in the sandbox ---- */

/* Told of a directory of the listing whose name is no job id
 * (job_id_valid): @name, @len bytes, not NUL-terminated. */
typedef void (*recs_skip_fn)(void *arg, const char *name, size_t len);
/*
 * recs_parse() - the records in a listing of @dir (JOBS_DIR or
 * LIVE_DIR), one per job directory, sorted by id. A directory whose name
 * is no job id is left out, and @skip (if not NULL) told of it; it hides
 * no other record. *ret is malloc'd. 0 or -ENOMEM.
 */
int recs_parse(const char *dir, const struct osb_stat *ents, size_t n,
	       recs_skip_fn skip, void *arg, struct rec **ret, size_t *ret_n);
struct rec *recs_find(struct rec *recs, size_t n, const char *id);
/* Lists @dir (depth 2) and parses it; a missing directory is no job.
 * A record skipped is logged, once in the mount's life.
 * -EAGAIN when the listing kept racing with removals. */
int recs_list(struct jobs *js, const char *dir, struct rec **ret,
	      size_t *ret_n);
/* The record of job @id (its JOBS_DIR entry only). -ENOENT if none. */
int rec_read(struct jobs *js, const char *id, struct rec *ret);
/* The first line of the job's error file, escaped (osb_escape: the
 * sandbox wrote it); malloc'd (NULL on ENOMEM). */
char *job_read_error(struct jobs *js, const char *id);
/* Records @msg as the job's error in the sandbox (best effort). */
void job_persist_error(struct jobs *js, const char *id, const char *msg);

/* ---- jobs_sync.c: the table against the records ---- */

/* Reads the sandbox's records and merges them into the table. */
int jobs_sync(struct jobs *js);
/* After the job left live/: reads its record to learn how it ended. Or
 * live/ showed its exit marker (@code, @when) but not its output: the
 * record gives the output's sizes, and the code if it has none yet. */
void job_finalize(struct jobs *js, struct job *j, int code,
		  struct timespec when);
/* The job's wrapper went silent: records it as failed in the sandbox
 * and in the table. */
void job_vanished(struct jobs *js, struct job *j);

/* ---- jobs_script.c: shell text run in the sandbox ---- */

/* The wrapper that runs job @id (see jobs.h), whose record was
 * uploaded. malloc'd. */
char *job_wrapper_script(const char *id);
/* The wrapper that also makes the record, with @cmd (@len bytes) and
 * @cwd carried in it and the job's claim in the record. NULL when @cmd
 * cannot travel so (not UTF-8, a NUL, longer than JOB_INLINE_MAX) or on
 * ENOMEM. malloc'd. */
char *job_inline_script(const char *id, const char *cwd, const char *cmd,
			size_t len);
/* The script that hands signal @sig (canonical name) to job @id's
 * wrapper: exits 0 (sent), 3 (the job is not running), 4 (the job takes
 * no signals). malloc'd. */
char *job_signal_script(const char *id, const char *sig);
/* "TERM", "SIGTERM", "term", "15" -> "TERM" into @buf; -EINVAL. */
int job_signal_parse(const char *name, char *buf, size_t size);
/* 15 -> "TERM" ("RTMIN+3", or NULL beyond 64). */
const char *job_signal_name(int sig);

/* ---- jobs_stream.c: starts read as a stream ---- */

struct jstream;
/*
 * jstream_start() - sends the inline wrapper @script of job @j as a
 * foreground command whose stream a reader thread keeps reading, and
 * waits until the wrapper says the job started. 0: started, *ret is the
 * stream, to be handed to jstream_ack() once @j is RUNNING. -EBUSY: too
 * many streams, nothing sent. Another error, with @err saying why, as
 * osb_command_run's (a wrapper that failed: -EIO, status 200).
 * *ret_taken: another copy of the start had claimed the job (0, *ret
 * NULL: the monitor follows it).
 */
int jstream_start(struct jobs *js, struct job *j, const char *script,
		  struct jstream **ret, bool *ret_taken, struct osb_error *err);
/* @st's job is RUNNING with streamed set: the reader may end it.
 * Consumes @st. */
void jstream_ack(struct jstream *st);
/* At unmount: stops every reader and waits for them. */
void jstreams_stop(struct jobs *js);

/* ---- jobs_monitor.c ---- */

/* One round: polls the running jobs (called by the monitor thread). */
void jobs_poll(struct jobs *js);

#endif /* OSBFS_JOBS_I_H */

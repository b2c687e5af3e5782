/*
 * life.h - the sandbox's lifecycle as the mount sees it: its state, and a
 * gate that resumes a paused sandbox before any request reaches it (a
 * paused sandbox's execd accepts connections and then hangs).
 */
#ifndef OSBFS_LIFE_H
#define OSBFS_LIFE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

struct osbfs;

int life_init(struct osbfs *fs, const char *state, time_t expires_at);
/* The mount moved to another sandbox (a restore), in @state, expiring at
 * @expires_at (0: never). */
void life_reset(struct osbfs *fs, const char *state, time_t expires_at);
/* Stops the background thread (keepalive, idle pause). */
void life_stop(struct osbfs *fs);
void life_release(struct osbfs *fs);
/* Starts the background thread, after daemonizing. */
int life_start(struct osbfs *fs);

/* Resumes the sandbox if it is (known to be) paused, and waits until it
 * runs. 0, or -EIO with the cause logged. */
int life_ensure_running(struct osbfs *fs);
/* After a request timed out or was refused: asks the server for the
 * state. Returns 1 if the sandbox was paused and runs again (repeat the
 * request), 0 if nothing changed, negative if it is gone. */
int life_recheck(struct osbfs *fs);

/* Whether the sandbox is known to be gone (deleted or expired). */
bool life_gone(struct osbfs *fs);

int life_pause(struct osbfs *fs, char *msg, size_t msg_size);
int life_resume(struct osbfs *fs, char *msg, size_t msg_size);
int life_renew(struct osbfs *fs, long seconds, char *msg, size_t msg_size);
int life_kill(struct osbfs *fs, char *msg, size_t msg_size);

/* info and the log warn when the sandbox expires sooner than this */
#define LIFE_EXPIRY_WARN_S 120

struct life_info {
	char state[32];    /* Running, Paused, Resuming, Deleted... */
	time_t expires_at; /* 0 = never */
	time_t last_renew;
	long long idle_ms;
};
void life_get(struct osbfs *fs, struct life_info *ret);

#endif /* OSBFS_LIFE_H */

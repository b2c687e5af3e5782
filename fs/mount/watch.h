/*
 * watch.h - requests that hang, and a server that is away (watch.c).
 *
 * Two things a mount must notice by itself, without making each user of
 * the mount wait out long timeouts:
 *   - a sandbox paused by someone else: its execd accepts connections and
 *     never answers. A request without a sign of life for a few seconds
 *     makes the watchdog ask the lifecycle server; if the sandbox is
 *     paused, every request in flight is cancelled, the sandbox resumed,
 *     and the cancelled requests are repeated (remote.c).
 *   - a server that cannot be reached (after the client's retries, which
 *     ride out a restart): the mount is "away". New requests then fail at
 *     once with EIO instead of each waiting out the retries again, cached
 *     attributes, listings and data are served as they are, and the
 *     watchdog asks the server once a second until it answers: first the
 *     lifecycle server where execd is (a restart may have moved it),
 *     then execd there. While
 *     the server refuses connections (an answer that costs nothing), a
 *     request may ask too (at most ten times a second), so the first
 *     one after a restart works; a server that hangs is asked by the
 *     watchdog only, so that nobody else waits for it.
 */
#ifndef OSBFS_WATCH_H
#define OSBFS_WATCH_H

#include <stdbool.h>

struct osbfs;

/* Installs the client hooks; starts the watchdog (after daemonizing). */
int watch_init(struct osbfs *fs);
int watch_start(struct osbfs *fs);
void watch_stop(struct osbfs *fs);
void watch_release(struct osbfs *fs);

/* The calling thread's requests are not watched, nor cancelled with the
 * others (a stream that lasts and has a cancel flag of its own). */
void watch_exempt_thread(void);

/* Whether the server is away (cached data is served as it is). */
bool watch_away(struct osbfs *fs);
/* How long the server has given no answer, in ms: since it went away,
 * or, while it is not, for the request in flight longest without a sign
 * of life, when that is more than a few seconds; else 0. */
long long watch_silent_ms(struct osbfs *fs);
/* Before a request: true when it must fail at once, the server being
 * away (asked again, quickly, at most once a second, by whoever comes). */
bool watch_gate(struct osbfs *fs);
/* A request failed with @rc (a negative errno) after the client's
 * retries: a refused, unreachable or timed out server makes the mount
 * away. */
void watch_failed(struct osbfs *fs, int rc);
/* After a request ended with -ECANCELED: waits while the watchdog resumes
 * a paused sandbox; true when the request is worth repeating. */
bool watch_cancelled_resume(struct osbfs *fs);

#endif /* OSBFS_WATCH_H */

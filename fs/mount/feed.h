/*
 * feed.h - the sandbox tells the mount what changed (feed.c).
 *
 * A command that runs in the sandbox as long as the mount does, and
 * prints, twice a second, the paths under the mount's root that changed
 * since its last look, then a tick. While its ticks come, what the mount
 * learned after the feed went live holds until the feed reports a change
 * (node_attr_fresh, node.h): a tree nobody changed is not asked again.
 * When the ticks stop, the mount falls back to its timeouts at once.
 */
#ifndef OSBFS_FEED_H
#define OSBFS_FEED_H

#include <stdbool.h>
#include <stddef.h>

struct osbfs;

int feed_init(struct osbfs *fs);
/* Starts the feed's thread (after daemonizing); 0 when the feed is off. */
int feed_start(struct osbfs *fs);
/* Stops the thread and the command in the sandbox. */
void feed_stop(struct osbfs *fs);
/* Asks the feed to stop and returns at once: its command's stream is
 * cancelled, which takes up to a second (a restore asks before it makes
 * the new sandbox); feed_stop() then waits for the end. */
void feed_stop_begin(struct osbfs *fs);
void feed_release(struct osbfs *fs);
/* feed_start() after a feed_stop(): the mount moved to another sandbox
 * (a restore), where the command runs anew. */
int feed_restart(struct osbfs *fs);

/* One line for info: "live since ...", "off", or why it is not live. */
void feed_describe(struct osbfs *fs, char *buf, size_t size);
/* How many rounds it has ended (each a tick): what it says holds up to
 * the last. */
unsigned long long feed_rounds(struct osbfs *fs);
/* How the feed learns of changes: "inotify", "poll", or "" (off, or not
 * said yet). */
void feed_mode(struct osbfs *fs, char *buf, size_t size);

#endif /* OSBFS_FEED_H */

/*
 * owners.h - who owns a file: the sandbox's owners shown as local
 * numbers, and the owner a local user gives a file sent as the sandbox's.
 *
 * execd names owners (docs/SERVER.md §5.1): a name from the sandbox's user
 * database, or the number when it has none. The mount shows the sandbox's
 * numbers, as NFS does, with one exception: the sandbox's root, which
 * every request of the mount acts as, shows as the mount's user (and
 * group), and what the mount's user owns is root's there. A mount by root
 * is so the identity.
 *
 * This holds where owners mean something here: with allow_other, or in a
 * mount by root (owners_on()). A mount of one user who is not root shows
 * every file as theirs, as it always has, refuses a change of owner, and
 * never asks the sandbox anything more.
 *
 * Names other than root, and numbers, are looked up in the sandbox's
 * /etc/passwd and /etc/group, read by one command the first time a name
 * needs them, and again at most once a minute for a name they lack (a
 * user added later). A name they do not have shows as 65534, the
 * overflow id.
 *
 * The tables have a lock of their own, taken last (osbfs.h's lock order):
 * owners_show() may run with the nodes lock held. owners_learn() and
 * owners_names() may send a command: never with a lock held.
 */
#ifndef OSBFS_OWNERS_H
#define OSBFS_OWNERS_H

#include <stdbool.h>
#include <sys/types.h>

struct osbfs;

#define OWNERS_NAME_MAX 64

int owners_init(struct osbfs *fs);
void owners_free(struct osbfs *fs);

/* Whether the owners shown are the sandbox's (else the mount's user). */
bool owners_on(const struct osbfs *fs);

/* The local uid and gid shown for a file execd says @owner and @group own
 * ("" = unknown: root's). Never sends anything. */
void owners_show(struct osbfs *fs, const char *owner, const char *group,
		 uid_t *uid, gid_t *gid);

/* Learns the sandbox's tables if @owner or @group is a name they are
 * needed for and have not been read (one command, for all later names). */
void owners_learn(struct osbfs *fs, const char *owner, const char *group);

/* The sandbox's numbers for local @uid and @gid. */
uid_t owners_sandbox_uid(const struct osbfs *fs, uid_t uid);
gid_t owners_sandbox_gid(const struct osbfs *fs, gid_t gid);

/* What execd is to be told owns a file local @uid and @gid own: the
 * sandbox's names for them, else their numbers (may learn the tables). */
void owners_names(struct osbfs *fs, uid_t uid, gid_t gid,
		  char owner[OWNERS_NAME_MAX], char group[OWNERS_NAME_MAX]);

/* Whether @name is a number: a name execd cannot look up (§5.9), which
 * only a command sets. */
bool owners_numeric(const char *name);

#endif /* OSBFS_OWNERS_H */

/*
 * changed.h - taking a change the sandbox reported (see changed.c).
 */
#ifndef OSBFS_CHANGED_H
#define OSBFS_CHANGED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "osbfs.h"

/* What the feed says of a directory's names: the POSIX cksum (CRC and
 * byte count) of `ls -A` in the C locale, a name a line. */
struct names_sum {
	uint32_t crc;
	uint64_t size;
};

/* The sandbox's @path (absolute) changed: its name, content,
 * attributes, or (a directory) its names. @unsure: its names may hold
 * newlines or CRs written as \1, so all below the sure part goes. Each
 * of these takes the nodes lock. */
void fs_feed_changed(struct osbfs *fs, const char *path, bool unsure);

/* A report with the attributes @a of @path as they are now: they are
 * taken as if asked now (what has local changes keeps them). A node
 * this mount changed after the table's change_seq was @since may have
 * changed after the report was made: its attributes go instead. */
void fs_feed_attr(struct osbfs *fs, const char *path, bool unsure,
		  struct fattr *a, uint64_t since);
/* A report of directory @path: its names as they are now, then (may be
 * NULL) its attributes. When the mount knows those names, its listing
 * holds, and the attributes are taken (unless this mount changed them
 * after @since, as fs_feed_attr()); else both go, with its children's
 * attributes. */
void fs_feed_dir(struct osbfs *fs, const char *path, bool unsure,
		 const struct names_sum *names, struct fattr *a,
		 uint64_t since);

/* The cksum of @n names, each followed by a newline, in the order
 * given. */
struct names_sum names_sum_of(const char *const *names, size_t n);

#endif /* OSBFS_CHANGED_H */

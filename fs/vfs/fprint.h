/*
 * fprint.h - a 64-bit fingerprint of a file's bytes (fprint.c): how the
 * write-back knows, later, that a copy in the sandbox is one it sent
 * itself although no answer said it had landed.
 *
 * Not a cryptographic hash: a sandbox able to forge a match could as
 * well have overwritten the file, which is all a match lets osbfs do.
 */
#ifndef OSBFS_FPRINT_H
#define OSBFS_FPRINT_H

#include <stddef.h>
#include <stdint.h>

struct fprint {
	uint64_t a, b, len;
	unsigned char tail[8];
	unsigned ntail;
};

void fprint_init(struct fprint *f);
void fprint_add(struct fprint *f, const void *data, size_t len);
uint64_t fprint_end(const struct fprint *f);
/* The fingerprint of bytes [0, @size) of @fd in *@ret: 0 or -errno
 * (-EIO when the file is shorter). */
int fprint_fd(int fd, int64_t size, uint64_t *ret);

#endif /* OSBFS_FPRINT_H */

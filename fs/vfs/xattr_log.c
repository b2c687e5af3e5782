/*
 * xattr_log.c - the extended attributes table on disk: an append-only
 * log, CACHE/ID/SLOT/xattrs, beside the write-back journal.
 *
 * One line per change, written with one write(2) on an O_APPEND fd:
 *   <op> <hex>[ <hex>[ <hex>]] <sum>
 * with the op's fields (xattr_log.h) as hex digits and <sum> the FNV-1a
 * hash of what comes before it, in 16 hex digits. A line whose sum does
 * not match (torn by a power loss, damaged) is skipped at replay; a crash
 * of osbfs leaves every line whole. The log is rewritten with only the
 * live table at each mount, through a temporary file that is synced and
 * renamed over it, and when it grows to several times the table. Lines
 * reach the disk with the cache's, within a second (the write-back
 * syncer's syncfs of the cache's filesystem).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hex.h"
#include "xattr.h"
#include "xattr_log.h"

#define HEADER "osbfs-xattrs 1\n"
/* a line longer than this is no record of ours */
#define LINE_MAX_BYTES (4 << 20)

static uint64_t fnv(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The line of @r, malloc'd, its length in *ret_len; NULL on ENOMEM. */
static char *line_make(const struct xlog_rec *r, size_t *ret_len)
{
	static const char digits[] = "0123456789abcdef";
	size_t size = 2 + 16 + 2;
	for (int i = 0; i < r->n; i++)
		size += 1 + 2 * r->len[i];
	char *s = malloc(size);
	if (!s)
		return NULL;
	size_t o = 0;
	s[o++] = r->op;
	for (int i = 0; i < r->n; i++) {
		const unsigned char *p = (const unsigned char *)r->f[i];
		s[o++] = ' ';
		for (size_t j = 0; j < r->len[i]; j++) {
			s[o++] = digits[p[j] >> 4];
			s[o++] = digits[p[j] & 15];
		}
	}
	uint64_t h = fnv(s, o);
	s[o++] = ' ';
	for (int i = 15; i >= 0; i--)
		s[o++] = digits[(h >> (4 * i)) & 15];
	s[o++] = '\n';
	*ret_len = o;
	return s;
}

static int write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int xlog_open(struct xlog *l, const char *dir)
{
	l->fd = -1;
	l->bytes = 0;
	l->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return l->dir_fd < 0 ? -errno : 0;
}

void xlog_close(struct xlog *l)
{
	if (l->fd >= 0)
		close(l->fd);
	if (l->dir_fd >= 0)
		close(l->dir_fd);
	l->fd = l->dir_fd = -1;
}

/* Decodes field @i of @r from @hex (@n digits; any bytes, NUL-terminated
 * past their length). 0 or -1. */
static int field_take(struct xlog_rec *r, int i, const char *hex, size_t n)
{
	char *out = hex_decode_dup(hex, n);
	if (!out)
		return -1;
	r->f[i] = out;
	r->len[i] = n / 2;
	return 0;
}

static int fields_want(char op)
{
	switch (op) {
	case XLOG_SET:
		return 3;
	case XLOG_REMOVE:
	case XLOG_MOVE:
		return 2;
	case XLOG_DROP:
		return 1;
	default:
		return -1;
	}
}

static void rec_free(struct xlog_rec *r)
{
	for (int i = 0; i < r->n; i++)
		free((char *)r->f[i]);
	r->n = 0;
}

/* Parses line @s (@n bytes, no newline) into @r. 0 or -1. */
static int line_parse(const char *s, size_t n, struct xlog_rec *r)
{
	memset(r, 0, sizeof(*r));
	if (n < 19 || s[n - 17] != ' ')
		return -1;
	char sum[17];
	memcpy(sum, s + n - 16, 16);
	sum[16] = '\0';
	if (strtoull(sum, NULL, 16) != fnv(s, n - 17))
		return -1;
	int want = fields_want(s[0]);
	r->op = s[0];
	size_t o = 1, end = n - 17;
	while (want > 0 && r->n < want && o < end && s[o] == ' ') {
		size_t b = ++o;
		while (o < end && s[o] != ' ')
			o++;
		if (field_take(r, r->n, s + b, o - b)) {
			rec_free(r);
			return -1;
		}
		r->n++;
	}
	if (want < 0 || r->n != want || o != end) {
		rec_free(r);
		return -1;
	}
	return 0;
}

int xlog_replay(struct xlog *l, void (*fn)(void *arg, struct xlog_rec *r),
		void *arg)
{
	int fd = openat(l->dir_fd, "xattrs", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int skipped = 0;
	bool first = true;
	while ((n = getline(&line, &cap, f)) > 0) {
		struct xlog_rec r;
		bool whole = line[n - 1] == '\n';
		if (first && whole && strcmp(line, HEADER) == 0) {
			first = false;
			continue;
		}
		first = false;
		if (!whole || n > LINE_MAX_BYTES ||
		    line_parse(line, (size_t)n - 1, &r)) {
			skipped++;
			continue;
		}
		fn(arg, &r);
	}
	free(line);
	fclose(f);
	return skipped;
}

int xlog_keep(struct xlog *l)
{
	int fd = openat(l->dir_fd, "xattrs",
			O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	off_t end = lseek(fd, 0, SEEK_END);
	if (l->fd >= 0)
		close(l->fd);
	l->fd = fd;
	l->bytes = end > 0 ? end : 0;
	return 0;
}

int xlog_append(struct xlog *l, const struct xlog_rec *r)
{
	size_t n;
	char *s = line_make(r, &n);
	if (!s)
		return -ENOMEM;
	/* no log open (xattrs_open could not): nothing can be recorded */
	int rc = l->fd < 0 ? -ENOSPC : write_all(l->fd, s, n);
	free(s);
	if (!rc)
		l->bytes += (off_t)n;
	return rc;
}

/* Writes the records @next gives to @fd; the bytes written, or -errno. */
static off_t write_records(int fd, int (*next)(void *, struct xlog_rec *),
			   void *arg)
{
	off_t total = (off_t)strlen(HEADER);
	int rc = write_all(fd, HEADER, strlen(HEADER));
	struct xlog_rec r;
	while (!rc && next(arg, &r)) {
		size_t n = 0;
		char *s = line_make(&r, &n);
		rc = s ? write_all(fd, s, n) : -ENOMEM;
		free(s);
		total += (off_t)n;
	}
	return rc ? rc : total;
}

int xlog_rewrite(struct xlog *l, int (*next)(void *arg, struct xlog_rec *r),
		 void *arg)
{
	int fd = openat(l->dir_fd, "xattrs.tmp",
			O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	off_t total = write_records(fd, next, arg);
	int rc = total < 0 ? (int)total : 0;
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (!rc && renameat(l->dir_fd, "xattrs.tmp", l->dir_fd, "xattrs") < 0)
		rc = -errno;
	if (rc) {
		unlinkat(l->dir_fd, "xattrs.tmp", 0);
		return rc;
	}
	fsync(l->dir_fd);
	int nfd = openat(l->dir_fd, "xattrs", O_WRONLY | O_APPEND | O_CLOEXEC,
			 0600);
	if (nfd < 0)
		return -errno;
	if (l->fd >= 0)
		close(l->fd);
	l->fd = nfd;
	l->bytes = total;
	return 0;
}

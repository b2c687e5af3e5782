/*
 * tar.c - a POSIX (pax) tar archive writer, so that many small files can
 * travel in one upload and be unpacked with one `tar x` in the sandbox.
 *
 * Each member is a pax extended header (its path, times to the
 * nanosecond, owner and group names, all of any length, or their
 * numbers for an owner the sandbox has no name for) followed by a
 * ustar header and the data padded to 512-byte blocks. GNU tar and
 * busybox tar read it. Only regular files: directories and links go
 * through the API.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "osb_i.h"

#define BLOCK 512

struct ustar {
	char name[100], mode[8], uid[8], gid[8], size[12], mtime[12];
	char chksum[8], typeflag, linkname[100], magic[6], version[2];
	char uname[32], gname[32], devmajor[8], devminor[8], prefix[155];
	char pad[12];
};

_Static_assert(sizeof(struct ustar) == BLOCK, "a ustar header is a block");

static int pad_to_block(int fd, int64_t len)
{
	static const char zeros[BLOCK];
	size_t rest = (size_t)(len % BLOCK);
	return rest ? osb_write_all(fd, zeros, BLOCK - rest) : 0;
}

/* One "LEN key=value\n" record; LEN counts the whole record. */
static int pax_record(struct buf *b, const char *key, const char *value)
{
	size_t body = 1 + strlen(key) + 1 + strlen(value) + 1;
	size_t len = body + 1;
	for (;;) {
		char digits[24];
		size_t n = (size_t)snprintf(digits, sizeof(digits), "%zu", len);
		if (n + body == len)
			break;
		len = n + body;
	}
	return buf_printf(b, "%zu %s=%s\n", len, key, value);
}

static int pax_time(struct buf *b, const char *key, const struct timespec *t)
{
	char v[48];
	if (t->tv_sec >= 0)
		snprintf(v, sizeof(v), "%lld.%09ld", (long long)t->tv_sec,
			 t->tv_nsec);
	else
		snprintf(v, sizeof(v), "%lld", (long long)t->tv_sec);
	return pax_record(b, key, v);
}

/* @v in width - 1 octal digits and a NUL (v fits: callers check). */
static void octal(char *field, size_t width, uint64_t v)
{
	field[width - 1] = '\0';
	for (size_t i = width - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
}

/* The number an owner given as one stands for (the sandbox has no name
 * for it: tar then takes the number), else -1. */
static long long owner_number(const char *s)
{
	if (!s || !*s || strlen(s) > 10)
		return -1;
	for (const char *p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	return strtoll(s, NULL, 10);
}

/* An id in its 8-byte field, or 0 when only the pax header can hold it. */
static uint64_t id_field(long long id)
{
	return id > 0 && id < 07777777 ? (uint64_t)id : 0;
}

static int put_header(int out, const char *name, char type, int64_t size,
		      mode_t mode, time_t mtime, const char *uname,
		      const char *gname)
{
	struct ustar h;
	memset(&h, 0, sizeof(h));
	snprintf(h.name, sizeof(h.name), "%s", name);
	octal(h.mode, sizeof(h.mode), mode & 07777);
	long long uid = owner_number(uname), gid = owner_number(gname);
	octal(h.uid, sizeof(h.uid), id_field(uid));
	octal(h.gid, sizeof(h.gid), id_field(gid));
	/* sizes of 8 GiB and more are in the pax header */
	octal(h.size, sizeof(h.size),
	      size < 077777777777LL ? (uint64_t)size : 0);
	octal(h.mtime, sizeof(h.mtime), mtime > 0 ? (uint64_t)mtime : 0);
	h.typeflag = type;
	memcpy(h.magic, "ustar", 6);
	memcpy(h.version, "00", 2);
	/* a number goes in the id field only: tar looks a name up first */
	snprintf(h.uname, sizeof(h.uname), "%s",
		 uid >= 0 ? "" :
		 uname    ? uname :
			    "root");
	snprintf(h.gname, sizeof(h.gname), "%s",
		 gid >= 0 ? "" :
		 gname    ? gname :
			    "root");
	memset(h.chksum, ' ', sizeof(h.chksum));
	unsigned sum = 0;
	for (size_t i = 0; i < sizeof(h); i++)
		sum += ((unsigned char *)&h)[i];
	snprintf(h.chksum, sizeof(h.chksum), "%06o", sum);
	h.chksum[7] = ' ';
	return osb_write_all(out, &h, sizeof(h));
}

int osb_tar_add(int out, const struct osb_tar_member *m)
{
	const char *rel = m->path;
	while (*rel == '/')
		rel++;
	if (!*rel || m->size < 0)
		return -EINVAL;

	struct buf pax = { 0 };
	int rc = pax_record(&pax, "path", rel);
	if (!rc)
		rc = pax_time(&pax, "mtime", &m->mtime);
	if (!rc && m->atime.tv_nsec != UTIME_OMIT)
		rc = pax_time(&pax, "atime", &m->atime);
	if (!rc && m->owner)
		rc = pax_record(&pax,
				owner_number(m->owner) >= 0 ? "uid" : "uname",
				m->owner);
	if (!rc && m->group)
		rc = pax_record(&pax,
				owner_number(m->group) >= 0 ? "gid" : "gname",
				m->group);
	if (!rc && m->size >= 077777777777LL) {
		char v[24];
		snprintf(v, sizeof(v), "%" PRId64, m->size);
		rc = pax_record(&pax, "size", v);
	}
	if (!rc)
		rc = put_header(out, "PaxHeader", 'x', (int64_t)pax.len, 0644,
				m->mtime.tv_sec, NULL, NULL);
	if (!rc)
		rc = osb_write_all(out, pax.data, pax.len);
	if (!rc)
		rc = pad_to_block(out, (int64_t)pax.len);
	free(pax.data);
	if (!rc)
		rc = put_header(out, rel, '0', m->size, m->mode,
				m->mtime.tv_sec, m->owner, m->group);

	char chunk[65536];
	int64_t done = 0;
	while (!rc && done < m->size) {
		size_t want = (size_t)(m->size - done) < sizeof(chunk) ?
				      (size_t)(m->size - done) :
				      sizeof(chunk);
		ssize_t r = pread(m->fd, chunk, want, done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = -errno;
		else if (r == 0)
			rc = -EAGAIN; /* shorter than said: sent again later */
		else
			rc = osb_write_all(out, chunk, (size_t)r);
		if (r > 0)
			done += r;
	}
	if (!rc)
		rc = pad_to_block(out, m->size);
	return rc;
}

int osb_tar_finish(int out)
{
	static const char end[2 * BLOCK];
	return osb_write_all(out, end, sizeof(end));
}

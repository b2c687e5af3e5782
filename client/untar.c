/*
 * untar.c - a tar archive reader, for archives the sandbox makes of many
 * small files so that they travel in one download.
 *
 * It reads what GNU tar writes with --format=posix (ustar headers, pax
 * extended headers with the path, size, mtime and ctime to the
 * nanosecond) and
 * plain ustar and GNU long names too. The archive comes from the
 * sandbox, so nothing in it is trusted: every header's checksum is
 * checked, every length against the archive's end, and a name is only
 * returned, never used here as a path.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "osb_i.h"

#define BLOCK 512
/* An extended header or long name bigger than this is refused. */
#define META_MAX (1 << 20)
#define NAME_MAX_LEN 4096

static int read_at(int fd, void *buf, size_t len, int64_t off)
{
	char *p = buf;
	while (len) {
		ssize_t r = pread(fd, p, len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EINVAL; /* shorter than it said */
		p += r;
		len -= (size_t)r;
		off += r;
	}
	return 0;
}

/* An octal field (NUL or space terminated), or GNU's base-256 with the
 * high bit set. -1 if malformed. */
static int64_t number(const unsigned char *f, size_t len)
{
	int64_t v = 0;
	if (len && (f[0] & 0x80)) {
		if (f[0] & 0x40)
			return -1; /* negative */
		v = f[0] & 0x3f;
		for (size_t i = 1; i < len; i++) {
			if (v > (INT64_MAX >> 8))
				return -1;
			v = (v << 8) | f[i];
		}
		return v;
	}
	size_t i = 0;
	while (i < len && f[i] == ' ')
		i++;
	bool any = false;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v > (INT64_MAX >> 3))
			return -1;
		v = (v << 3) | (f[i] - '0');
		any = true;
	}
	if (i < len && f[i] != ' ' && f[i] != '\0')
		return -1;
	return any ? v : -1;
}

static bool checksum_ok(const unsigned char *h)
{
	int64_t want = number(h + 148, 8);
	int64_t sum = 0;
	for (int i = 0; i < BLOCK; i++)
		sum += i >= 148 && i < 156 ? ' ' : h[i];
	return want >= 0 && sum == want;
}

static bool all_zero(const unsigned char *h)
{
	for (int i = 0; i < BLOCK; i++)
		if (h[i])
			return false;
	return true;
}

/* "SEC[.FRACTION]" of a pax mtime; false if malformed. */
static bool pax_time(const char *s, size_t len, struct timespec *ts)
{
	int64_t sec = 0;
	long nsec = 0;
	size_t i = 0;
	bool neg = len && s[0] == '-';
	if (neg)
		i++;
	size_t start = i;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		if (sec > INT64_MAX / 10 - 1)
			return false;
		sec = sec * 10 + (s[i] - '0');
	}
	if (i == start)
		return false;
	if (i < len && s[i] == '.') {
		int digits = 0;
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++)
			if (digits++ < 9)
				nsec = nsec * 10 + (s[i] - '0');
		for (; digits < 9; digits++)
			nsec *= 10;
	}
	if (i != len)
		return false;
	if (neg && nsec) {
		sec = -sec - 1;
		nsec = 1000000000L - nsec;
	} else if (neg) {
		sec = -sec;
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = nsec;
	return true;
}

struct pax {
	char *path;
	int64_t size; /* -1: not given */
	bool have_mtime;
	struct timespec mtime;
	struct timespec ctime; /* {0, 0}: not given */
};

/* Parses the "LEN key=value\n" records of an extended header. */
static int pax_parse(const char *d, size_t n, struct pax *x)
{
	size_t i = 0;
	while (i < n) {
		size_t len = 0, j = i;
		while (j < n && d[j] >= '0' && d[j] <= '9' && len < n)
			len = len * 10 + (size_t)(d[j++] - '0');
		if (j == i || j >= n || d[j] != ' ' || len > n - i ||
		    len < j - i + 3 || d[i + len - 1] != '\n')
			return -EINVAL;
		const char *kv = d + j + 1, *end = d + i + len - 1;
		const char *eq = memchr(kv, '=', (size_t)(end - kv));
		if (!eq)
			return -EINVAL;
		size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
		const char *v = eq + 1;
		if (klen == 4 && memcmp(kv, "path", 4) == 0) {
			if (vlen > NAME_MAX_LEN || memchr(v, '\0', vlen))
				return -EINVAL;
			free(x->path);
			x->path = strndup(v, vlen);
			if (!x->path)
				return -ENOMEM;
		} else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
			int64_t s = 0;
			if (!vlen)
				return -EINVAL;
			for (size_t k = 0; k < vlen; k++) {
				if (v[k] < '0' || v[k] > '9' ||
				    s > INT64_MAX / 10 - 1)
					return -EINVAL;
				s = s * 10 + (v[k] - '0');
			}
			x->size = s;
		} else if (klen == 5 && memcmp(kv, "mtime", 5) == 0) {
			if (!pax_time(v, vlen, &x->mtime))
				return -EINVAL;
			x->have_mtime = true;
		} else if (klen == 5 && memcmp(kv, "ctime", 5) == 0) {
			if (!pax_time(v, vlen, &x->ctime))
				return -EINVAL;
		}
		i += len;
	}
	return 0;
}

/* The @len bytes of metadata at @off (an extended header or a long
 * name), NUL-terminated; malloc'd. */
static int read_meta(int fd, int64_t off, int64_t len, int64_t end, char **ret)
{
	if (len < 0 || len > META_MAX || off + len > end)
		return -EINVAL;
	char *d = malloc((size_t)len + 1);
	if (!d)
		return -ENOMEM;
	int rc = read_at(fd, d, (size_t)len, off);
	if (rc) {
		free(d);
		return rc;
	}
	d[len] = '\0';
	*ret = d;
	return 0;
}

static int64_t blocks(int64_t len)
{
	return (len + BLOCK - 1) / BLOCK * BLOCK;
}

int osb_tar_next(int fd, int64_t *pos, int64_t end, struct osb_tar_entry *e)
{
	struct pax x = { .size = -1 };
	char *longname = NULL;
	unsigned char h[BLOCK];
	int rc = 0;

	memset(e, 0, sizeof(*e));
	for (;;) {
		if (*pos + BLOCK > end) {
			rc = *pos == end ? 0 : -EINVAL; /* no end blocks */
			break;
		}
		rc = read_at(fd, h, BLOCK, *pos);
		if (rc)
			break;
		if (all_zero(h)) {
			rc = 0;
			break;
		}
		if (!checksum_ok(h)) {
			rc = -EINVAL;
			break;
		}
		int64_t size = number(h + 124, 12);
		char type = (char)h[156];
		int64_t data = *pos + BLOCK;
		if (size < 0 || size > end - data) {
			rc = -EINVAL;
			break;
		}
		if (type == 'x' || type == 'g' || type == 'L') {
			char *d = NULL;
			rc = read_meta(fd, data, size, end, &d);
			if (!rc && type == 'x')
				rc = pax_parse(d, (size_t)size, &x);
			if (!rc && type == 'L') {
				free(longname);
				longname = strndup(d, NAME_MAX_LEN);
				rc = longname ? 0 : -ENOMEM;
			}
			free(d);
			if (rc)
				break;
			*pos = data + blocks(size);
			continue;
		}
		if (x.size >= 0)
			size = x.size;
		if (size > end - data) {
			rc = -EINVAL;
			break;
		}
		/* ustar: prefix "/" name, each NUL-padded, not terminated */
		char name[155 + 1 + 100 + 1];
		size_t nl = 0;
		if (memcmp(h + 257, "ustar", 5) == 0 && h[345]) {
			nl = strnlen((char *)h + 345, 155);
			memcpy(name, h + 345, nl);
			name[nl++] = '/';
		}
		size_t bl = strnlen((char *)h, 100);
		memcpy(name + nl, h, bl);
		name[nl + bl] = '\0';
		e->path = x.path ? x.path : longname ? longname : strdup(name);
		if (e->path == x.path)
			x.path = NULL;
		else if (e->path == longname)
			longname = NULL;
		if (!e->path) {
			rc = -ENOMEM;
			break;
		}
		e->type = type == '\0' ? '0' : type;
		/* links, devices, directories and fifos carry no data */
		if (strchr("123456", e->type))
			size = 0;
		e->size = size;
		if (x.have_mtime) {
			e->mtime = x.mtime;
		} else {
			int64_t m = number(h + 136, 12);
			e->mtime.tv_sec = m < 0 ? 0 : (time_t)m;
		}
		e->ctime = x.ctime;
		e->data_off = data;
		*pos = data + blocks(e->size);
		rc = 1;
		break;
	}
	free(x.path);
	free(longname);
	if (rc != 1)
		osb_tar_entry_release(e);
	return rc;
}

void osb_tar_entry_release(struct osb_tar_entry *e)
{
	free(e->path);
	e->path = NULL;
}

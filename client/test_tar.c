/*
 * test_tar.c - the tar reader (untar.c) against the writer (tar.c) and
 * GNU tar: paths of any length, times to the nanosecond, member data
 * where it says; and the damaged archives it must refuse.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "osb_i.h"
#include "test_check.h"

static int tmpfd(void)
{
	return open("/tmp", O_TMPFILE | O_RDWR, 0600);
}

static int data_fd(const char *text)
{
	int fd = tmpfd();
	if (fd >= 0 && write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads every member of @fd; the rc that ended it. */
static int read_all(int fd, struct osb_tar_entry *out, int max, int *ret_n)
{
	int64_t pos = 0, end = lseek(fd, 0, SEEK_END);
	int n = 0, rc;
	struct osb_tar_entry e;
	while ((rc = osb_tar_next(fd, &pos, end, &e)) == 1) {
		if (n < max)
			out[n++] = e;
		else
			osb_tar_entry_release(&e);
	}
	*ret_n = n;
	return rc;
}

static void test_round_trip(void)
{
	char longname[400];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[0] = '/';
	longname[sizeof(longname) - 1] = '\0';
	const char *paths[2] = { "/w/short.txt", longname };
	const char *texts[2] = { "hello\n", "" };
	int out = tmpfd();
	CHECK(out >= 0, "tmpfile");
	for (int i = 0; i < 2; i++) {
		int fd = data_fd(texts[i]);
		struct osb_tar_member m = {
			.path = paths[i],
			.fd = fd,
			.size = (int64_t)strlen(texts[i]),
			.mode = 0644,
			.mtime = { 1700000000, 123456789 },
			.atime = { 1700000000, 0 },
		};
		CHECK(osb_tar_add(out, &m) == 0, "add %d", i);
		close(fd);
	}
	CHECK(osb_tar_finish(out) == 0, "finish");
	struct osb_tar_entry e[4];
	int n = 0;
	CHECK(read_all(out, e, 4, &n) == 0 && n == 2, "read %d", n);
	for (int i = 0; i < n; i++) {
		/* the writer stores paths without the leading slash */
		CHECK(strcmp(e[i].path, paths[i] + 1) == 0, "path %d: %s", i,
		      e[i].path);
		CHECK(e[i].type == '0' &&
			      e[i].size == (int64_t)strlen(texts[i]),
		      "type/size %d", i);
		CHECK(e[i].mtime.tv_sec == 1700000000 &&
			      e[i].mtime.tv_nsec == 123456789,
		      "mtime %d", i);
		char buf[16] = { 0 };
		CHECK(pread(out, buf, (size_t)e[i].size, e[i].data_off) ==
				      e[i].size &&
			      strcmp(buf, texts[i]) == 0,
		      "data %d", i);
		osb_tar_entry_release(&e[i]);
	}

	/* damage: a flipped header byte, a cut archive */
	char byte;
	CHECK(pread(out, &byte, 1, 10) == 1, "pread");
	byte ^= 1;
	CHECK(pwrite(out, &byte, 1, 10) == 1, "pwrite");
	CHECK(read_all(out, e, 4, &n) == -EINVAL, "a bad checksum refused");
	for (int i = 0; i < n; i++)
		osb_tar_entry_release(&e[i]);
	byte ^= 1;
	CHECK(pwrite(out, &byte, 1, 10) == 1, "pwrite");
	CHECK(ftruncate(out, 1536) == 0, "truncate");
	CHECK(read_all(out, e, 4, &n) == -EINVAL, "a cut archive refused");
	for (int i = 0; i < n; i++)
		osb_tar_entry_release(&e[i]);
	close(out);
}

/* An extended header whose record length does not add up. */
static void test_bad_pax(void)
{
	unsigned char h[1536];
	memset(h, 0, sizeof(h));
	const char *rec = "99 path=x\n";
	memcpy(h, "./PaxHeaders/x", 14);
	memcpy(h + 100, "0000644", 7);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)strlen(rec));
	h[156] = 'x';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	unsigned sum = 0;
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	memcpy(h + 512, rec, strlen(rec));
	int fd = tmpfd();
	CHECK(fd >= 0 && write(fd, h, sizeof(h)) == (ssize_t)sizeof(h),
	      "write");
	int64_t pos = 0;
	struct osb_tar_entry e;
	CHECK(osb_tar_next(fd, &pos, (int64_t)sizeof(h), &e) == -EINVAL,
	      "a pax record longer than its header refused");
	close(fd);
}

/* What GNU tar writes with --format=posix, when it is installed. */
static void test_gnu_tar(void)
{
	char dir[] = "/tmp/osb-tar-XXXXXX";
	char cmd[512];
	if (system("command -v tar >/dev/null 2>&1") != 0 || !mkdtemp(dir))
		return;
	snprintf(cmd, sizeof(cmd),
		 "cd %s && mkdir -p d/e && printf abc > d/e/f && "
		 "touch -d @1600000000.987654321 d/e/f && "
		 "tar --format=posix -c -f a.tar d",
		 dir);
	CHECK(system(cmd) == 0, "%s", cmd);
	struct stat st;
	snprintf(cmd, sizeof(cmd), "%s/d/e/f", dir);
	CHECK(stat(cmd, &st) == 0, "stat %s", cmd);
	snprintf(cmd, sizeof(cmd), "%s/a.tar", dir);
	int fd = open(cmd, O_RDONLY);
	struct osb_tar_entry e[8];
	int n = 0;
	CHECK(fd >= 0 && read_all(fd, e, 8, &n) == 0 && n == 3, "gnu %d", n);
	bool found = false;
	for (int i = 0; i < n; i++) {
		if (strcmp(e[i].path, "d/e/f") == 0) {
			found = e[i].type == '0' && e[i].size == 3 &&
				e[i].mtime.tv_sec == 1600000000 &&
				e[i].mtime.tv_nsec == 987654321 &&
				e[i].ctime.tv_sec == st.st_ctim.tv_sec &&
				e[i].ctime.tv_nsec == st.st_ctim.tv_nsec;
		}
		osb_tar_entry_release(&e[i]);
	}
	CHECK(found, "d/e/f with its size, mtime and ctime");
	if (fd >= 0)
		close(fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0, "cleanup");
}

/* An owner given as a number (the sandbox has no name for it) is the
 * number to GNU tar, a name is a name. */
static void test_numeric_owner(void)
{
	char dir[] = "/tmp/osb-tar-XXXXXX";
	char cmd[512], path[300];
	if (system("command -v tar >/dev/null 2>&1") != 0 || !mkdtemp(dir))
		return;
	snprintf(path, sizeof(path), "%s/a.tar", dir);
	int out = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(out >= 0, "%s", path);
	const char *owners[2][2] = { { "1234", "4321" }, { "app", "staff" } };
	const char *names[2] = { "/w/num", "/w/name" };
	for (int i = 0; i < 2; i++) {
		int fd = data_fd("x");
		struct osb_tar_member m = { .path = names[i],
					    .fd = fd,
					    .size = 1,
					    .mode = 0644,
					    .mtime = { 1600000000, 0 },
					    .atime = { 0, UTIME_OMIT },
					    .owner = owners[i][0],
					    .group = owners[i][1] };
		CHECK(fd >= 0 && osb_tar_add(out, &m) == 0, "add %s", names[i]);
		if (fd >= 0)
			close(fd);
	}
	CHECK(osb_tar_finish(out) == 0, "finish");
	close(out);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && tar --numeric-owner -tvf a.tar | grep -q "
		 "' 1234/4321 .* w/num$' && tar -tvf a.tar | grep -q "
		 "' app/staff .* w/name$' && rm -rf %s",
		 dir, dir);
	CHECK(system(cmd) == 0, "%s", cmd);
}

int main(void)
{
	test_round_trip();
	test_bad_pax();
	test_gnu_tar();
	test_numeric_owner();
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures ? 1 : 0;
}

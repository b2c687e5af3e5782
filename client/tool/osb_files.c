/*
 * osb_files.c - `osb ls|stat|get|put|rm|mkdir|mv|chmod|search|replace`.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "osb_tool.h"

static const char *type_name(enum osb_ftype t)
{
	switch (t) {
	case OSB_DIR:
		return "directory";
	case OSB_SYMLINK:
		return "symlink";
	case OSB_FILE:
		return "file";
	default:
		return "other";
	}
}

static void mode_string(const struct osb_stat *st, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	out[0] = st->type == OSB_DIR ? 'd' : st->type == OSB_SYMLINK ? 'l' :
			     st->type == OSB_OTHER ? '?' : '-';
	for (int i = 0; i < 9; i++)
		out[i + 1] = st->mode & (0400 >> i) ? rwx[i] : '-';
	out[10] = '\0';
}

static void print_long(const struct osb_stat *st, const char *name)
{
	char mode[11], when[32];
	struct tm tm;
	time_t t = st->mtime.tv_sec;

	mode_string(st, mode);
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
	printf("%s %-8s %-8s %10lld %s %s\n", mode, st->owner, st->group,
	       (long long)st->size, when, name);
}

int cmd_ls(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_stat *ents;
	struct osb_error err;
	size_t n;
	bool longfmt = false;
	long depth = 1;
	int c;

	while ((c = getopt(argc, argv, "ld:R")) != -1) {
		switch (c) {
		case 'l':
			longfmt = true;
			break;
		case 'd':
			if (cli_parse_long(optarg, &depth) || depth < 1)
				return cli_usage("bad depth %s", optarg);
			break;
		case 'R':
			depth = 64;
			break;
		default:
			return 2;
		}
	}
	if (optind + 1 != argc)
		return cli_usage("usage: osb ls [-l] [-d DEPTH|-R] PATH");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *dir = argv[optind];
	int rc = osb_dir_list(sb, dir, (int)depth, &ents, &n, &err);
	if (rc)
		return cli_fail("ls", rc, &err);
	size_t skip = strlen(dir);
	while (skip > 1 && dir[skip - 1] == '/')
		skip--;
	for (size_t i = 0; i < n; i++) {
		const char *name = ents[i].path;
		if (strncmp(name, dir, skip) == 0 && name[skip] == '/')
			name += skip + 1;
		else if (skip == 1 && name[0] == '/')
			name += 1;
		if (longfmt)
			print_long(&ents[i], name);
		else
			printf("%s\n", name);
	}
	osb_stat_array_free(ents, n);
	return 0;
}

int cmd_stat(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_stat st;
	struct osb_error err;
	char when[64];

	if (argc != 2)
		return cli_usage("usage: osb stat PATH");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_file_stat(sb, argv[1], &st, &err);
	if (rc)
		return cli_fail("stat", rc, &err);
	printf("path: %s\n", st.path);
	printf("type: %s\n", type_name(st.type));
	printf("size: %lld\n", (long long)st.size);
	printf("mode: %04o\n", (unsigned)st.mode);
	printf("owner: %s\n", st.owner);
	printf("group: %s\n", st.group);
	osb_time_format(st.mtime.tv_sec, when, sizeof(when));
	printf("modified: %s\n", when);
	osb_time_format(st.ctime.tv_sec, when, sizeof(when));
	printf("changed: %s\n", when);
	osb_stat_release(&st);
	return 0;
}

int cmd_get(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "offset", required_argument, NULL, 'o' },
		{ "length", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_error err;
	long offset = 0, length = -1;
	char tmp[4096] = "";
	int c, fd;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (cli_parse_long(optarg, &offset) || offset < 0)
				return cli_usage("bad --offset %s", optarg);
			break;
		case 'n':
			if (cli_parse_long(optarg, &length) || length < 0)
				return cli_usage("bad --length %s", optarg);
			break;
		default:
			return 2;
		}
	}
	if (optind + 2 != argc)
		return cli_usage("usage: osb get SANDBOX_PATH LOCAL_PATH|-");
	const char *src = argv[optind], *dst = argv[optind + 1];
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	if (strcmp(dst, "-") == 0) {
		fd = STDOUT_FILENO;
	} else {
		/* into a temporary beside the target, renamed at the end, so
		 * a failed download leaves no half file under its name */
		snprintf(tmp, sizeof(tmp), "%s.osb-XXXXXX", dst);
		fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "osb: %s: %s\n", dst, strerror(errno));
			return 1;
		}
	}
	int rc = osb_file_download_fd(sb, src, offset, length, fd, NULL, &err);
	int local = 0; /* a failure of ours after the download: errno only */
	if (fd != STDOUT_FILENO) {
		if (!rc && fsync(fd) < 0)
			local = -errno;
		if (close(fd) < 0 && !rc && !local)
			local = -errno;
		if (!rc && !local) {
			mode_t mask = umask(0);
			umask(mask);
			fchmodat(AT_FDCWD, tmp, 0666 & ~mask, 0);
			if (rename(tmp, dst) < 0)
				local = -errno;
		}
		if (rc || local)
			unlink(tmp);
	}
	if (rc)
		return cli_fail("get", rc, &err);
	if (local) {
		fprintf(stderr, "osb: %s: %s\n", dst, strerror(-local));
		return 1;
	}
	return 0;
}

/* stdin into an anonymous temporary file (the upload needs its size). */
static int spool_stdin(off_t *ret_size)
{
	const char *dir = getenv("TMPDIR");
	char buf[1 << 16];
	off_t total = 0;

	int fd = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC,
		      0600);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));
			if (w < 0) {
				int e = errno;
				close(fd);
				return -e;
			}
			off += w;
		}
		total += n;
	}
	*ret_size = total;
	return fd;
}

int cmd_put(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "owner", required_argument, NULL, 'o' },
		{ "group", required_argument, NULL, 'g' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_upload u = { .fd = -1 };
	struct osb_error err;
	struct stat st;
	int c, fd;

	while ((c = getopt_long(argc, argv, "m:", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (cli_parse_mode(optarg, &u.mode) || !u.mode)
				return cli_usage("bad mode %s", optarg);
			break;
		case 'o':
			u.owner = optarg;
			break;
		case 'g':
			u.group = optarg;
			break;
		default:
			return 2;
		}
	}
	if (optind + 2 != argc)
		return cli_usage("usage: osb put LOCAL_PATH|- SANDBOX_PATH");
	const char *src = argv[optind];
	u.path = argv[optind + 1];
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	if (strcmp(src, "-") == 0) {
		off_t size;
		if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
			fd = dup(STDIN_FILENO);
			u.fd_offset = lseek(STDIN_FILENO, 0, SEEK_CUR);
			if (u.fd_offset < 0)
				u.fd_offset = 0;
			size = st.st_size - u.fd_offset;
		} else {
			fd = spool_stdin(&size);
		}
		if (fd < 0) {
			fprintf(stderr, "osb: stdin: %s\n", strerror(-fd));
			return 1;
		}
		u.size = size;
	} else {
		fd = open(src, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, "osb: %s: %s\n", src, strerror(errno));
			return 1;
		}
		if (!S_ISREG(st.st_mode)) {
			fprintf(stderr, "osb: %s: not a regular file\n", src);
			close(fd);
			return 1;
		}
		u.size = st.st_size;
		if (!u.mode)
			u.mode = st.st_mode & 0777;
	}
	u.fd = fd;
	int rc = osb_file_upload(sb, &u, 1, &err);
	close(fd);
	return rc ? cli_fail("put", rc, &err) : 0;
}

int cmd_rm(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	bool recursive = false;
	int c, rc;

	while ((c = getopt(argc, argv, "rf")) != -1) {
		if (c == 'r')
			recursive = true;
		else if (c != 'f')
			return 2;
	}
	if (optind >= argc)
		return cli_usage("usage: osb rm [-r] PATH...");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *const *paths = (const char *const *)argv + optind;
	size_t n = (size_t)(argc - optind);
	if (recursive)
		rc = osb_dirs_remove(sb, paths, n, &err);
	else
		rc = osb_files_remove(sb, paths, n, &err);
	return rc ? cli_fail("rm", rc, &err) : 0;
}

int cmd_mkdir(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	mode_t mode = 0;
	int c;

	while ((c = getopt(argc, argv, "m:p")) != -1) {
		if (c == 'm') {
			if (cli_parse_mode(optarg, &mode) || !mode)
				return cli_usage("bad mode %s", optarg);
		} else if (c != 'p') {
			return 2;
		}
	}
	if (optind >= argc)
		return cli_usage("usage: osb mkdir [-m MODE] PATH...");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	for (int i = optind; i < argc; i++) {
		int rc = osb_dir_make(sb, argv[i], mode, NULL, NULL, &err);
		if (rc)
			return cli_fail("mkdir", rc, &err);
	}
	return 0;
}

int cmd_mv(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	if (argc != 3)
		return cli_usage("usage: osb mv SRC DEST");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	struct osb_move m = { argv[1], argv[2] };
	int rc = osb_file_move(sb, &m, 1, &err);
	return rc ? cli_fail("mv", rc, &err) : 0;
}

int cmd_chmod(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "owner", required_argument, NULL, 'o' },
		{ "group", required_argument, NULL, 'g' },
		{ NULL, 0, NULL, 0 },
	};
	const char *owner = NULL, *group = NULL;
	struct osb_error err;
	struct osb_stat st;
	mode_t mode;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'o')
			owner = optarg;
		else if (c == 'g')
			group = optarg;
		else
			return 2;
	}
	if (optind + 2 != argc || cli_parse_mode(argv[optind], &mode))
		return cli_usage("usage: osb chmod [--owner U] [--group G] MODE PATH");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *path = argv[optind + 1];
	/* execd always chowns: keep the current owner unless told */
	int rc = osb_file_stat(sb, path, &st, &err);
	if (rc)
		return cli_fail("chmod", rc, &err);
	rc = osb_file_chmod(sb, path, mode, owner ? owner : st.owner,
			    group ? group : st.group, &err);
	osb_stat_release(&st);
	return rc ? cli_fail("chmod", rc, &err) : 0;
}

int cmd_search(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_stat *ents;
	struct osb_error err;
	size_t n;

	if (argc != 2 && argc != 3)
		return cli_usage("usage: osb search DIR [PATTERN]");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_file_search(sb, argv[1], argc == 3 ? argv[2] : NULL,
				 &ents, &n, &err);
	if (rc)
		return cli_fail("search", rc, &err);
	for (size_t i = 0; i < n; i++)
		printf("%s\n", ents[i].path);
	osb_stat_array_free(ents, n);
	return 0;
}

int cmd_replace(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	long count;

	if (argc != 4)
		return cli_usage("usage: osb replace PATH OLD NEW");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	int rc = osb_file_replace(sb, argv[1], argv[2], argv[3], &count, &err);
	if (rc)
		return cli_fail("replace", rc, &err);
	if (count >= 0)
		printf("%ld\n", count);
	return 0;
}

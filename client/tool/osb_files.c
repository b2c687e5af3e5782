/*
 * osb_files.c - `osb file cat|write|upload|download|rm|mv|mkdir|rmdir|
 * search|info|chmod|replace|ls` (ls is osb's own, also as `osb ls`), and
 * the older spellings (stat, get, put...). Each takes the sandbox id
 * first, or from -s.
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
	out[0] = st->type == OSB_DIR     ? 'd' :
		 st->type == OSB_SYMLINK ? 'l' :
		 st->type == OSB_OTHER   ? '?' :
					   '-';
	for (int i = 0; i < 9; i++)
		out[i + 1] = st->mode & (0400 >> i) ? rwx[i] : '-';
	out[10] = '\0';
}

static void print_long(const struct osb_cli *cli, const struct osb_stat *st,
		       const char *name)
{
	char mode[11], when[32];
	struct tm tm;
	time_t t = st->mtime.tv_sec;

	mode_string(st, mode);
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
	cli_line(cli, "%s %-8s %-8s %10lld %s %s", mode, st->owner, st->group,
		 (long long)st->size, when, name);
}

static void rec_stat(struct cli_rec *r, const struct osb_stat *st)
{
	rec_str(r, "path", st->path);
	rec_str(r, "type", type_name(st->type));
	rec_int(r, "size", st->size);
	char mode[8];
	snprintf(mode, sizeof(mode), "%04o", (unsigned)st->mode);
	rec_str(r, "mode", mode);
	rec_str(r, "owner", st->owner);
	rec_str(r, "group", st->group);
	rec_time(r, "created_at", st->ctime.tv_sec);
	rec_time(r, "modified_at", st->mtime.tv_sec);
}

static const char *const stat_cols[] = { "path",        "type",  "size",
					 "mode",        "owner", "group",
					 "modified_at", NULL };

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
	optind = cli_take_id(cli, argc, argv, optind, 1);
	if (optind + 1 != argc)
		return cli_usage("usage: osb file ls SANDBOX_ID PATH [-l] "
				 "[-d DEPTH|-R]");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *dir = argv[optind];
	int rc = osb_dir_list(sb, dir, (int)depth, &ents, &n, &err);
	if (rc)
		return cli_fail("ls", rc, &err);
	if (CLI_STRUCTURED(cli->format)) {
		struct cli_rec *r = rec_array();
		for (size_t i = 0; i < n; i++)
			rec_stat(rec_add_object(r, NULL), &ents[i]);
		osb_stat_array_free(ents, n);
		return cli_print(cli, r, NULL);
	}
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
			print_long(cli, &ents[i], name);
		else
			cli_line(cli, "%s", name);
	}
	osb_stat_array_free(ents, n);
	return 0;
}

static void print_stat(const struct osb_stat *st)
{
	char when[64];
	printf("path: %s\n", st->path);
	printf("type: %s\n", type_name(st->type));
	printf("size: %lld\n", (long long)st->size);
	printf("mode: %04o\n", (unsigned)st->mode);
	printf("owner: %s\n", st->owner);
	printf("group: %s\n", st->group);
	osb_time_format(st->mtime.tv_sec, when, sizeof(when));
	printf("modified: %s\n", when);
	osb_time_format(st->ctime.tv_sec, when, sizeof(when));
	printf("changed: %s\n", when);
}

/* info [SANDBOX_ID] PATH... (the older stat PATH) */
int cmd_stat(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_stat st;
	struct osb_error err;

	int first = cli_take_id(cli, argc, argv, 1, -1);
	if (first >= argc)
		return cli_usage("usage: osb stat PATH");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	struct cli_rec *r = rec_array();
	for (int i = first; i < argc; i++) {
		int rc = osb_file_stat(sb, argv[i], &st, &err);
		if (rc) {
			rec_free(r);
			return cli_fail("stat", rc, &err);
		}
		if (cli->format == CLI_RAW)
			print_stat(&st);
		else
			rec_stat(rec_add_object(r, NULL), &st);
		osb_stat_release(&st);
	}
	if (cli->format == CLI_RAW) {
		rec_free(r);
		return 0;
	}
	return cli_print(cli, r, stat_cols);
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
	optind = cli_take_id(cli, argc, argv, optind, 2);
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
	struct cli_progress *prog = NULL;
	if (cli->progress) {
		/* the size, for the percentage */
		struct osb_stat st;
		int64_t total = -1;
		if (osb_file_stat(sb, src, &st, NULL) == 0) {
			total = st.size > offset ? st.size - offset : 0;
			if (length >= 0 && length < total)
				total = length;
			osb_stat_release(&st);
		}
		prog = progress_start(cli, false, total);
	}
	int rc = osb_file_download_fd(sb, src, offset, length, fd, NULL, &err);
	progress_end(prog);
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
	if (fd != STDOUT_FILENO)
		cli_done(cli, "downloaded %s to %s", src, dst);
	return 0;
}

/* stdin into an anonymous temporary file (the upload needs its size). */
static int spool_stdin(off_t *ret_size)
{
	const char *dir = getenv("TMPDIR");
	char buf[1 << 16];
	off_t total = 0;

	int fd = open(dir && *dir ? dir : "/tmp",
		      O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
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
	optind = cli_take_id(cli, argc, argv, optind, 2);
	if (optind + 2 != argc)
		return cli_usage("usage: osb put LOCAL_PATH|- SANDBOX_PATH");
	const char *src = argv[optind];
	u.path = argv[optind + 1];
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	if (strcmp(src, "-") == 0) {
		off_t size = 0;
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
	struct cli_progress *prog = progress_start(cli, true, u.size);
	int rc = osb_file_upload(sb, &u, 1, &err);
	progress_end(prog);
	close(fd);
	if (rc)
		return cli_fail("put", rc, &err);
	cli_done(cli, "uploaded %s to %s", src, u.path);
	return 0;
}

/* A row per path done, for rm, rmdir and mkdir. */
/* The paths a command acted on: a row each (a line each in raw), none
 * with -q. */
static int print_paths(struct osb_cli *cli, char **paths, int n,
		       const char *status)
{
	static const char *const cols[] = { "path", "status", NULL };
	if (cli->format == CLI_RAW) {
		for (int i = 0; i < n; i++)
			cli_done(cli, "%s %s", status, paths[i]);
		return 0;
	}
	if (cli->quiet && !CLI_STRUCTURED(cli->format))
		return 0;
	struct cli_rec *r = rec_array();
	for (int i = 0; i < n; i++) {
		struct cli_rec *row = rec_add_object(r, NULL);
		rec_str(row, "path", paths[i]);
		rec_str(row, "status", status);
	}
	return cli_print(cli, r, cols);
}

static int remove_paths(struct osb_cli *cli, int argc, char **argv,
			bool recursive)
{
	struct osb_error err;
	int rc;

	int first = cli_take_id(cli, argc, argv, optind, -1);
	if (first >= argc)
		return cli_usage("usage: osb %s [-r] PATH...", argv[0]);
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *const *paths = (const char *const *)argv + first;
	size_t n = (size_t)(argc - first);
	if (recursive)
		rc = osb_dirs_remove(sb, paths, n, &err);
	else
		rc = osb_files_remove(sb, paths, n, &err);
	if (rc)
		return cli_fail(argv[0], rc, &err);
	return print_paths(cli, argv + first, (int)n, "deleted");
}

int cmd_rm(struct osb_cli *cli, int argc, char **argv)
{
	bool recursive = false;
	int c;

	while ((c = getopt(argc, argv, "rf")) != -1) {
		if (c == 'r')
			recursive = true;
		else if (c != 'f')
			return 2;
	}
	return remove_paths(cli, argc, argv, recursive);
}

int cmd_rmdir(struct osb_cli *cli, int argc, char **argv)
{
	optind = 1;
	return remove_paths(cli, argc, argv, true);
}

static const struct option owner_opts[] = {
	{ "mode", required_argument, NULL, 'm' },
	{ "owner", required_argument, NULL, 'o' },
	{ "group", required_argument, NULL, 'g' },
	{ "content", required_argument, NULL, 'c' },
	{ "encoding", required_argument, NULL, 'E' },
	{ "old", required_argument, NULL, 'O' },
	{ "new", required_argument, NULL, 'N' },
	{ "pattern", required_argument, NULL, 'p' },
	{ NULL, 0, NULL, 0 },
};

/* The options of the file commands that set a mode and an owner, and
 * say what to write or replace: one parser for all, each command
 * refusing the ones it does not take (@allowed: their letters). */
struct file_opts {
	mode_t mode;
	bool mode_given;
	const char *owner, *group;
	const char *content, *old, *new_text, *pattern;
	const char *encoding; /* NULL: UTF-8, written as it is */
};

static int parse_file_opts(int argc, char **argv, const char *shorts,
			   const char *allowed, struct file_opts *f)
{
	int c;
	while ((c = getopt_long(argc, argv, shorts, owner_opts, NULL)) != -1) {
		if (c == '?' || !strchr(allowed, c))
			return c == '?' ?
				       2 :
				       cli_usage("%s does not take that option",
						 argv[0]);
		switch (c) {
		case 'm':
			if (cli_parse_mode(optarg, &f->mode))
				return cli_usage("bad mode %s", optarg);
			f->mode_given = true;
			break;
		case 'o':
			f->owner = optarg;
			break;
		case 'g':
			f->group = optarg;
			break;
		case 'c':
			f->content = optarg;
			break;
		case 'E':
			f->encoding = cli_is_utf8(optarg) ? NULL : optarg;
			break;
		case 'O':
			f->old = optarg;
			break;
		case 'N':
			f->new_text = optarg;
			break;
		case 'p':
			f->pattern = optarg;
			break;
		}
	}
	return 0;
}

int cmd_mkdir(struct osb_cli *cli, int argc, char **argv)
{
	struct file_opts f = { 0 };
	struct osb_error err;

	/* -p: mkdir always makes the parents */
	int st = parse_file_opts(argc, argv, "m:p", "mogp", &f);
	if (st)
		return st;
	if (f.mode_given && !f.mode)
		return cli_usage("bad mode 0");
	int first = cli_take_id(cli, argc, argv, optind, -1);
	if (first >= argc)
		return cli_usage("usage: osb mkdir [-m MODE] PATH...");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	for (int i = first; i < argc; i++) {
		int rc = osb_dir_make(sb, argv[i], f.mode, f.owner, f.group,
				      &err);
		if (rc)
			return cli_fail("mkdir", rc, &err);
	}
	return print_paths(cli, argv + first, argc - first, "created");
}

int cmd_mv(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	int first = cli_take_id(cli, argc, argv, 1, 2);
	if (first + 2 != argc)
		return cli_usage("usage: osb mv SRC DEST");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	struct osb_move m = { argv[first], argv[first + 1] };
	int rc = osb_file_move(sb, &m, 1, &err);
	if (rc)
		return cli_fail("mv", rc, &err);
	cli_done(cli, "moved %s to %s", m.src, m.dest);
	return 0;
}

/* chmod SANDBOX_ID PATH --mode MODE, or the older chmod MODE PATH */
int cmd_chmod(struct osb_cli *cli, int argc, char **argv)
{
	struct file_opts f = { 0 };
	struct osb_error err;
	struct osb_stat st;

	int rc = parse_file_opts(argc, argv, "", "mog", &f);
	if (rc)
		return rc;
	int first = cli_take_id(cli, argc, argv, optind, f.mode_given ? 1 : 2);
	if (!f.mode_given) {
		if (first + 2 != argc || cli_parse_mode(argv[first], &f.mode))
			return cli_usage("usage: osb chmod [--owner U] "
					 "[--group G] MODE PATH");
		first++;
	}
	if (first + 1 != argc)
		return cli_usage(
			"usage: osb chmod [--owner U] [--group G] MODE PATH");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *path = argv[first];
	/* execd always chowns: keep the current owner unless told */
	rc = osb_file_stat(sb, path, &st, &err);
	if (rc)
		return cli_fail("chmod", rc, &err);
	rc = osb_file_chmod(sb, path, f.mode, f.owner ? f.owner : st.owner,
			    f.group ? f.group : st.group, &err);
	osb_stat_release(&st);
	if (rc)
		return cli_fail("chmod", rc, &err);
	cli_done(cli, "mode of %s set to %04o", path, (unsigned)f.mode);
	return 0;
}

/* search SANDBOX_ID PATH --pattern GLOB, or the older search DIR [GLOB] */
int cmd_search(struct osb_cli *cli, int argc, char **argv)
{
	struct file_opts f = { 0 };
	struct osb_stat *ents;
	struct osb_error err;
	size_t n;

	int rc = parse_file_opts(argc, argv, "p:", "p", &f);
	if (rc)
		return rc;
	int first = cli_take_id(cli, argc, argv, optind, f.pattern ? 1 : 2);
	if (!f.pattern && first + 2 == argc && argv[first][0] != '/')
		first = cli_take_id(cli, argc, argv, first, 0); /* ID DIR */
	else if (!f.pattern && first + 2 == argc)
		f.pattern = argv[argc - 1];
	if (first >= argc || first + 2 < argc)
		return cli_usage("usage: osb search DIR [PATTERN]");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	rc = osb_file_search(sb, argv[first], f.pattern, &ents, &n, &err);
	if (rc)
		return cli_fail("search", rc, &err);
	struct cli_rec *r = cli->format == CLI_RAW ? NULL : rec_array();
	for (size_t i = 0; i < n; i++) {
		if (r)
			rec_stat(rec_add_object(r, NULL), &ents[i]);
		else
			printf("%s\n", ents[i].path);
	}
	osb_stat_array_free(ents, n);
	return r ? cli_print(cli, r, stat_cols) : 0;
}

/* replace SANDBOX_ID PATH --old A --new B, or the older replace PATH A B */
int cmd_replace(struct osb_cli *cli, int argc, char **argv)
{
	struct file_opts f = { 0 };
	struct osb_error err;
	long count;

	int rc = parse_file_opts(argc, argv, "", "ON", &f);
	if (rc)
		return rc;
	bool older = !f.old && !f.new_text;
	int first = cli_take_id(cli, argc, argv, optind, older ? 3 : 1);
	if (older && first + 3 == argc) {
		f.old = argv[first + 1];
		f.new_text = argv[first + 2];
	} else if (older || first + 1 != argc || !f.old || !f.new_text) {
		return cli_usage("usage: osb replace PATH OLD NEW");
	}
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	const char *path = argv[first];
	rc = osb_file_replace(sb, path, f.old, f.new_text, &count, &err);
	if (rc)
		return cli_fail("replace", rc, &err);
	if (cli->format == CLI_RAW) {
		if (count >= 0)
			printf("%ld\n", count);
		return 0;
	}
	struct cli_rec *r = rec_object();
	rec_str(r, "path", path);
	if (count >= 0)
		rec_int(r, "replaced", count);
	return cli_print(cli, r, NULL);
}

/* cat SANDBOX_ID PATH [--encoding E]: the file to stdout, as it is, or
 * decoded from E into UTF-8 */
int cmd_cat(struct osb_cli *cli, int argc, char **argv)
{
	struct file_opts f = { 0 };
	struct osb_error err;

	int rc = parse_file_opts(argc, argv, "", "E", &f);
	if (rc)
		return rc;
	int first = cli_take_id(cli, argc, argv, optind, 1);
	if (first + 1 != argc)
		return cli_usage("usage: osb file cat SANDBOX_ID PATH "
				 "[--encoding ENCODING]");
	struct osb_sandbox *sb = cli_sandbox(cli);
	if (!sb)
		return 1;
	fflush(stdout);
	if (!f.encoding) {
		rc = osb_file_download_fd(sb, argv[first], 0, -1, STDOUT_FILENO,
					  NULL, &err);
		return rc ? cli_fail("cat", rc, &err) : 0;
	}
	/* decoded once it is all here: a failed download prints nothing */
	FILE *tmp = tmpfile();
	if (!tmp)
		return cli_fail("cat", -errno, NULL);
	rc = osb_file_download_fd(sb, argv[first], 0, -1, fileno(tmp), NULL,
				  &err);
	if (rc)
		rc = cli_fail("cat", rc, &err);
	else if (lseek(fileno(tmp), 0, SEEK_SET) < 0)
		rc = cli_fail("cat", -errno, NULL);
	else
		rc = cli_decode_fd(f.encoding, fileno(tmp), stdout);
	fclose(tmp);
	return rc;
}

/* write SANDBOX_ID PATH [-c TEXT]: TEXT, else stdin, becomes the file */
int cmd_write(struct osb_cli *cli, int argc, char **argv)
{
	struct file_opts f = { 0 };
	struct osb_error err;

	int rc = parse_file_opts(argc, argv, "c:", "cmogE", &f);
	if (rc)
		return rc;
	int first = cli_take_id(cli, argc, argv, optind, 1);
	if (first + 1 != argc)
		return cli_usage(
			"usage: osb file write SANDBOX_ID PATH [-c TEXT]");
	size_t len = 0;
	if (!f.content && isatty(STDIN_FILENO))
		fprintf(stderr, "osb: reading the file from stdin (Ctrl-D "
				"ends it)\n");
	char *text = f.content ? strdup(f.content) : cli_slurp(NULL, &len);
	if (!text)
		return cli_fail("write", -ENOMEM, NULL);
	if (f.content)
		len = strlen(text);
	if (f.encoding) {
		char *enc;
		rc = cli_encode_text(f.encoding, text, len, &enc, &len);
		free(text);
		if (rc)
			return rc;
		text = enc;
	}
	struct osb_sandbox *sb = cli_sandbox(cli);
	struct osb_upload u = {
		.path = argv[first],
		.data = text,
		.fd = -1,
		.size = (int64_t)len,
		.mode = f.mode,
		.owner = f.owner,
		.group = f.group,
	};
	rc = sb ? osb_file_upload(sb, &u, 1, &err) : 0;
	free(text);
	if (!sb)
		return 1;
	if (rc)
		return cli_fail("write", rc, &err);
	cli_done(cli, "wrote %lld bytes to %s", (long long)u.size, u.path);
	return 0;
}

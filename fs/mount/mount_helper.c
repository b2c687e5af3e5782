/*
 * mount_helper.c - mount.fuse.osbfs, what mount(8) runs for
 * `mount -t fuse.osbfs` and for an fstab line of type fuse.osbfs:
 *
 *     mount.fuse.osbfs SOURCE MOUNTPOINT [-sfnv] [-t TYPE] [-o OPTIONS]
 *
 * It runs `osbfs [SANDBOX][:DIR] MOUNTPOINT -o OPTIONS`, found next to
 * itself, else where osbfs is installed (OSBFS_BINDIR), else on PATH;
 * with no shell in between.
 *
 * SOURCE is ID, ID:DIR or :DIR, with or without "osbfs#" before it (as
 * /proc/mounts shows a mount, and as mount.fuse takes TYPE#SOURCE).
 * "osbfs" alone, or "osbfs:DIR", has no id: a new sandbox, or the one
 * name=NAME finds; fstab has no empty field for it.
 *
 * Dropped, as mount.fuse drops them, since they are for mount(8), fstab
 * or systemd and libfuse refuses them: "", defaults, auto, noauto, user,
 * users, nouser, _netdev, nofail, comment=..., x-* and X-*.
 * setuid=USER runs osbfs as USER (HOME then USER's, for its cache dir).
 * Unlike mount.fuse it adds neither dev nor suid: a file of the sandbox
 * gains no setuid or device powers here unless the line asks for them.
 */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "mount.fuse.osbfs"

static const char *const dropped[] = {
	"",      "defaults", "auto",    "noauto", "user",
	"users", "nouser",   "_netdev", "nofail",
};

static bool is_dropped(const char *opt)
{
	if (strncmp(opt, "x-", 2) == 0 || strncmp(opt, "X-", 2) == 0 ||
	    strncmp(opt, "comment=", 8) == 0)
		return true;
	for (size_t i = 0; i < sizeof(dropped) / sizeof(*dropped); i++)
		if (strcmp(opt, dropped[i]) == 0)
			return true;
	return false;
}

/* Length of the first option of @list: up to a ',' not escaped by '\'
 * (as fuse_opt reads them). */
static size_t opt_len(const char *list)
{
	size_t n = 0;
	while (list[n] && list[n] != ',')
		n += list[n] == '\\' && list[n + 1] ? 2 : 1;
	return n;
}

/* Appends @list's options but the dropped ones to @out (size @size),
 * comma-separated; setuid=USER goes to @user. 0 or -E2BIG. */
static int filter_options(const char *list, char *out, size_t size, char *user,
			  size_t user_size)
{
	size_t len = strlen(out);

	while (*list) {
		size_t n = opt_len(list);
		char opt[1024];
		if (n >= sizeof(opt))
			return -E2BIG;
		memcpy(opt, list, n);
		opt[n] = '\0';
		list += n + (list[n] == ',');
		if (strncmp(opt, "setuid=", 7) == 0) {
			size_t ul = strlen(opt + 7) + 1;
			if (ul > user_size)
				return -E2BIG;
			memcpy(user, opt + 7, ul);
			continue;
		}
		if (is_dropped(opt))
			continue;
		if (len + 1 + n + 1 > size)
			return -E2BIG;
		if (len)
			out[len++] = ',';
		memcpy(out + len, opt, n + 1);
		len += n;
	}
	return 0;
}

/* SOURCE -> osbfs's [SANDBOX][:DIR]: "osbfs#" dropped, "osbfs" as the
 * id means none. Points into @source. */
static const char *osbfs_source(const char *source)
{
	if (strncmp(source, "osbfs#", 6) == 0)
		source += 6;
	if (strncmp(source, "osbfs", 5) == 0 &&
	    (source[5] == '\0' || source[5] == ':'))
		source += 5;
	return source;
}

/* The osbfs to run: in @dir if there is one there. */
static bool osbfs_in(const char *dir, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/osbfs", dir);
	return n > 0 && (size_t)n < size && access(buf, X_OK) == 0;
}

static const char *find_osbfs(char *buf, size_t size)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			if (osbfs_in(self, buf, size))
				return buf;
		}
	}
	if (osbfs_in(OSBFS_BINDIR, buf, size))
		return buf;
	return "osbfs"; /* on PATH */
}

/* setuid=USER: osbfs runs as USER, with USER's home for its cache. */
static int become(const char *user)
{
	struct passwd *pw = getpwnam(user);
	if (!pw) {
		fprintf(stderr, PROG ": setuid=%s: no such user\n", user);
		return -1;
	}
	if (initgroups(pw->pw_name, pw->pw_gid) || setgid(pw->pw_gid) ||
	    setuid(pw->pw_uid)) {
		fprintf(stderr, PROG ": setuid=%s: %s\n", user,
			strerror(errno));
		return -1;
	}
	setenv("HOME", pw->pw_dir, 1);
	setenv("USER", pw->pw_name, 1);
	setenv("LOGNAME", pw->pw_name, 1);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: " PROG " SOURCE MOUNTPOINT [-sfnv] "
			"[-o OPTIONS]\n"
			"  SOURCE: ID, ID:DIR, :DIR, osbfs or osbfs:DIR "
			"(no id: a new sandbox, or name=NAME's)\n");
	return 1;
}

int main(int argc, char **argv)
{
	static char opts[65536];
	char osbfs[PATH_MAX + 8];
	char user[256] = "";
	bool fake = false, verbose = false;

	if (argc == 2 &&
	    (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0)) {
		printf(PROG " (osbfs %s)\n", OSBFS_VERSION);
		return 0;
	}
	if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-')
		return usage();
	for (int i = 3; i < argc; i++) {
		const char *a = argv[i];
		if ((strcmp(a, "-o") == 0 || strcmp(a, "-t") == 0) &&
		    i + 1 == argc)
			return usage();
		if (strcmp(a, "-o") == 0) {
			if (filter_options(argv[++i], opts, sizeof(opts), user,
					   sizeof(user))) {
				fprintf(stderr, PROG ": options too long\n");
				return 1;
			}
		} else if (strcmp(a, "-t") == 0) {
			i++; /* fuse.osbfs: we know */
		} else if (a[0] == '-' && a[1] &&
			   strspn(a + 1, "sfnv") == strlen(a + 1)) {
			fake |= strchr(a, 'f') != NULL;
			verbose |= strchr(a, 'v') != NULL;
		} else {
			return usage();
		}
	}
	const char *source = osbfs_source(argv[1]);
	const char *args[7];
	int n = 0;
	args[n++] = find_osbfs(osbfs, sizeof(osbfs));
	if (*source)
		args[n++] = source;
	args[n++] = argv[2];
	if (opts[0]) {
		args[n++] = "-o";
		args[n++] = opts;
	}
	args[n] = NULL;
	if (verbose) {
		fprintf(stderr, PROG ":");
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %s", args[i]);
		fprintf(stderr, "%s%s\n", user[0] ? " as " : "", user);
	}
	if (fake)
		return 0;
	if (user[0] && become(user))
		return 1;
	if (!getenv("HOME")) {
		/* at boot there may be none; osbfs's cache dir needs one */
		struct passwd *pw = getpwuid(getuid());
		setenv("HOME", pw ? pw->pw_dir : "/", 0);
	}
	execvp(args[0], (char *const *)args);
	fprintf(stderr, PROG ": cannot run %s: %s\n", args[0], strerror(errno));
	return 1;
}

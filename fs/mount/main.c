/*
 * main.c - osbfs: mount an OpenSandbox sandbox as a local directory.
 *
 * Only wiring: options -> client -> sandbox -> caches -> mount ->
 * daemonize -> threads -> loop -> flush -> unwind. Every failure before
 * the mount is one line on stderr and a non-zero exit. The cache dir's
 * lock file follows the daemon's life (holder.h): starting, mounted,
 * unmounted (uploading what is left), exited (with what never reached
 * the sandbox, for `osbfs -u`, which is umount.c).
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "connect.h"
#include "ctl.h"
#include "feed.h"
#include "holder.h"
#include "life.h"
#include "log.h"
#include "notify.h"
#include "preflight.h"
#include "pull.h"
#include "recover.h"
#include "ops.h"
#include "owners.h"
#include "remote.h"
#include "special.h"
#include "umount.h"
#include "watch.h"
#include "writeback.h"
#include "xattr.h"

#define MOUNTED_RETRIES 8

/* A mount that fails after making its sandbox leaves nothing behind. */
static void undo_create(struct osbfs *fs, bool created)
{
	struct osb_error err;
	if (!created || !fs->sandbox_id)
		return;
	if (osb_sandbox_delete(fs->client, fs->sandbox_id, &err) == 0)
		log_stderr("osbfs: deleted sandbox %s, which this mount "
			   "had made",
			   fs->sandbox_id);
	else
		log_stderr("osbfs: sandbox %s, which this mount made, "
			   "is left running: %s",
			   fs->sandbox_id, err.message);
}

/* -d: a line per API call (osb.h: never a key or a header). */
static void trace_call(void *arg, const char *method, const char *path,
		       int status, const char *error, long ms, int attempt)
{
	(void)arg;
	char line[1200];
	osb_trace_format(line, sizeof(line), method, path, status, error, ms,
			 attempt);
	log_debug("api: %s", line);
}

/* Where the log goes once the daemon leaves the terminal: log_file=, or
 * syslog, or where there is no syslog (a container), a file in the
 * cache dir, said on stderr while it is still seen. */
static void log_for_daemon(struct osbfs *fs)
{
	if (fs->opt->log_file) {
		log_quiet_stderr();
		return;
	}
	if (access("/dev/log", W_OK) == 0) {
		log_to_syslog();
		return;
	}
	char path[4200];
	snprintf(path, sizeof(path), "%s/log", cache_dir(fs->cache));
	if (log_to_file(path) == 0) {
		log_stderr("osbfs: no syslog here: the log goes to %s", path);
		log_quiet_stderr();
	} else {
		log_to_syslog();
	}
}

/* What /proc/mounts and findmnt show: source osbfs#ID:DIR, type
 * fuse.osbfs. Put first, so an fsname= or subtype= of the user's wins. */
static int add_mount_name(struct fuse_args *args, const char *id,
			  const char *dir)
{
	static const char head[] = "-osubtype=osbfs,fsname=osbfs#";
	size_t n = strlen(id) + 1 + strlen(dir);
	char *name = malloc(n + 1);
	char *arg = malloc(sizeof(head) + 2 * n);
	int rc = -ENOMEM;

	if (name && arg) {
		snprintf(name, n + 1, "%s:%s", id, dir);
		char *w = arg + sprintf(arg, "%s", head);
		/* fuse_opt splits at ',' and takes '\' as an escape */
		for (const char *r = name; *r; r++) {
			if (*r == ',' || *r == '\\')
				*w++ = '\\';
			*w++ = *r;
		}
		*w = '\0';
		rc = fuse_opt_insert_arg(args, 1, arg) ? -ENOMEM : 0;
	}
	free(name);
	free(arg);
	return rc;
}

static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int run_loop(struct osbfs *fs)
{
	if (fs->opt->singlethread)
		return fuse_session_loop(fs->se);
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	/* blocking reads (job wait) and fsyncs hold a thread each */
	fuse_loop_cfg_set_max_threads(cfg, 64);
	fuse_loop_cfg_set_idle_threads(cfg, 8);
	int rc = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return rc;
}

int main(int argc, char **argv)
{
	struct osbfs_options opt;
	struct osbfs fs;
	struct osb_sandbox_info info = { 0 };
	struct holder holder = { .fd = -1 };
	struct pending pending = { 0 };
	char msg[2048];
	int rc, status = 1;
	bool created = false, mounted = false;

	memset(&fs, 0, sizeof(fs));
	/* two malloc arenas, not one per thread: each of FUSE's threads
	 * would keep megabytes in its own (peak RSS ~45 MiB after an untar
	 * and a git commit of 5,000 files; ~30 with two) */
	mallopt(M_ARENA_MAX, 2);
	rc = options_parse(&opt, argc, argv, msg, sizeof(msg));
	if (rc) {
		log_stderr("osbfs: %s", msg[0] ? msg : strerror(-rc));
		log_stderr("usage: %s [options] [SANDBOX][:DIR] MOUNTPOINT "
			   "(--help for more)",
			   argv[0]);
		options_release(&opt);
		return 2;
	}
	if (opt.show_help) {
		options_usage(argv[0]);
		options_release(&opt);
		return 0;
	}
	if (opt.show_version) {
		printf("osbfs %s (libfuse %s)\n", OSBFS_VERSION,
		       fuse_pkgversion());
		options_release(&opt);
		return 0;
	}
	if (opt.unmount) {
		status = umount_run(&opt);
		options_release(&opt);
		return status;
	}
	/* a bad setup file fails like a bad option, before anything */
	rc = options_read_setup(&opt, msg, sizeof(msg));
	if (rc) {
		log_stderr("osbfs: %s", msg[0] ? msg : strerror(-rc));
		options_release(&opt);
		return 2;
	}
	log_init(opt.debug);
	if (opt.log_file) {
		rc = log_to_file(opt.log_file);
		if (rc) {
			log_stderr("osbfs: log_file %s: %s", opt.log_file,
				   strerror(-rc));
			options_release(&opt);
			return 1;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	fs.opt = &opt;
	fs.uid = getuid();
	fs.gid = getgid();
	fs.root = opt.dir;
	pthread_mutex_init(&fs.statfs_lock, NULL);
	pthread_rwlockattr_t rwa;
	pthread_rwlockattr_init(&rwa);
	pthread_rwlockattr_setkind_np(
		&rwa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&fs.path_lock, &rwa);
	atomic_store(&fs.last_activity, mono_ms());

	/* libfuse checks its own options here, before anything is made; on
	 * a copy, since it takes the ones it knows (allow_other...) out of
	 * what it is given, and the real session needs them all again */
	struct fuse_lowlevel_ops ops = osbfs_make_ops();
	struct fuse_args check = FUSE_ARGS_INIT(0, NULL);
	for (int i = 0; i < opt.fuse_args.argc; i++)
		if (fuse_opt_add_arg(&check, opt.fuse_args.argv[i]) != 0)
			break;
	if (check.argc == opt.fuse_args.argc)
		fs.se = fuse_session_new(&check, &ops, sizeof(ops), &fs);
	fuse_opt_free_args(&check);
	if (!fs.se) {
		log_stderr("osbfs: cannot start a FUSE session (see the "
			   "message above)");
		goto out;
	}
	/* nothing is asked of the server before this machine is ready */
	rc = preflight_check(&opt, msg, sizeof(msg));
	if (!rc)
		rc = connect_client(&opt, &fs.client, msg, sizeof(msg));
	if (!rc && opt.debug)
		osb_client_set_trace(fs.client, trace_call, NULL);
	if (!rc)
		rc = connect_sandbox(&fs, &info, &created, msg, sizeof(msg));
	if (rc) {
		log_stderr("osbfs: %s", msg);
		goto out;
	}
	fs.sandbox_id = osb_sandbox_id(fs.sb);
	/* the session again, now that the mount's name is known */
	fuse_session_destroy(fs.se);
	fs.se = NULL;
	if (add_mount_name(&opt.fuse_args, fs.sandbox_id, opt.dir) == 0)
		fs.se = fuse_session_new(&opt.fuse_args, &ops, sizeof(ops),
					 &fs);
	if (!fs.se) {
		log_stderr("osbfs: cannot start a FUSE session");
		goto out;
	}
	/* once mounted, ride out a restart of the server (about 8 to 16 s
	 * of retries) before an operation fails with EIO */
	osb_client_set_retries(fs.client, MOUNTED_RETRIES);
	rc = node_table_init(&fs.nodes, opt.dir);
	fs.nodes.attr_ms = opt.attr_timeout_ms;
	fs.nodes.neg_ms = opt.negative_timeout_ms;
	fs.nodes.list_ms = opt.dir_timeout_ms;
	holder.mountpoint = opt.mountpoint;
	holder.wait_ms = HOLDER_WAIT_MS;
	if (!rc)
		rc = cache_init(&fs.cache, opt.cache_dir, fs.sandbox_id,
				opt.cache_max_size, &fs.nodes, &holder, msg,
				sizeof(msg));
	if (rc) {
		log_stderr("osbfs: %s", msg[0] ? msg : strerror(-rc));
		goto out;
	}
	rc = xattrs_open(&fs.xattrs, cache_dir(fs.cache), opt.xattr_max_size,
			 msg, sizeof(msg));
	if (rc) {
		log_stderr("osbfs: %s", msg);
		goto out;
	}
	rc = owners_init(&fs);
	if (rc) {
		log_stderr("osbfs: %s", strerror(-rc));
		goto out;
	}
	fs.nodes.on_free = cache_detach;
	fs.nodes.on_free_arg = fs.cache;
	fs.nodes.on_link_gone = cache_link_gone;
	fs.nodes.root->attr.type = OSB_DIR;
	fs.nodes.root->attr.mode = 0755;
	rc = life_init(&fs, info.state, info.expires_at);
	if (!rc)
		rc = watch_init(&fs);
	if (!rc)
		rc = feed_init(&fs);
	if (!rc)
		rc = ctl_init(&fs);
	if (rc) {
		log_stderr("osbfs: %s", strerror(-rc));
		goto out;
	}
	recover_journal(&fs);
	special_root_load(&fs);

	if (fuse_set_signal_handlers(fs.se) != 0 ||
	    fuse_session_mount(fs.se, opt.mountpoint) != 0) {
		log_stderr("osbfs: cannot mount at %s", opt.mountpoint);
		goto out;
	}
	mounted = true;
	log_info("mounted sandbox %s:%s at %s", fs.sandbox_id, opt.dir,
		 opt.mountpoint);
	if (!opt.foreground) {
		/* the id of a new sandbox, for scripts */
		log_stderr("osbfs: sandbox %s mounted at %s", fs.sandbox_id,
			   opt.mountpoint);
		fflush(stderr);
	}
	if (!opt.foreground)
		log_for_daemon(&fs);
	if (fuse_daemonize(opt.foreground) != 0)
		goto out_unmount;
	/* our pid (a new one after daemonizing) and the mount's device */
	rc = holder_set(&holder, HOLDER_MOUNTED, NULL);
	if (rc)
		log_error("cannot write %s/lock: %s", cache_dir(fs.cache),
			  strerror(-rc));

	rc = wb_start(&fs);
	if (!rc)
		rc = watch_start(&fs);
	if (!rc)
		rc = notify_start(&fs);
	if (!rc)
		rc = life_start(&fs);
	if (!rc)
		rc = ctl_start(&fs);
	if (!rc)
		rc = feed_start(&fs);
	if (rc) {
		log_error("cannot start the daemon's threads: %s",
			  strerror(-rc));
		goto out_unmount;
	}
	rc = run_loop(&fs);
	status = rc == 0 ? 0 : 1;

out_unmount:
	pull_stop(&fs);
	/* the threads that talk to the kernel stop before its fd closes */
	feed_stop(&fs);
	ctl_stop(&fs);
	life_stop(&fs);
	notify_stop(&fs);
	fuse_session_unmount(fs.se);
	fuse_remove_signal_handlers(fs.se);
	/* a new mount of this cache dir now waits for us, not refuses */
	holder_set(&holder, HOLDER_UNMOUNTED, NULL);
	if (fs.wb) {
		if (opt.destroy_on_unmount) {
			char kmsg[1200];
			if (life_kill(&fs, kmsg, sizeof(kmsg)))
				log_error("%s", kmsg);
		} else {
			struct wb_stats st;
			struct life_info li;
			life_get(&fs, &li);
			/* a sandbox that is gone takes nothing: do not wait */
			bool gone = strcmp(li.state, "Deleted") == 0;
			int frc =
				gone ? 0 : wb_flush_all(&fs, HOLDER_FINISH_MS);
			wb_get_stats(&fs, &st);
			char count[80];
			wb_describe_count(&st, count, sizeof(count));
			bool waiting = st.dirty_files || st.dirty_dirs;
			if (gone && waiting) {
				log_error("%s never reached the sandbox, "
					  "which was deleted; their data stays "
					  "in %s",
					  count, cache_dir(fs.cache));
				status = 1;
			} else if (gone) {
				log_info("the sandbox was deleted; nothing was "
					 "waiting to be uploaded");
			} else if (frc || waiting) {
				log_error("%s not yet in the sandbox at "
					  "unmount; they stay in %s and the "
					  "next mount of this sandbox uploads "
					  "them",
					  count, cache_dir(fs.cache));
				status = 1;
			}
		}
		wb_stop(&fs);
	}
	watch_stop(&fs);
	/* what osbfs -u reports */
	if (!opt.destroy_on_unmount &&
	    cache_pending(fs.cache, HOLDER_PENDING_MAX, &pending))
		log_error("cannot list the files not yet in the sandbox");
	holder_set(&holder, HOLDER_EXITED, &pending);
	pending_release(&pending);
out:
	if (!mounted)
		undo_create(&fs, created);
	if (fs.se)
		fuse_session_destroy(fs.se);
	ctl_release_all(&fs);
	life_release(&fs);
	if (fs.nodes.by_ino)
		node_table_release(&fs.nodes);
	xattrs_close(fs.xattrs);
	owners_free(&fs);
	cache_release(fs.cache);
	feed_release(&fs);
	watch_release(&fs);
	holder_release(&holder); /* the last: the cache dir is free */
	osb_sandbox_info_release(&info);
	osb_sandbox_close(fs.sb);
	osb_client_free(fs.client);
	pthread_rwlock_destroy(&fs.path_lock);
	pthread_mutex_destroy(&fs.statfs_lock);
	options_release(&opt);
	log_flush();
	return status;
}

/*
 * options.h - osbfs's command line: one table of options with their
 * defaults (options.c), parsed into one struct osbfs_options.
 */
#ifndef OSBFS_OPTIONS_H
#define OSBFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <fuse_opt.h>

#include "osb.h"
#include "setup_decl.h"

struct osbfs_options {
	/* positional: [SANDBOX][:DIR] MOUNTPOINT */
	char *sandbox_id; /* NULL = create (or find by name) */
	char *dir;        /* directory inside the sandbox */
	char *mountpoint;

	/* connection (as the seed adapter); what is not given here comes
	 * from the environment, then from the settings file (cfgfile) */
	char *config;               /* the official CLI's settings file */
	struct osb_cfgfile cfgfile; /* as read (options_parse) */
	char *domain;
	char *protocol;
	char *cacert;
	bool insecure;
	char *api_key_file;
	long request_timeout_ms;
	bool server_proxy;

	/* creation */
	char *name;       /* -o name=NAME: find or create by label */
	char *snapshot;   /* -o snapshot=ID|NAME: a new sandbox from it */
	char *image;      /* NULL with snapshot= */
	char *entrypoint; /* split on white space */
	struct osb_kvlist env;
	struct osb_kvlist metadata;
	long timeout_s;       /* sandbox TTL; 0 = none (option, else the
				 settings file's [defaults], else 600) */
	char *network_policy; /* a JSON file */
	char *cpu;
	char *memory;
	char *setup;                  /* -o setup=FILE (YAML) */
	struct setup_decl setup_decl; /* read by options_read_setup() */

	/* lifecycle */
	bool keepalive;
	long idle_pause_ms; /* 0 = never */
	bool destroy_on_unmount;
	bool restore_keeps;    /* a restore does not delete the sandbox left */
	long start_timeout_ms; /* how long a sandbox may take to run */

	/* cache */
	char *cache_dir;
	char *log_file;
	long attr_timeout_ms;
	bool feed;
	long feed_interval_ms;
	char *feed_mode; /* "auto" (inotify where it can) or "poll" */
	long dir_timeout_ms;
	long negative_timeout_ms;
	long writeback_delay_ms;
	int64_t cache_max_size;
	int64_t xattr_max_size;
	char *control_dir; /* name of the control tree */

	/* symlinks: "safe" shows targets mapped into the mount (linkmap.h),
	 * "raw" as stored; symlinks_raw tells which */
	char *symlinks;
	bool symlinks_raw;
	/* osbfs -u MOUNTPOINT: flush, unmount, wait, report (umount.c) */
	bool unmount;

	/* FUSE */
	bool allow_other; /* given (it implies default_permissions): the
			     owners shown are the sandbox's (owners.h) */
	bool foreground;
	bool debug;
	bool singlethread;
	bool show_help;
	bool show_version;
	struct fuse_args fuse_args; /* options passed through to libfuse */
};

/*
 * options_parse() - fill @o from @argc/@argv and the environment, and
 * read the settings file (config=, else ~/.opensandbox/config.toml) for
 * what neither gives. Returns 0, or -EINVAL with a one-line reason in
 * @msg (a malformed settings file: "FILE:LINE: what").
 */
int options_parse(struct osbfs_options *o, int argc, char **argv, char *msg,
		  size_t msg_size);
/* Reads and checks the setup= file, if any, into o->setup_decl: 0, or
 * -EINVAL with "FILE:LINE: cause" in @msg. */
int options_read_setup(struct osbfs_options *o, char *msg, size_t msg_size);
void options_release(struct osbfs_options *o);
void options_usage(const char *prog);

/* "30", "30s", "500ms", "5m", "2h", "1d" -> milliseconds. */
int parse_duration_ms(const char *s, long *ret);
/* "1048576", "512K", "10M", "2G", "1T" -> bytes. */
int parse_size(const char *s, int64_t *ret);

#endif /* OSBFS_OPTIONS_H */

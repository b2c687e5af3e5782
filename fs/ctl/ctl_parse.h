/*
 * ctl_parse.h - what a write to `ctl` or to a job's `ctl` asks for,
 * parsed and checked whole before anything runs: a write with one bad
 * line runs none of its lines.
 *
 * Pure: no locks, no I/O, no logging; the reason for a refusal is put in
 * @msg. The fuzzer (tests/fuzz) calls it on anything.
 */
#ifndef OSBFS_CTL_PARSE_H
#define OSBFS_CTL_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* the most verbs one write may hold */
#define CTL_VERBS_MAX 16
/* the longest `renew` a ctl may ask for */
#define CTL_RENEW_MAX_S (10L * 365 * 24 * 3600)

enum ctl_verb_kind {
	CTL_PAUSE,
	CTL_RESUME,
	CTL_RENEW, /* secs: 0 for the sandbox's own timeout */
	CTL_KILL,
	CTL_SYNC,
	CTL_INVALIDATE,
	CTL_RESTORE,    /* ref, force */
	CTL_JOB_KILL,   /* a job's ctl: TERM, then KILL */
	CTL_JOB_SIGNAL, /* a job's ctl: sig */
	CTL_JOB_FORGET, /* a job's ctl: remove the ended job */
};

/* the longest snapshot name or id `restore` takes */
#define CTL_REF_MAX 255

struct ctl_verb {
	enum ctl_verb_kind kind;
	long secs;
	char sig[16];              /* the signal's name without "SIG" */
	char ref[CTL_REF_MAX + 1]; /* restore: the snapshot's name or id */
	bool force;                /* restore ... force */
};

struct ctl_verbs {
	struct ctl_verb v[CTL_VERBS_MAX];
	size_t n;
};

/* What `ctl` takes, for messages. */
extern const char ctl_verbs_help[];

/*
 * ctl_parse() - the verbs in @len bytes written to `ctl` (@job false) or
 * to a job's ctl (@job true): one per line, white space around ignored,
 * blank lines skipped. 0; -EINVAL with the reason in @msg, prefixed with
 * @what (the file's name): binary data, nothing but white space, an
 * unknown verb, a bad argument, more than CTL_VERBS_MAX verbs. `ctl`
 * takes VERB, renew SECONDS, or restore NAME [force].
 */
int ctl_parse(const char *buf, size_t len, bool job, const char *what,
	      struct ctl_verbs *ret, char *msg, size_t msg_size);

#endif /* OSBFS_CTL_PARSE_H */

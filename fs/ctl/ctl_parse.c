/*
 * ctl_parse.c - the verbs of a write to `ctl` or a job's `ctl`, checked
 * whole before any runs (see ctl_parse.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_parse.h"
#include "ctl_text.h"
#include "jobs_i.h"

const char ctl_verbs_help[] =
	"pause, resume, renew [SECONDS], kill, sync, invalidate, restore "
	"SNAPSHOT [force]";

static const struct {
	const char *name;
	enum ctl_verb_kind kind;
} root_verbs[] = {
	{ "pause", CTL_PAUSE },     { "resume", CTL_RESUME },
	{ "renew", CTL_RENEW },     { "kill", CTL_KILL },
	{ "sync", CTL_SYNC },       { "invalidate", CTL_INVALIDATE },
	{ "restore", CTL_RESTORE },
};

/* restore NAME [force] */
static int restore_line(const char *arg, const char *extra, const char *more,
			const char *what, struct ctl_verb *v, char *msg,
			size_t msg_size)
{
	if (!arg || more || (extra && strcmp(extra, "force") != 0)) {
		snprintf(msg, msg_size,
			 "%s: restore takes a snapshot's name or id, then "
			 "\"force\" or nothing",
			 what);
		return -EINVAL;
	}
	if (strlen(arg) > CTL_REF_MAX) {
		snprintf(msg, msg_size,
			 "%s: restore: no snapshot has a name or id of %zu "
			 "bytes",
			 what, strlen(arg));
		return -EINVAL;
	}
	snprintf(v->ref, sizeof(v->ref), "%s", arg);
	v->force = extra != NULL;
	return 0;
}

/* One line of `ctl`: VERB, renew SECONDS, or restore NAME [force]. */
static int root_line(char *verb, const char *arg, const char *extra,
		     const char *more, const char *what, struct ctl_verb *v,
		     char *msg, size_t msg_size)
{
	size_t i, n = sizeof(root_verbs) / sizeof(*root_verbs);
	for (i = 0; i < n && strcmp(verb, root_verbs[i].name) != 0; i++)
		;
	if (i == n) {
		snprintf(msg, msg_size,
			 "%s: unknown command \"%.100s\" (expected one of %s)",
			 what, verb, ctl_verbs_help);
		return -EINVAL;
	}
	v->kind = root_verbs[i].kind;
	if (v->kind == CTL_RESTORE)
		return restore_line(arg, extra, more, what, v, msg, msg_size);
	if (extra || (arg && v->kind != CTL_RENEW)) {
		snprintf(msg, msg_size, "%s: \"%s\" takes %s", what, verb,
			 v->kind == CTL_RENEW ? "one number at most" :
						"no argument");
		return -EINVAL;
	}
	if (v->kind == CTL_RENEW && arg) {
		char *end;
		errno = 0;
		v->secs = strtol(arg, &end, 10);
		if (errno || *end || end == arg || v->secs <= 0 ||
		    v->secs > CTL_RENEW_MAX_S) {
			snprintf(msg, msg_size,
				 "renew: \"%.40s\" is not a number of seconds "
				 "(1 to %ld)",
				 arg, CTL_RENEW_MAX_S);
			return -EINVAL;
		}
	}
	return 0;
}

/* One line of a job's ctl: kill, signal NAME, or forget. */
static int job_line(char *verb, const char *arg, const char *extra,
		    const char *what, struct ctl_verb *v, char *msg,
		    size_t msg_size)
{
	if ((strcmp(verb, "kill") == 0 || strcmp(verb, "forget") == 0) &&
	    !arg) {
		v->kind = verb[0] == 'k' ? CTL_JOB_KILL : CTL_JOB_FORGET;
		return 0;
	}
	if (strcmp(verb, "signal") == 0 && arg && !extra) {
		v->kind = CTL_JOB_SIGNAL;
		if (job_signal_parse(arg, v->sig, sizeof(v->sig)) == 0)
			return 0;
		snprintf(msg, msg_size, "%s: unknown signal \"%.40s\"", what,
			 arg);
		return -EINVAL;
	}
	snprintf(msg, msg_size,
		 "%s: unknown command \"%.100s\" (expected kill, signal "
		 "NAME or forget)",
		 what, verb);
	return -EINVAL;
}

int ctl_parse(const char *buf, size_t len, bool job, const char *what,
	      struct ctl_verbs *ret, char *msg, size_t msg_size)
{
	ret->n = 0;
	if (text_check_command(buf, len, false)) {
		snprintf(msg, msg_size,
			 "%s: not a command (binary data, or not UTF-8)", what);
		return -EINVAL;
	}
	if (text_blank(buf, len)) {
		snprintf(msg, msg_size, "%s: empty write", what);
		return -EINVAL;
	}
	char *copy = strndup(buf, len);
	if (!copy)
		return -ENOMEM;
	int rc = 0;
	char *save = NULL;
	for (char *l = strtok_r(copy, "\n", &save); !rc && l;
	     l = strtok_r(NULL, "\n", &save)) {
		char *ws = NULL;
		char *verb = strtok_r(l, " \t\r", &ws);
		if (!verb)
			continue; /* a blank line */
		char *arg = strtok_r(NULL, " \t\r", &ws);
		char *extra = strtok_r(NULL, " \t\r", &ws);
		char *more = extra ? strtok_r(NULL, " \t\r", &ws) : NULL;
		if (ret->n == CTL_VERBS_MAX) {
			snprintf(msg, msg_size,
				 "%s: more than %d commands in one write", what,
				 CTL_VERBS_MAX);
			rc = -EINVAL;
			break;
		}
		struct ctl_verb *v = &ret->v[ret->n];
		memset(v, 0, sizeof(*v));
		rc = job ? job_line(verb, arg, extra, what, v, msg, msg_size) :
			   root_line(verb, arg, extra, more, what, v, msg,
				     msg_size);
		if (!rc)
			ret->n++;
	}
	free(copy);
	if (!rc && !ret->n) {
		/* white space text_blank() does not know, such as "\r" */
		snprintf(msg, msg_size, "%s: empty write", what);
		rc = -EINVAL;
	}
	return rc;
}

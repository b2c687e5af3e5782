/*
 * code_settle.c - a run whose answer was lost: did the code run? Settled
 * by checking, never by sending the code again.
 *
 * execd keeps no record of a run, but each context counts its runs (the
 * execution_count of Jupyter, and of the local server's interpreters),
 * and every run's stream says its number. The context's last number seen
 * is kept (code_i.h: count_low, count_exact; a context made or taken
 * again starts with 0 as a bound below). After a lost answer one probe,
 * code that does nothing, runs in the same context and its number tells:
 * the last one plus one, the lost run never ran (whatever the bound); plus
 * two, with the last number known exactly, it ran, once; anything else
 * (no number at all: an execd whose bash contexts are not Jupyter's, or
 * someone else running code in the context) cannot be told. A probe
 * that finds the context busy means the lost run still runs: it is asked
 * again, less and less often, until the run ends or the mount goes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "code_i.h"
#include "log.h"
#include "osbfs.h"
#include "remote.h"

#define PROBE_WAIT_MS 1000
#define PROBE_WAIT_MAX_MS 30000

/* Code that does nothing, in each language of code_langs. */
static const char *const probe_src[CODE_NLANG] = {
	"pass", ";", ";", ";", "_ = 0", ":",
};

bool code_maybe_ran(int rc, const struct osb_error *err)
{
	switch (-rc) {
	case 0:
	case ECONNREFUSED: /* never sent */
	case ECANCELED:    /* the mount goes: the run was interrupted */
	case EBUSY:        /* the context ran other code */
	case EREMOTEIO:    /* execd's own error in the stream */
	case ENOENT:       /* no such context */
	case EINVAL:
	case ENOMEM:
	case EOPNOTSUPP:
		return false;
	default:
		/* no answer, a stream that broke or ended early, or a
		 * gateway's error: not execd's own word before the run */
		return !(err->status >= 400 && err->status <= 500);
	}
}

static int probe_event(void *arg, const struct osb_event *ev)
{
	long *count = arg;
	if (ev->type == OSB_EV_EXECUTION_COUNT)
		*count = ev->execution_count;
	return 0;
}

/* Runs the probe in context @id: its execution count in *ret (0 when
 * none came). 0, or a negative errno with @err filled. */
static int probe(struct code *cd, struct code_ctx *cx, const char *id,
		 long *ret, struct osb_error *err)
{
	long wait = PROBE_WAIT_MS;
	for (;;) {
		*ret = 0;
		osb_error_clear(err);
		int rc = remote_enter(cd->fs);
		if (!rc)
			rc = osb_code_run(cd->fs->sb, id, code_langs[cx->lang],
					  probe_src[cx->lang], probe_event, ret,
					  NULL, err);
		if (rc != -EBUSY)
			return rc;
		/* the lost run still runs: it did reach the context */
		pthread_mutex_lock(&cd->lock);
		struct timespec dl;
		code_deadline(&dl, wait);
		while (!atomic_load(&cx->cancel) && !cd->stopping)
			if (pthread_cond_timedwait(&cd->cond, &cd->lock, &dl) ==
			    ETIMEDOUT)
				break;
		bool stop = atomic_load(&cx->cancel) || cd->stopping;
		pthread_mutex_unlock(&cd->lock);
		if (stop)
			return -ECANCELED;
		wait = wait * 2 > PROBE_WAIT_MAX_MS ? PROBE_WAIT_MAX_MS :
						      wait * 2;
	}
}

enum code_status code_settle(struct code *cd, struct code_ctx *cx,
			     const char *id, long low, bool exact, char *why,
			     size_t why_size)
{
	struct osb_error err;
	long n = 0;
	int rc = probe(cd, cx, id, &n, &err);
	enum code_status st = CODE_UNKNOWN;
	if (rc)
		snprintf(why, why_size,
			 "its answer was lost, and so was the check of "
			 "whether it ran: %s",
			 err.message[0] ? err.message : strerror(-rc));
	else if (n == low + 1)
		st = CODE_FAILED;
	else if (exact && n == low + 2)
		st = CODE_RAN;
	else if (n <= 0)
		snprintf(why, why_size,
			 "its answer was lost, and whether it ran cannot be "
			 "told: the context gives no execution count");
	else
		snprintf(why, why_size,
			 "its answer was lost, and whether it ran cannot be "
			 "told: the context's execution count went from %s%ld "
			 "to %ld (other code ran in it?)",
			 exact ? "" : "at least ", low, n);
	if (st == CODE_FAILED)
		snprintf(why, why_size,
			 "its request was lost before the code ran (the "
			 "context's execution count says so): nothing ran");
	pthread_mutex_lock(&cd->lock);
	if (!rc && n > 0 && strcmp(cx->id, id) == 0) {
		cx->count_low = n;
		cx->count_exact = true;
	}
	pthread_mutex_unlock(&cd->lock);
	return st;
}

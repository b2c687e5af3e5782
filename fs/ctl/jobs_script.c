/*
 * jobs_script.c - the shell text osbfs runs in the sandbox for jobs, and
 * signal names.
 *
 * The wrapper is started as an execd command, foreground (streamed,
 * jobs_stream.c) or background. It makes the job's record with the
 * command it carries (or, for a long command, finds it uploaded), then
 * runs the job's command file with bash in a process group of its own, so a
 * signal reaches the job's whole group and never the wrapper;
 * it keeps the record's exit marker and the live/ directory (jobs.h)
 * up to date. Signals travel through a FIFO in live/ID/ rather than as a
 * `kill` from another command, because another command may see other
 * process ids (a sandbox whose commands each get a PID namespace).
 *
 * Job ids hold only [A-Za-z0-9._-] (jobs.c), so they are pasted into the
 * scripts as they are, inside single quotes; the command and the working
 * directory are quoted (shell_quote). The lines the wrapper prints are
 * read only from a streamed start; a background one's go to execd's
 * log.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "jobs_i.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* The start of the wrapper whose record was uploaded before. */
static const char head_uploaded[] =
	"J='" JOBS_DIR "/%1$s' L='" LIVE_DIR "/%1$s' T='claim/%2$s'\n"
	/* the claim: a start sent again (its answer was lost) finds it
	 * taken, or live/ID gone with the job's end, and runs nothing.
	 * T, this start's own, tells its live/ID from that of a later job
	 * of the same name (the job forgotten, the name used again) */
	"mkdir \"$L/claim\" 2>/dev/null || exit 0\n"
	": >\"$L/$T\"\n";

/* The start of the wrapper that makes the record itself (%3$s the
 * working directory, %4$s the command, each quoted for the shell). The
 * claim is the record's own claim/, which stays until the job is
 * removed: a copy of the start that arrives after the job ended finds
 * it too. live/ID comes before cmd, as in an uploaded record. */
/* clang-format off */
static const char head_inline[] =
	"J='" JOBS_DIR "/%1$s' L='" LIVE_DIR "/%1$s' T='claim/%2$s'\n"
	"[ -d \"$J\" ] || mkdir -p \"$J\" || exit 1\n"
	/* a file made with O_EXCL (noclobber): no process to start */
	"{ set -C; : >\"$J/claim\"; } 2>/dev/null ||"
	" { echo '" JOB_LINE_TAKEN "'; exit 0; }\n"
	"set +C\n"
	"mkdir -p \"$L/claim\" && : >\"$L/alive\" && : >\"$L/$T\" || exit 1\n"
	"printf %%s %3$s >\"$J/cwd\" && printf %%s %4$s >\"$J/cmd\""
	" || exit 1\n";

/* The rest, the same for both (%1$s the id): runs the job and keeps
 * its record and live/ID. */
static const char wrapper[] =
	": >\"$J/stdout\" && : >\"$J/stderr\" || exit 1\n"
	/* job control on: the job gets a process group of its own, and
	 * SIGINT and SIGQUIT are not ignored in it (they would be in a
	 * background command of a shell without job control) */
	"set -m\n"
	"OSBFS_JOB='%1$s' bash \"$J/cmd\" </dev/null"
	" >\"$J/stdout\" 2>\"$J/stderr\" &\n"
	"p=$!\n"
	"set +m\n"
	/* the wrapper's own output is what a streamed start reads: the
	 * job has started once its pid is in the record */
	"echo \"$p\" >\"$J/pid\"; echo '" JOB_LINE_STARTED "'\n"
	/* the listener, beside the job: the links to the output in live/,
	 * signals from the FIFO (signallers wait for ready, made once it
	 * is held open: a signal written before the listener reads is
	 * kept in the pipe), and the heartbeat. It does not hold the
	 * wrapper's output open. */
	"(\n"
	"  ln -f \"$J/stdout\" \"$J/stderr\" \"$L/\" 2>/dev/null\n"
	"  if mkfifo -m 600 \"$L/ctl\" 2>/dev/null; then\n"
	"    exec 3<>\"$L/ctl\"; : >\"$L/ready\"\n"
	"  else\n"
	"    exec 3</dev/null\n"
	"  fi\n"
	"  while kill -0 \"$p\" 2>/dev/null && kill -0 $$ 2>/dev/null; do\n"
	"    if read -r -t " STR(JOB_HEARTBEAT_S) " s <&3; then\n"
	"      case $s in\n"
	"      ''|*[!A-Z0-9+]*) ;;\n"
	"      *) kill -s \"$s\" -- \"-$p\" 2>/dev/null ||"
	" kill -s \"$s\" \"$p\" 2>/dev/null ;;\n"
	"      esac\n"
	"    else\n"
	"      [ $? -gt 128 ] || sleep " STR(JOB_HEARTBEAT_S) "\n"
	"      : >\"$L/alive\" 2>/dev/null || break\n"
	"    fi\n"
	"  done\n"
	") >/dev/null 2>&1 &\n"
	"w=$!\n"
	"wait \"$p\"\n"
	"rc=$?\n"
	"kill \"$w\" 2>/dev/null\n"
	": >\"$J/exit.$rc\"\n"
	/* the same in live/: a monitor's listing sees the end at once */
	"x=\n"
	"if [ -e \"$L/$T\" ]; then\n"
	"  : >\"$L/exit.$rc\"\n"
	"  x=1\n"
	"fi\n"
	/* the end, with the output's sizes, for a streamed start */
	"set -- $(stat -c %%s \"$J/stdout\" \"$J/stderr\" 2>/dev/null)\n"
	"echo \"" JOB_LINE_END " $rc $1 $2\"\n"
	"[ -n \"$x\" ] && [ -e \"$L/$T\" ] && rm -rf -- \"$L\"\n"
	"exit 0\n";
/* clang-format on */

/* @s quoted for the shell ('...', a ' as '\''), malloc'd; NULL if it
 * holds a NUL. */
static char *shell_quote(const char *s, size_t len)
{
	size_t n = 2;
	for (size_t i = 0; i < len; i++) {
		if (!s[i])
			return NULL;
		n += s[i] == '\'' ? 4 : 1;
	}
	char *q = malloc(n + 1), *o = q;
	if (!q)
		return NULL;
	*o++ = '\'';
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = s[i];
		}
	}
	*o++ = '\'';
	*o = '\0';
	return q;
}

/* This start's own token: unique for the name (one osbfs at a time
 * starts a name, and not twice in the same nanosecond). */
static void start_token(char *buf, size_t size)
{
	static atomic_uint n;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(buf, size, "%llx.%lx.%x.%x", (unsigned long long)now.tv_sec,
		 (unsigned long)now.tv_nsec, (unsigned)getpid(),
		 atomic_fetch_add(&n, 1));
}

/* @head then the wrapper, for job @id. */
static char *wrapper_with(const char *head, const char *id, const char *cwd,
			  const char *cmd)
{
	char token[80];
	char *h = NULL, *w = NULL, *s = NULL;
	start_token(token, sizeof(token));
	if (asprintf(&h, head, id, token, cwd ? cwd : "", cmd ? cmd : "") < 0)
		return NULL;
	if (asprintf(&w, wrapper, id) < 0) {
		free(h);
		return NULL;
	}
	if (asprintf(&s, "%s%s", h, w) < 0)
		s = NULL;
	free(h);
	free(w);
	return s;
}

char *job_wrapper_script(const char *id)
{
	return wrapper_with(head_uploaded, id, NULL, NULL);
}

char *job_inline_script(const char *id, const char *cwd, const char *cmd,
			size_t len)
{
	if (len > JOB_INLINE_MAX || !osb_utf8_valid(cmd, len) ||
	    !osb_utf8_valid(cwd, strlen(cwd)))
		return NULL;
	char *qcmd = shell_quote(cmd, len);
	char *qcwd = shell_quote(cwd, strlen(cwd));
	char *s = NULL;
	if (qcmd && qcwd && strlen(qcmd) <= 2 * JOB_INLINE_MAX)
		s = wrapper_with(head_inline, id, qcwd, qcmd);
	free(qcmd);
	free(qcwd);
	return s;
}

static const char signaller[] = "L='" LIVE_DIR "/%s' i=0\n"
				"while [ ! -e \"$L/ready\" ]; do\n"
				"  [ -d \"$L\" ] || exit 3\n"
				"  i=$((i+1)); [ \"$i\" -le 50 ] || exit 4\n"
				"  sleep 0.1\n"
				"done\n"
				"printf '%%s\\n' '%s' 1<>\"$L/ctl\"\n";

char *job_signal_script(const char *id, const char *sig)
{
	char *s = NULL;
	if (asprintf(&s, signaller, id, sig) < 0)
		return NULL;
	return s;
}

/* Linux's numbering (the sandbox is Linux). */
static const char *const names[] = {
	[1] = "HUP",   [2] = "INT",     [3] = "QUIT",  [4] = "ILL",
	[5] = "TRAP",  [6] = "ABRT",    [7] = "BUS",   [8] = "FPE",
	[9] = "KILL",  [10] = "USR1",   [11] = "SEGV", [12] = "USR2",
	[13] = "PIPE", [14] = "ALRM",   [15] = "TERM", [16] = "STKFLT",
	[17] = "CHLD", [18] = "CONT",   [19] = "STOP", [20] = "TSTP",
	[21] = "TTIN", [22] = "TTOU",   [23] = "URG",  [24] = "XCPU",
	[25] = "XFSZ", [26] = "VTALRM", [27] = "PROF", [28] = "WINCH",
	[29] = "IO",   [30] = "PWR",    [31] = "SYS",
};
#define NNAMES ((int)(sizeof(names) / sizeof(names[0])))
#define SIGRT_MIN 34
#define SIGRT_MAX 64

const char *job_signal_name(int sig)
{
	static const char *const rt[] = {
		"RTMIN",    "RTMIN+1",  "RTMIN+2",  "RTMIN+3",  "RTMIN+4",
		"RTMIN+5",  "RTMIN+6",  "RTMIN+7",  "RTMIN+8",  "RTMIN+9",
		"RTMIN+10", "RTMIN+11", "RTMIN+12", "RTMIN+13", "RTMIN+14",
		"RTMIN+15", "RTMAX-14", "RTMAX-13", "RTMAX-12", "RTMAX-11",
		"RTMAX-10", "RTMAX-9",  "RTMAX-8",  "RTMAX-7",  "RTMAX-6",
		"RTMAX-5",  "RTMAX-4",  "RTMAX-3",  "RTMAX-2",  "RTMAX-1",
		"RTMAX",
	};
	if (sig > 0 && sig < NNAMES)
		return names[sig];
	if (sig >= SIGRT_MIN && sig <= SIGRT_MAX)
		return rt[sig - SIGRT_MIN];
	return NULL;
}

int job_signal_parse(const char *name, char *buf, size_t size)
{
	char *end;
	if (!name || !*name)
		return -EINVAL;
	long num = strtol(name, &end, 10);
	if (!*end && end != name) {
		const char *n = num > 0 && num <= SIGRT_MAX ?
					job_signal_name((int)num) :
					NULL;
		if (!n)
			return -EINVAL;
		snprintf(buf, size, "%s", n);
		return 0;
	}
	if (strncasecmp(name, "SIG", 3) == 0)
		name += 3;
	for (int s = 1; s <= SIGRT_MAX; s++) {
		const char *n = job_signal_name(s);
		if (n && strcasecmp(n, name) == 0) {
			snprintf(buf, size, "%s", n);
			return 0;
		}
	}
	return -EINVAL;
}

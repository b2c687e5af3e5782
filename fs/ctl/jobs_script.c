/*
 * jobs_script.c - the shell text osbfs runs in the sandbox for jobs, and
 * signal names.
 *
 * The wrapper is started as a background execd command. It runs the
 * job's command file with bash in a process group of its own, so a
 * signal reaches the job's whole group and never the wrapper;
 * it keeps the record's exit marker and the live/ directory (jobs.h)
 * up to date. Signals travel through a FIFO in live/ID/ rather than as a
 * `kill` from another command, because another command may see other
 * process ids (a sandbox whose commands each get a PID namespace).
 *
 * Job ids hold only [A-Za-z0-9._-] (jobs.c), so they are pasted into the
 * scripts as they are, inside single quotes.
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

static const char wrapper[] =
	"J='" JOBS_DIR "/%1$s' L='" LIVE_DIR "/%1$s' T='claim/%2$s'\n"
	/* the claim: a start sent again (its answer was lost) finds it
	 * taken, or live/ID gone with the job's end, and runs nothing.
	 * T, this start's own, tells its live/ID from that of a later job
	 * of the same name (the job forgotten, the name used again) */
	"mkdir \"$L/claim\" 2>/dev/null || exit 0\n"
	": >\"$L/$T\"\n"
	": >\"$J/stdout\" && : >\"$J/stderr\" || exit 1\n"
	"ln -f \"$J/stdout\" \"$J/stderr\" \"$L/\" 2>/dev/null\n"
	/* signallers wait for ready, made once we hold the FIFO open: a
	 * signal written before the listener reads is kept in the pipe */
	"if mkfifo -m 600 \"$L/ctl\" 2>/dev/null; then\n"
	"  exec 3<>\"$L/ctl\"; : >\"$L/ready\"\n"
	"else\n"
	"  exec 3</dev/null\n"
	"fi\n"
	/* job control on: the job gets a process group of its own, and
	 * SIGINT and SIGQUIT are not ignored in it (they would be in a
	 * background command of a shell without job control) */
	"set -m\n"
	"OSBFS_JOB='%1$s' bash \"$J/cmd\" </dev/null"
	" >\"$J/stdout\" 2>\"$J/stderr\" 3<&- &\n"
	"p=$!\n"
	"set +m\n"
	"echo \"$p\" >\"$J/pid\"\n"
	/* the listener: signals from the FIFO, and the heartbeat */
	"(\n"
	"  while kill -0 \"$p\" 2>/dev/null && kill -0 $$ 2>/dev/null; do\n"
	"    if read -r -t " STR(
		JOB_HEARTBEAT_S) " s <&3; then\n"
				 "      case $s in\n"
				 "      ''|*[!A-Z0-9+]*) ;;\n"
				 "      *) kill -s \"$s\" -- \"-$p\" "
				 "2>/dev/null ||"
				 " kill -s \"$s\" \"$p\" 2>/dev/null ;;\n"
				 "      esac\n"
				 "    else\n"
				 "      [ $? -gt 128 ] || sleep " STR(
					 JOB_HEARTBEAT_S) "\n"
							  "      : "
							  ">\"$L/alive\" "
							  "2>/dev/null || "
							  "break\n"
							  "    fi\n"
							  "  done\n"
							  ") &\n"
							  "w=$!\n"
							  "wait \"$p\"\n"
							  "rc=$?\n"
							  "kill \"$w\" "
							  "2>/dev/null\n"
							  ": >\"$J/exit.$rc\"\n"
							  /* the same in live/:
							     a monitor's listing
							     sees the end at
							     once */
							  "if [ -e \"$L/$T\" "
							  "]; then\n"
							  "  : "
							  ">\"$L/exit.$rc\"\n"
							  "  [ -e \"$L/$T\" ] "
							  "&& rm -rf -- "
							  "\"$L\"\n"
							  "fi\n";

char *job_wrapper_script(const char *id)
{
	static atomic_uint n;
	struct timespec now;
	char token[80];
	char *s = NULL;
	/* this start's own: unique for the name (one osbfs at a time
	 * starts a name, and not twice in the same nanosecond) */
	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(token, sizeof(token), "%llx.%lx.%x.%x",
		 (unsigned long long)now.tv_sec, (unsigned long)now.tv_nsec,
		 (unsigned)getpid(), atomic_fetch_add(&n, 1));
	if (asprintf(&s, wrapper, id, token) < 0)
		return NULL;
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

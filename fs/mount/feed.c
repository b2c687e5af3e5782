/*
 * feed.c - the change feed (see feed.h).
 *
 * The command is POSIX sh with find, ls, cksum, tr and head (any image
 * has them). Where the image has inotifywait and GNU stat (and feed_mode
 * is auto) it learns of changes from inotify; else, or when inotifywait
 * cannot set its watches, it polls. Polling, it keeps stamp files in a
 * directory of its own under /tmp
 * and, each round, reports every path under the root whose status
 * changed after the stamp taken before the round before (find -cnewer
 * where find has it, else -newer). Each stamp is followed by a pause
 * longer than the kernel's clock tick for file times, so that a change
 * made while a round's find runs, after it looked, is newer than the
 * stamp the next round compares with. A name that left a directory is
 * reported as a change of the directory (its mtime and ctime moved).
 *
 * With inotify, inotifywait -m -r watches the root and a sentinel file
 * in that directory; a ticker touches the sentinel every interval, once
 * the last touch was read and its tick sent. The kernel queues events in
 * order in one queue, so when the reader meets the sentinel's event,
 * every change made before the touch was read: it ends the round there,
 * stats the round's paths (deduplicated; a name made, gone or moved also
 * reports its directory) in one batch and prints the tick. inotifywait
 * watches a new directory (and every one in it) when it reads that it
 * was made, and a name made in it before then has no event: the round
 * that reports the directory reports every path below it too, read
 * after the sentinel, so after the watches were set. It is
 * started before the first round, which (with R back) is one find, so
 * nothing falls between the two. Its walk sets a directory's watch
 * after reading it and all below it, so a directory made meanwhile in
 * one already read gets neither a watch nor an event: when a directory
 * changed while it walked (after a stamp taken before), inotifywait is
 * started again, up to five times in about 3 s, then the command polls.
 * The same gap is left, far shorter, when a new directory is walked: a
 * directory made inside it between its reading and its watch. When the queue
 * overflows or inotifywait dies, events may be lost: the command prints "*
 * lost" (every cache goes), takes a stamp before it, and polls from then on.
 *
 * Its lines:
 *   R            ready: its first stamp is taken
 *   R back       ready, and its first round reports what changed since
 *                the time the mount asked for (what the feed before it
 *                had not reported yet, with a margin): what the mount
 *                held then still holds
 *   /PATH        PATH changed
 *   dCRC N PATH  directory PATH changed; its names' cksum (changed.h)
 *   ASTAT PATH   PATH changed and is now STAT (remote_parse_stat()'s
 *                six fields), where GNU stat can say it
 *   DCRC N STAT PATH  a directory, its names and then its attributes
 *   . W          a round ended; the next in W ms: the interval, or four
 *                times as long as the round took where date can say, so
 *                that a big tree costs the sandbox at most a fifth of a
 *                CPU (and the mount waits that much longer for a tick)
 *   M MODE       how it learns of changes: "inotify" or "poll" (once
 *                at the start, and again when inotify fails)
 *   * WHY        anything may have changed: every cache goes ("* lost":
 *                inotify lost events; "* many": more than FEED_BURST
 *                paths in a round)
 *   E            it ends after FEED_ROUNDS rounds, so that a mount that
 *                died cannot leave it running for long; the next one
 *                starts at once and goes back to its last round
 * It ends too as soon as another feed of this mount took its directory.
 * Paths are printed NUL-terminated and turned into lines, newlines and
 * CRs into \1 (execd splits output into lines, at CRs too): a line with
 * \1 is unsure, and the mount drops all below its sure part. More than
 * FEED_BURST reports in a round (an npm install) drop every cache at
 * once instead.
 *
 * With attributes, the mount takes what changed as if it had asked; so
 * its own uploads and renames, reported like anyone's, cost nothing.
 * Without, what changed is asked again when next used.
 *
 * The thread runs one command at a time and starts the next only while
 * the sandbox is Running (a paused sandbox is never woken by it). While
 * none runs, or its ticks stop, node_feed_live() is false and every
 * cache has its timeouts again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "changed.h"
#include "remote.h"
#include "feed.h"
#include "life.h"
#include "log.h"
#include "notify.h"
#include "ops.h"
#include "osbfs.h"
#include "watch.h"

#define FEED_BURST 200
#define FEED_ROUNDS 1200
#define FEED_BACKOFF_MAX_MS 30000
/* a new feed's first round reports what changed since the last one's
 * last round began, less this margin (the time a command takes to
 * start), if that was less than FEED_BACK_MAX_MS ago */
#define FEED_BACK_MARGIN_S 10
#define FEED_BACK_MAX_MS (10LL * 60 * 1000)
/* a tick later than twice its pause plus this: the feed is not live */
#define FEED_SLACK_MS 1500
/* that a round came late is said at most this often */
#define FEED_LATE_SAY_MS 60000

struct feed {
	pthread_mutex_t lock; /* guards the fields marked, and cond */
	pthread_cond_t cond;
	bool stop, started; /* lock */
	atomic_int cancel;  /* stops the command's stream */
	pthread_t thread;
	char dir[64]; /* the command's directory in the sandbox */
	/* the thread's, read by feed_describe under lock */
	char why[1200]; /* why it is not live */
	long long live_since_wall;
	unsigned long long reports;
	unsigned long long rounds;
	/* times it was not live after it first was, and came back (a round
	 * that came late, a command that broke): the timeouts applied in
	 * between */
	unsigned long long lapses;
	/* the thread's own: when it last said rounds came late, and how
	 * many since */
	long long late_said;
	unsigned long long late_unsaid;
	/* how it learns of changes: "inotify", "poll" (static), or NULL */
	const char *mode;
	/* the thread's own: every change made before covered (monotonic
	 * ms, less a margin) was reported; the feed_since a feed that starts
	 * by reporting what changed since then keeps */
	long long covered, held_since;
	bool said_live;
};

/* One command's run. */
struct run {
	struct osbfs *fs;
	struct feed *f;
	char id[OSB_ID_MAX];
	long long last_tick; /* monotonic ms: the last tick (or "R") came */
	bool ready, ended;
	size_t burst; /* paths since the last tick */
	/* the table's change_seq at the last tick and at the one before: a
	 * round's reports were made after the one before was sent, so a
	 * node this mount changed after seq_before may be newer than its
	 * report (fs_feed_attr) */
	uint64_t seq_last, seq_before;
};

static const char feed_body[] =
	"mkdir -p \"$d\" && echo $me > \"$d/owner\" || exit 3\n"
	"# whether this command still owns the directory, and its shell lives\n"
	"mine() { read o < \"$d/owner\" 2>/dev/null && [ \"$o\" = $me ] && "
	"kill -0 $me 2>/dev/null; }\n"
	"q=\"$d/i.$me\"\n"
	"trap 'i=$(cat \"$q\" 2>/dev/null); mine && rm -rf \"$d\"; rm -f "
	"\"$q\" \"$d/e.$me\" \"$d/t.$me\" \"$d/a.$me\"; [ -n \"$i\" ] && kill "
	"$i 2>/dev/null; exit 143' TERM INT HUP\n"
	"c=-cnewer\n"
	"find \"$d/owner\" -cnewer \"$d/owner\" >/dev/null 2>&1 || c=-newer\n"
	"F='%f %s %.9Y %.9Z %u %g'\n"
	"export F\n"
	"g=0\n"
	"stat --printf \"$F\" -- \"$d/owner\" >/dev/null 2>&1 && g=1\n"
	"t=0\n"
	"case $(date +%s%N 2>/dev/null) in *[!0-9]*|'') ;; *) t=1;; esac\n"
	"ws=$((W / 1000)).$(printf '%03d' $((W % 1000)))\n"
	"pause() { sleep 0.02 2>/dev/null || sleep 1; }\n"
	"# one round: what changed after the stamp s1\n"
	"look() {\n"
	"  if [ $g = 1 ]; then\n"
	"    find \"$r\" \\( -path \"$d\" $P \\) -prune -o $c \"$d/s1\" \\( "
	"-type d -exec sh -c 'for x; do n=$(QUOTING_STYLE=literal LC_ALL=C ls "
	"-A \"$x\" 2>/dev/null | cksum) && s=$(stat -c \"$F\" -- \"$x\") && "
	"printf \"D%s %s %s\\000\" \"$n\" \"$s\" \"$x\"; done' sh {} + -o "
	"-exec stat --printf \"A$F %n\\000\" -- {} + \\)\n"
	"  else\n"
	"    find \"$r\" \\( -path \"$d\" $P \\) -prune -o $c \"$d/s1\" \\( "
	"-type d -exec sh -c 'for x; do printf \"d%s %s\\000\" "
	"\"$(QUOTING_STYLE=literal LC_ALL=C ls -A \"$x\" 2>/dev/null | "
	"cksum)\" \"$x\"; done' sh {} + -o -exec printf '%s\\000' {} + \\)\n"
	"  fi 2>/dev/null | tr '\\n\\r\\000' '\\001\\001\\n' | head -n $((B + "
	"1))\n"
	"}\n"
	"poll() {\n"
	"  while mine && [ $n -lt $N ]; do\n"
	"    touch \"$d/s0\" || exit 3\n"
	"    pause\n"
	"    [ $t = 1 ] && a=$(date +%s%N)\n"
	"    look\n"
	"    mv -f \"$d/s0\" \"$d/s1\" || exit 3\n"
	"    w=$W\n"
	"    if [ $t = 1 ]; then\n"
	"      e=$((($(date +%s%N) - a) / 1000000))\n"
	"      [ $((e * 4)) -gt $w ] && w=$((e * 4))\n"
	"    fi\n"
	"    echo \". $w\"\n"
	"    sleep $((w / 1000)).$(printf '%03d' $((w % 1000)))\n"
	"    n=$((n+1))\n"
	"  done\n"
	"}\n"
	"ready() {\n"
	"  if [ $b -gt 0 ] && touch -d \"@$(($(date +%s) - b))\" \"$d/s1\" "
	"2>/dev/null; then\n"
	"    echo 'R back'\n"
	"    return 0\n"
	"  fi\n"
	"  touch \"$d/s1\" || exit 3\n"
	"  pause\n"
	"  echo R\n"
	"  return 1\n"
	"}\n"
	"# the paths of a round (one a line), told with what they are now\n"
	"tell() {\n"
	"  tr '\\n' '\\000' | xargs -0 sh -c 'for x; do [ -e \"$x\" ] || [ -h "
	"\"$x\" ] || printf \"%s\\000\" \"$x\"; done; find \"$@\" -prune \\( "
	"-type d -exec sh -c '\\''for x; do n=$(QUOTING_STYLE=literal LC_ALL=C "
	"ls -A \"$x\" 2>/dev/null | cksum) && s=$(stat -c \"$F\" -- \"$x\") && "
	"printf \"D%s %s %s\\000\" \"$n\" \"$s\" \"$x\"; done'\\'' sh {} + -o "
	"-exec stat --printf \"A$F %n\\000\" -- {} + \\)' sh 2>/dev/null | tr "
	"'\\n\\r\\000' '\\001\\001\\n' | head -n $((B + 1))\n"
	"}\n"
	"# all below the directories a round made (one a line)\n"
	"below() {\n"
	"  [ \"$v\" = \"$nl\" ] || printf '%s' \"${v#?}\" | tr '\\n' '\\000' | "
	"xargs -0 sh -c 'find \"$@\" -mindepth 1 -print0' sh 2>/dev/null | tr "
	"'\\n\\r\\000' '\\001\\001\\n' | head -n $((B + 1))\n"
	"}\n"
	"# inotify: events in, rounds out; a round ends at the sentinel's "
	"touch\n"
	"# (events are read in the order the kernel queued them)\n"
	"inotify() {\n"
	"  h=0\n"
	"  while :; do\n"
	"    grep -q '^Watches established' \"$d/e.$me\" 2>/dev/null && break\n"
	"    if grep -q '^gone' \"$d/e.$me\" 2>/dev/null || [ $h -ge 1200 ]; "
	"then\n"
	"      return 1\n"
	"    fi\n"
	"    sleep 0.05\n"
	"    h=$((h+1))\n"
	"  done\n"
	"  # its walk sets a directory's watch after reading it, so a "
	"directory\n"
	"  # made in one while it walked may have none: a directory changed\n"
	"  # since the stamp s9, taken before it started, asks for another "
	"walk\n"
	"  [ -z \"$(find \"$r\" \\( -path \"$d\" $P \\) -prune -o -type d $c "
	"\"$d/s9\" -print 2>/dev/null | head -n 1)\" ] || return 2\n"
	"  echo 'M inotify'\n"
	"  ready && look\n"
	"  # the ticker: it touches the sentinel (an open for writing, "
	"closed)\n"
	"  # once the last touch was read and its tick sent, so that a tick "
	"says\n"
	"  # every change made before the last one was sent was read\n"
	"  echo 0 > \"$d/a.$me\"\n"
	"  ( j=0\n"
	"    while mine; do\n"
	"      sleep $ws\n"
	"      read c < \"$d/a.$me\" || break\n"
	"      [ \"$c\" = $j ] || continue\n"
	"      j=$((j+1))\n"
	"      : >> \"$d/t.$me\" || break\n"
	"    done\n"
	"    kill $(cat \"$q\") 2>/dev/null ) &\n"
	"  k=$!\n"
	"  nl='\n"
	"'\n"
	"  p=$nl\n"
	"  v=$nl\n"
	"  u=0\n"
	"  while IFS= read -r l; do\n"
	"    e=${l%% *}\n"
	"    x=${l#* }\n"
	"    case $e in *Q_OVERFLOW*) break;; esac\n"
	"    case $x in\n"
	"    \"$d/t.$me\")\n"
	"      case $e in CLOSE_WRITE*) ;; *) continue;; esac\n"
	"      if [ $u -gt $B ]; then\n"
	"        echo '* many'\n"
	"      elif [ $u -gt 0 ]; then\n"
	"        { printf '%s' \"${p#?}\"; below; } | tell\n"
	"      fi\n"
	"      p=$nl\n"
	"      v=$nl\n"
	"      u=0\n"
	"      echo \". $W\"\n"
	"      n=$((n+1))\n"
	"      echo $n > \"$d/a.$me\"\n"
	"      [ $n -ge $N ] && return 0\n"
	"      continue;;\n"
	"    \"$d\"|\"$d\"/*) continue;;\n"
	"    /*) ;;\n"
	"    *) break;;\n"
	"    esac\n"
	"    case $x in ?*/) x=${x%/}; esac\n"
	"    case $e in\n"
	"    *CREATE*|*DELETE*|*MOVED*)\n"
	"      y=${x%/*}\n"
	"      set -- \"$x\" \"${y:-/}\";;\n"
	"    *) set -- \"$x\";;\n"
	"    esac\n"
	"    [ $u -gt $B ] && continue\n"
	"    # a directory made or moved in: inotifywait watches it, and what\n"
	"    # is in it, once it read that; a name made in it before has no\n"
	"    # event, so the round's end (read after) reports all below it\n"
	"    case $e in *ISDIR*) case $e in *CREATE*|*MOVED_TO*) case $v in\n"
	"      *\"$nl$x$nl\"*) ;; *) v=$v$x$nl;; esac;; esac;; esac\n"
	"    for x; do\n"
	"      case $p in *\"$nl$x$nl\"*) ;; *) p=$p$x$nl; u=$((u+1));; esac\n"
	"    done\n"
	"  done\n"
	"  # it stopped telling, or lost events: what changed since is "
	"unknown\n"
	"  mine || return 0\n"
	"  kill $k $(cat \"$q\") 2>/dev/null\n"
	"  k=\n"
	"  touch \"$d/s1\" || exit 3\n"
	"  pause\n"
	"  echo '* lost'\n"
	"  echo 'M poll'\n"
	"  poll\n"
	"  return 0\n"
	"}\n"
	"n=0\n"
	"# inotify where it can: inotifywait, GNU stat for the reports, and a "
	"tr\n"
	"# that stdbuf can make give each event at once\n"
	"if [ \"$m\" = auto ] && [ $g = 1 ] && command -v inotifywait "
	">/dev/null 2>&1 && stdbuf -oL tr --version 2>/dev/null | grep -q GNU "
	"&& : > \"$d/t.$me\"; then\n"
	"  # (a walk the tree changed under is tried again, five times in\n"
	"  # about 3 s, then it polls)\n"
	"  { a=0\n"
	"    while :; do\n"
	"      touch \"$d/s9\" || exit 3\n"
	"      pause\n"
	"      ( inotifywait -m -r -e "
	"modify,attrib,close_write,move,create,delete,delete_self,move_self,q_"
	"overflow --format '%e %w%f%0' --no-newline \"$r\" \"$d/t.$me\" "
	"\"@$d\" $X 2>\"$d/e.$me\" & echo $! > \"$q\"; wait $!; echo \"gone "
	"$?\" >> \"$d/e.$me\" ) | stdbuf -oL tr '\\n\\r\\000' '\\001\\001\\n' "
	"| { inotify; x=$?; [ $x = 0 ] || kill $(cat \"$q\") 2>/dev/null; [ $x "
	"= 2 ] && [ $a -lt 4 ] && exit 2; [ $x = 0 ] || { echo 'M poll'; "
	"ready; poll; }; [ $n -ge $N ] && echo E; kill $k $(cat \"$q\") "
	"2>/dev/null; exit 0; }\n"
	"      x=$?\n"
	"      [ $x = 2 ] || exit $x\n"
	"      a=$((a+1))\n"
	"      case $a in 1) sleep 0.2;; 2) sleep 0.4;; 3) sleep 0.8;; *) "
	"sleep "
	"1.6;; esac\n"
	"    done; } &\n"
	"else\n"
	"  { echo 'M poll'; ready; poll; [ $n -ge $N ] && echo E; } &\n"
	"fi\n"
	"wait $!\n"
	"w=$?\n"
	"rm -f \"$q\" \"$d/e.$me\" \"$d/t.$me\" \"$d/a.$me\"\n"
	"exit $w\n";

static char *feed_script(struct osbfs *fs, struct feed *f, long back_s)
{
	char *root = osb_shell_quote(fs->root);
	char *out = NULL;
	if (!root)
		return NULL;
	bool all = strcmp(fs->root, "/") == 0;
	/* what a feed of the whole sandbox leaves out */
	const char *prune =
		all ? "-o -path /proc -o -path /sys -o -path /dev" : "";
	const char *skip = all ? "@/proc @/sys @/dev" : "";
	bool poll = strcmp(fs->opt->feed_mode, "poll") == 0;
	int n = asprintf(&out,
			 "d=%s; r=%s; me=$$; b=%ld; W=%ld; B=%d; N=%d; m=%s; "
			 "P='%s'; X='%s'\n%s",
			 f->dir, root, back_s, fs->opt->feed_interval_ms,
			 FEED_BURST, FEED_ROUNDS, poll ? "poll" : "auto", prune,
			 skip, feed_body);
	free(root);
	return n < 0 ? NULL : out;
}

/* The feed is live from @since (0: not live). */
static void set_live(struct osbfs *fs, long long since, long long now)
{
	pthread_mutex_lock(&fs->nodes.lock);
	fs->nodes.feed_since = since;
	fs->nodes.feed_seen = now;
	pthread_mutex_unlock(&fs->nodes.lock);
}

/* A round ended: the table's change_seq now; *@late_ms: how long the
 * feed had not been live before it (0: it was). */
static uint64_t tick(struct osbfs *fs, long long now, long next_ms,
		     long long *late_ms)
{
	if (next_ms < fs->opt->feed_interval_ms || next_ms > 3600L * 1000)
		next_ms = fs->opt->feed_interval_ms;
	*late_ms = 0;
	pthread_mutex_lock(&fs->nodes.lock);
	if (fs->nodes.feed_since) {
		long long gap = now - fs->nodes.feed_seen;
		if (gap > fs->nodes.feed_grace_ms)
			*late_ms = gap - fs->nodes.feed_grace_ms;
		fs->nodes.feed_seen = now;
		/* a round over a big tree takes long, and the pause after it
		 * is longer, so that the feed costs the sandbox little */
		fs->nodes.feed_grace_ms = 2 * next_ms + FEED_SLACK_MS;
	}
	uint64_t seq = fs->nodes.change_seq;
	pthread_mutex_unlock(&fs->nodes.lock);
	return seq;
}

/* A round came @late ms after the feed stopped being live: what the mount
 * knew was asked again in between. Said at most once a minute. */
static void fell_behind(struct feed *f, long long now, long long late)
{
	pthread_mutex_lock(&f->lock);
	f->lapses++;
	pthread_mutex_unlock(&f->lock);
	f->late_unsaid++;
	if (f->late_said && now - f->late_said < FEED_LATE_SAY_MS)
		return;
	log_info("change feed: %llu round(s) came late (the last by %lld ms, "
		 "a busy sandbox or network); the timeouts applied meanwhile",
		 f->late_unsaid, late);
	f->late_said = now;
	f->late_unsaid = 0;
}

/* "R", or "R back": its first round reports what changed since the
 * time asked (run_once), so what was held before still is. */
static void got_ready(struct run *r, bool back)
{
	struct feed *f = r->f;
	long long now = mono_ms();
	bool kept = back && f->held_since;
	r->ready = true;
	r->last_tick = now;
	if (!kept)
		f->held_since = now;
	set_live(r->fs, f->held_since, now);
	pthread_mutex_lock(&f->lock);
	if (!kept || !f->live_since_wall)
		f->live_since_wall = time(NULL);
	f->why[0] = '\0';
	if (f->said_live)
		f->lapses++;
	pthread_mutex_unlock(&f->lock);
	if (!f->said_live)
		log_info("change feed live: what the mount knows holds until "
			 "the sandbox reports a change");
	else if (!kept)
		log_info("change feed live again; what the mount knew before "
			 "is asked again when used");
	f->said_live = true;
}

/* Splits "<crc> <size> rest" off @p: the rest, or NULL. */
static const char *names_of(const char *p, struct names_sum *ret)
{
	char *end;
	unsigned long long crc = strtoull(p, &end, 10);
	if (*end != ' ' || crc > UINT32_MAX)
		return NULL;
	ret->crc = (uint32_t)crc;
	ret->size = strtoull(end + 1, &end, 10);
	return *end == ' ' ? end + 1 : NULL;
}

/* Splits a stat line (six fields) off @p into @a: the path after it, or
 * NULL. */
static const char *attr_of(const char *p, struct fattr *a)
{
	const char *q = p;
	for (int i = 0; i < 6 && q; i++) {
		q = strchr(q, ' ');
		q = q ? q + 1 : NULL;
	}
	if (!q || q - p > 400)
		return NULL;
	char fields[404];
	memcpy(fields, p, (size_t)(q - p));
	fields[q - p] = '\0';
	return remote_parse_stat(fields, a) ? NULL : q;
}

/*
 * One report: "/PATH" (changed), "dCRC SIZE PATH" (a directory and its
 * names), and, where stat can say what they are now, "ASTAT PATH" and
 * "DCRC SIZE STAT PATH" (STAT: remote_parse_stat()'s six fields).
 */
static bool take_report(struct run *r, const char *line, bool unsure)
{
	struct osbfs *fs = r->fs;
	struct names_sum sum;
	struct fattr a;
	const char *p = line + 1;
	switch (line[0]) {
	case '/':
		fs_feed_changed(fs, line, unsure);
		return true;
	case 'd':
		p = names_of(p, &sum);
		if (p && *p == '/')
			fs_feed_dir(fs, p, unsure, &sum, NULL, r->seq_before);
		return p && *p == '/';
	case 'D':
		p = names_of(p, &sum);
		p = p ? attr_of(p, &a) : NULL;
		if (p && *p == '/')
			fs_feed_dir(fs, p, unsure, &sum, &a, r->seq_before);
		return p && *p == '/';
	case 'A':
		p = attr_of(p, &a);
		if (p && *p == '/')
			fs_feed_attr(fs, p, unsure, &a, r->seq_before);
		return p && *p == '/';
	}
	return false;
}

static void got_path(struct run *r, const char *line)
{
	if (!r->ready)
		return;
	r->burst++;
	if (r->burst > FEED_BURST) {
		if (r->burst == FEED_BURST + 1)
			fs_invalidate_all(r->fs);
		return;
	}
	if (!take_report(r, line, strchr(line, '\1') != NULL)) {
		/* what it names is not known: everything */
		log_warn("change feed: a report not understood; every cache "
			 "dropped");
		fs_invalidate_all(r->fs);
	}
	pthread_mutex_lock(&r->f->lock);
	r->f->reports++;
	pthread_mutex_unlock(&r->f->lock);
}

/* "M MODE": how the command learns of changes (it may fall back from
 * inotify to polling while it runs). */
static void got_mode(struct run *r, const char *line)
{
	struct feed *f = r->f;
	const char *mode = strcmp(line, "inotify") == 0 ? "inotify" : "poll";
	pthread_mutex_lock(&f->lock);
	bool same = f->mode && strcmp(f->mode, mode) == 0;
	f->mode = mode;
	pthread_mutex_unlock(&f->lock);
	if (!same)
		log_info("change feed: %s",
			 mode[0] == 'i' ?
				 "the sandbox's inotify says what changes" :
				 "the sandbox looks over the tree each round "
				 "(polling)");
}

static int on_event(void *arg, const struct osb_event *ev)
{
	struct run *r = arg;
	if (atomic_load(&r->f->cancel))
		return -ECANCELED;
	if (ev->type == OSB_EV_INIT && ev->text)
		snprintf(r->id, sizeof(r->id), "%s", ev->text);
	if (ev->type != OSB_EV_STDOUT || !ev->text)
		return 0;
	const char *t = ev->text;
	if (t[0] != '.') /* -o debug: every report, not the ticks */
		log_debug("feed: %.300s", t);
	if (strcmp(t, "R") == 0 || strcmp(t, "R back") == 0) {
		got_ready(r, t[1] != '\0');
	} else if (t[0] == '.' && (t[1] == ' ' || !t[1])) {
		/* ". W": the next comes in about W ms */
		long w = t[1] ? strtol(t + 2, NULL, 10) : 0;
		r->burst = 0;
		/* this round reported every change made before the round
		 * began, after the last tick was sent */
		r->f->covered = r->last_tick;
		r->last_tick = mono_ms();
		r->seq_before = r->seq_last;
		long long late;
		r->seq_last = tick(r->fs, r->last_tick, w, &late);
		pthread_mutex_lock(&r->f->lock);
		r->f->rounds++;
		pthread_mutex_unlock(&r->f->lock);
		if (late)
			fell_behind(r->f, r->last_tick, late);
	} else if (strcmp(t, "E") == 0) {
		r->ended = true;
	} else if (t[0] == 'M' && t[1] == ' ') {
		got_mode(r, t + 2);
	} else if (t[0] == '*' && (t[1] == ' ' || !t[1])) {
		/* "* many": more changes in a round than it says one by
		 * one; "* lost": its watch lost events. Anything may have
		 * changed. */
		if (r->ready) {
			if (strcmp(t, "* many") != 0)
				log_warn("change feed: the sandbox's watch "
					 "lost events; every cache dropped");
			fs_invalidate_all(r->fs);
		}
	} else if (t[0] && strchr("/dDA", t[0])) {
		got_path(r, t);
	}
	return 0;
}

static void set_why(struct feed *f, const char *fmt, const char *arg)
{
	pthread_mutex_lock(&f->lock);
	snprintf(f->why, sizeof(f->why), fmt, arg);
	f->live_since_wall = 0;
	pthread_mutex_unlock(&f->lock);
}

/* One command, to its end. Returns whether it ended as planned. */
static bool run_once(struct osbfs *fs, struct feed *f)
{
	struct run r = { .fs = fs, .f = f };
	/* its first round goes back to what the last one had not seen, with
	 * a margin for the time the command takes to start */
	long long gap = mono_ms() - f->covered;
	long back_s = f->covered && gap < FEED_BACK_MAX_MS ?
			      (long)(gap / 1000) + FEED_BACK_MARGIN_S :
			      0;
	if (!back_s)
		f->held_since = 0;
	char *script = feed_script(fs, f, back_s);
	if (!script) {
		set_why(f, "%s", "out of memory");
		return false;
	}
	struct osb_command_opts o;
	osb_command_opts_init(&o);
	o.no_follow = true;
	struct osb_error err = { 0 };
	int code = 0;
	int rc = osb_command_run(fs->sb, script, &o, on_event, &r, &code, r.id,
				 &err);
	free(script);
	if (!rc && r.ended)
		return true; /* the next one goes on from its last tick */
	set_live(fs, 0, 0);
	if (atomic_load(&f->cancel)) {
		if (r.id[0]) {
			/* the command ends with the mount (its flag would
			 * cancel this request too) */
			struct osb_error e2 = { 0 };
			osb_cancel_flag_set(NULL);
			osb_command_interrupt(fs->sb, r.id, &e2);
			osb_cancel_flag_set(&f->cancel);
		}
		return false;
	}
	char why[1100];
	if (rc)
		snprintf(why, sizeof(why), "%s",
			 err.message[0] ? err.message : strerror(-rc));
	else
		snprintf(why, sizeof(why), "its command ended (exit %d)", code);
	set_why(f, "broke: %s; the timeouts apply", why);
	log_warn("change feed broke: %s; cached attributes and listings "
		 "expire after their timeouts until it is back",
		 why);
	return false;
}

static bool running(struct osbfs *fs)
{
	struct life_info li;
	life_get(fs, &li);
	return strcmp(li.state, "Running") == 0 && !watch_away(fs);
}

/* Waits @ms or until stopped; true when stopped. */
static bool nap(struct feed *f, long ms)
{
	struct timespec ts;
	cond_deadline(&ts, ms);
	pthread_mutex_lock(&f->lock);
	if (!f->stop)
		pthread_cond_timedwait(&f->cond, &f->lock, &ts);
	bool stop = f->stop;
	pthread_mutex_unlock(&f->lock);
	return stop;
}

static void *feed_thread(void *arg)
{
	struct osbfs *fs = arg;
	struct feed *f = fs->feed;
	long backoff = 1000;

	watch_exempt_thread();
	osb_cancel_flag_set(&f->cancel);
	osb_thread_set_retries(0);
	while (!nap(f, 0)) {
		if (!running(fs)) {
			set_why(f, "%s", "waits for the sandbox to run");
			if (nap(f, 1000))
				break;
			continue;
		}
		long long began = mono_ms();
		if (run_once(fs, f)) {
			backoff = 1000;
			continue;
		}
		if (mono_ms() - began > 60000)
			backoff = 1000;
		if (nap(f, backoff))
			break;
		backoff = backoff * 2 > FEED_BACKOFF_MAX_MS ?
				  FEED_BACKOFF_MAX_MS :
				  backoff * 2;
	}
	osb_cancel_flag_set(NULL);
	return NULL;
}

int feed_init(struct osbfs *fs)
{
	if (!fs->opt->feed)
		return 0;
	struct feed *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	unsigned char rnd[8];
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		free(f);
		return -EIO;
	}
	int off = snprintf(f->dir, sizeof(f->dir), "/tmp/.osbfs-feed-");
	for (size_t i = 0; i < sizeof(rnd); i++)
		off += snprintf(f->dir + off, sizeof(f->dir) - (size_t)off,
				"%02x", rnd[i]);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	snprintf(f->why, sizeof(f->why), "starting");
	/* nothing was known before the mount began */
	f->covered = f->held_since = mono_ms();
	fs->nodes.feed_grace_ms = 2 * fs->opt->feed_interval_ms + FEED_SLACK_MS;
	fs->feed = f;
	return 0;
}

int feed_start(struct osbfs *fs)
{
	struct feed *f = fs->feed;
	if (!f)
		return 0;
	int rc = pthread_create(&f->thread, NULL, feed_thread, fs);
	if (rc)
		return -rc;
	f->started = true;
	return 0;
}

void feed_stop_begin(struct osbfs *fs)
{
	struct feed *f = fs->feed;
	if (!f || !f->started)
		return;
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	atomic_store(&f->cancel, 1);
}

void feed_stop(struct osbfs *fs)
{
	struct feed *f = fs->feed;
	if (!f || !f->started)
		return;
	feed_stop_begin(fs);
	pthread_join(f->thread, NULL);
	f->started = false;
	set_live(fs, 0, 0);
}

int feed_restart(struct osbfs *fs)
{
	struct feed *f = fs->feed;
	if (!f || f->started)
		return 0;
	pthread_mutex_lock(&f->lock);
	f->stop = false;
	pthread_mutex_unlock(&f->lock);
	atomic_store(&f->cancel, 0);
	/* nothing is known of the new sandbox from before (the thread is
	 * not running: these are its own) */
	f->covered = f->held_since = mono_ms();
	f->said_live = false;
	return feed_start(fs);
}

void feed_release(struct osbfs *fs)
{
	struct feed *f = fs->feed;
	if (!f)
		return;
	feed_stop(fs);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
	fs->feed = NULL;
}

unsigned long long feed_rounds(struct osbfs *fs)
{
	struct feed *f = fs->feed;
	if (!f)
		return 0;
	pthread_mutex_lock(&f->lock);
	unsigned long long n = f->rounds;
	pthread_mutex_unlock(&f->lock);
	return n;
}

void feed_mode(struct osbfs *fs, char *buf, size_t size)
{
	struct feed *f = fs->feed;
	buf[0] = '\0';
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	snprintf(buf, size, "%s", f->mode ? f->mode : "");
	pthread_mutex_unlock(&f->lock);
}

void feed_describe(struct osbfs *fs, char *buf, size_t size)
{
	struct feed *f = fs->feed;
	if (!f) {
		snprintf(buf, size, "off (feed=no): the timeouts apply");
		return;
	}
	pthread_mutex_lock(&fs->nodes.lock);
	bool live = node_feed_live(&fs->nodes, mono_ms());
	pthread_mutex_unlock(&fs->nodes.lock);
	pthread_mutex_lock(&f->lock);
	if (live) {
		char when[32];
		struct tm tm;
		time_t t = f->live_since_wall;
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ",
			 gmtime_r(&t, &tm));
		snprintf(buf, size,
			 "live since %s, %llu changes reported, lapsed %llu "
			 "times",
			 when, f->reports, f->lapses);
	} else {
		snprintf(buf, size, "not live (%s)",
			 f->why[0] ? f->why : "no tick lately");
	}
	pthread_mutex_unlock(&f->lock);
}

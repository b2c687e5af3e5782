/*
 * ctl_root.c - what the files at the top of the control tree say and do:
 * info (JSON, no secrets), the verbs written to ctl, the egress policy,
 * and the verbs written to a job's ctl.
 *
 * Every refused write is logged with log_error(), so its reason shows in
 * info's last_error and in log.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "feed.h"
#include "ctl_i.h"
#include "ctl_parse.h"
#include "holder.h"
#include "life.h"
#include "log.h"
#include "notify.h"
#include "setup.h"
#include "ops.h"
#include "remote.h"
#include "watch.h"
#include "writeback.h"

/* the longest `sync` waits for the uploads */
#define SYNC_MS (10L * 60 * 1000)

/* ---- info ---- */

static int json_unix_time(struct text *t, time_t when)
{
	struct timespec ts = { .tv_sec = when };
	return text_json_time(t, ts);
}

/* ,"expires_in_s":N,"keepalive":B,"expiry_warning":"..."|null */
static int expiry_json(struct ctl *c, const struct life_info *li,
		       struct text *out)
{
	bool keep = c->fs->opt->keepalive;
	long long left =
		li->expires_at ? (long long)(li->expires_at - time(NULL)) : -1;
	int rc = li->expires_at ? text_printf(out, ",\"expires_in_s\":%lld",
					      left > 0 ? left : 0) :
				  text_adds(out, ",\"expires_in_s\":null");
	rc = rc ? rc :
		  text_printf(out, ",\"keepalive\":%s",
			      keep ? "true" : "false");
	rc = rc ? rc : text_adds(out, ",\"expiry_warning\":");
	if (rc)
		return rc;
	if (!li->expires_at || left >= LIFE_EXPIRY_WARN_S ||
	    strcmp(li->state, "Deleted") == 0)
		return text_adds(out, "null");
	char w[200];
	snprintf(w, sizeof(w),
		 "the sandbox expires in %lld s, and everything in it with "
		 "it: write renew to ctl%s",
		 left > 0 ? left : 0, keep ? "" : ", or mount with keepalive");
	return text_json_str(out, w);
}

/* ,"client":{...}: what the mount sent, and the connections it opened;
 * the TLS handshakes, null when it speaks plain HTTP, resumed null when
 * the TLS library does not say (osb.h). */
static int client_json(struct osbfs *fs, struct text *out)
{
	struct osb_client_stats st;
	osb_client_stats(fs->client, &st);
	char *url = osb_sandbox_execd_url(fs->sb);
	bool tls = strncmp(osb_client_base_url(fs->client), "https:", 6) == 0 ||
		   (url && strncmp(url, "https:", 6) == 0);
	free(url);
	int rc = text_printf(out,
			     ",\"client\":{\"requests\":%llu,\"retries\":%llu,"
			     "\"failures\":%llu,\"bytes_up\":%llu,"
			     "\"bytes_down\":%llu,\"connections\":%llu",
			     (unsigned long long)st.requests,
			     (unsigned long long)st.retries,
			     (unsigned long long)st.failures,
			     (unsigned long long)st.bytes_up,
			     (unsigned long long)st.bytes_down,
			     (unsigned long long)st.connections);
	if (rc || !tls)
		return rc ? rc :
			    text_adds(out, ",\"tls_handshakes\":null,"
					   "\"tls_resumed\":null}");
	rc = text_printf(out, ",\"tls_handshakes\":%llu,\"tls_resumed\":",
			 (unsigned long long)st.tls_handshakes);
	rc = rc ? rc :
	     st.tls_resumed == OSB_STAT_UNKNOWN ?
		  text_adds(out, "null") :
		  text_printf(out, "%llu", (unsigned long long)st.tls_resumed);
	return rc ? rc : text_adds(out, "}");
}

/* info's JSON, on one line. */
static int info_line(struct ctl *c, struct text *out)
{
	struct osbfs *fs = c->fs;
	struct life_info li;
	struct wb_stats wb;
	long long last_when = 0;
	size_t running, total;

	life_get(fs, &li);
	wb_get_stats(fs, &wb);
	struct pending pending;
	int rc = cache_pending(fs->cache, HOLDER_PENDING_MAX, &pending);
	if (rc)
		return rc;
	char *last = log_last_error(&last_when);
	jobs_counts(c->jobs, &running, &total);
	char image[sizeof(c->image)], snap[sizeof(c->snapshot_id)];
	char from[sizeof(c->restored_from)];
	pthread_mutex_lock(&c->about_lock);
	memcpy(image, c->image, sizeof(image));
	memcpy(snap, c->snapshot_id, sizeof(snap));
	memcpy(from, c->restored_from, sizeof(from));
	time_t created_at = c->created_at;
	pthread_mutex_unlock(&c->about_lock);

	rc = text_adds(out, "{\"sandbox_id\":");
	rc = rc ? rc : text_json_str(out, fs->sandbox_id);
	rc = rc ? rc : text_adds(out, ",\"state\":");
	rc = rc ? rc : text_json_str(out, li.state);
	rc = rc ? rc : text_adds(out, ",\"image\":");
	rc = rc ? rc : text_json_str(out, image[0] ? image : NULL);
	rc = rc ? rc : text_adds(out, ",\"snapshot_id\":");
	rc = rc ? rc : text_json_str(out, snap[0] ? snap : NULL);
	rc = rc ? rc : text_adds(out, ",\"restored_from\":");
	rc = rc ? rc : text_json_str(out, from[0] ? from : NULL);
	rc = rc ? rc : text_adds(out, ",\"created_at\":");
	rc = rc ? rc : json_unix_time(out, created_at);
	rc = rc ? rc : text_adds(out, ",\"expires_at\":");
	rc = rc ? rc : json_unix_time(out, li.expires_at);
	rc = rc ? rc : expiry_json(c, &li, out);
	rc = rc ? rc : text_adds(out, ",\"endpoint\":");
	char *url = osb_sandbox_execd_url(fs->sb);
	rc = rc ? rc : url ? text_json_str(out, url) : -ENOMEM;
	free(url);
	/* away: requests fail at once, the cache is served (watch.h) */
	rc = rc ? rc : text_adds(out, ",\"server\":");
	rc = rc ? rc :
		  text_json_str(out, watch_away(fs) ? "away" : "reachable");
	/* how long it has not answered (osbfs -u says so) */
	rc = rc ? rc :
		  text_printf(out, ",\"server_silent_s\":%lld",
			      (watch_silent_ms(fs) + 999) / 1000);
	/* whether a tree nobody changed is asked again (feed.h) */
	char feed[1400];
	feed_describe(fs, feed, sizeof(feed));
	rc = rc ? rc : text_adds(out, ",\"change_feed\":");
	rc = rc ? rc : text_json_str(out, feed);
	feed_mode(fs, feed, sizeof(feed));
	rc = rc ? rc : text_adds(out, ",\"change_feed_mode\":");
	rc = rc ? rc : text_json_str(out, feed);
	rc = rc ? rc :
		  text_printf(out, ",\"change_feed_rounds\":%llu",
			      feed_rounds(fs));
	rc = rc ? rc : text_adds(out, ",\"dir\":");
	rc = rc ? rc : text_json_str(out, fs->root);
	rc = rc ? rc : text_adds(out, ",\"mountpoint\":");
	rc = rc ? rc : text_json_str(out, c->mountpoint);
	rc = rc ? rc : text_adds(out, ",\"control_dir\":");
	rc = rc ? rc : text_json_str(out, fs->opt->control_dir);
	rc = rc ? rc : text_printf(out, ",\"pid\":%d", (int)getpid());
	rc = rc ? rc : text_adds(out, ",\"cache\":{\"dir\":");
	rc = rc ? rc : text_json_str(out, cache_dir(fs->cache));
	rc = rc ? rc : text_adds(out, ",\"pending\":[");
	for (size_t i = 0; !rc && i < pending.n; i++) {
		rc = i ? text_adds(out, ",") : 0;
		rc = rc ? rc : text_json_str(out, pending.paths[i]);
	}
	rc = rc ? rc :
		  text_printf(out,
			      "],\"dirty_files\":%zu,\"dirty_dirs\":%zu,"
			      "\"dirty_bytes\":%lld,\"uploading\":%zu,"
			      "\"uploaded_files\":%llu,"
			      "\"uploaded_bytes\":%llu,"
			      "\"failed_uploads\":%llu,\"conflicts\":%llu",
			      wb.dirty_files, wb.dirty_dirs,
			      (long long)wb.dirty_bytes, wb.inflight,
			      (unsigned long long)wb.uploaded_files,
			      (unsigned long long)wb.uploaded_bytes,
			      (unsigned long long)wb.failed_uploads,
			      (unsigned long long)wb.conflicts);
	/* what waits for a retry, and why */
	char failing[600];
	wb_describe_failures(fs, failing, sizeof(failing));
	rc = rc ? rc : text_adds(out, ",\"failing\":");
	rc = rc ? rc : text_json_str(out, failing[0] ? failing : NULL);
	rc = rc ? rc : text_adds(out, "}");
	rc = rc ? rc :
		  text_printf(out, ",\"jobs\":{\"running\":%zu,\"total\":%zu}",
			      running, total);
	rc = rc ? rc : client_json(fs, out);
	rc = rc ? rc : setup_info_json(c->setup, out);
	/* the temporary files waiting for a rename (ctl_scratch.c) */
	rc = rc ? rc : text_adds(out, ",\"scratch\":");
	rc = rc ? rc : scratch_list_json(c, out);
	rc = rc ? rc : text_adds(out, ",\"last_error\":");
	rc = rc ? rc : text_json_str(out, last && last[0] ? last : NULL);
	rc = rc ? rc : text_adds(out, ",\"last_error_at\":");
	rc = rc ? rc :
		  json_unix_time(out, last && last[0] ? (time_t)last_when : 0);
	free(last);
	pending_release(&pending);
	return rc ? rc : text_adds(out, "}\n");
}

/* info: one key a line, for a person and for grep, still JSON. */
int ctl_info_json(struct ctl *c, struct text *out)
{
	struct text line = { 0 };
	int rc = info_line(c, &line);
	cJSON *root = rc ? NULL : cJSON_ParseWithLength(line.s, line.len);
	char *pretty = root ? cJSON_Print(root) : NULL;
	if (!rc && pretty)
		rc = text_adds(out, pretty);
	else if (!rc) /* not parsed back (out of memory): as it is */
		rc = text_add(out, line.s, line.len);
	rc = rc || !pretty ? rc : text_adds(out, "\n");
	free(pretty);
	cJSON_Delete(root);
	text_release(&line);
	return rc;
}

/* ---- ctl verbs ---- */

/* The errno for a failed lifecycle call. */
static int life_errno(int rc)
{
	return rc == -EBUSY || rc == -ENOENT ? rc : fs_errno(rc);
}

int ctl_sync(struct osbfs *fs, char *msg, size_t msg_size)
{
	struct wb_stats st;
	char which[600];
	int rc = wb_flush_all(fs, SYNC_MS);
	if (!rc)
		return 0;
	char count[80];
	wb_get_stats(fs, &st);
	wb_describe_count(&st, count, sizeof(count));
	size_t failing = wb_describe_failures(fs, which, sizeof(which));
	snprintf(msg, msg_size,
		 "sync: %s could not be uploaded to the sandbox "
		 "(%s)%s%s; they stay local and are retried",
		 count, strerror(-rc), failing ? ": " : "",
		 failing ? which : "");
	return -EIO;
}

/* Runs one verb of `ctl`. */
static int run_verb(struct ctl *c, const struct ctl_verb *v)
{
	static const char *const names[] = {
		[CTL_PAUSE] = "pause",     [CTL_RESUME] = "resume",
		[CTL_RENEW] = "renew",     [CTL_KILL] = "kill",
		[CTL_SYNC] = "sync",       [CTL_INVALIDATE] = "invalidate",
		[CTL_RESTORE] = "restore",
	};
	struct osbfs *fs = c->fs;
	char msg[1200] = "";
	int rc = 0;

	switch (v->kind) {
	case CTL_PAUSE:
		rc = life_errno(life_pause(fs, msg, sizeof(msg)));
		break;
	case CTL_RESUME:
		rc = life_errno(life_resume(fs, msg, sizeof(msg)));
		break;
	case CTL_RENEW:
		rc = life_errno(life_renew(fs, v->secs, msg, sizeof(msg)));
		break;
	case CTL_KILL:
		rc = life_errno(life_kill(fs, msg, sizeof(msg)));
		break;
	case CTL_SYNC:
		rc = ctl_sync(fs, msg, sizeof(msg));
		break;
	case CTL_INVALIDATE:
		fs_invalidate_all(fs);
		/* the files' content too (a job's end keeps it: the next
		 * open compares the file's size, mtime and ctime) */
		cache_drop_clean(fs->cache);
		cache_sweep_wait(fs->cache);
		snaps_forget_age(c->snaps);
		/* and the kernel's, before the write returns: a stat just
		 * after was answered from what it still held */
		notify_drain(fs);
		break;
	case CTL_RESTORE:
		rc = ctl_restore(c, v->ref, v->force, msg, sizeof(msg));
		break;
	case CTL_JOB_KILL:
	case CTL_JOB_SIGNAL:
	case CTL_JOB_FORGET:
		return -EINVAL; /* not a verb of this ctl */
	}
	if (rc)
		log_error("%s", msg[0] ? msg : strerror(-rc));
	else if (v->kind == CTL_RENEW && v->secs)
		log_info("ctl: renew %ld done", v->secs);
	else if (v->kind == CTL_RESTORE)
		log_info("ctl: restore %s done: sandbox %s", v->ref,
			 fs->sandbox_id);
	else
		log_info("ctl: %s done", names[v->kind]);
	return rc;
}

int ctl_exec(struct ctl *c, const char *buf, size_t len)
{
	struct ctl_verbs vs;
	char msg[300];
	int rc = ctl_parse(buf, len, false, "ctl", &vs, msg, sizeof(msg));
	if (rc == -EINVAL)
		log_error("%s", msg);
	for (size_t i = 0; !rc && i < vs.n; i++)
		rc = run_verb(c, &vs.v[i]);
	return rc;
}

/* ---- a job's ctl ---- */

/* forget, written to jobs/@id/ctl (@what). */
static int job_forget(struct ctl *c, const char *id, const char *what)
{
	char w[JOB_ID_MAX + 24];
	snprintf(w, sizeof(w), "%s: forget", what);
	int rc = ctl_job_forget(c, id, w);
	if (!rc) {
		/* the kernel's name of the directory (an rmdir drops its
		 * own; it holds jobs/, so this is not done there) */
		notify_entry(c->fs, ctl_ino(K_JOBS, NULL), id);
		notify_drain(c->fs);
	}
	return rc;
}

int ctl_job_exec(struct ctl *c, struct job *job, const char *buf, size_t len)
{
	char what[JOB_ID_MAX + 16];
	struct ctl_verbs vs;
	char msg[300];
	const char *id = job_id(job);

	snprintf(what, sizeof(what), "jobs/%s/ctl", id);
	int rc = ctl_parse(buf, len, true, what, &vs, msg, sizeof(msg));
	if (rc == -EINVAL)
		log_error("%s", msg);
	for (size_t i = 0; !rc && i < vs.n; i++) {
		const struct ctl_verb *v = &vs.v[i];
		bool kill = v->kind == CTL_JOB_KILL;
		if (v->kind == CTL_JOB_FORGET) {
			rc = job_forget(c, id, what);
			continue;
		}
		rc = job_signal(c->jobs, job, kill ? "TERM" : v->sig, kill);
		if (rc == -ESRCH)
			log_error("%s: %s: the job is not running", what,
				  kill ? "kill" : "signal");
	}
	return rc;
}

/* ---- egress ---- */

/* The errno for a failed egress call; logs its reason. */
static int egress_errno(struct ctl *c, int rc, const struct osb_error *err)
{
	if (rc == -ENOENT) {
		atomic_store(&c->no_sidecar, true);
		log_error("egress: sandbox %s has no egress sidecar (it was "
			  "created without a network policy)",
			  c->fs->sandbox_id);
		return -EOPNOTSUPP;
	}
	log_error("egress: %s", err->message[0] ? err->message : strerror(-rc));
	return rc == -EINVAL ? rc : fs_errno(rc);
}

int ctl_egress_text(struct ctl *c, struct text *out)
{
	struct osb_error err;
	char *json = NULL;

	osb_error_clear(&err);
	/* asking again would cost the client's retries of execd's 502 */
	int rc = atomic_load(&c->no_sidecar) ? -ENOENT : remote_enter(c->fs);
	if (!rc)
		rc = osb_egress_get(c->fs->sb, &json, &err);
	if (rc == -ENOENT) {
		atomic_store(&c->no_sidecar, true);
		rc = text_printf(out,
				 "{\"sidecar\":false,\"policy\":null,"
				 "\"message\":\"sandbox %s has no egress "
				 "sidecar: it was created without a network "
				 "policy, so its traffic is not filtered and "
				 "no rules can be set\"}\n",
				 c->fs->sandbox_id);
	} else if (!rc) {
		size_t n = strlen(json);
		rc = text_add(out, json, n);
		if (!rc && (!n || json[n - 1] != '\n'))
			rc = text_adds(out, "\n");
	} else {
		log_error("egress: %s",
			  err.message[0] ? err.message : strerror(-rc));
		rc = fs_errno(rc);
	}
	free(json);
	if (!rc)
		atomic_store(&c->egress_size, (long long)out->len);
	return rc;
}

/* Where the JSON value starting at @s[0] ('[') ends: the index after
 * its closing bracket, 0 if it is not complete in @n bytes. */
static size_t json_end(const char *s, size_t n)
{
	int depth = 0;
	bool str = false, esc = false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (str) {
			if (esc)
				esc = false;
			else if (ch == '\\')
				esc = true;
			else if (ch == '"')
				str = false;
		} else if (ch == '"') {
			str = true;
		} else if (ch == '[' || ch == '{') {
			depth++;
		} else if ((ch == ']' || ch == '}') && --depth == 0) {
			return i + 1;
		}
	}
	return 0;
}

static bool is_action(const char *s)
{
	return s && (strcmp(s, "allow") == 0 || strcmp(s, "deny") == 0);
}

/* What is wrong with egress line @verb @arg @extra, or NULL. */
static const char *egress_line_fault(const char *verb, const char *arg,
				     const char *extra)
{
	if (!verb)
		return "it is empty";
	bool known = is_action(verb) || strcmp(verb, "remove") == 0 ||
		     strcmp(verb, "default") == 0;
	if (!known)
		return "its first word is not allow, deny, remove or default";
	if (!arg)
		return strcmp(verb, "default") == 0 ?
			       "default wants allow or deny after it" :
			       "it names no host";
	if (extra)
		return "one host a line: a second word follows the host";
	if (strcmp(verb, "default") == 0 && !is_action(arg))
		return "default wants allow or deny after it";
	return NULL;
}

/* "allow HOST", "deny HOST", "remove HOST" or "default allow|deny". */
static int egress_line(struct ctl *c, char *line)
{
	struct osb_error err;
	char *save = NULL;
	char *copy = strdup(line);
	if (!copy)
		return -ENOMEM;
	char *verb = strtok_r(line, " \t", &save);
	char *arg = strtok_r(NULL, " \t", &save);
	char *extra = strtok_r(NULL, " \t", &save);
	bool rule = is_action(verb);
	bool remove = verb && strcmp(verb, "remove") == 0;

	osb_error_clear(&err);
	const char *fault = egress_line_fault(verb, arg, extra);
	if (fault) {
		log_error("egress: the line \"%s\" is not applied: %s. Write "
			  "lines \"allow HOST\", \"deny HOST\", \"remove "
			  "HOST\", \"default allow|deny\"; a JSON array of "
			  "rules to merge "
			  "([{\"action\":\"allow\",\"target\":\"pypi.org\"}]); "
			  "or a whole policy, as read here",
			  copy, fault);
		free(copy);
		return -EINVAL;
	}
	free(copy);
	int rc = atomic_load(&c->no_sidecar) ? -ENOENT : remote_enter(c->fs);
	if (!rc && rule)
		rc = osb_egress_rule(c->fs->sb, verb, arg, &err);
	else if (!rc && remove)
		rc = osb_egress_delete(c->fs->sb, (const char *const *)&arg, 1,
				       &err);
	else if (!rc)
		rc = osb_egress_default(c->fs->sb, arg, &err);
	if (rc)
		return egress_errno(c, rc, &err);
	log_info("egress: %s %s", verb, arg);
	return 0;
}

/* A JSON array of rules is merged; an object is the whole policy. */
static int egress_json(struct ctl *c, const char *json)
{
	struct osb_error err;
	osb_error_clear(&err);
	int rc = atomic_load(&c->no_sidecar) ? -ENOENT : remote_enter(c->fs);
	if (!rc && json[0] == '[')
		rc = osb_egress_patch(c->fs->sb, json, &err);
	else if (!rc)
		rc = osb_egress_set(c->fs->sb, json, &err);
	if (rc)
		return egress_errno(c, rc, &err);
	log_info("egress: %s",
		 json[0] == '[' ? "rules merged" : "policy replaced");
	return 0;
}

int ctl_egress_apply(struct ctl *c, struct ctl_fh *fh, bool final)
{
	struct text *in = &fh->in;
	size_t pos = 0;
	int rc = 0;

	while (!rc && pos < in->len) {
		const char *s = in->s + pos;
		size_t left = in->len - pos;
		size_t skip = strspn(s, " \t\r\n");
		if (skip >= left) {
			pos = in->len;
			break;
		}
		s += skip;
		left -= skip;
		pos += skip;
		if (*s == '[' || *s == '{') {
			size_t end = json_end(s, left);
			if (!end && !final)
				break; /* the rest comes in the next write */
			if (!end) {
				log_error("egress: incomplete JSON %s",
					  *s == '[' ? "array" : "object");
				rc = -EINVAL;
				break;
			}
			char *json = strndup(s, end);
			rc = json ? egress_json(c, json) : -ENOMEM;
			free(json);
			pos += end;
			continue;
		}
		size_t n = strcspn(s, "\n");
		char *line = strndup(s, n);
		if (!line)
			return -ENOMEM;
		size_t l = strlen(line);
		while (l && strchr(" \t\r", line[l - 1]))
			line[--l] = '\0';
		rc = egress_line(c, line);
		free(line);
		pos += n;
	}
	if (rc || pos >= in->len) {
		text_clear(in);
	} else if (pos) {
		memmove(in->s, in->s + pos, in->len - pos);
		in->len -= pos;
		in->s[in->len] = '\0';
	}
	if (!rc && final && in->len && !text_blank(in->s, in->len)) {
		log_error("egress: incomplete JSON");
		rc = -EINVAL;
	}
	return rc;
}

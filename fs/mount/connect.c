/*
 * connect.c - from the command line to a running sandbox: the client
 * (connection settings), then the sandbox (reconnect by id, find or
 * create by name label, or create; a new one from snapshot= when given),
 * waiting until it runs and execd answers, and the mounted directory made
 * if missing (an existing one is mounted as it is, read-only or not).
 * Every failure is one line naming the cause and the URL tried.
 *
 * A create is sent once. Its answer lost, name= settles it by listing
 * the sandboxes of that name, as a race between two mounts is settled;
 * without name= the mount fails saying a sandbox may have been made.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "connect.h"
#include "fork.h"
#include "log.h"

#define READY_WAIT_MS 60000

static char *slurp(const char *path, char *msg, size_t msg_size)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(msg, msg_size, "network_policy file %s: %s", path,
			 strerror(errno));
		return NULL;
	}
	char *s = NULL;
	size_t cap = 0, len = 0;
	for (;;) {
		if (len + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			char *p = realloc(s, cap);
			if (!p) {
				free(s);
				fclose(f);
				return NULL;
			}
			s = p;
		}
		size_t n = fread(s + len, 1, 4096, f);
		len += n;
		if (n < 4096)
			break;
	}
	s[len] = '\0';
	fclose(f);
	return s;
}

int connect_client(struct osbfs_options *o, struct osb_client **ret, char *msg,
		   size_t msg_size)
{
	struct osb_config cfg = { 0 };
	struct osb_error err;
	char *key = NULL;
	int rc;

	cfg.domain = o->domain;
	cfg.protocol = o->protocol;
	cfg.ca_file = o->cacert;
	cfg.insecure = o->insecure;
	cfg.request_timeout_ms = o->request_timeout_ms;
	cfg.use_server_proxy = o->server_proxy;
	cfg.execd_token = getenv("OSBFS_EXECD_TOKEN");
	if (cfg.domain && !*cfg.domain)
		cfg.domain = NULL;
	if (o->api_key_file) {
		rc = osb_read_key_file(o->api_key_file, &key, &err);
		if (rc) {
			snprintf(msg, msg_size, "%s", err.message);
			return rc;
		}
		cfg.api_key = key;
	}
	/* what the options leave out: the environment, then the file */
	osb_config_layer(&cfg, &o->cfgfile);
	/* what the daemon waits for itself (a code run's close) */
	if (!o->request_timeout_ms)
		o->request_timeout_ms =
			cfg.request_timeout_ms ? cfg.request_timeout_ms : 30000;
	if (cfg.api_key == o->cfgfile.api_key && o->cfgfile.key_exposed)
		log_warn("%s holds the API key and others may read it "
			 "(chmod 600 %s)",
			 o->cfgfile.path, o->cfgfile.path);
	/* while mounting, a server that is not there fails the mount at
	 * once (main() raises the budget for the mount's life) */
	cfg.max_retries = 1;
	rc = osb_client_new(&cfg, ret, &err);
	if (key) {
		explicit_bzero(key, strlen(key));
		free(key);
	}
	if (rc)
		snprintf(msg, msg_size, "%s", err.message);
	return rc;
}

static char **split_words(const char *s)
{
	size_t n = 0, cap = 8;
	char **v = calloc(cap, sizeof(char *));
	while (v && *s) {
		while (isspace((unsigned char)*s))
			s++;
		if (!*s)
			break;
		const char *start = s;
		while (*s && !isspace((unsigned char)*s))
			s++;
		if (n + 2 > cap) {
			char **g = realloc(v, cap * 2 * sizeof(char *));
			if (!g)
				break;
			v = g;
			cap *= 2;
		}
		v[n++] = strndup(start, (size_t)(s - start));
		v[n] = NULL;
	}
	return v;
}

static void free_words(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* Whether a create that failed so may have been done all the same: it
 * was sent, and no answer came (or a gateway's) */
static bool maybe_done(int rc, const struct osb_error *err)
{
	if (rc == -ENOMEM || rc == -EINVAL || rc == -ECONNREFUSED)
		return false;
	return err->status == 0 || err->status >= 500;
}

/*
 * A new sandbox from the options: from snapshot @snap_id when given (a
 * restore), else from snapshot= when given, else from the image; with
 * the labels @extra too (may be NULL). Sent once (osb_sandbox_create);
 * *@ret_unsure says, on a failure, that it may have made one all the
 * same (its answer was lost).
 */
static int create_sandbox(struct osbfs *fs, const char *snap_id,
			  const struct osb_kvlist *extra,
			  struct osb_sandbox_info *ret, bool *ret_unsure,
			  char *msg, size_t msg_size)
{
	struct osbfs_options *o = fs->opt;
	struct osb_create_params p = { 0 };
	struct osb_snapshot snap = { 0 };
	struct osb_kvlist md = { 0 };
	struct osb_error err;
	char *policy = NULL;
	int rc = 0;

	*ret_unsure = false;
	p.image = o->image;
	p.timeout_s = o->timeout_s;
	p.env = &o->env;
	p.cpu = o->cpu;
	p.memory = o->memory;
	char **ep = split_words(o->entrypoint);
	if (!ep || !ep[0]) {
		free_words(ep);
		snprintf(msg, msg_size, "the entrypoint is empty");
		return -EINVAL;
	}
	p.entrypoint = (const char *const *)ep;
	for (size_t i = 0; i < o->metadata.n; i++)
		osb_kvlist_add(&md, o->metadata.items[i].key,
			       o->metadata.items[i].value);
	if (o->name && !osb_kvlist_get(&md, "name"))
		osb_kvlist_add(&md, "name", o->name);
	for (size_t i = 0; extra && i < extra->n; i++)
		osb_kvlist_add(&md, extra->items[i].key, extra->items[i].value);
	p.metadata = &md;
	if (o->network_policy) {
		policy = slurp(o->network_policy, msg, msg_size);
		if (!policy)
			rc = -EINVAL;
		p.network_policy_json = policy;
	}
	if (!rc && snap_id) {
		/* the snapshot's files, not the image's */
		p.image = NULL;
		p.snapshot_id = snap_id;
	} else if (!rc && o->snapshot) {
		rc = fork_snapshot(fs, "snapshot=", o->snapshot, &snap, msg,
				   msg_size);
		p.snapshot_id = snap.id;
	}
	if (!rc) {
		rc = osb_sandbox_create(fs->client, &p, ret, &err);
		if (rc)
			snprintf(msg, msg_size, "cannot create a sandbox: %s",
				 err.message);
		*ret_unsure = rc && maybe_done(rc, &err);
	}
	if (!rc && snap_id)
		log_info("created sandbox %s from snapshot %s", ret->id,
			 snap_id);
	else if (!rc && snap.id)
		log_info("created sandbox %s from snapshot %s (%s)", ret->id,
			 o->snapshot, snap.id);
	else if (!rc)
		log_info("created sandbox %s (image %s)", ret->id, o->image);
	osb_snapshot_release(&snap);
	free(policy);
	free_words(ep);
	osb_kvlist_release(&md);
	return rc;
}

static const char *const live_states[] = { "Pending", "Running",  "Paused",
					   "Pausing", "Resuming", NULL };

/* Whether another sandbox of @l says it was restored from @s
 * (RESTORED_FROM): a restore's sandbox takes the place of its old one,
 * kept (restore_keeps=yes) or left by a daemon killed mid-restore. */
static bool superseded(const struct osb_sandbox_list *l,
		       const struct osb_sandbox_info *s)
{
	for (size_t i = 0; i < l->n; i++) {
		const char *from =
			osb_kvlist_get(&l->items[i].metadata, RESTORED_FROM);
		if (&l->items[i] != s && from && strcmp(from, s->id) == 0)
			return true;
	}
	return false;
}

/* The oldest live sandbox labelled @key=@value, if any, leaving out
 * those a restore superseded; with @ret_left, the one it says it
 * replaced, when listed (a restore that did not end: NULL if none). */
static int find_by_label(struct osbfs *fs, const char *key, const char *value,
			 char **ret_id, char **ret_left, size_t *ret_count,
			 char *msg, size_t msg_size)
{
	struct osb_kvlist md = { 0 };
	struct osb_sandbox_list l;
	struct osb_error err;
	struct osb_list_params p = { .states = live_states,
				     .metadata = &md,
				     .page_size = 200 };

	osb_kvlist_add(&md, key, value);
	int rc = osb_sandbox_list(fs->client, &p, &l, &err);
	osb_kvlist_release(&md);
	if (rc) {
		snprintf(msg, msg_size, "cannot list sandboxes: %s",
			 err.message);
		return rc;
	}
	*ret_id = NULL;
	*ret_count = l.n;
	const struct osb_sandbox_info *best = NULL;
	for (size_t i = 0; i < l.n; i++) {
		const struct osb_sandbox_info *s = &l.items[i];
		if (superseded(&l, s))
			continue;
		/* the first made: every racer sees it (it was made before
		 * the later one listed), so all agree on it */
		long long a = (long long)s->created.tv_sec * 1000000000LL +
			      s->created.tv_nsec;
		long long b =
			best ? (long long)best->created.tv_sec * 1000000000LL +
					best->created.tv_nsec :
			       0;
		if (!best || a < b || (a == b && strcmp(s->id, best->id) < 0))
			best = s;
	}
	if (best)
		*ret_id = strdup(best->id);
	const char *from =
		best ? osb_kvlist_get(&best->metadata, RESTORED_FROM) : NULL;
	for (size_t i = 0; ret_left && from && i < l.n; i++) {
		if (strcmp(l.items[i].id, from) == 0) {
			*ret_left = strdup(from);
			break;
		}
	}
	osb_sandbox_list_release(&l);
	return 0;
}

/* The oldest sandbox named NAME (or none) once every racer's shows. A
 * racer's sandbox shows in listings only once its create is done, and
 * createdAt is when it began: list again over a window as long as our
 * own create took (@took_ms, at least two seconds), until every racer is
 * visible to every other; then all agree on the oldest. */
static int oldest_settled(struct osbfs *fs, const char *key, const char *value,
			  long long took_ms, char **ret_id, char *msg,
			  size_t msg_size)
{
	long long until = mono_ms() + (took_ms < 2000 ? 2000 : took_ms);
	size_t count;
	int rc;

	*ret_id = NULL;
	for (;;) {
		free(*ret_id);
		*ret_id = NULL;
		rc = find_by_label(fs, key, value, ret_id, NULL, &count, msg,
				   msg_size);
		if (rc || mono_ms() >= until)
			return rc;
		mono_sleep_ms(250);
	}
}

/* Our create was sent and its answer lost (@msg says how): whether it
 * made one, the listing tells, as it tells a race; it is never sent
 * again. */
static int settle_lost(struct osbfs *fs, const char *key, const char *name,
		       long long took_ms, int create_rc, char **ret_id,
		       char *msg, size_t msg_size)
{
	char lost[1024];

	snprintf(lost, sizeof(lost), "%s", msg);
	log_info("%s: the answer was lost; looking for a sandbox labelled "
		 "%s=%s",
		 lost, key, name);
	int rc = oldest_settled(fs, key, name, took_ms, ret_id, msg, msg_size);
	if (rc) {
		char why[1200];
		snprintf(why, sizeof(why), "%s", msg);
		snprintf(msg, msg_size,
			 "%s; whether it made one is not known: %s", lost, why);
		return rc;
	}
	if (!*ret_id) {
		snprintf(msg, msg_size,
			 "%s; no sandbox labelled %s=%s is listed since: none "
			 "was made",
			 lost, key, name);
		return create_rc;
	}
	log_info("sandbox %s is labelled %s=%s: the create whose answer was "
		 "lost made it, or another mount did",
		 *ret_id, key, name);
	return 0;
}

/*
 * -o name=NAME: reconnect to the sandbox with that label, or make one.
 * Two mounts racing both create; each then lists again and keeps the
 * oldest, and the loser deletes its own, so both end on one sandbox.
 * *@ret_found: it was there before this mount asked (nothing was made).
 */
static int by_name(struct osbfs *fs, char **ret_id, bool *ret_found, char *msg,
		   size_t msg_size)
{
	struct osb_sandbox_info info;
	struct osb_error err;
	size_t count;
	char *id = NULL;
	bool unsure;

	/* the name is a valid label value (options.c) */
	char *left = NULL;
	int rc = find_by_label(fs, "name", fs->opt->name, &id, &left, &count,
			       msg, msg_size);
	*ret_found = id != NULL;
	if (!rc && left && !fs->opt->restore_keeps) {
		/* a restore whose daemon ended before it deleted the sandbox
		 * it left: done now */
		log_info("sandbox %s named %s was restored into %s: deleting "
			 "it, as that restore would have",
			 left, fs->opt->name, id);
		if (osb_sandbox_delete(fs->client, left, &err) != 0)
			log_warn("sandbox %s is left: %s", left, err.message);
	}
	free(left);
	if (rc || id) {
		*ret_id = id;
		return rc;
	}
	long long t0 = mono_ms();
	rc = create_sandbox(fs, NULL, NULL, &info, &unsure, msg, msg_size);
	if (rc)
		return unsure ? settle_lost(fs, "name", fs->opt->name,
					    mono_ms() - t0, rc, ret_id, msg,
					    msg_size) :
				rc;
	rc = oldest_settled(fs, "name", fs->opt->name, mono_ms() - t0, &id, msg,
			    msg_size);
	if (!rc && id && strcmp(id, info.id) != 0) {
		log_info("another mount made sandbox %s named %s first; "
			 "using it and deleting %s",
			 id, fs->opt->name, info.id);
		osb_sandbox_delete(fs->client, info.id, &err);
	} else {
		free(id);
		id = strdup(info.id);
	}
	osb_sandbox_info_release(&info);
	*ret_id = id;
	return id ? 0 : -ENOMEM;
}

/* A handle on running sandbox @id once its execd answers, the mounted
 * directory made if missing (it must be one). 0, or a negative errno
 * with @err filled. */
static int open_ready(struct osbfs *fs, const char *id,
		      struct osb_sandbox **ret, struct osb_error *err)
{
	const char *dir = fs->opt->dir;
	int rc = osb_sandbox_open(fs->client, id, ret, err);
	if (!rc)
		rc = osb_wait_ready(*ret, READY_WAIT_MS, err);
	if (rc)
		return rc;
	/* made only when missing: making an existing one chmods it, which
	 * a read-only one (/usr) refuses */
	struct osb_stat st;
	rc = osb_file_stat(*ret, dir, &st, err);
	if (rc == -ENOENT) {
		rc = osb_dir_make(*ret, dir, 0, NULL, NULL, err);
		if (!rc)
			rc = osb_file_stat(*ret, dir, &st, err);
	}
	if (rc)
		return rc;
	if (st.type != OSB_DIR) {
		snprintf(err->message, sizeof(err->message),
			 "%s is not a directory in the sandbox", dir);
		rc = -ENOTDIR;
	}
	osb_stat_release(&st);
	return rc;
}

int connect_sandbox(struct osbfs *fs, struct osb_sandbox_info *ret_info,
		    bool *ret_created, char *msg, size_t msg_size)
{
	struct osbfs_options *o = fs->opt;
	struct osb_sandbox_info info;
	struct osb_error err;
	char *id = NULL;
	bool created = false, found = false;
	int rc = 0;

	if (o->sandbox_id) {
		id = strdup(o->sandbox_id);
	} else if (o->name) {
		/* not deleted on a failure: another mount may use it */
		rc = by_name(fs, &id, &found, msg, msg_size);
	} else {
		bool unsure;
		rc = create_sandbox(fs, NULL, NULL, &info, &unsure, msg,
				    msg_size);
		if (unsure) {
			size_t n = strlen(msg);
			snprintf(msg + n, msg_size - n,
				 " (the answer was lost: a sandbox may have "
				 "been made all the same, which osb sandbox "
				 "list shows; with name= a mount settles this "
				 "itself)");
		}
		if (!rc) {
			id = strdup(info.id);
			created = true;
			osb_sandbox_info_release(&info);
		}
	}
	if (rc)
		return rc;
	if (!id)
		return -ENOMEM;

	rc = osb_sandbox_get(fs->client, id, &info, &err);
	if (rc) {
		if (rc == -ENOENT)
			snprintf(msg, msg_size,
				 "sandbox %s not found at %s (deleted, expired "
				 "or never made)",
				 id, osb_client_base_url(fs->client));
		else
			snprintf(msg, msg_size, "%s", err.message);
		free(id);
		return rc;
	}
	if (o->snapshot && found) {
		rc = fork_check_found(fs, &info, msg, msg_size);
		if (rc) {
			osb_sandbox_info_release(&info);
			free(id);
			return rc;
		}
	}
	if (strcasecmp(info.state, "Failed") == 0 ||
	    strcasecmp(info.state, "Terminated") == 0) {
		snprintf(msg, msg_size, "sandbox %s is %s%s%s%s%s", id,
			 info.state, info.reason ? " (" : "",
			 info.reason ? info.reason : "",
			 info.message ? "): " : (info.reason ? ")" : ""),
			 info.message ? info.message : "");
		osb_sandbox_info_release(&info);
		free(id);
		return -EIO;
	}
	if (strcasecmp(info.state, "Running") != 0 &&
	    strcasecmp(info.state, "Paused") != 0) {
		osb_sandbox_info_release(&info);
		rc = osb_sandbox_wait_running(
			fs->client, id, fs->opt->start_timeout_ms, &info, &err);
		if (rc) {
			snprintf(msg, msg_size, "%s%s", err.message,
				 rc == -ETIMEDOUT ? " (stuck before Running)" :
						    "");
			free(id);
			return rc;
		}
	}
	if (strcasecmp(info.state, "Paused") == 0) {
		rc = osb_sandbox_resume(fs->client, id, &err);
		if (!rc || rc == -EBUSY)
			rc = osb_sandbox_wait_running(fs->client, id,
						      fs->opt->start_timeout_ms,
						      NULL, &err);
		if (rc) {
			snprintf(msg, msg_size, "cannot resume sandbox %s: %s",
				 id, err.message);
			osb_sandbox_info_release(&info);
			free(id);
			return rc;
		}
		free(info.state);
		info.state = strdup("Running");
		log_info("resumed paused sandbox %s", id);
	}
	rc = open_ready(fs, id, &fs->sb, &err);
	if (rc) {
		snprintf(msg, msg_size, "sandbox %s: %s", id, err.message);
		if (created)
			osb_sandbox_delete(fs->client, id, NULL);
		osb_sandbox_info_release(&info);
		free(id);
		return rc;
	}
	*ret_info = info;
	*ret_created = created;
	free(id);
	return 0;
}

int connect_restored(struct osbfs *fs, const char *snap_id, char **ret_id,
		     char *msg, size_t msg_size)
{
	struct osb_kvlist extra = { 0 };
	struct osb_sandbox_info info;
	struct osb_sandbox *sb = NULL;
	struct osb_error err;
	unsigned char rnd[8];
	char token[2 * sizeof(rnd) + 1];
	char *id = NULL;
	bool unsure;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		snprintf(msg, msg_size,
			 "no random bytes for the restore's label");
		return -EIO;
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(token + 2 * i, 3, "%02x", rnd[i]);
	if (osb_kvlist_add(&extra, RESTORED_FROM, fs->sandbox_id) ||
	    osb_kvlist_add(&extra, RESTORE_TOKEN, token)) {
		osb_kvlist_release(&extra);
		snprintf(msg, msg_size, "out of memory");
		return -ENOMEM;
	}
	long long t0 = mono_ms();
	int rc = create_sandbox(fs, snap_id, &extra, &info, &unsure, msg,
				msg_size);
	osb_kvlist_release(&extra);
	if (!rc) {
		id = strdup(info.id);
		osb_sandbox_info_release(&info);
		if (!id)
			rc = -ENOMEM;
	} else if (unsure) {
		/* the label no other create carries tells whether it made
		 * one (never sent again) */
		rc = settle_lost(fs, RESTORE_TOKEN, token, mono_ms() - t0, rc,
				 &id, msg, msg_size);
	}
	if (rc)
		return rc;
	rc = osb_sandbox_wait_running(fs->client, id, fs->opt->start_timeout_ms,
				      NULL, &err);
	if (!rc)
		rc = open_ready(fs, id, &sb, &err);
	osb_sandbox_close(sb);
	if (rc) {
		snprintf(msg, msg_size,
			 "sandbox %s, made from snapshot %s: %s%s; deleted", id,
			 snap_id, err.message,
			 rc == -ETIMEDOUT ? " (start_timeout)" : "");
		if (osb_sandbox_delete(fs->client, id, &err) != 0)
			log_error("sandbox %s, made for a restore that "
				  "failed, is left: %s",
				  id, err.message);
		free(id);
		return rc;
	}
	*ret_id = id;
	return 0;
}

/*
 * osb.h - libosb: a C client for OpenSandbox's three HTTP APIs.
 *
 *   lifecycle  the sandbox server (/v1/sandboxes...): create, list, get,
 *              pause, resume, renew, delete, endpoints.
 *   execd      the daemon inside each sandbox: files, directories,
 *              commands, bash sessions, code contexts.
 *   egress     the network policy sidecar of a sandbox (/policy).
 *
 * Conventions
 *   Every call returns 0 or a negative errno and, when @err is not NULL,
 *   fills it with what went wrong: the HTTP status, the server's error code,
 *   and a message naming the method, the URL's path and the server's text.
 *   The API key never appears in a message. Output parameters are named
 *   ret_* and are written only on success. Strings handed in are copied;
 *   what comes back is owned by the caller and released with the matching
 *   *_release() or free() as each call says. Nothing here logs or exits.
 *
 * Threads
 *   One struct osb_client and any struct osb_sandbox made from it may be used
 *   by any number of threads at once. Connections are kept alive and reused
 *   through a pool of libcurl handles; no handle is used by two threads.
 *
 * Retries
 *   Idempotent calls (every GET, uploads of whole files, removals, mkdir,
 *   chmod, renew, endpoint lookups) are retried on transient failures:
 *   connection refused or reset, timeouts, 502/503/504, with capped
 *   exponential backoff and jitter, up to the configured budget. Other
 *   calls (create, move, commands, pause/resume, code runs) are retried only
 *   when the request is known not to have reached the server (connection
 *   refused, name resolution); move and pause/resume also check the
 *   outcome when an answer was lost, so a retry never duplicates an effect.
 *   The transport never sends a request of these twice either: each goes
 *   over a connection opened for it (libcurl silently resends a request
 *   whose reused keep-alive connection closed before any answer came, and
 *   it does so only on a reused connection). A lost answer to one of them
 *   is reported (-ECONNRESET, -ETIMEDOUT) and the effect may have happened.
 *   The cost is a connection set-up per such call; idempotent calls keep
 *   reusing connections.
 *
 * Wire quirks handled here, once (docs/SERVER.md describes each)
 *   - A ranged download at or past the end of a file (or of an empty file)
 *     answers 416: reported as end of file, 0 bytes (§5.5).
 *   - Errors other than "not found" arrive as 500 RUNTIME_ERROR with Go's
 *     error text: mapped to ENOTDIR, EISDIR, EEXIST, EACCES, EXDEV, ENOSPC,
 *     EROFS, ENOTEMPTY, ENAMETOOLONG... by the text (errors.c, one table;
 *     §7).
 *   - execd expands $NAME in every file path, with no escape: the file calls
 *     refuse a path holding '$' with -EINVAL; osb_path_is_safe() tells the
 *     caller beforehand, so it can take another route (a command) (§4).
 *   - Command output streams are raw "JSON\n\n" events, not SSE: parsed
 *     here, with the "error instead of execution_complete" rule turned into
 *     an exit code (§8.2, §8.5).
 *   - Background command log cursors are byte offsets (§8.9).
 *   - FileInfo's mode is octal digits read as a decimal number (644): turned
 *     into real mode bits both ways (§5.1).
 */
#ifndef OSB_H
#define OSB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Errors */

struct osb_error {
	int status;         /* HTTP status, 0 when no answer came */
	char code[64];      /* the server's error code, "" if none */
	char message[1024]; /* one line for people: what, where, why */
};

/* Clears @err (NULL-safe). */
void osb_error_clear(struct osb_error *err);

/* ------------------------------------------------------------------ */
/* Client and configuration */

struct osb_header {
	const char *name;
	const char *value;
};

struct osb_config {
	/* host[:port][/prefix]; "http://" or "https://" in front also picks
	 * the protocol. NULL = environment, else "localhost:8080". */
	const char *domain;
	const char *protocol;    /* "http" or "https"; NULL = http */
	const char *api_key;     /* NULL = none */
	const char *ca_file;     /* PEM bundle to trust for https */
	bool insecure;           /* accept any TLS certificate */
	long request_timeout_ms; /* per request; 0 = 30 s (the seed's default)
				  */
	long connect_timeout_ms; /* 0 = 10 s */
	int max_retries;         /* transient failures retried; <0 = 0, 0 = 5 */
	long retry_base_ms;      /* first backoff; 0 = 100 ms */
	long retry_max_ms;       /* backoff cap; 0 = 5 s */
	bool use_server_proxy;   /* reach execd through the lifecycle server */
	const char *execd_token; /* X-EXECD-ACCESS-TOKEN, if the user has one */
	const char *proxy;       /* HTTP proxy URL for every request, or NULL */
	const struct osb_header *headers; /* extra headers on every request */
	size_t n_headers;
};

/*
 * osb_config_from_env() - fill the fields of @cfg still NULL from the
 * environment: the domain from OPEN_SANDBOX_DOMAIN or OPENSANDBOX_DOMAIN,
 * the key from OPEN_SANDBOX_API_KEY or OPENSANDBOX_API_KEY (the official
 * SDKs' names, then the seed adapter's). The pointers refer to the
 * environment; copy them if the environment may change.
 */
void osb_config_from_env(struct osb_config *cfg);

/*
 * osb_read_key_file() - the API key stored in @path: its first line, with
 * surrounding white space removed. *ret_key is malloc'd. Returns 0,
 * -ENOENT, -EACCES, -EINVAL (empty) or -ENOMEM.
 */
int osb_read_key_file(const char *path, char **ret_key, struct osb_error *err);

/*
 * The settings file of the official OpenSandbox CLI (config.c):
 * ~/.opensandbox/config.toml, whose [connection] and [defaults] osb and
 * osbfs read too. Strings are malloc'd, NULL when the file does not set
 * them; osb_cfgfile_release() frees them (and wipes the key).
 */
struct osb_cfgfile {
	char *path;
	bool exists;      /* false: no file, every field unset */
	bool key_exposed; /* holds api_key, and others than its owner
			     may read it (warn, as ssh does) */
	char *api_key;    /* [connection] */
	char *domain;
	char *protocol;
	long request_timeout_s; /* 0 = not set */
	int use_server_proxy;   /* -1 = not set, 0, 1 */
	char *image;            /* [defaults] image of a new sandbox */
	char *timeout;          /* [defaults] its TTL as written ("10m",
				   "none"): see osb_duration_parse() */
};

/* $HOME/.opensandbox/config.toml into @buf. -ENOENT without $HOME. */
int osb_cfgfile_default_path(char *buf, size_t size);
/*
 * osb_cfgfile_load() - reads @path. A missing file is no error (exists is
 * false). The TOML the official CLI writes is understood: sections,
 * key = "string" | 'string' | integer | true | false, comments; anything
 * else, a known key of the wrong type, a key or section given twice
 * fail with -EINVAL and "PATH:LINE: what" in @err. Unknown keys and
 * sections are skipped. Release *ret with osb_cfgfile_release().
 */
int osb_cfgfile_load(const char *path, struct osb_cfgfile *ret,
		     struct osb_error *err);
/* The same for a file's @text (@path only names it in messages). */
int osb_cfgfile_parse(const char *path, const char *text,
		      struct osb_cfgfile *ret, struct osb_error *err);
void osb_cfgfile_release(struct osb_cfgfile *f);
/*
 * osb_cfgfile_init() - writes a commented template to @path (mode 0600,
 * its directory made 0700 if missing). -EEXIST unless @force.
 */
int osb_cfgfile_init(const char *path, bool force, struct osb_error *err);
/*
 * osb_cfgfile_set() - sets @name ("section.key") to @value in @path,
 * keeping every other line and comment: the key's line is replaced, or
 * the line is added after the template's commented one, at the end of
 * the section, or in a new section. Known keys take their type
 * (request_timeout an integer, use_server_proxy true/false); others a
 * boolean or integer if they look like one, else a string. A missing
 * file is made from the template, mode 0600; an existing one keeps its
 * mode. The file is replaced by a rename. -EINVAL for a bad name or
 * value, or a file that does not load.
 */
int osb_cfgfile_set(const char *path, const char *name, const char *value,
		    struct osb_error *err);
/*
 * osb_config_layer() - fills what @cfg leaves unset (NULL, 0, false) from
 * the environment (OPEN_SANDBOX_DOMAIN, _API_KEY, _PROTOCOL,
 * _REQUEST_TIMEOUT in seconds, _USE_SERVER_PROXY; and the OPENSANDBOX_*
 * spellings of the first two), then from @file (may be NULL): the
 * official CLI's order, flags > environment > file > defaults. The
 * pointers refer to the environment and to @file, which must outlive
 * @cfg's use.
 */
void osb_config_layer(struct osb_config *cfg, const struct osb_cfgfile *file);
/* "90", "90s", "10m", "1h30m" -> seconds; "none" -> 0. -EINVAL else. */
int osb_duration_parse(const char *s, long *ret_secs);

struct osb_client;

/*
 * osb_client_new() - a client for the server @cfg describes. Copies
 * everything it needs from @cfg. Does not connect. Free with
 * osb_client_free().
 */
int osb_client_new(const struct osb_config *cfg, struct osb_client **ret,
		   struct osb_error *err);
void osb_client_free(struct osb_client *c);

/* Changes how many times transient failures are retried (0 = none).
 * Not to be called while other threads use the client. */
void osb_client_set_retries(struct osb_client *c, int max_retries);
/* For the calling thread only: at most @max_retries retries per call
 * from now on (0 = one attempt: a quick question), whatever the client
 * says; -1 goes back to the client's setting. Returns the setting it
 * replaces, to be given back. */
int osb_thread_set_retries(int max_retries);

/* "http://localhost:8080": the base URL of the lifecycle API (no key). */
const char *osb_client_base_url(const struct osb_client *c);

/* Counters since the client was made, for tests and `info`. Bytes are
 * counted as they move (a transfer's progress can be watched from
 * another thread). Connections are kept alive and reused; a new one over
 * TLS resumes the session of an earlier one to the same host when it can
 * (one round trip less than a full handshake). */
struct osb_client_stats {
	uint64_t requests; /* HTTP requests sent, retries included */
	uint64_t retries;  /* of which retries */
	uint64_t failures; /* calls that returned an error */
	uint64_t bytes_up;
	uint64_t bytes_down;
	uint64_t connections;    /* new connections opened */
	uint64_t tls_handshakes; /* of which TLS handshakes done */
	uint64_t tls_resumed;    /* of which resumed sessions, or
				    OSB_STAT_UNKNOWN (a TLS library that does
				    not say) */
};
#define OSB_STAT_UNKNOWN UINT64_MAX
void osb_client_stats(struct osb_client *c, struct osb_client_stats *ret);

/*
 * Cancellation: a caller may set *@flag (from any thread) to make the
 * requests of the current thread stop at their next progress point with
 * -ECANCELED. NULL detaches. Per thread.
 */
void osb_cancel_flag_set(atomic_int *flag);

/*
 * Hooks around every HTTP exchange of a client (for a watchdog that looks
 * for requests that hang): @begin runs in the calling thread before the
 * request is sent, @progress whenever bytes moved since the last call
 * (about once a second at most while they do), @end when the exchange is
 * over; retries count as exchanges of their own. Each may be NULL. They
 * must be quick and must not call libosb. Set before the client is
 * shared between threads; NULL removes them.
 */
struct osb_hooks {
	void (*begin)(void *arg);
	void (*progress)(void *arg);
	void (*end)(void *arg);
	/* execd of sandbox @id was found at another address (or with other
	 * headers): @old_url, now @new_url (osb_sandbox_locate()) */
	void (*moved)(void *arg, const char *id, const char *old_url,
		      const char *new_url);
	void *arg;
};
void osb_client_set_hooks(struct osb_client *c, const struct osb_hooks *h);

/* One HTTP exchange, as it ended: @status 0 when no answer came (then
 * @error says why), @ms how long it took, @attempt 1 for the first try.
 * @path holds the path and query only: never a key or a header. */
typedef void (*osb_trace_fn)(void *arg, const char *method, const char *path,
			     int status, const char *error, long ms,
			     int attempt);
/* Calls @fn after every exchange (NULL: none). Set before other threads
 * use the client. */
void osb_client_set_trace(struct osb_client *c, osb_trace_fn fn, void *arg);
/* An exchange as one line for a log: "GET /path -> 200, 12 ms" (the
 * error instead of a status when no answer came; " (try N)" on a retry). */
void osb_trace_format(char *buf, size_t size, const char *method,
		      const char *path, int status, const char *error, long ms,
		      int attempt);

/* ------------------------------------------------------------------ */
/* Key/value lists (env, metadata, headers) */

struct osb_kv {
	char *key;
	char *value;
};

struct osb_kvlist {
	struct osb_kv *items;
	size_t n;
};

/* Appends a copy of key=value. 0 or -ENOMEM. */
int osb_kvlist_add(struct osb_kvlist *l, const char *key, const char *value);
/* Parses "KEY=VALUE" and appends it. -EINVAL if there is no '='. */
int osb_kvlist_add_pair(struct osb_kvlist *l, const char *pair);
const char *osb_kvlist_get(const struct osb_kvlist *l, const char *key);
void osb_kvlist_release(struct osb_kvlist *l);

/* ------------------------------------------------------------------ */
/* Lifecycle */

struct osb_sandbox_info {
	char *id;
	char *state;       /* Pending, Running, Paused, Failed, Terminated... */
	char *reason;      /* may be NULL */
	char *message;     /* may be NULL */
	char *image;       /* may be NULL */
	char *snapshot_id; /* the snapshot it was made from, or NULL */
	struct osb_kvlist metadata;
	char **entrypoint; /* NULL-terminated, may be NULL */
	time_t created_at;
	struct timespec created; /* created_at to the server's precision */
	time_t expires_at;       /* 0 = never expires */
};
void osb_sandbox_info_release(struct osb_sandbox_info *info);

struct osb_create_params {
	const char *image;       /* this, or: */
	const char *snapshot_id; /* a Ready snapshot's files (no image) */
	const char *const
		*entrypoint; /* NULL-terminated; NULL = tail -f /dev/null */
	long timeout_s;      /* TTL; <= 0 = never expires */
	const struct osb_kvlist *env;
	const struct osb_kvlist *metadata;
	const char *
		network_policy_json; /* NetworkPolicy object as JSON, or NULL */
	const char *cpu;    /* resource limits, e.g. "500m"; NULL = none */
	const char *memory; /* e.g. "512Mi" */
	/* a private registry's login for the image; both or neither */
	const char *image_username, *image_password;
	const struct osb_kvlist *extensions; /* server-defined, may be NULL */
	const char *volumes_json; /* a JSON array of volumes, or NULL */
	bool credential_proxy;    /* the credential vault's proxy (needs a
				     network policy) */
};

/* Creates a sandbox (not idempotent: never retried after it may have
 * reached the server). *ret holds its state as the server answered
 * (Running on Docker, maybe Pending on Kubernetes). */
int osb_sandbox_create(struct osb_client *c, const struct osb_create_params *p,
		       struct osb_sandbox_info *ret, struct osb_error *err);
int osb_sandbox_get(struct osb_client *c, const char *id,
		    struct osb_sandbox_info *ret, struct osb_error *err);

struct osb_list_params {
	const char *const *states;         /* NULL-terminated or NULL */
	const struct osb_kvlist *metadata; /* all must match */
	int page;                          /* 0 = 1 */
	int page_size;                     /* 0 = 20; max 200 */
};

struct osb_sandbox_list {
	struct osb_sandbox_info *items;
	size_t n;
	int page, page_size, total_pages;
	long total_items;
	bool has_next;
};
int osb_sandbox_list(struct osb_client *c, const struct osb_list_params *p,
		     struct osb_sandbox_list *ret, struct osb_error *err);
void osb_sandbox_list_release(struct osb_sandbox_list *l);

int osb_sandbox_delete(struct osb_client *c, const char *id,
		       struct osb_error *err);
/* pause/resume: -EBUSY (409) when the sandbox is not in the state the call
 * needs; after a lost answer, a 409 saying the work is done counts as 0. */
int osb_sandbox_pause(struct osb_client *c, const char *id,
		      struct osb_error *err);
int osb_sandbox_resume(struct osb_client *c, const char *id,
		       struct osb_error *err);
/* Sets the expiry to @expires_at (Unix time). *ret_expires_at (may be
 * NULL) gets what the server stored. -EBUSY for a sandbox without TTL. */
int osb_sandbox_renew(struct osb_client *c, const char *id, time_t expires_at,
		      time_t *ret_expires_at, struct osb_error *err);

/*
 * osb_sandbox_wait_running() - poll until @id is Running (then 0), or
 * until @timeout_ms passes (-ETIMEDOUT, the last state in the message),
 * or it is Failed/Terminated/gone (-EIO/-ENOENT). Writes *ret (may be
 * NULL) with the last answer on success.
 */
int osb_sandbox_wait_running(struct osb_client *c, const char *id,
			     long timeout_ms, struct osb_sandbox_info *ret,
			     struct osb_error *err);

/* ------------------------------------------------------------------ */
/* Snapshots (docs/SERVER.md §2.10) */

struct osb_snapshot {
	char *id;
	char *sandbox_id; /* its source; may be NULL */
	char *name;       /* may be NULL */
	char *state;      /* Creating, Ready, Failed, Deleting, or newer */
	char *reason;     /* may be NULL */
	char *message;    /* may be NULL */
	struct timespec created;
	struct timespec last_transition; /* zero when the server gave none */
};
void osb_snapshot_release(struct osb_snapshot *s);

/*
 * osb_snapshot_create() - asks for a snapshot of sandbox @sandbox_id,
 * named @name (NULL: none); *ret is the new snapshot, usually Creating:
 * poll osb_snapshot_get() until it is not. Not resent once it may have
 * arrived (a repeat makes a second snapshot): after a lost answer, list by
 * sandbox and name. -ENOENT: no such sandbox; -EBUSY: it is not Running;
 * -EOPNOTSUPP: the server has no snapshots (Docker).
 */
int osb_snapshot_create(struct osb_client *c, const char *sandbox_id,
			const char *name, struct osb_snapshot *ret,
			struct osb_error *err);
/* -ENOENT: no such snapshot. */
int osb_snapshot_get(struct osb_client *c, const char *id,
		     struct osb_snapshot *ret, struct osb_error *err);

struct osb_snapshot_list_params {
	const char *sandbox_id;    /* NULL: any */
	const char *name;          /* NULL: any */
	const char *const *states; /* NULL-terminated or NULL; any matches */
	int page;                  /* 0 = 1 */
	int page_size;             /* 0 = 20; max 200 */
};

/* A list answer's page: which, how many a page, how many in all. */
struct osb_page {
	int page, page_size, total_pages;
	long total_items;
	bool has_next;
};

struct osb_snapshot_list {
	struct osb_snapshot *items; /* newest first */
	size_t n;
	struct osb_page pg;
};
int osb_snapshot_list(struct osb_client *c,
		      const struct osb_snapshot_list_params *p,
		      struct osb_snapshot_list *ret, struct osb_error *err);
void osb_snapshot_list_release(struct osb_snapshot_list *l);

/* -EBUSY while it is Creating; after a lost answer, the repeat's 404
 * counts as done. */
int osb_snapshot_delete(struct osb_client *c, const char *id,
			struct osb_error *err);

/*
 * osb_snapshot_find() - the snapshot @ref names (snapshot_find.c): the
 * one whose id it is, else the one named @ref among all the key can see
 * (every page of the list; one being deleted does not count). -ENOENT:
 * neither; -ENOTUNIQ: several have that name (the message counts them,
 * names some ids, and asks for one). A request for the id, then, when
 * that is no id, one a page of 200 of that name.
 */
int osb_snapshot_find(struct osb_client *c, const char *ref,
		      struct osb_snapshot *ret, struct osb_error *err);
/*
 * osb_snapshot_wait() - asks for *@s again (updating it) while it is
 * Creating, with growing pauses, for at most @timeout_ms (< 0: no
 * limit). 0 once it is Ready; -EIO when it is in any other state (Failed:
 * the message has its reason); -ETIMEDOUT.
 */
int osb_snapshot_wait(struct osb_client *c, struct osb_snapshot *s,
		      long timeout_ms, struct osb_error *err);

struct osb_endpoint {
	char *url; /* scheme://endpoint, no trailing '/' */
	struct osb_kvlist headers;
};
void osb_endpoint_release(struct osb_endpoint *ep);
int osb_endpoint_get(struct osb_client *c, const char *id, int port,
		     struct osb_endpoint *ret, struct osb_error *err);

#define OSB_EXECD_PORT 44772
#define OSB_EGRESS_PORT 18080

/* ------------------------------------------------------------------ */
/* A sandbox's execd and egress */

struct osb_sandbox;

/*
 * osb_sandbox_open() - a handle on sandbox @id for execd and egress calls.
 * Looks up the execd endpoint now (so an unknown id fails here with
 * -ENOENT); the egress endpoint is looked up on first use. The handle
 * keeps a reference to @c: free it before the client.
 */
int osb_sandbox_open(struct osb_client *c, const char *id,
		     struct osb_sandbox **ret, struct osb_error *err);
/*
 * osb_sandbox_open_at() - the same on an execd endpoint known already
 * (one osb_sandbox_execd_endpoint() gave earlier, kept by the caller):
 * asks nothing, so an unknown id or a stale endpoint only shows at the
 * first call. A call whose connection is refused there looks the
 * endpoint up again before it tries again (osb_sandbox_locate()).
 */
int osb_sandbox_open_at(struct osb_client *c, const char *id,
			const struct osb_endpoint *execd,
			struct osb_sandbox **ret);
/* A copy of execd's endpoint in use, its headers included (they may
 * hold an access token: a secret). 0 or -ENOMEM. */
int osb_sandbox_execd_endpoint(struct osb_sandbox *sb,
			       struct osb_endpoint *ret);
/* Whether two endpoints are the same address with the same headers. */
bool osb_endpoint_same(const struct osb_endpoint *a,
		       const struct osb_endpoint *b);
void osb_sandbox_close(struct osb_sandbox *sb);
const char *osb_sandbox_id(const struct osb_sandbox *sb);
/* A copy of the execd base URL in use (for `info`; carries no secret):
 * malloc'd, NULL when out of memory. Another thread may move it
 * meanwhile (osb_sandbox_locate()), so no pointer into the handle is
 * handed out. */
char *osb_sandbox_execd_url(struct osb_sandbox *sb);
/*
 * osb_sandbox_switch() - the handle now names sandbox @id: its execd
 * endpoint is looked up (one request), then every later call of any
 * thread goes there; calls in flight end where they were sent. The
 * strings osb_sandbox_id() gave before stay valid until the close. 0,
 * or a negative errno (the handle unchanged) with @err filled.
 */
int osb_sandbox_switch(struct osb_sandbox *sb, const char *id,
		       struct osb_error *err);
/* Looks the endpoints up again (after a restart of the sandbox). */
int osb_sandbox_refresh(struct osb_sandbox *sb, struct osb_error *err);
/*
 * osb_sandbox_locate() - asks the lifecycle server where execd is now
 * (one GET .../endpoints/44772, not retried) and sends every later call
 * there: a restart of the sandbox or of its host may give execd another
 * address. Calls in flight go on where they were sent; their retries go
 * to the new address (an execd call whose connection is refused asks this
 * itself before it tries again). Asks at most once per
 * OSB_LOCATE_EVERY_MS per handle: a call sooner asks nothing and returns
 * 0. Returns 1 when the address or its headers changed, 0 when not, or a
 * negative errno. Safe to call from any thread.
 */
#define OSB_LOCATE_EVERY_MS 1000
int osb_sandbox_locate(struct osb_sandbox *sb, struct osb_error *err);
/* GET /ping: 0 when execd answers. */
int osb_ping(struct osb_sandbox *sb, struct osb_error *err);
/* Polls /ping until it answers or @timeout_ms passes (-ETIMEDOUT). */
int osb_wait_ready(struct osb_sandbox *sb, long timeout_ms,
		   struct osb_error *err);

/* What execd's GET /metrics says of the sandbox's machine (execd takes
 * about a second to answer: it samples the CPU for one). */
struct osb_metrics {
	double cpu_count;     /* cores */
	double cpu_used_pct;  /* 0..100 */
	double mem_total_mib; /* MiB */
	double mem_used_mib;
	int64_t timestamp_ms; /* when sampled, Unix milliseconds */
};
/* GET /metrics (one request, retried as a GET). -EPROTO for an answer
 * without these five numbers. */
int osb_metrics_get(struct osb_sandbox *sb, struct osb_metrics *ret,
		    struct osb_error *err);
/* One sample of a watch, or (@m NULL) the error execd sent instead of
 * one. A non-zero return ends the watch with that value. */
typedef int (*osb_metrics_fn)(void *arg, const struct osb_metrics *m,
			      const char *error);
/* GET /metrics/watch: execd sends a sample a second, a JSON object a line
 * ("data: " before it is taken too), until the connection ends: returns
 * 0 when the server ends it, @fn's value when @fn ends it, else a
 * negative errno (-EPROTO for a line that is not a sample). */
int osb_metrics_watch(struct osb_sandbox *sb, osb_metrics_fn fn, void *arg,
		      struct osb_error *err);

/* ------------------------------------------------------------------ */
/* Files */

enum osb_ftype {
	OSB_FILE = 1,
	OSB_DIR,
	OSB_SYMLINK,
	OSB_OTHER,
};

struct osb_stat {
	char *path; /* absolute, as the server returned it */
	enum osb_ftype type;
	int64_t size; /* symlink: the length of its target */
	mode_t mode;  /* permission bits only (0644) */
	struct timespec mtime;
	struct timespec ctime; /* execd's created_at is the ctime */
	const char *owner;     /* names in the sandbox, "" if unknown; */
	const char *group;     /* both live in path's allocation */
};
/* Frees path (and with it owner and group). */
void osb_stat_release(struct osb_stat *st);
void osb_stat_array_free(struct osb_stat *sts, size_t n);

/*
 * true when @path can be given to the file calls: absolute, free of '$'
 * (execd would expand it), of NUL, and valid UTF-8. Other paths must be
 * reached with commands (see osb_shell_quote()).
 */
bool osb_path_is_safe(const char *path);
/* true when @s is valid UTF-8 (a name that can cross the JSON APIs). */
bool osb_utf8_valid(const char *s, size_t len);
/*
 * osb_escape() - @len bytes of @s (a name or a message from a sandbox or
 * a server) as text fit for one log line or a terminal: printable UTF-8
 * as it is; a backslash as \\, a newline as \n, a carriage return as
 * \r, a tab as \t; every byte of any other control (C0, DEL, C1), of a
 * line separator or bidirectional control, and of invalid UTF-8 as
 * \xNN; U+FFFD (execd's stand-in for bytes of no UTF-8) as \ufffd. So
 * no escape sequence reaches a terminal, no line is forged, and
 * different texts stay different. malloc'd, NULL on ENOMEM.
 */
char *osb_escape(const char *s, size_t len);

/* lstat of one path (symlinks are not followed). -ENOENT if missing. */
int osb_file_stat(struct osb_sandbox *sb, const char *path,
		  struct osb_stat *ret, struct osb_error *err);

/*
 * osb_dir_list() - the entries of directory @path, @depth levels deep
 * (1 = children only), sorted by name within each directory, depth-first.
 * *ret_entries is an array of *ret_n (free with osb_stat_array_free()).
 * -ENOENT, -ENOTDIR (a file, or a symlink: execd refuses those).
 */
int osb_dir_list(struct osb_sandbox *sb, const char *path, int depth,
		 struct osb_stat **ret_entries, size_t *ret_n,
		 struct osb_error *err);
/*
 * osb_dir_walk() - the same, but the answer is cut once @max entries came
 * (0: never), so that a listing of a whole subtree costs at most that
 * much; *ret_cut (may be NULL) says whether it was. Entries come depth
 * first, so when it is cut, every directory the walk had left behind is
 * complete; the ones on the way to the last entry are not.
 */
int osb_dir_walk(struct osb_sandbox *sb, const char *path, int depth,
		 size_t max, struct osb_stat **ret_entries, size_t *ret_n,
		 bool *ret_cut, struct osb_error *err);

/* Data sink for downloads: return 0 to go on, a negative errno to stop. */
typedef int (*osb_sink_fn)(void *arg, const void *data, size_t len);

/*
 * osb_file_download() - bytes [@offset, @offset + @length) of @path (a
 * symlink is followed), streamed to @sink as they arrive; @length < 0 means
 * to the end. An offset at or past the end gives 0 bytes (not an error).
 * A broken connection is resumed from the last byte received, so @sink
 * never sees a byte twice. *ret_size (may be NULL) gets the file's total
 * size when the server said it. Memory use does not depend on the size.
 *
 * The bytes come from one version of the file: each answer (the first
 * part, and each resumed part) states the file's total size, and a part
 * whose size differs from the first one's fails the call with -ESTALE
 * before any of its bytes reach @sink (what @sink got so far and the rest
 * would be of two versions). A ranged answer carries no time stamp: a
 * replacement of the same size is not seen here (compare osb_file_stat()'s
 * size and mtime before and after, if that matters).
 */
int osb_file_download(struct osb_sandbox *sb, const char *path, int64_t offset,
		      int64_t length, osb_sink_fn sink, void *arg,
		      int64_t *ret_size, struct osb_error *err);

/* What osb_file_download_sized() checks the parts' sizes against. */
#define OSB_SIZE_FIRST (-1) /* the first part's (osb_file_download()) */
#define OSB_SIZE_GROWS (-2) /* a file only appended to: never smaller */

/*
 * osb_file_download_sized() - osb_file_download() for a caller that knows
 * which version it wants: @size >= 0 is the file's size in that version,
 * and every part, the first one too, must state it (-ESTALE otherwise,
 * also for an answer that says @offset is past the end). Or @size is
 * OSB_SIZE_FIRST, or OSB_SIZE_GROWS for a file that is only ever appended
 * to (a log), whose parts may see it grow but not shrink.
 */
int osb_file_download_sized(struct osb_sandbox *sb, const char *path,
			    int64_t offset, int64_t length, int64_t size,
			    osb_sink_fn sink, void *arg, int64_t *ret_size,
			    struct osb_error *err);
/* The same into @fd at its current position (write(2)); *ret_bytes gets
 * the count written. */
int osb_file_download_fd(struct osb_sandbox *sb, const char *path,
			 int64_t offset, int64_t length, int fd,
			 int64_t *ret_bytes, struct osb_error *err);

/* One file of an upload: the bytes come from @data or from @fd (read with
 * pread from @fd_offset, @size bytes). */
struct osb_upload {
	const char *path; /* where it goes in the sandbox */
	const void *data; /* or NULL to read from fd */
	int fd;
	int64_t fd_offset;
	int64_t size;
	mode_t mode;       /* 0 = a new file gets execd's default */
	const char *owner; /* NULL = execd's user (root) */
	const char *group;
};

/*
 * osb_file_upload() - writes whole files (creating parents; truncating
 * in place) in one multipart request, streamed: memory use does not
 * depend on the sizes. Retried (it is idempotent). Parent directories are
 * created by execd. -EAGAIN if a source fd got shorter than its @size
 * while it was being sent (the caller decides what to send instead).
 */
int osb_file_upload(struct osb_sandbox *sb, const struct osb_upload *files,
		    size_t n, struct osb_error *err);

/* A regular file of a tar archive (osb_tar_add()). */
struct osb_tar_member {
	const char *path; /* its sandbox path (absolute) */
	int fd;           /* its bytes, read with pread from 0 */
	int64_t size;
	mode_t mode; /* all of 07777: special bits too */
	struct timespec mtime;
	struct timespec atime; /* tv_nsec UTIME_OMIT: not in the archive */
	const char *owner;     /* NULL = root; a name, or a number (an
				  owner the sandbox has no name for) */
	const char *group;
};

/*
 * osb_tar_add() - appends @m to the POSIX (pax) tar archive being written
 * to @out: its path, times to the nanosecond and owner names in a pax
 * header, whatever their length, then its bytes. -EAGAIN if @m's fd gave
 * fewer than size bytes (the archive is then unusable).
 * osb_tar_finish() - ends the archive. Both return 0 or -errno.
 * Unpacked with `tar -xpf ARCHIVE -C /` in the sandbox, many small files
 * cost one upload and one command.
 */
int osb_tar_add(int out, const struct osb_tar_member *m);
int osb_tar_finish(int out);

/* A member of a tar archive read with osb_tar_next() (untar.c). */
struct osb_tar_entry {
	char *path;            /* as the archive names it (pax path first);
				  untrusted: a name, never used as a path */
	char type;             /* '0' a regular file, '5' a directory, ... */
	int64_t size;          /* of its data (0 for all but files) */
	struct timespec mtime; /* to the nanosecond from a pax header */
	struct timespec ctime; /* from a pax header; {0, 0} if none */
	int64_t data_off;      /* where its data starts in the archive */
};
/*
 * osb_tar_next() - reads the member at *pos of the archive in @fd (of
 * @end bytes: what it says is checked against that) and moves *pos past
 * its data. 1: @e is a member (release it); 0: the archive ended;
 * -EINVAL: not a tar archive, or damaged (a checksum, a length, a pax
 * record that does not add up); -errno.
 */
int osb_tar_next(int fd, int64_t *pos, int64_t end, struct osb_tar_entry *e);
void osb_tar_entry_release(struct osb_tar_entry *e);

/* A path with the mode (0 = leave it, or execd's default for a new
 * one) and owner (NULL = execd's user, root) it is to have. */
struct osb_perm {
	const char *path;
	mode_t mode;
	const char *owner;
	const char *group;
};

/* mkdir -p @path, with @mode (0 = default) on the leaf. No EEXIST. */
int osb_dir_make(struct osb_sandbox *sb, const char *path, mode_t mode,
		 const char *owner, const char *group, struct osb_error *err);
/* mkdir -p of each of @n paths in one request, each leaf given its mode
 * and owner (existing directories too). No EEXIST. */
int osb_dirs_make(struct osb_sandbox *sb, const struct osb_perm *dirs, size_t n,
		  struct osb_error *err);
/* Removes files (not directories: -EISDIR). Missing files are no error. */
int osb_files_remove(struct osb_sandbox *sb, const char *const *paths, size_t n,
		     struct osb_error *err);
/* rm -rf of each path (directories, files, symlinks unfollowed).
 * Missing paths are no error. Never give it "/". */
int osb_dirs_remove(struct osb_sandbox *sb, const char *const *paths, size_t n,
		    struct osb_error *err);

struct osb_move {
	const char *src;
	const char *dest;
};
/* rename(2) each pair in order; -EEXIST if a dest exists, -ENOENT if a src
 * is missing. execd creates missing parents of dest. */
int osb_file_move(struct osb_sandbox *sb, const struct osb_move *moves,
		  size_t n, struct osb_error *err);

/* chmod @mode (0 = unchanged) and chown to @owner/@group (names; NULL =
 * execd's user: pass the current owner to keep it). Follows symlinks. */
int osb_file_chmod(struct osb_sandbox *sb, const char *path, mode_t mode,
		   const char *owner, const char *group, struct osb_error *err);

/* Files under @dir whose base name matches the glob @pattern ("**" for
 * all), recursively. */
int osb_file_search(struct osb_sandbox *sb, const char *dir,
		    const char *pattern, struct osb_stat **ret_entries,
		    size_t *ret_n, struct osb_error *err);

/* Replaces every @old with @new in the file @path; *ret_count (may be
 * NULL) gets the count replaced. */
int osb_file_replace(struct osb_sandbox *sb, const char *path, const char *old,
		     const char *new_text, long *ret_count,
		     struct osb_error *err);

/* ------------------------------------------------------------------ */
/* Streams of events (commands, sessions, code) */

enum osb_event_type {
	OSB_EV_INIT = 1,
	OSB_EV_STDOUT,
	OSB_EV_STDERR,
	OSB_EV_RESULT,
	OSB_EV_ERROR,
	OSB_EV_COMPLETE,
	OSB_EV_STATUS,
	OSB_EV_EXECUTION_COUNT,
	OSB_EV_PING,
	OSB_EV_OTHER,
};

struct osb_event {
	enum osb_event_type type;
	const char *type_name; /* as on the wire */
	const char *text;      /* init: the id; stdout/stderr: one line
				  without its terminator ("\n" for an empty
				  line); status: the status */
	long execution_count;
	long execution_time_ms;
	const char *results_json; /* result: the MIME bundle as JSON */
	const char *result_text;  /* result: its "text" member, or NULL */
	const char *ename;        /* error */
	const char *evalue;
	const char *const *traceback; /* NULL-terminated, may be NULL */
};

/* Called for each event; the event lives only during the call. Return 0
 * to go on, a negative errno to stop the stream. */
typedef int (*osb_event_fn)(void *arg, const struct osb_event *ev);

/* ------------------------------------------------------------------ */
/* Commands */

struct osb_command_opts {
	const char *cwd; /* NULL = execd's working directory */
	long timeout_ms; /* 0 = none */
	int uid, gid;    /* -1 = execd's; gid needs uid */
	const struct osb_kvlist *envs;
	bool no_follow; /* osb_command_run(): a stream that breaks ends the
			   call, the command is not followed to its end */
	/* The command guards itself against running twice (it claims its
	 * work in the sandbox first, and a second copy does nothing): its
	 * request may then go over a reused connection, over which libcurl
	 * may send it again by itself when the connection turns out dead.
	 * Without it, a command gets a new connection of its own. */
	bool resend_safe;
	/* osb_command_run(): stop reading the stream after this long
	 * (-ETIMEDOUT; the command runs on); 0 = no limit */
	long stream_max_ms;
};
/* Sets the defaults: no cwd, no timeout, uid/gid -1, no envs, follow. */
void osb_command_opts_init(struct osb_command_opts *o);

#define OSB_ID_MAX 96

/*
 * osb_command_run() - runs @cmd with bash -c in the foreground; every
 * event goes to @fn (may be NULL) as it arrives. Returns when the command
 * ended, with *ret_exit_code (may be NULL) = its exit status, or -1 when a
 * signal ended it; ret_id (may be NULL, OSB_ID_MAX bytes) gets the
 * command's id, on failure too once it is known. Not retried once sent.
 * A stream that breaks after the command started is followed by the
 * command's status to its end, unless @o says no_follow.
 */
int osb_command_run(struct osb_sandbox *sb, const char *cmd,
		    const struct osb_command_opts *o, osb_event_fn fn,
		    void *arg, int *ret_exit_code, char *ret_id,
		    struct osb_error *err);

/*
 * osb_command_capture() - osb_command_run() collecting stdout and stderr
 * (lines joined with '\n', up to @max bytes each; more is an -EFBIG
 * error). *ret_out / *ret_errout (may be NULL) are malloc'd. When the
 * connection broke after the command started, it is followed to its end
 * but the output is incomplete: -ECONNRESET (the command did run).
 */
int osb_command_capture(struct osb_sandbox *sb, const char *cmd,
			const struct osb_command_opts *o, size_t max,
			char **ret_out, char **ret_errout, int *ret_exit_code,
			struct osb_error *err);

/* Starts @cmd in the background; ret_id (OSB_ID_MAX bytes) gets its id. */
int osb_command_start(struct osb_sandbox *sb, const char *cmd,
		      const struct osb_command_opts *o, char *ret_id,
		      struct osb_error *err);

struct osb_command_status {
	char *id;
	char *content; /* the command */
	bool running;
	bool exited;   /* exit_code valid */
	int exit_code; /* -1 for a signal */
	char *error;   /* "exit status 3", or NULL */
	struct timespec started_at;
	struct timespec finished_at; /* zero while running */
};
void osb_command_status_release(struct osb_command_status *st);
int osb_command_status(struct osb_sandbox *sb, const char *id,
		       struct osb_command_status *ret, struct osb_error *err);

/* Combined output of a background command from byte @cursor on, to @sink;
 * *ret_next (may be NULL) = the cursor for the next call. */
int osb_command_logs(struct osb_sandbox *sb, const char *id, int64_t cursor,
		     osb_sink_fn sink, void *arg, int64_t *ret_next,
		     struct osb_error *err);

/* SIGTERM then SIGKILL to a running command's process group. -ESRCH if
 * it is not running, -ENOENT if unknown. */
int osb_command_interrupt(struct osb_sandbox *sb, const char *id,
			  struct osb_error *err);

/* ------------------------------------------------------------------ */
/* Bash sessions */

int osb_session_create(struct osb_sandbox *sb, const char *cwd, char *ret_id,
		       struct osb_error *err);
/* Runs @cmd in session @id (stdout and stderr come merged as stdout
 * events). *ret_exit_code as osb_command_run(). */
int osb_session_run(struct osb_sandbox *sb, const char *id, const char *cmd,
		    const char *cwd, long timeout_ms, osb_event_fn fn,
		    void *arg, int *ret_exit_code, struct osb_error *err);
int osb_session_delete(struct osb_sandbox *sb, const char *id,
		       struct osb_error *err);

/* ------------------------------------------------------------------ */
/* Code contexts */

struct osb_code_context {
	char *id;
	char *language;
	char *cwd; /* may be NULL */
};
void osb_code_context_release(struct osb_code_context *ctx);
void osb_code_context_array_free(struct osb_code_context *a, size_t n);

int osb_code_context_create(struct osb_sandbox *sb, const char *language,
			    const char *cwd, struct osb_code_context *ret,
			    struct osb_error *err);
/* @language NULL = all. */
int osb_code_context_list(struct osb_sandbox *sb, const char *language,
			  struct osb_code_context **ret, size_t *ret_n,
			  struct osb_error *err);
int osb_code_context_delete(struct osb_sandbox *sb, const char *id,
			    struct osb_error *err);
/*
 * osb_code_run() - runs @code in context @context_id (NULL = the
 * language's default context). Events (stdout, stderr, result, error,
 * execution_count...) go to @fn. *ret_failed (may be NULL) is true when
 * the code raised an error.
 */
int osb_code_run(struct osb_sandbox *sb, const char *context_id,
		 const char *language, const char *code, osb_event_fn fn,
		 void *arg, bool *ret_failed, struct osb_error *err);
/* Interrupts what runs in a context. */
int osb_code_interrupt(struct osb_sandbox *sb, const char *context_id,
		       struct osb_error *err);

/* ------------------------------------------------------------------ */
/* Egress policy */

/* The policy as the sidecar reports it (JSON, malloc'd). -ENOENT when
 * the sandbox has no egress sidecar (created without a network policy). */
int osb_egress_get(struct osb_sandbox *sb, char **ret_json,
		   struct osb_error *err);
/* Merges @rules_json (a JSON array of {"action","target"}) into the
 * policy: these rules first, then the old ones for other targets. */
int osb_egress_patch(struct osb_sandbox *sb, const char *rules_json,
		     struct osb_error *err);
/* Merges one rule: @action "allow" or "deny" for @target (a host name,
 * "*.domain", an IP or a CIDR). */
int osb_egress_rule(struct osb_sandbox *sb, const char *action,
		    const char *target, struct osb_error *err);
/* Removes the rules for @targets. */
int osb_egress_delete(struct osb_sandbox *sb, const char *const *targets,
		      size_t n, struct osb_error *err);
/* Replaces the whole policy with @policy_json: {"defaultAction":
 * "allow"|"deny","egress":[rules]}, or osb_egress_get()'s answer (which
 * holds one under "policy"), so what was read can be written back.
 * -EINVAL for anything else. */
int osb_egress_set(struct osb_sandbox *sb, const char *policy_json,
		   struct osb_error *err);
/* Sets the action for hosts no rule names, keeping the rules (a read and
 * a replace: a change made between the two by another client is lost). */
int osb_egress_default(struct osb_sandbox *sb, const char *action,
		       struct osb_error *err);

/* ------------------------------------------------------------------ */
/* Helpers */

/* The errno an API answer means: HTTP @status, the API's error @code,
 * its @message (Go or coreutils error text is matched: "no such file or
 * directory", "file exists", ...). 0 for a 2xx status. */
int osb_errno_from_http(int status, const char *code, const char *message);

/* Writes all of @data to @fd (retrying short writes). 0 or -errno. */
int osb_write_all(int fd, const void *data, size_t len);

/* @s quoted for bash as one word ('...' with '\'' for quotes). malloc'd,
 * NULL on ENOMEM. */
char *osb_shell_quote(const char *s);

/* Unix time to/from the RFC 3339 forms the servers use. */
int osb_time_parse(const char *s, struct timespec *ret);
void osb_time_format(time_t t, char *buf, size_t size); /* ...Z */

#ifdef __cplusplus
}
#endif

#endif /* OSB_H */

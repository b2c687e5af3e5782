/*
 * osb_i.h - libosb's internal declarations, shared by its modules.
 *
 * Nothing here is part of the public API (osb.h). The modules:
 *   client.c     the client and sandbox handles, configuration, the pool
 *   http.c       one HTTP exchange with retries (libcurl lives here)
 *   share.c      the TLS sessions and DNS the pool's handles share; the
 *                count of connections and handshakes
 *   errors.c     HTTP status / error text / curl code -> errno, one table
 *   json.c       every JSON shape of the APIs (cJSON lives here)
 *   stream.c     the "JSON\n\n" event stream of commands, sessions, code
 *   lifecycle.c  /v1/sandboxes...
 *   files.c      /files and /directories
 *   commands.c   /command, /session
 *   code.c       /code
 *   egress.c     /policy
 *   util.c       kv lists, time, quoting, UTF-8, buffers
 */
#ifndef OSB_I_H
#define OSB_I_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "osb.h"

/* Caps on what is kept in memory from the network, in one place. */
#define OSB_JSON_BODY_MAX (256u << 20) /* a JSON answer (big listings) */
#define OSB_JSON_ELEM_MAX (64u << 10)  /* one entry of a listing */
#define OSB_ERROR_BODY_MAX (64u << 10) /* an error answer, kept for text */
#define OSB_EVENT_LINE_MAX (32u << 20) /* one event of a stream */
#define OSB_POOL_IDLE_MAX 64           /* idle connections kept */
/* a file transfer slower than this over request_timeout has stalled (a
 * server that trickles bytes would otherwise hold a reader for ever) */
#define OSB_BULK_MIN_RATE 1024L        /* bytes a second */
#define OSB_BULK_RECV_BUF (512L << 10) /* libcurl's buffers for file */
#define OSB_BULK_SEND_BUF (2L << 20)   /* contents (http.c) */
#define OSB_SHARE_LOCKS 16             /* > CURL_LOCK_DATA_LAST (share.c) */
#define OSB_HANDLE_CONNS_MAX                                                   \
	2 /* idle connections of one handle:                                   \
	     one per API host it talks to */

/* ---- util.c ---- */

struct buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max; /* 0 = no limit */
};

/* Appends; -EFBIG past b->max, -ENOMEM. data stays NUL-terminated. */
int buf_append(struct buf *b, const void *data, size_t len);
int buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void buf_release(struct buf *b);
/* Takes the data out (malloc'd, NUL-terminated; "" if empty). */
char *buf_steal(struct buf *b);

/* Percent-encodes @s for a query value (everything but unreserved). */
int url_encode(struct buf *b, const char *s);
/* Appends "name=value" with '&' or '?' before it. */
int query_add(struct buf *q, const char *name, const char *value);

void osb_error_set(struct osb_error *err, int status, const char *code,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
char *xstrdup_or_null(const char *s);
long long now_ms(void); /* CLOCK_MONOTONIC */
void sleep_ms(long ms);

/* ---- errors.c ---- */

/* The errno for a libcurl failure code (an int CURLcode). */
int osb_errno_from_curl(int curl_code);

/* ---- client.c ---- */

struct osb_client {
	char *base_url; /* scheme://domain */
	char *scheme;   /* "http" / "https" */
	char *domain;
	char *api_key;
	char *ca_file;
	bool insecure;
	long request_timeout_ms;
	long connect_timeout_ms;
	int max_retries;
	long retry_base_ms;
	long retry_max_ms;
	bool use_server_proxy;
	char *execd_token;
	char *proxy;
	struct osb_kvlist headers;
	struct osb_hooks hooks;
	osb_trace_fn trace;
	void *trace_arg;

	pthread_mutex_t pool_lock; /* guards pool, npool */
	void *pool[OSB_POOL_IDLE_MAX];
	size_t npool;

	/* the curl share of the handles (share.c), a lock per kind of data
	 * it holds (curl_lock_data) */
	void *share;
	pthread_mutex_t share_lock[OSB_SHARE_LOCKS];
	bool tls_probe; /* the TLS backend can tell a resumed session */

	atomic_uint_fast64_t n_requests, n_retries, n_failures;
	atomic_uint_fast64_t n_bytes_up, n_bytes_down;
	atomic_uint_fast64_t n_connections, n_tls_handshakes, n_tls_resumed;
	atomic_bool tls_unknown; /* a handshake whose resumption is unknown */
};

struct osb_sandbox {
	struct osb_client *c;
	/* the sandbox's id: moved by osb_sandbox_switch(), read by any
	 * thread without the lock; the ids it had are kept until the close,
	 * so a pointer read once stays valid */
	char *_Atomic id;
	char **old_ids; /* guarded by lock */
	size_t n_old_ids;
	pthread_mutex_t lock; /* guards the endpoints below */
	struct osb_endpoint execd;
	unsigned execd_gen; /* moves on when execd's endpoint changes */
	struct osb_endpoint egress;
	bool have_egress;
	atomic_llong located_ms; /* the last osb_sandbox_locate() asking */
};

/* Copies of the execd/egress base URL and headers, for one call. */
struct target {
	char *base;
	struct osb_kvlist headers;
};
int sandbox_egress_target(struct osb_sandbox *sb, struct target *ret,
			  struct osb_error *err);
void target_release(struct target *t);
struct http_request;
struct http_response;
/* http_call() on the sandbox's execd (or egress) endpoint: fills
 * rq->base and rq->headers. */
int execd_call(struct osb_sandbox *sb, struct http_request *rq,
	       struct http_response *rs, struct osb_error *err);
int egress_call(struct osb_sandbox *sb, struct http_request *rq,
		struct http_response *rs, struct osb_error *err);

/* ---- share.c ---- */

/* What a transfer saw of its connection while the answer came. */
struct conn_seen {
	bool answered; /* a header came */
	int resumed;   /* its TLS session was resumed: 1, 0, -1 unknown */
};
/* 0 or -ENOMEM; share_release() undoes even a failed one. */
int share_init(struct osb_client *c);
void share_release(struct osb_client *c);
/* The handle's arguments are CURL *. */
void share_attach(struct osb_client *c, void *h);
void share_observe(struct osb_client *c, void *h, struct conn_seen *s);
void share_count(struct osb_client *c, void *h, const char *url,
		 const struct conn_seen *s);

/* ---- http.c ---- */

enum http_retry {
	HTTP_RETRY_IDEMPOTENT,  /* any transient failure is retried */
	HTTP_RETRY_UNSENT,      /* only failures before the request left;
				   sent over a new connection, so that
				   libcurl never resends it by itself */
	HTTP_RETRY_RESEND_SAFE, /* as HTTP_RETRY_UNSENT, but over a reused
				   connection: the request is harmless if
				   libcurl resends it (a command that guards
				   itself, osb_command_opts.resend_safe) */
};

/* Builds the multipart body of an upload on a curl handle; called for
 * every attempt. Returns 0 or -errno; *ret_mime is a curl_mime *. */
typedef int (*http_mime_fn)(void *arg, void *curl, void **ret_mime);

struct http_request {
	const char *method;
	const char *base;  /* base URL, no trailing '/' */
	const char *path;  /* "/files/info" */
	const char *query; /* "?a=b..." or NULL */
	const char *what;  /* detail for messages (a sandbox path) */
	bool lifecycle;    /* send the API key */
	const struct osb_kvlist *headers; /* endpoint headers */
	const char *content_type;
	const void *body; /* request body, or NULL */
	size_t body_len;
	http_mime_fn mime; /* or a multipart body */
	void *mime_arg;
	const char *range; /* "bytes=a-b" or NULL */
	osb_sink_fn sink;  /* 2xx bodies go here as they come */
	void *sink_arg;
	bool streaming; /* long body: no total timeout, a stall
			   limit of request_timeout instead */
	bool bulk;      /* file contents: large transfer buffers */
	long max_ms;    /* streaming: give up after this long; 0 = never */
	enum http_retry retry;
	bool no_retry; /* one attempt only */
	/* before another attempt of a request that never left (a refused
	 * connection): may point base and headers elsewhere */
	void (*retarget)(void *arg, struct http_request *rq);
	void *retarget_arg;
};

struct http_response {
	int status;
	struct buf body;        /* the body when no sink, or an error body */
	int64_t content_length; /* -1 if absent */
	int64_t range_start, range_end, range_total; /* Content-Range */
	int64_t tail_cursor; /* EXECD-COMMANDS-TAIL-CURSOR, -1 if absent */
	uint64_t delivered;  /* bytes given to the sink */
	bool sink_stopped;   /* the sink returned non-zero */
	bool headers_done;   /* the last header block was complete */
	int sink_rc;
	bool transient; /* failed, and the policy allowed a retry */
	bool retryable; /* failed in a transient way (a lost answer
			   or a gateway error), whatever the policy */
	int attempts;   /* requests sent */
};
void http_response_release(struct http_response *rs);

/*
 * http_call() - one API call with the retry policy of @rq. On a 2xx
 * answer returns 0; else fills @err (status, API code, message with the
 * method, URL path and @rq->what) and returns the mapped -errno. A sink
 * that stopped the transfer makes it return the sink's code (0 counts as
 * a normal end). Retries never happen once bytes reached the sink.
 */
int http_call(struct osb_client *c, const struct http_request *rq,
	      struct http_response *rs, struct osb_error *err);

/* Backoff before attempt @attempt (1-based), with jitter. */
long http_backoff_ms(const struct osb_client *c, int attempt);

/* ---- lifecycle.c ---- */

/* 0 when @id may be a sandbox or snapshot id (not empty, no '/'), else
 * -EINVAL with a message naming @what. */
int lifecycle_bad_id(const char *id, const char *what, struct osb_error *err);
/* http_call() on the lifecycle server; @body is JSON or NULL. */
int lifecycle_call(struct osb_client *c, const char *method, const char *path,
		   const char *query, const char *body, enum http_retry retry,
		   struct http_response *rs, struct osb_error *err);

/* Adds "page" and "pageSize" to query @q, each when > 0. */
int lifecycle_query_page(struct buf *q, int page, int page_size);
/* DELETE @path, retried; a 404 after a lost answer counts as done. */
int lifecycle_delete(struct osb_client *c, const char *path,
		     struct osb_error *err);

/* ---- json.c ---- */

/* Error bodies: {"code","message"}, {"error":...}, FastAPI {"detail":..}. */
void json_error_body(const char *body, size_t len, char *code, size_t code_size,
		     char *msg, size_t msg_size);

/* {"error": "..."} (what a stream sends in place of an item): 0 and its
 * message, else -EPROTO. */
int json_error_field(const char *body, size_t len, char *msg, size_t msg_size);

int json_stat_map_get(const char *body, size_t len, const char *key,
		      struct osb_stat *ret);

/*
 * A JSON array of FileInfo objects (a listing), read as it arrives: each
 * element is cut out of the stream and parsed alone, so that neither the
 * whole body nor a tree of it is ever held. _feed() takes the next bytes
 * (0, -EPROTO, -EFBIG past OSB_JSON_BODY_MAX or an element past
 * OSB_JSON_ELEM_MAX, -ENOMEM, -ECANCELED when max is set and an entry
 * past max begins: the rest is not wanted); _finish() hands the entries over
 * once the array was closed or cut at max (-EPROTO otherwise; free them
 * with osb_stat_array_free()); _release() drops what is left.
 */
struct json_stat_stream {
	int state;
	int depth; /* nesting inside the current element */
	bool in_string, escaped;
	struct buf elem; /* the current element's text */
	uint64_t total;  /* bytes fed */
	struct osb_stat *a;
	size_t n, cap;
	size_t max; /* stop after this many entries (0: never) */
	bool cut;   /* stopped at max */
};
void json_stat_stream_init(struct json_stat_stream *s);
int json_stat_stream_feed(struct json_stat_stream *s, const void *data,
			  size_t len);
int json_stat_stream_finish(struct json_stat_stream *s, struct osb_stat **ret,
			    size_t *ret_n);
void json_stat_stream_release(struct json_stat_stream *s);

int json_sandbox(const char *body, size_t len, struct osb_sandbox_info *ret);
int json_sandbox_list(const char *body, size_t len,
		      struct osb_sandbox_list *ret);
char *json_create_request(const struct osb_create_params *p);
int json_snapshot(const char *body, size_t len, struct osb_snapshot *ret);
int json_snapshot_list(const char *body, size_t len,
		       struct osb_snapshot_list *ret);
char *json_snapshot_request(const char *name); /* {"name":..} or {} */
char *json_renew_request(time_t expires_at);
int json_renew_response(const char *body, size_t len, time_t *ret);
int json_metrics(const char *body, size_t len, struct osb_metrics *ret);
int json_endpoint(const char *body, size_t len, const char *scheme,
		  struct osb_endpoint *ret);

char *json_upload_metadata(const struct osb_upload *u);
char *json_perm_map(const struct osb_perm *p, size_t n);
char *json_moves(const struct osb_move *m, size_t n);
char *json_replace(const char *path, const char *old, const char *new_text);
int json_replace_count(const char *body, size_t len, const char *path,
		       long *ret);

char *json_command_request(const char *cmd, const struct osb_command_opts *o,
			   bool background);
char *json_session_run_request(const char *cmd, const char *cwd,
			       long timeout_ms);
char *json_cwd_request(const char *cwd); /* {"cwd":..} or {} */
int json_session_id(const char *body, size_t len, char *ret_id);
int json_command_status(const char *body, size_t len,
			struct osb_command_status *ret);

char *json_code_context_request(const char *language, const char *cwd);
int json_code_context(const char *body, size_t len,
		      struct osb_code_context *ret);
int json_code_context_array(const char *body, size_t len,
			    struct osb_code_context **ret, size_t *ret_n);
char *json_code_run_request(const char *context_id, const char *language,
			    const char *code);

char *json_string_array(const char *const *s, size_t n);
/* [{"action":@action,"target":@target}] */
char *json_rule(const char *action, const char *target);
/* Validates that @s is a JSON array (of rules); 0 or -EINVAL. */
int json_check_array(const char *s);
/* The NetworkPolicy to send for the policy @s (one, or GET /policy's
 * answer holding one), with @default_action instead of its own when not
 * NULL. NULL with the reason in @why when @s is no valid policy. */
char *json_policy(const char *s, const char *default_action, char *why,
		  size_t why_size);

/*
 * One event of a stream. json_event() parses @line into @ev, whose strings
 * point into @store (released with json_event_release()). Returns 0,
 * -EPROTO for a line that is not an event object, or -EREMOTEIO for a bare
 * {"code","message"} error object (its text in @err).
 */
struct json_event_store {
	void *root;
	const char **traceback;
	char *results_json;
};
int json_event(const char *line, size_t len, struct osb_event *ev,
	       struct json_event_store *store, struct osb_error *err);
void json_event_release(struct json_event_store *store);

/* ---- commands.c ---- */

/* DELETE @api_path?id=@id (interrupt a command or a code context). */
int interrupt_call(struct osb_sandbox *sb, const char *api_path, const char *id,
		   struct osb_error *err);

/* ---- stream.c ---- */

struct event_stream {
	struct buf line; /* the partial line */
	osb_event_fn fn;
	void *arg;
	bool terminal;        /* the terminal event was seen */
	bool code_mode;       /* code runs: error is terminal too */
	int exit_code;        /* from the terminal event */
	bool output_lost;     /* the stream broke after init: the end
				 came from the command's status, the
				 output after the break is lost */
	bool failed;          /* error event seen */
	char id[OSB_ID_MAX];  /* from init */
	int rc;               /* first error */
	struct osb_error err; /* the error behind rc */
};
/* The payload of one line of a stream (NUL-terminated, @len its length
 * in and out): the line as it is, or after "data:" (an SSE field); NULL
 * for a line to skip (blank, an SSE comment, event:, id:, retry:). */
char *stream_payload(char *line, size_t *len);
void event_stream_init(struct event_stream *s, osb_event_fn fn, void *arg);
void event_stream_release(struct event_stream *s);
/* An osb_sink_fn: feeds bytes of the body. Returns 1 (stop) after the
 * terminal event, a negative errno on a broken stream. */
int event_stream_sink(void *arg, const void *data, size_t len);
/* After the body ended: -EPROTO if no terminal event came. */
int event_stream_finish(struct event_stream *s, struct osb_error *err);

#endif /* OSB_I_H */

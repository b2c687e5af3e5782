/*
 * http.c - one API call over HTTP, with retries. libcurl lives here.
 *
 * Easy handles come from the client's pool (client.c), so connections are
 * kept alive and reused, and no handle is used by two threads at once.
 * A call is attempted again after a transient failure as the request's
 * retry policy allows (osb.h, "Retries"), never once part of a streamed
 * body reached the caller's sink: callers that stream resume themselves.
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "osb_i.h"

static __thread atomic_int *cancel_flag;
static __thread unsigned int jitter_seed;
static __thread int thread_retries = -1;

int osb_thread_set_retries(int max_retries)
{
	int old = thread_retries;
	thread_retries = max_retries < 0 ? -1 : max_retries;
	return old;
}

void osb_cancel_flag_set(atomic_int *flag)
{
	cancel_flag = flag;
}

struct xfer {
	struct osb_client *c;
	const struct http_request *rq;
	struct http_response *rs;
	CURL *h;
	bool status_known;
	bool to_sink;
	curl_off_t moved;    /* bytes either way, at the last progress */
	curl_off_t up, down; /* of them counted in the client's stats */
	struct conn_seen seen;
};

void http_response_release(struct http_response *rs)
{
	buf_release(&rs->body);
}

static void response_reset(struct http_response *rs)
{
	buf_release(&rs->body);
	memset(rs, 0, sizeof(*rs));
	rs->content_length = -1;
	rs->range_start = rs->range_end = rs->range_total = -1;
	rs->tail_cursor = -1;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct xfer *x = userdata;
	size_t len = size * nmemb;

	if (!x->status_known) {
		long code = 0;
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
		x->rs->status = (int)code;
		x->to_sink = x->rq->sink && code >= 200 && code < 300;
		x->rs->body.max = (x->rq->sink || code >= 300) ?
					  OSB_ERROR_BODY_MAX :
					  OSB_JSON_BODY_MAX;
		x->status_known = true;
	}
	if (x->to_sink) {
		int rc = x->rq->sink(x->rq->sink_arg, ptr, len);
		x->rs->delivered += len;
		if (rc) {
			x->rs->sink_stopped = true;
			x->rs->sink_rc = rc < 0 ? rc : 0;
			return 0; /* stop the transfer */
		}
		return len;
	}
	if (x->rs->status >= 300 || x->rq->sink) {
		/* an error body: keep what fits, for the message */
		size_t room = x->rs->body.max - x->rs->body.len;
		if (buf_append(&x->rs->body, ptr, len < room ? len : room))
			return 0;
		return len;
	}
	if (buf_append(&x->rs->body, ptr, len)) {
		x->rs->sink_rc = -EFBIG;
		return 0;
	}
	return len;
}

static bool header_is(const char *line, size_t len, const char *name,
		      const char **ret_value)
{
	size_t n = strlen(name);
	if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
		return false;
	const char *v = line + n + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	*ret_value = v;
	return true;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct xfer *x = userdata;
	size_t len = size * nmemb;
	const char *v;
	char line[512];

	share_observe(x->c, x->h, &x->seen);
	if (len >= sizeof(line))
		return len;
	memcpy(line, ptr, len);
	line[len] = '\0';
	if (strcmp(line, "\r\n") == 0 || strcmp(line, "\n") == 0) {
		x->rs->headers_done = true;
	} else if (strncmp(line, "HTTP/", 5) == 0) {
		/* a new header block (after a 100 Continue, say) */
		x->rs->headers_done = false;
		x->rs->content_length = -1;
		x->rs->range_start = x->rs->range_end = -1;
		x->rs->range_total = -1;
		x->rs->tail_cursor = -1;
	} else if (header_is(line, len, "Content-Length", &v)) {
		x->rs->content_length = strtoll(v, NULL, 10);
	} else if (header_is(line, len, "Content-Range", &v)) {
		long long a, b, t;
		if (sscanf(v, "bytes %lld-%lld/%lld", &a, &b, &t) == 3) {
			x->rs->range_start = a;
			x->rs->range_end = b;
			x->rs->range_total = t;
		} else if (sscanf(v, "bytes */%lld", &t) == 1) {
			x->rs->range_total = t;
		}
	} else if (header_is(line, len, "EXECD-COMMANDS-TAIL-CURSOR", &v)) {
		x->rs->tail_cursor = strtoll(v, NULL, 10);
	}
	return len;
}

static int on_progress(void *clientp, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	struct xfer *x = clientp;
	(void)dltotal;
	(void)ultotal;
	if (dlnow + ulnow != x->moved) {
		/* bytes moved: the exchange is alive; counted as they move,
		 * so a transfer's progress shows in osb_client_stats() */
		x->moved = dlnow + ulnow;
		if (ulnow > x->up) {
			atomic_fetch_add(&x->c->n_bytes_up,
					 (uint64_t)(ulnow - x->up));
			x->up = ulnow;
		}
		if (dlnow > x->down) {
			atomic_fetch_add(&x->c->n_bytes_down,
					 (uint64_t)(dlnow - x->down));
			x->down = dlnow;
		}
		if (x->c->hooks.progress)
			x->c->hooks.progress(x->c->hooks.arg);
	}
	return cancel_flag && atomic_load(cancel_flag) ? 1 : 0;
}

static CURL *pool_take(struct osb_client *c)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->pool_lock);
	if (c->npool)
		h = c->pool[--c->npool];
	pthread_mutex_unlock(&c->pool_lock);
	if (h)
		curl_easy_reset(h);
	else
		h = curl_easy_init();
	return h;
}

static void pool_put(struct osb_client *c, CURL *h)
{
	pthread_mutex_lock(&c->pool_lock);
	if (c->npool < OSB_POOL_IDLE_MAX) {
		c->pool[c->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->pool_lock);
	if (h)
		curl_easy_cleanup(h);
}

static int add_header(struct curl_slist **list, const char *name,
		      const char *value)
{
	struct buf b = { 0 };
	if (buf_printf(&b, "%s: %s", name, value ? value : ""))
		return -ENOMEM;
	struct curl_slist *l = curl_slist_append(*list, b.data);
	buf_release(&b);
	if (!l)
		return -ENOMEM;
	*list = l;
	return 0;
}

static int build_headers(struct osb_client *c, const struct http_request *rq,
			 struct curl_slist **ret)
{
	struct curl_slist *list = NULL;
	int rc = 0;

	if (rq->lifecycle && c->api_key)
		rc = add_header(&list, "OPEN-SANDBOX-API-KEY", c->api_key);
	for (size_t i = 0; !rc && rq->headers && i < rq->headers->n; i++)
		rc = add_header(&list, rq->headers->items[i].key,
				rq->headers->items[i].value);
	for (size_t i = 0; !rc && i < c->headers.n; i++)
		rc = add_header(&list, c->headers.items[i].key,
				c->headers.items[i].value);
	if (!rc && rq->content_type)
		rc = add_header(&list, "Content-Type", rq->content_type);
	if (!rc && rq->range)
		rc = add_header(&list, "Range", rq->range);
	/* no "Expect: 100-continue" round trip before bodies */
	if (!rc) {
		struct curl_slist *l = curl_slist_append(list, "Expect:");
		if (!l)
			rc = -ENOMEM;
		else
			list = l;
	}
	if (rc) {
		curl_slist_free_all(list);
		return rc;
	}
	*ret = list;
	return 0;
}

static void set_common(struct osb_client *c, CURL *h,
		       const struct http_request *rq)
{
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	share_attach(c, h); /* TLS sessions, DNS (share.c) */
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
	if (rq->streaming) {
		/* a long transfer: fail when it stalls, not when it is long;
		 * an event stream is alive with a ping every few seconds, a
		 * file's bytes must move faster than a trickle */
		long secs = c->request_timeout_ms / 1000;
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT,
				 rq->bulk ? OSB_BULK_MIN_RATE : 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
				 secs > 0 ? secs : 1);
		if (rq->max_ms > 0)
			curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->max_ms);
	} else {
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->request_timeout_ms);
	}
	/*
	 * Buffers as large as these make file contents move faster (fewer
	 * callbacks and system calls), and libcurl allocates them afresh
	 * for every transfer that asks for them; any other call keeps
	 * libcurl's defaults (16 KiB and 64 KiB), so a daemon with many
	 * threads does not hold megabytes per listing, stat or command.
	 */
	if (rq->bulk) {
		curl_easy_setopt(h, CURLOPT_BUFFERSIZE, OSB_BULK_RECV_BUF);
		curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE,
				 OSB_BULK_SEND_BUF);
	}
	if (c->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (c->proxy)
		curl_easy_setopt(h, CURLOPT_PROXY, c->proxy);
	/*
	 * At most once (osb.h, "Retries"). libcurl sends a request again by
	 * itself, whatever its method, when a connection it reused from an
	 * earlier call closes before a byte of the answer came ("Connection
	 * died, retrying a fresh connect"): it takes that for a keep-alive
	 * connection the server had closed while idle, but the server may
	 * as well have received and performed the request, then lost the
	 * answer. libcurl (7.74 to 8.x) resends only over a reused
	 * connection, never over one it opened for this call (we follow no
	 * redirects), the only exception being an HTTP/2 stream the server
	 * refused, which by the protocol it did not process. So a call that
	 * must not run twice goes over a connection of its own: then only
	 * http_call's policy decides whether it is sent again. Idempotent
	 * calls, and commands that guard themselves against a second run,
	 * keep reusing connections.
	 */
	if (rq->retry == HTTP_RETRY_UNSENT)
		curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
	/* the new connection then replaces the handle's oldest idle one */
	curl_easy_setopt(h, CURLOPT_MAXCONNECTS, (long)OSB_HANDLE_CONNS_MAX);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
}

static void set_method(CURL *h, const struct http_request *rq, void *mime)
{
	const char *m = rq->method;

	if (mime) {
		curl_easy_setopt(h, CURLOPT_MIMEPOST, (curl_mime *)mime);
	} else if (rq->body || strcmp(m, "POST") == 0 ||
		   strcmp(m, "PATCH") == 0 || strcmp(m, "PUT") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(rq->body ? rq->body_len : 0));
		curl_easy_setopt(h, CURLOPT_POSTFIELDS,
				 rq->body ? (const char *)rq->body : "");
	} else if (strcmp(m, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	}
	if (strcmp(m, "GET") != 0 && strcmp(m, "POST") != 0 &&
	    strcmp(m, "HEAD") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
}

/* Failures before the request could have reached the server. */
static bool curl_unsent(CURLcode rc)
{
	return rc == CURLE_COULDNT_CONNECT ||
	       rc == CURLE_COULDNT_RESOLVE_HOST ||
	       rc == CURLE_COULDNT_RESOLVE_PROXY;
}

static bool curl_transient(CURLcode rc)
{
	return curl_unsent(rc) || rc == CURLE_OPERATION_TIMEDOUT ||
	       rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR ||
	       rc == CURLE_GOT_NOTHING || rc == CURLE_PARTIAL_FILE ||
	       rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_HTTP2_STREAM;
}

long http_backoff_ms(const struct osb_client *c, int attempt)
{
	long ms = c->retry_base_ms;
	for (int i = 1; i < attempt && ms < c->retry_max_ms; i++)
		ms *= 2;
	if (ms > c->retry_max_ms)
		ms = c->retry_max_ms;
	if (!jitter_seed)
		jitter_seed =
			(unsigned int)now_ms() ^ (unsigned int)(uintptr_t)&ms;
	/* full jitter in the upper half: [ms/2, ms] */
	return ms / 2 +
	       (long)(rand_r(&jitter_seed) % (unsigned long)(ms / 2 + 1));
}

/* The URL without its query, for messages. */
static void describe(const struct http_request *rq, char *buf, size_t size)
{
	snprintf(buf, size, "%s %s%s%s%s%s", rq->method, rq->base, rq->path,
		 rq->what ? " [" : "", rq->what ? rq->what : "",
		 rq->what ? "]" : "");
}

/* What a lifecycle server's 401 asks of the user: a key, or another. */
static const char *key_hint(const struct osb_client *c,
			    const struct http_request *rq, int status)
{
	if (status != 401 || !rq->lifecycle)
		return "";
	return c->api_key ?
		       " (the API key given was refused: check "
		       "OPEN_SANDBOX_API_KEY, the api_key_file= option or "
		       "osb's config)" :
		       " (no API key was given: set OPEN_SANDBOX_API_KEY, or "
		       "osbfs's api_key_file= option, or osb's --api-key or "
		       "`osb config set connection.api_key KEY`)";
}

static int fail_http(const struct osb_client *c, const struct http_request *rq,
		     struct http_response *rs, struct osb_error *err)
{
	char code[64] = "", msg[768] = "", where[1024];

	json_error_body(rs->body.data, rs->body.len, code, sizeof(code), msg,
			sizeof(msg));
	describe(rq, where, sizeof(where));
	int e = osb_errno_from_http(rs->status, code, msg);
	osb_error_set(err, rs->status, code, "%s: HTTP %d%s%s%s%s%s", where,
		      rs->status, *code ? " " : "", code, *msg ? ": " : "", msg,
		      key_hint(c, rq, rs->status));
	return -e;
}

static int fail_curl(const struct http_request *rq, CURLcode rc,
		     const char *detail, int attempts, struct osb_error *err)
{
	char where[1024], tries[32] = "";

	describe(rq, where, sizeof(where));
	if (attempts > 1)
		snprintf(tries, sizeof(tries), " (%d attempts)", attempts);
	osb_error_set(err, 0, "", "%s: %s%s", where,
		      *detail ? detail : curl_easy_strerror(rc), tries);
	return -osb_errno_from_curl(rc);
}

/* libcurl refuses an answer whose headers pass its limit (100 KB) with
 * CURLE_OUT_OF_MEMORY: not our memory, a broken or hostile server. */
static int fail_headers(const struct http_request *rq, int attempts,
			struct osb_error *err)
{
	fail_curl(rq, CURLE_OUT_OF_MEMORY,
		  "the answer's headers are larger than libcurl takes "
		  "(100 KB): a broken or hostile server",
		  attempts, err);
	return -EIO;
}

static int perform_once(struct osb_client *c, const struct http_request *rq,
			struct http_response *rs, CURLcode *ret_rc,
			char *errbuf)
{
	struct curl_slist *hdrs = NULL;
	struct buf url = { 0 };
	struct xfer x = { .c = c, .rq = rq, .rs = rs };
	void *mime = NULL;
	int rc;

	CURL *h = pool_take(c);
	if (!h)
		return -ENOMEM;
	x.h = h;
	rc = build_headers(c, rq, &hdrs);
	if (!rc)
		rc = buf_printf(&url, "%s%s%s", rq->base, rq->path,
				rq->query ? rq->query : "");
	if (!rc && rq->mime)
		rc = rq->mime(rq->mime_arg, h, &mime);
	if (rc)
		goto out;

	set_common(c, h, rq);
	curl_easy_setopt(h, CURLOPT_URL, url.data);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	set_method(h, rq, mime);
	errbuf[0] = '\0';

	atomic_fetch_add(&c->n_requests, 1);
	if (c->hooks.begin)
		c->hooks.begin(c->hooks.arg);
	*ret_rc = curl_easy_perform(h);
	if (c->hooks.end)
		c->hooks.end(c->hooks.arg);

	long code = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	rs->status = (int)code;
	if (c->trace) {
		curl_off_t us = 0;
		curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &us);
		c->trace(c->trace_arg, rq->method, url.data + strlen(rq->base),
			 rs->status,
			 *ret_rc == CURLE_OK ? "" :
			 errbuf[0]           ? errbuf :
					       curl_easy_strerror(*ret_rc),
			 (long)(us / 1000), rs->attempts);
	}
	share_count(c, h, url.data, &x.seen);
	curl_off_t up = 0, down = 0;
	curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
	curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down);
	/* what on_progress() has not counted yet */
	if (up > x.up)
		atomic_fetch_add(&c->n_bytes_up, (uint64_t)(up - x.up));
	if (down > x.down)
		atomic_fetch_add(&c->n_bytes_down, (uint64_t)(down - x.down));
	/* the handle must not point at what we free below */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_MIMEPOST, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
out:
	if (mime)
		curl_mime_free(mime);
	curl_slist_free_all(hdrs);
	buf_release(&url);
	pool_put(c, h);
	return rc;
}

int http_call(struct osb_client *c, const struct http_request *rq,
	      struct http_response *rs, struct osb_error *err)
{
	char errbuf[CURL_ERROR_SIZE];
	int max = rq->no_retry        ? 0 :
		  thread_retries >= 0 ? thread_retries :
					c->max_retries;
	int timeouts = 0;
	struct http_request cur = *rq; /* its target may move (retarget) */
	rq = &cur;

	for (int attempt = 1;; attempt++) {
		CURLcode crc = CURLE_OK;
		response_reset(rs);
		rs->attempts = attempt;
		int rc = perform_once(c, rq, rs, &crc, errbuf);
		if (rc) {
			osb_error_set(err, 0, "", "%s %s%s: %s", rq->method,
				      rq->base, rq->path, strerror(-rc));
			atomic_fetch_add(&c->n_failures, 1);
			return rc;
		}
		if (rs->sink_stopped) {
			/* the caller's sink refused the data (a full disk, a
			 * closed pipe): the caller still needs the message;
			 * -ECANCELED is a sink that has all it wants */
			if (rs->sink_rc && rs->sink_rc != -ECANCELED) {
				char where[1024];
				describe(rq, where, sizeof(where));
				osb_error_set(err, rs->status, "", "%s: %s",
					      where, strerror(-rs->sink_rc));
				atomic_fetch_add(&c->n_failures, 1);
			}
			return rs->sink_rc;
		}
		if (crc == CURLE_WRITE_ERROR && rs->sink_rc) {
			osb_error_set(err, rs->status, "",
				      "%s %s%s: answer larger than %u bytes",
				      rq->method, rq->base, rq->path,
				      OSB_JSON_BODY_MAX);
			atomic_fetch_add(&c->n_failures, 1);
			return rs->sink_rc;
		}
		if (crc == CURLE_ABORTED_BY_CALLBACK) {
			osb_error_set(err, 0, "", "%s %s%s: cancelled",
				      rq->method, rq->base, rq->path);
			return -ECANCELED;
		}

		bool transient;
		int ret;
		if (crc != CURLE_OK) {
			transient = curl_unsent(crc) ||
				    (rq->retry == HTTP_RETRY_IDEMPOTENT &&
				     curl_transient(crc));
			if (crc == CURLE_OPERATION_TIMEDOUT && ++timeouts > 1)
				transient = false; /* a hang, not a blip */
			if (crc == CURLE_OUT_OF_MEMORY && !rs->headers_done)
				ret = fail_headers(rq, attempt, err);
			else
				ret = fail_curl(rq, crc, errbuf, attempt, err);
		} else if (rs->status >= 200 && rs->status < 300) {
			return 0;
		} else {
			ret = fail_http(c, rq, rs, err);
			/* a 500 that names no cause we know (not ENOENT,
			 * EACCES, ...) is an internal hiccup: worth another
			 * try when the call is idempotent */
			transient = rq->retry == HTTP_RETRY_IDEMPOTENT &&
				    (rs->status == 502 || rs->status == 503 ||
				     rs->status == 504 || rs->status == 429 ||
				     (rs->status == 500 && ret == -EIO));
		}
		rs->transient = transient;
		rs->retryable = crc != CURLE_OK ? curl_transient(crc) :
						  (rs->status == 502 ||
						   rs->status == 503 ||
						   rs->status == 504);
		if (!transient || attempt > max || rs->delivered) {
			atomic_fetch_add(&c->n_failures, 1);
			return ret;
		}
		atomic_fetch_add(&c->n_retries, 1);
		sleep_ms(http_backoff_ms(c, attempt));
		if (cancel_flag && atomic_load(cancel_flag))
			return -ECANCELED;
		if (cur.retarget && curl_unsent(crc))
			cur.retarget(cur.retarget_arg, &cur);
	}
}

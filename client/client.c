/*
 * client.c - the client (connection settings, the pool of connections)
 * and sandbox handles (the execd and egress endpoints of one sandbox).
 */
#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "osb_i.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static const char *env_first(const char *a, const char *b)
{
	const char *v = getenv(a);
	if (!v || !*v)
		v = getenv(b);
	return v && *v ? v : NULL;
}

void osb_config_from_env(struct osb_config *cfg)
{
	if (!cfg->domain)
		cfg->domain =
			env_first("OPEN_SANDBOX_DOMAIN", "OPENSANDBOX_DOMAIN");
	if (!cfg->api_key)
		cfg->api_key = env_first("OPEN_SANDBOX_API_KEY",
					 "OPENSANDBOX_API_KEY");
}

int osb_read_key_file(const char *path, char **ret_key, struct osb_error *err)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		osb_error_set(err, 0, "", "API key file %s: %s", path,
			      strerror(e));
		return -e;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n < 0) {
		osb_error_set(err, 0, "", "API key file %s: %s", path,
			      strerror(e));
		return -e;
	}
	buf[n] = '\0';
	char *start = buf;
	while (isspace((unsigned char)*start))
		start++;
	char *end = start;
	while (*end && *end != '\n' && *end != '\r')
		end++;
	while (end > start && isspace((unsigned char)end[-1]))
		end--;
	*end = '\0';
	if (!*start) {
		osb_error_set(err, 0, "", "API key file %s is empty", path);
		return -EINVAL;
	}
	char *key = strdup(start);
	explicit_bzero(buf, sizeof(buf));
	if (!key)
		return -ENOMEM;
	*ret_key = key;
	return 0;
}

int osb_client_new(const struct osb_config *cfg, struct osb_client **ret,
		   struct osb_error *err)
{
	struct osb_config env = *cfg;
	const char *domain, *scheme = cfg->protocol ? cfg->protocol : "http";

	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		osb_error_set(err, 0, "", "libcurl failed to start: %s",
			      curl_easy_strerror(curl_init_rc));
		return -EIO;
	}
	osb_config_from_env(&env);
	domain = env.domain ? env.domain : "localhost:8080";
	if (strncmp(domain, "https://", 8) == 0) {
		scheme = "https";
		domain += 8;
	} else if (strncmp(domain, "http://", 7) == 0) {
		scheme = "http";
		domain += 7;
	}
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
		osb_error_set(err, 0, "",
			      "protocol must be http or https, not \"%s\"",
			      scheme);
		return -EINVAL;
	}
	if (!*domain) {
		osb_error_set(err, 0, "", "the server domain is empty");
		return -EINVAL;
	}

	struct osb_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->pool_lock, NULL);
	c->scheme = strdup(scheme);
	size_t dlen = strlen(domain);
	while (dlen && domain[dlen - 1] == '/')
		dlen--;
	c->domain = strndup(domain, dlen);
	struct buf base = { 0 };
	buf_printf(&base, "%s://%s", scheme, c->domain ? c->domain : "");
	c->base_url = buf_steal(&base);
	c->api_key = xstrdup_or_null(env.api_key);
	c->ca_file = xstrdup_or_null(cfg->ca_file);
	c->insecure = cfg->insecure;
	c->request_timeout_ms =
		cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 30000;
	c->connect_timeout_ms =
		cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 10000;
	c->max_retries = cfg->max_retries < 0  ? 0 :
			 cfg->max_retries == 0 ? 5 :
						 cfg->max_retries;
	c->retry_base_ms = cfg->retry_base_ms > 0 ? cfg->retry_base_ms : 100;
	c->retry_max_ms = cfg->retry_max_ms > 0 ? cfg->retry_max_ms : 5000;
	c->use_server_proxy = cfg->use_server_proxy;
	c->execd_token = xstrdup_or_null(cfg->execd_token);
	c->proxy = xstrdup_or_null(cfg->proxy);
	for (size_t i = 0; i < cfg->n_headers; i++)
		osb_kvlist_add(&c->headers, cfg->headers[i].name,
			       cfg->headers[i].value);
	if (share_init(c) || !c->scheme || !c->domain || !c->base_url ||
	    (env.api_key && !c->api_key) || c->headers.n != cfg->n_headers) {
		osb_client_free(c);
		return -ENOMEM;
	}
	*ret = c;
	return 0;
}

void osb_client_free(struct osb_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->npool; i++)
		curl_easy_cleanup(c->pool[i]);
	share_release(c); /* after the handles that use it */
	pthread_mutex_destroy(&c->pool_lock);
	free(c->base_url);
	free(c->scheme);
	free(c->domain);
	if (c->api_key) {
		explicit_bzero(c->api_key, strlen(c->api_key));
		free(c->api_key);
	}
	free(c->ca_file);
	free(c->execd_token);
	free(c->proxy);
	osb_kvlist_release(&c->headers);
	free(c);
}

void osb_client_set_retries(struct osb_client *c, int max_retries)
{
	c->max_retries = max_retries > 0 ? max_retries : 0;
}

const char *osb_client_base_url(const struct osb_client *c)
{
	return c->base_url;
}

void osb_client_stats(struct osb_client *c, struct osb_client_stats *ret)
{
	ret->requests = atomic_load(&c->n_requests);
	ret->retries = atomic_load(&c->n_retries);
	ret->failures = atomic_load(&c->n_failures);
	ret->bytes_up = atomic_load(&c->n_bytes_up);
	ret->bytes_down = atomic_load(&c->n_bytes_down);
	ret->connections = atomic_load(&c->n_connections);
	ret->tls_handshakes = atomic_load(&c->n_tls_handshakes);
	ret->tls_resumed = atomic_load(&c->tls_unknown) ?
				   OSB_STAT_UNKNOWN :
				   atomic_load(&c->n_tls_resumed);
}

/* ---- sandbox handles ---- */

static struct osb_sandbox *sandbox_new(struct osb_client *c, const char *id)
{
	struct osb_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	sb->c = c;
	sb->id = strdup(id);
	pthread_mutex_init(&sb->lock, NULL);
	if (!sb->id) {
		osb_sandbox_close(sb);
		return NULL;
	}
	return sb;
}

int osb_sandbox_open(struct osb_client *c, const char *id,
		     struct osb_sandbox **ret, struct osb_error *err)
{
	struct osb_sandbox *sb = sandbox_new(c, id);
	if (!sb)
		return -ENOMEM;
	int rc = osb_endpoint_get(c, id, OSB_EXECD_PORT, &sb->execd, err);
	if (rc) {
		osb_sandbox_close(sb);
		return rc;
	}
	*ret = sb;
	return 0;
}

static int endpoint_copy(const struct osb_endpoint *ep,
			 struct osb_endpoint *ret)
{
	int rc = 0;
	memset(ret, 0, sizeof(*ret));
	ret->url = xstrdup_or_null(ep->url);
	for (size_t i = 0; !rc && i < ep->headers.n; i++)
		rc = osb_kvlist_add(&ret->headers, ep->headers.items[i].key,
				    ep->headers.items[i].value);
	if (rc || !ret->url) {
		osb_endpoint_release(ret);
		return -ENOMEM;
	}
	return 0;
}

int osb_sandbox_open_at(struct osb_client *c, const char *id,
			const struct osb_endpoint *execd,
			struct osb_sandbox **ret)
{
	struct osb_sandbox *sb = sandbox_new(c, id);
	if (!sb || endpoint_copy(execd, &sb->execd)) {
		osb_sandbox_close(sb);
		return -ENOMEM;
	}
	*ret = sb;
	return 0;
}

int osb_sandbox_execd_endpoint(struct osb_sandbox *sb, struct osb_endpoint *ret)
{
	pthread_mutex_lock(&sb->lock);
	int rc = endpoint_copy(&sb->execd, ret);
	pthread_mutex_unlock(&sb->lock);
	return rc;
}

void osb_sandbox_close(struct osb_sandbox *sb)
{
	if (!sb)
		return;
	osb_endpoint_release(&sb->execd);
	osb_endpoint_release(&sb->egress);
	pthread_mutex_destroy(&sb->lock);
	for (size_t i = 0; i < sb->n_old_ids; i++)
		free(sb->old_ids[i]);
	free(sb->old_ids);
	free(sb->id);
	free(sb);
}

const char *osb_sandbox_id(const struct osb_sandbox *sb)
{
	return sb->id;
}

char *osb_sandbox_execd_url(struct osb_sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	char *url = xstrdup_or_null(sb->execd.url);
	pthread_mutex_unlock(&sb->lock);
	return url;
}

static bool same_headers(const struct osb_kvlist *a, const struct osb_kvlist *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const char *v = osb_kvlist_get(b, a->items[i].key);
		if (!v || strcmp(v, a->items[i].value) != 0)
			return false;
	}
	return true;
}

bool osb_endpoint_same(const struct osb_endpoint *a,
		       const struct osb_endpoint *b)
{
	return a->url && b->url && strcmp(a->url, b->url) == 0 &&
	       same_headers(&a->headers, &b->headers);
}

/* Takes @ep as execd's endpoint. 1 when it differs from the one in use
 * (then calls of other threads take it at their next attempt, and the
 * moved hook is told), else 0. */
static int execd_take(struct osb_sandbox *sb, struct osb_endpoint *ep)
{
	char *old = NULL, *now = NULL;
	pthread_mutex_lock(&sb->lock);
	bool same_url = sb->execd.url && strcmp(sb->execd.url, ep->url) == 0;
	bool moved =
		!same_url || !same_headers(&sb->execd.headers, &ep->headers);
	osb_kvlist_release(&sb->execd.headers);
	sb->execd.headers = ep->headers;
	if (same_url) {
		free(ep->url);
	} else {
		old = sb->execd.url;
		sb->execd.url = ep->url;
	}
	memset(ep, 0, sizeof(*ep));
	if (moved) {
		sb->execd_gen++;
		now = xstrdup_or_null(sb->execd.url);
	}
	/* the sidecar may sit behind execd's address (bridge networking):
	 * looked up again on its next use */
	if (sb->have_egress) {
		osb_endpoint_release(&sb->egress);
		sb->have_egress = false;
	}
	pthread_mutex_unlock(&sb->lock);
	if (moved && sb->c->hooks.moved)
		sb->c->hooks.moved(sb->c->hooks.arg, sb->id,
				   old ? old :
				   now ? now :
					 "",
				   now ? now : "");
	free(old);
	free(now);
	return moved;
}

int osb_sandbox_switch(struct osb_sandbox *sb, const char *id,
		       struct osb_error *err)
{
	struct osb_endpoint ep;
	int rc = osb_endpoint_get(sb->c, id, OSB_EXECD_PORT, &ep, err);
	if (rc)
		return rc;
	char *nid = strdup(id);
	pthread_mutex_lock(&sb->lock);
	char **old =
		nid ? realloc(sb->old_ids, (sb->n_old_ids + 1) * sizeof(*old)) :
		      NULL;
	if (old) {
		sb->old_ids = old;
		sb->old_ids[sb->n_old_ids++] = sb->id;
		sb->id = nid;
		/* another sandbox's address is no move of execd: taken
		 * whole, the sidecar looked up again on its next use */
		osb_endpoint_release(&sb->execd);
		sb->execd = ep;
		sb->execd_gen++;
		if (sb->have_egress) {
			osb_endpoint_release(&sb->egress);
			sb->have_egress = false;
		}
		atomic_store(&sb->located_ms, 0);
	}
	pthread_mutex_unlock(&sb->lock);
	if (old)
		return 0;
	free(nid);
	osb_endpoint_release(&ep);
	osb_error_set(err, 0, "", "out of memory");
	return -ENOMEM;
}

int osb_sandbox_refresh(struct osb_sandbox *sb, struct osb_error *err)
{
	struct osb_endpoint ep;
	int rc = osb_endpoint_get(sb->c, sb->id, OSB_EXECD_PORT, &ep, err);
	if (rc)
		return rc;
	execd_take(sb, &ep);
	return 0;
}

int osb_sandbox_locate(struct osb_sandbox *sb, struct osb_error *err)
{
	long long now = now_ms(), last = atomic_load(&sb->located_ms);
	if ((last && now - last < OSB_LOCATE_EVERY_MS) ||
	    !atomic_compare_exchange_strong(&sb->located_ms, &last, now))
		return 0; /* asked a moment ago, by this thread or another */
	struct osb_endpoint ep;
	int saved = osb_thread_set_retries(0);
	int rc = osb_endpoint_get(sb->c, sb->id, OSB_EXECD_PORT, &ep, err);
	osb_thread_set_retries(saved);
	return rc ? rc : execd_take(sb, &ep);
}

static int target_copy(struct osb_sandbox *sb, const struct osb_endpoint *ep,
		       bool execd, struct target *ret)
{
	struct osb_endpoint copy;
	memset(ret, 0, sizeof(*ret));
	if (endpoint_copy(ep, &copy))
		return -ENOMEM;
	ret->base = copy.url;
	ret->headers = copy.headers;
	if (execd && sb->c->execd_token &&
	    !osb_kvlist_get(&ep->headers, "X-EXECD-ACCESS-TOKEN") &&
	    osb_kvlist_add(&ret->headers, "X-EXECD-ACCESS-TOKEN",
			   sb->c->execd_token)) {
		target_release(ret);
		return -ENOMEM;
	}
	return 0;
}

int sandbox_egress_target(struct osb_sandbox *sb, struct target *ret,
			  struct osb_error *err)
{
	pthread_mutex_lock(&sb->lock);
	bool have = sb->have_egress;
	pthread_mutex_unlock(&sb->lock);
	if (!have) {
		struct osb_endpoint ep;
		int rc = osb_endpoint_get(sb->c, sb->id, OSB_EGRESS_PORT, &ep,
					  err);
		if (rc)
			return rc;
		pthread_mutex_lock(&sb->lock);
		if (sb->have_egress) {
			osb_endpoint_release(&ep);
		} else {
			sb->egress = ep;
			sb->have_egress = true;
		}
		pthread_mutex_unlock(&sb->lock);
	}
	pthread_mutex_lock(&sb->lock);
	int rc = target_copy(sb, &sb->egress, false, ret);
	pthread_mutex_unlock(&sb->lock);
	return rc;
}

void target_release(struct target *t)
{
	free(t->base);
	t->base = NULL;
	osb_kvlist_release(&t->headers);
}

/* Where one execd call goes: a copy of the endpoint, taken again when a
 * refused attempt finds that execd moved (retarget). */
struct execd_dest {
	struct osb_sandbox *sb;
	struct target t;
	unsigned gen;
};

static void execd_retarget(void *arg, struct http_request *rq)
{
	struct execd_dest *d = arg;
	struct osb_sandbox *sb = d->sb;
	osb_sandbox_locate(sb, NULL);
	pthread_mutex_lock(&sb->lock);
	struct target t;
	if (sb->execd_gen != d->gen &&
	    target_copy(sb, &sb->execd, true, &t) == 0) {
		target_release(&d->t);
		d->t = t;
		d->gen = sb->execd_gen;
	}
	pthread_mutex_unlock(&sb->lock);
	rq->base = d->t.base;
	rq->headers = &d->t.headers;
}

int execd_call(struct osb_sandbox *sb, struct http_request *rq,
	       struct http_response *rs, struct osb_error *err)
{
	struct execd_dest d = { .sb = sb };
	pthread_mutex_lock(&sb->lock);
	int rc = target_copy(sb, &sb->execd, true, &d.t);
	d.gen = sb->execd_gen;
	pthread_mutex_unlock(&sb->lock);
	if (rc)
		return rc;
	rq->base = d.t.base;
	rq->headers = &d.t.headers;
	rq->retarget = execd_retarget;
	rq->retarget_arg = &d;
	rc = http_call(sb->c, rq, rs, err);
	rq->base = NULL;
	rq->headers = NULL;
	rq->retarget = NULL;
	rq->retarget_arg = NULL;
	target_release(&d.t);
	return rc;
}

int egress_call(struct osb_sandbox *sb, struct http_request *rq,
		struct http_response *rs, struct osb_error *err)
{
	struct target t;
	int rc = sandbox_egress_target(sb, &t, err);
	if (rc)
		return rc;
	rq->base = t.base;
	rq->headers = &t.headers;
	rc = http_call(sb->c, rq, rs, err);
	rq->base = NULL;
	rq->headers = NULL;
	target_release(&t);
	return rc;
}

void osb_client_set_hooks(struct osb_client *c, const struct osb_hooks *h)
{
	if (h)
		c->hooks = *h;
	else
		memset(&c->hooks, 0, sizeof(c->hooks));
}

void osb_client_set_trace(struct osb_client *c, osb_trace_fn fn, void *arg)
{
	c->trace = fn;
	c->trace_arg = arg;
}

void osb_trace_format(char *buf, size_t size, const char *method,
		      const char *path, int status, const char *error, long ms,
		      int attempt)
{
	char again[32] = "", st[16];
	if (attempt > 1)
		snprintf(again, sizeof(again), " (try %d)", attempt);
	snprintf(st, sizeof(st), "%d", status);
	snprintf(buf, size, "%s %s -> %s, %ld ms%s", method, path,
		 status ? st : error, ms, again);
}

int osb_ping(struct osb_sandbox *sb, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct http_request rq = { .method = "GET",
				   .path = "/ping",
				   .retry = HTTP_RETRY_IDEMPOTENT,
				   .no_retry = true };
	int rc = execd_call(sb, &rq, &rs, err);
	http_response_release(&rs);
	return rc;
}

int osb_metrics_get(struct osb_sandbox *sb, struct osb_metrics *ret,
		    struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct http_request rq = { .method = "GET",
				   .path = "/metrics",
				   .retry = HTTP_RETRY_IDEMPOTENT };
	int rc = execd_call(sb, &rq, &rs, err);
	if (!rc) {
		rc = json_metrics(rs.body.data, rs.body.len, ret);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "GET /metrics: unexpected answer");
	}
	http_response_release(&rs);
	return rc;
}

struct metrics_watch {
	osb_metrics_fn fn;
	void *arg;
	struct buf line;
};

#define METRICS_LINE_MAX 65536

/* One line of the watch: blank lines and SSE fields other than data are
 * skipped. 0, the callback's value, or -EPROTO. */
static int metrics_line(struct metrics_watch *w, char *line, size_t len)
{
	line = stream_payload(line, &len);
	if (!line)
		return 0;
	struct osb_metrics m;
	if (json_metrics(line, len, &m) == 0)
		return w->fn(w->arg, &m, NULL);
	char msg[512];
	if (json_error_field(line, len, msg, sizeof(msg)) == 0)
		return w->fn(w->arg, NULL, msg);
	return -EPROTO;
}

static int metrics_sink(void *arg, const void *data, size_t len)
{
	struct metrics_watch *w = arg;
	const char *p = data, *end = p + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (w->line.len + n > METRICS_LINE_MAX)
			return -EPROTO;
		if (buf_append(&w->line, p, n))
			return -ENOMEM;
		p += n;
		if (!nl)
			break;
		p++;
		if (buf_append(&w->line, "", 1))
			return -ENOMEM;
		int rc = metrics_line(w, w->line.data, w->line.len - 1);
		w->line.len = 0;
		if (rc)
			return rc;
	}
	return 0;
}

int osb_metrics_watch(struct osb_sandbox *sb, osb_metrics_fn fn, void *arg,
		      struct osb_error *err)
{
	struct metrics_watch w = { .fn = fn, .arg = arg };
	struct http_response rs = { 0 };
	struct http_request rq = { .method = "GET",
				   .path = "/metrics/watch",
				   .sink = metrics_sink,
				   .sink_arg = &w,
				   .streaming = true,
				   .retry = HTTP_RETRY_IDEMPOTENT };
	int rc = execd_call(sb, &rq, &rs, err);
	if (rc == -EPROTO && rs.sink_stopped)
		osb_error_set(err, rs.status, "",
			      "GET /metrics/watch: a line that is not a "
			      "sample");
	buf_release(&w.line);
	http_response_release(&rs);
	return rc;
}

int osb_wait_ready(struct osb_sandbox *sb, long timeout_ms,
		   struct osb_error *err)
{
	long long deadline = now_ms() + timeout_ms;
	for (;;) {
		int rc = osb_ping(sb, err);
		if (!rc || rc == -EACCES || now_ms() >= deadline)
			return rc == -ECONNREFUSED ? -ETIMEDOUT : rc;
		sleep_ms(200);
	}
}

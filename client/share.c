/*
 * share.c - what the client's easy handles share, and the count of the
 * connections and TLS handshakes they make.
 *
 * Every handle of the pool (http.c) is attached to one curl share of the
 * client, which holds the TLS sessions and the DNS cache. A handle opens
 * connections of its own, and without the share each of them began with
 * a full TLS handshake of its own: a mount whose pool grows to N handles
 * paid N full handshakes per host: with TLS 1.2 a round trip more than a
 * resumed one, with TLS 1.3 as many round trips but the server's
 * certificates sent and checked again. With the share, the first
 * handshake to a host is full and the connections after it resume.
 *
 * The connections themselves are not shared (CURL_LOCK_DATA_CONNECT): a
 * handle keeps its own (OSB_HANDLE_CONNS_MAX), the pool already spreads
 * them over the threads, and libcurl documents its shared connection
 * cache as unsafe between concurrent threads. A shared cache would also
 * take the connection a handle closes for want of room from any thread,
 * and one cap (CURLOPT_MAXCONNECTS) would then apply to all of them.
 * A call that must not be resent still opens a connection of its own
 * (CURLOPT_FRESH_CONNECT, http.c): sharing sessions changes nothing there,
 * as a resumed session is a new connection all the same.
 *
 * With TLS 1.3 and OpenSSL, libcurl keeps one session per host, the
 * newest, and sets that very object on each new connection. A client
 * that resumed a TLS 1.3 session takes it for spent (OpenSSL asks that a
 * ticket be used once), so the session libcurl kept was useless from the
 * moment the first connection resumed it until that connection read the
 * ticket the server sent next, with its answer: every connection begun
 * in between, and commands begin several at once, did a full handshake
 * (10 of 48 in test_40's readers). Each connection therefore resumes a
 * copy of the kept session (on_handshake), and only the copy is spent.
 * The kept session then serves several connections at once: no early data
 * is sent (libcurl sends none), so a ticket used twice replays nothing,
 * and a server that takes a ticket only once does a full handshake
 * instead, as before. TLS 1.2 sessions are left as OpenSSL keeps them.
 *
 * libcurl tells how many connections a transfer opened, not whether the
 * TLS session of one was resumed. With the OpenSSL backend (decided when
 * the client is made, from curl_version_info()), the connection's SSL
 * object says so; with another backend, resumptions are unknown.
 */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/ssl.h>
#include <string.h>
#include <strings.h>

#include "osb_i.h"

_Static_assert(CURL_LOCK_DATA_LAST <= OSB_SHARE_LOCKS,
	       "a lock for each kind of data libcurl shares");

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access,
		       void *userptr)
{
	struct osb_client *c = userptr;
	(void)h;
	(void)access;
	if ((unsigned)data < OSB_SHARE_LOCKS)
		pthread_mutex_lock(&c->share_lock[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *userptr)
{
	struct osb_client *c = userptr;
	(void)h;
	if ((unsigned)data < OSB_SHARE_LOCKS)
		pthread_mutex_unlock(&c->share_lock[data]);
}

static bool backend_is_openssl(void)
{
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
	/* a build with several backends names the inactive ones in (...) */
	return v && v->ssl_version &&
	       strncmp(v->ssl_version, "OpenSSL/", 8) == 0;
}

int share_init(struct osb_client *c)
{
	for (size_t i = 0; i < OSB_SHARE_LOCKS; i++)
		pthread_mutex_init(&c->share_lock[i], NULL);
	c->tls_probe = backend_is_openssl();
	CURLSH *sh = curl_share_init();
	if (!sh)
		return -ENOMEM;
	c->share = sh;
	if (curl_share_setopt(sh, CURLSHOPT_LOCKFUNC, share_lock) ||
	    curl_share_setopt(sh, CURLSHOPT_UNLOCKFUNC, share_unlock) ||
	    curl_share_setopt(sh, CURLSHOPT_USERDATA, c) ||
	    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) ||
	    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION))
		return -ENOMEM;
	return 0;
}

/* After every easy handle is gone: libcurl refuses to free a share that
 * a handle still uses. */
void share_release(struct osb_client *c)
{
	if (c->share)
		curl_share_cleanup(c->share);
	c->share = NULL;
	for (size_t i = 0; i < OSB_SHARE_LOCKS; i++)
		pthread_mutex_destroy(&c->share_lock[i]);
}

static bool is_tls13(const SSL_SESSION *sess)
{
	return sess && SSL_SESSION_get_protocol_version(sess) == TLS1_3_VERSION;
}

/* Before the first handshake message: the connection resumes a copy of
 * the session libcurl set on it, and spends that copy. */
static void on_handshake(const SSL *ssl, int where, int ret)
{
	SSL_SESSION *sess = SSL_get_session(ssl);
	(void)ret;

	if (!(where & SSL_CB_HANDSHAKE_START) || SSL_is_server(ssl) ||
	    !is_tls13(sess) || !SSL_SESSION_is_resumable(sess))
		return;
	/* without a copy, it resumes the kept one */
	SSL_SESSION *copy = SSL_SESSION_dup(sess);
	if (!copy)
		return;
	SSL_set_session((SSL *)ssl, copy); /* takes a reference */
	SSL_SESSION_free(copy);
}

/* Each new connection has a context of its own, where libcurl sets no
 * info callback. */
static CURLcode on_ssl_ctx(CURL *h, void *sslctx, void *arg)
{
	(void)h;
	(void)arg;
	if (!SSL_CTX_get_info_callback(sslctx)) /* a libcurl that sets one */
		SSL_CTX_set_info_callback(sslctx, on_handshake);
	return CURLE_OK;
}

void share_attach(struct osb_client *c, CURL *h)
{
	curl_easy_setopt(h, CURLOPT_SHARE, (CURLSH *)c->share);
	if (c->tls_probe)
		curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
}

/* While the answer comes: the connection is the transfer's. */
void share_observe(struct osb_client *c, CURL *h, struct conn_seen *s)
{
	struct curl_tlssessioninfo *tsi = NULL;

	if (s->answered)
		return;
	s->answered = true;
	s->resumed = -1;
	if (!c->tls_probe ||
	    curl_easy_getinfo(h, CURLINFO_TLS_SSL_PTR, &tsi) != CURLE_OK ||
	    !tsi || tsi->backend != CURLSSLBACKEND_OPENSSL || !tsi->internals)
		return;
	s->resumed = SSL_session_reused((SSL *)tsi->internals) ? 1 : 0;
}

/* After the transfer: what it opened. A handshake is counted when the
 * connection it made answered (one that failed made no session). */
void share_count(struct osb_client *c, CURL *h, const char *url,
		 const struct conn_seen *s)
{
	long n = 0;
	if (curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &n) != CURLE_OK ||
	    n <= 0)
		return;
	atomic_fetch_add(&c->n_connections, (uint64_t)n);
	if (!s->answered || strncasecmp(url, "https:", 6) != 0)
		return;
	atomic_fetch_add(&c->n_tls_handshakes, 1);
	if (s->resumed > 0)
		atomic_fetch_add(&c->n_tls_resumed, 1);
	else if (s->resumed < 0)
		atomic_store(&c->tls_unknown, true);
}

/*
 * test_threads.c - libosb from 8 threads at once, on one shared client and
 * one shared sandbox handle: uploads (from memory and from a file), whole
 * and ranged downloads compared byte for byte, stats, listings, commands
 * and endpoint refreshes, all interleaved.
 *
 * It needs a server, so it is not a meson test: tests/test_14_osb_errors.py
 * runs it with OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY and OPEN_SANDBOX_ID
 * set (OSB_TEST_ROUNDS optional; OSB_TEST_CA_FILE, the CA of a server
 * over https). Prints one summary line and exits 0, or
 * prints one line per mismatch on stderr and exits 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "osb.h"

#define NTHREADS 8
#define ROOT "/workspace/threads"

static struct osb_client *client;
static struct osb_sandbox *sandbox;
static int rounds = 6;
static atomic_int failures;

static void fail(int t, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail(int t, int r, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "test_threads: thread %d round %d: %s\n", t, r, msg);
	atomic_fetch_add(&failures, 1);
}

/* Bytes that differ per thread, round and offset (xorshift64). */
static void fill(unsigned char *p, size_t n, int t, int r)
{
	uint64_t x =
		0x9e3779b97f4a7c15ull ^ ((uint64_t)t << 32) ^ (uint64_t)(r + 1);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

struct membuf {
	unsigned char *data;
	size_t len, cap;
};

static int mem_sink(void *arg, const void *data, size_t len)
{
	struct membuf *b = arg;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + len)
			cap *= 2;
		unsigned char *p = realloc(b->data, cap);
		if (!p)
			return -ENOMEM;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	return 0;
}

/* Downloads [off, off+len) of @path and compares it with @want. */
static void check_download(int t, int r, const char *path, int64_t off,
			   int64_t len, const unsigned char *want,
			   size_t want_len)
{
	struct membuf got = { 0 };
	struct osb_error err;
	int64_t size = -1;

	int rc = osb_file_download(sandbox, path, off, len, mem_sink, &got,
				   &size, &err);
	if (rc)
		fail(t, r, "download %s [%" PRId64 ", +%" PRId64 "): %s", path,
		     off, len, err.message);
	else if (got.len != want_len ||
		 (want_len && memcmp(got.data, want, want_len) != 0))
		fail(t, r,
		     "download %s [%" PRId64 ", +%" PRId64
		     "): %zu bytes differ from the %zu uploaded",
		     path, off, len, got.len, want_len);
	free(got.data);
}

/* Uploads @data to @path, from memory or (odd rounds) from a memfd. */
static int upload(int t, int r, const char *path, const unsigned char *data,
		  size_t n)
{
	struct osb_upload u = {
		.path = path, .fd = -1, .size = (int64_t)n, .mode = 0640
	};
	struct osb_error err;
	int fd = -1, rc;

	if (r % 2) {
		fd = memfd_create("test_threads", MFD_CLOEXEC);
		if (fd < 0 || write(fd, data, n) != (ssize_t)n) {
			fail(t, r, "memfd: %s", strerror(errno));
			if (fd >= 0)
				close(fd);
			return -EIO;
		}
		u.fd = fd;
	} else {
		u.data = data;
	}
	rc = osb_file_upload(sandbox, &u, 1, &err);
	if (rc)
		fail(t, r, "upload %s: %s", path, err.message);
	if (fd >= 0)
		close(fd);
	return rc;
}

static void check_stat(int t, int r, const char *path, size_t n)
{
	struct osb_stat st;
	struct osb_error err;

	int rc = osb_file_stat(sandbox, path, &st, &err);
	if (rc) {
		fail(t, r, "stat %s: %s", path, err.message);
		return;
	}
	if (st.type != OSB_FILE || st.size != (int64_t)n || st.mode != 0640 ||
	    strcmp(st.path, path) != 0)
		fail(t, r, "stat %s: type %d size %" PRId64 " mode %o path %s",
		     path, st.type, st.size, (unsigned)st.mode, st.path);
	osb_stat_release(&st);
}

static void check_listing(int t, int r, const char *dir)
{
	struct osb_stat *ents = NULL;
	struct osb_error err;
	size_t n = 0;

	int rc = osb_dir_list(sandbox, dir, 1, &ents, &n, &err);
	if (rc) {
		fail(t, r, "list %s: %s", dir, err.message);
		return;
	}
	/* f0.bin .. fR.bin, in name order (rounds <= 9: one digit) */
	if (n != (size_t)r + 1)
		fail(t, r, "list %s: %zu entries, want %d", dir, n, r + 1);
	for (size_t i = 0; i < n; i++) {
		char want[256];
		snprintf(want, sizeof(want), "%s/f%zu.bin", dir, i);
		if (strcmp(ents[i].path, want) != 0)
			fail(t, r, "list %s: entry %zu is %s, want %s", dir, i,
			     ents[i].path, want);
	}
	osb_stat_array_free(ents, n);
}

static void check_command(int t, int r, const char *path, size_t n)
{
	struct osb_command_opts o;
	struct osb_error err;
	char cmd[512], want[128];
	char *out = NULL, *errout = NULL;
	int code = -2;

	osb_command_opts_init(&o);
	snprintf(cmd, sizeof(cmd),
		 "printf 'T%%s R%%s\\n' \"$T\" %d; wc -c < %s; echo oops >&2; "
		 "exit %d",
		 r, path, t);
	struct osb_kvlist env = { 0 };
	char tv[16];
	snprintf(tv, sizeof(tv), "%d", t);
	if (osb_kvlist_add(&env, "T", tv)) {
		fail(t, r, "out of memory");
		return;
	}
	o.envs = &env;
	int rc = osb_command_capture(sandbox, cmd, &o, 4096, &out, &errout,
				     &code, &err);
	osb_kvlist_release(&env);
	snprintf(want, sizeof(want), "T%d R%d\n%zu\n", t, r, n);
	if (rc)
		fail(t, r, "command: %s", err.message);
	else if (strcmp(out, want) != 0 || strcmp(errout, "oops\n") != 0 ||
		 code != t)
		fail(t, r, "command: stdout \"%s\" stderr \"%s\" exit %d", out,
		     errout, code);
	free(out);
	free(errout);
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	char dir[128], path[256];
	struct osb_error err;

	snprintf(dir, sizeof(dir), "%s/t%d", ROOT, t);
	for (int r = 0; r < rounds; r++) {
		size_t n = (size_t)(t + 1) * 97 * 1024 + (size_t)r * 4099;
		unsigned char *data = malloc(n);
		if (!data) {
			fail(t, r, "out of memory");
			break;
		}
		fill(data, n, t, r);
		snprintf(path, sizeof(path), "%s/f%d.bin", dir, r);
		if (upload(t, r, path, data, n) == 0) {
			check_stat(t, r, path, n);
			check_download(t, r, path, 0, -1, data, n);
			check_download(t, r, path, (int64_t)n / 3, 1000,
				       data + n / 3, 1000);
			check_download(t, r, path, (int64_t)n - 10, 100,
				       data + n - 10, 10);
			check_download(t, r, path, (int64_t)n, -1, NULL, 0);
			check_listing(t, r, dir);
			check_command(t, r, path, n);
		}
		free(data);
		/* a missing file stays missing, whatever the others do */
		struct osb_stat st;
		int rc = osb_file_stat(sandbox, ROOT "/never", &st, &err);
		if (rc != -ENOENT)
			fail(t, r, "stat of a missing file: %d (%s)", rc,
			     err.message);
		if (rc == 0)
			osb_stat_release(&st);
		/* swap the shared handle's endpoint under the others' feet */
		if (t == 0 && osb_sandbox_refresh(sandbox, &err))
			fail(t, r, "refresh: %s", err.message);
	}
	return NULL;
}

int main(void)
{
	struct osb_config cfg = { 0 };
	struct osb_error err;
	pthread_t th[NTHREADS];
	const char *id = getenv("OPEN_SANDBOX_ID");
	const char *rs = getenv("OSB_TEST_ROUNDS");

	if (!id || !*id) {
		fprintf(stderr, "test_threads: set OPEN_SANDBOX_DOMAIN, "
				"OPEN_SANDBOX_API_KEY and OPEN_SANDBOX_ID\n");
		return 2;
	}
	cfg.ca_file = getenv("OSB_TEST_CA_FILE");
	if (rs)
		rounds = atoi(rs);
	if (rounds < 1 || rounds > 9) {
		fprintf(stderr, "test_threads: OSB_TEST_ROUNDS must be 1-9\n");
		return 2;
	}
	int rc = osb_client_new(&cfg, &client, &err);
	if (!rc)
		rc = osb_sandbox_open(client, id, &sandbox, &err);
	if (rc) {
		fprintf(stderr, "test_threads: %s\n", err.message);
		osb_client_free(client);
		return 1;
	}
	for (int t = 0; t < NTHREADS; t++) {
		rc = pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
		if (rc) {
			fprintf(stderr, "test_threads: pthread_create: %s\n",
				strerror(rc));
			return 1;
		}
	}
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);

	const char *root = ROOT;
	if (osb_dirs_remove(sandbox, &root, 1, &err))
		fail(-1, -1, "cleanup: %s", err.message);
	struct osb_client_stats s;
	osb_client_stats(client, &s);
	printf("%d threads x %d rounds: %" PRIu64 " requests, %" PRIu64
	       " retries, %" PRIu64 " bytes up, %" PRIu64 " bytes down, "
	       "%" PRIu64 " connections, %" PRIu64 " TLS handshakes (%" PRId64
	       " full), %d mismatches\n",
	       NTHREADS, rounds, s.requests, s.retries, s.bytes_up,
	       s.bytes_down, s.connections, s.tls_handshakes,
	       s.tls_resumed == OSB_STAT_UNKNOWN ?
		       (int64_t)-1 :
		       (int64_t)(s.tls_handshakes - s.tls_resumed),
	       atomic_load(&failures));
	osb_sandbox_close(sandbox);
	osb_client_free(client);
	return atomic_load(&failures) ? 1 : 0;
}

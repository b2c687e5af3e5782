/*
 * test_json.c - the streamed reader of FileInfo arrays (json.c): the same
 * entries whatever the cut of the body into pieces, strings that hold
 * braces and escaped quotes, and the answers it must refuse; and the
 * egress policy a written policy becomes (json_policy); snapshots, their
 * list and the requests that make them and restore one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"
#include "test_check.h"

static const char listing[] =
	" [ {\"path\":\"/w/a\",\"size\":3,\"mode\":644,\"type\":\"file\","
	"\"owner\":\"root\",\"group\":\"staff\","
	"\"modified_at\":\"2025-01-02T03:04:05Z\"},\n"
	"{\"path\":\"/w/b}{\\\"[x]\",\"type\":\"directory\",\"mode\":755,"
	"\"extra\":{\"k\":[1,{\"z\":\"}\"}]}},"
	"{\"path\":\"/w/\\u00e9\",\"type\":\"symlink\",\"size\":9} ]\n";

/* Feeds @body in pieces of @piece bytes; the rc of the first failure. */
static int read_all(const char *body, size_t len, size_t piece,
		    struct osb_stat **ret, size_t *ret_n)
{
	struct json_stat_stream s;
	int rc = 0;

	json_stat_stream_init(&s);
	for (size_t off = 0; !rc && off < len; off += piece)
		rc = json_stat_stream_feed(
			&s, body + off, len - off < piece ? len - off : piece);
	if (!rc)
		rc = json_stat_stream_finish(&s, ret, ret_n);
	json_stat_stream_release(&s);
	return rc;
}

static void test_pieces(void)
{
	for (size_t piece = 1; piece <= sizeof(listing); piece++) {
		struct osb_stat *a = NULL;
		size_t n = 0;
		int rc = read_all(listing, strlen(listing), piece, &a, &n);
		CHECK(rc == 0 && n == 3, "pieces of %zu: rc %d, %zu entries",
		      piece, rc, n);
		if (rc || n != 3) {
			if (!rc)
				osb_stat_array_free(a, n);
			continue;
		}
		CHECK(strcmp(a[0].path, "/w/a") == 0 && a[0].size == 3 &&
			      a[0].mode == 0644 && a[0].type == OSB_FILE &&
			      strcmp(a[0].owner, "root") == 0 &&
			      strcmp(a[0].group, "staff") == 0 &&
			      a[0].mtime.tv_sec == 1735787045,
		      "entry 0");
		CHECK(strcmp(a[1].path, "/w/b}{\"[x]") == 0 &&
			      a[1].type == OSB_DIR && a[1].mode == 0755 &&
			      strcmp(a[1].owner, "") == 0,
		      "entry 1: %s", a[1].path);
		CHECK(strcmp(a[2].path, "/w/\xc3\xa9") == 0 &&
			      a[2].type == OSB_SYMLINK && a[2].size == 9,
		      "entry 2: %s", a[2].path);
		osb_stat_array_free(a, n);
	}
}

static void test_answers(void)
{
	static const struct {
		const char *body;
		int rc;
		size_t n;
	} rows[] = {
		{ "[]", 0, 0 },
		{ " [ \n ] \n", 0, 0 },
		{ "", -EPROTO, 0 },
		{ "[", -EPROTO, 0 },
		{ "[{\"path\":\"/a\"}", -EPROTO, 0 },
		{ "[{\"path\":\"/a\"},]", -EPROTO, 0 },
		{ "[,{\"path\":\"/a\"}]", -EPROTO, 0 },
		{ "[{\"path\":\"/a\"}{\"path\":\"/b\"}]", -EPROTO, 0 },
		{ "[{\"path\":\"/a\"}] x", -EPROTO, 0 },
		{ "[1]", -EPROTO, 0 },
		{ "{\"path\":\"/a\"}", -EPROTO, 0 },
		{ "[{\"size\":1}]", -EPROTO, 0 },
		{ "[{\"path\":\"/a\",}]", -EPROTO, 0 },
		{ "null", -EPROTO, 0 },
		{ "[{\"path\":\"/a\"},{\"path\":\"/b\"}]", 0, 2 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct osb_stat *a = NULL;
		size_t n = 0;
		int rc =
			read_all(rows[i].body, strlen(rows[i].body), 3, &a, &n);
		CHECK(rc == rows[i].rc && (rc || n == rows[i].n),
		      "%s: rc %d, %zu entries", rows[i].body, rc, n);
		CHECK(rc || a, "%s: an empty listing is not NULL",
		      rows[i].body);
		if (!rc)
			osb_stat_array_free(a, n);
	}
}

static void test_caps(void)
{
	struct json_stat_stream s;
	static char big[OSB_JSON_ELEM_MAX + 64];

	memset(big, ' ', sizeof(big));
	memcpy(big, "[{\"path\":\"/", 11);
	big[sizeof(big) - 1] = 'x';
	json_stat_stream_init(&s);
	int rc = json_stat_stream_feed(&s, big, sizeof(big));
	CHECK(rc == -EFBIG, "an entry past the cap: rc %d", rc);
	json_stat_stream_release(&s);
}

/* A walk cut at max entries: the parser stops there and hands them over,
 * though the array never closed. */
static void test_cut(void)
{
	static const char body[] = "[{\"path\":\"/a\",\"type\":\"directory\"},"
				   "{\"path\":\"/a/b\",\"type\":\"file\"},"
				   "{\"path\":\"/c\",\"type\":\"file\"}]";
	struct json_stat_stream s;
	struct osb_stat *a = NULL;
	size_t n = 0;

	json_stat_stream_init(&s);
	s.max = 2;
	int rc = json_stat_stream_feed(&s, body, sizeof(body) - 1);
	CHECK(rc == -ECANCELED && s.cut, "cut at 2: rc %d", rc);
	rc = json_stat_stream_finish(&s, &a, &n);
	CHECK(rc == 0 && n == 2 && strcmp(a[1].path, "/a/b") == 0,
	      "the two entries before the cut: rc %d, %zu", rc, n);
	if (!rc)
		osb_stat_array_free(a, n);
	json_stat_stream_release(&s);

	/* exactly max, or fewer: not cut */
	for (size_t max = 3; max <= 4; max++) {
		json_stat_stream_init(&s);
		s.max = max;
		rc = json_stat_stream_feed(&s, body, sizeof(body) - 1);
		CHECK(rc == 0 && !s.cut, "3 of max %zu: rc %d", max, rc);
		rc = json_stat_stream_finish(&s, &a, &n);
		CHECK(rc == 0 && n == 3, "all three: rc %d, %zu", rc, n);
		if (!rc)
			osb_stat_array_free(a, n);
		json_stat_stream_release(&s);
	}
}

static void test_policy(void)
{
	char why[200];
	static const char read_back[] =
		"{\"status\":\"ok\",\"mode\":\"enforcing\",\"policy\":"
		"{\"egress\":[{\"action\":\"allow\",\"target\":\"a.org\"}],"
		"\"defaultAction\":\"deny\"}}";
	char *p = json_policy(read_back, NULL, why, sizeof(why));
	CHECK(p && strcmp(p,
			  "{\"defaultAction\":\"deny\",\"egress\":"
			  "[{\"action\":\"allow\",\"target\":\"a.org\"}]}") ==
			      0,
	      "read back: %s", p ? p : why);
	free(p);
	p = json_policy("{\"defaultAction\":\"deny\",\"egress\":null}", "allow",
			why, sizeof(why));
	CHECK(p && strcmp(p, "{\"defaultAction\":\"allow\",\"egress\":[]}") ==
			      0,
	      "default set: %s", p ? p : why);
	free(p);
	static const char *const bad[] = {
		"[]",
		"{}",
		"{\"defaultAction\":\"maybe\"}",
		"not json",
		"{\"defaultAction\":\"deny\",\"egress\":{}}",
		"{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\"}"
		"]}",
		("{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"x\","
		 "\"target\":\"a\"}]}"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = json_policy(bad[i], NULL, why, sizeof(why));
		CHECK(!p && why[0], "refused: %s", bad[i]);
		free(p);
	}
}

/* execd's GET /metrics, as its Go model marshals it */
static void test_metrics(void)
{
	static const char good[] =
		"{\"cpu_count\":4,\"cpu_used_pct\":45.5,\"mem_total_mib\":8192,"
		"\"mem_used_mib\":4096.25,\"timestamp\":1700000000000}";
	struct osb_metrics m = { 0 };
	CHECK(json_metrics(good, sizeof(good) - 1, &m) == 0, "metrics");
	CHECK(m.cpu_count == 4 && m.cpu_used_pct == 45.5 &&
		      m.mem_total_mib == 8192 && m.mem_used_mib == 4096.25 &&
		      m.timestamp_ms == 1700000000000LL,
	      "metrics values");
	static const char *const bad[] = {
		"{\"cpu_count\":4,\"cpu_used_pct\":1,\"mem_total_mib\":2,"
		"\"mem_used_mib\":1}",
		"{\"cpu_count\":\"4\",\"cpu_used_pct\":1,\"mem_total_mib\":2,"
		"\"mem_used_mib\":1,\"timestamp\":1}",
		"[]",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(json_metrics(bad[i], strlen(bad[i]), &m) == -EPROTO,
		      "refused: %s", bad[i]);
	/* what /metrics/watch sends in place of a sample */
	static const char err_line[] = "{\"error\":\"failed to get CPU\"}";
	char msg[64];
	CHECK(json_error_field(err_line, sizeof(err_line) - 1, msg,
			       sizeof(msg)) == 0 &&
		      strcmp(msg, "failed to get CPU") == 0,
	      "metrics error line");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(json_error_field(bad[i], strlen(bad[i]), msg,
				       sizeof(msg)) == -EPROTO,
		      "not an error line: %s", bad[i]);
	CHECK(json_error_field("{\"error\":7}", 11, msg, sizeof(msg)) ==
		      -EPROTO,
	      "an error that is not a text");
}

/* A snapshot's answers: every field, the optional ones absent, a state
 * this client does not know, and the shapes it must refuse. */
static void test_snapshots(void)
{
	static const char one[] =
		"{\"id\":\"s1\",\"sandboxId\":\"b1\",\"name\":\"pre\","
		"\"status\":{\"state\":\"Failed\",\"reason\":\"snapshot_"
		"capture_failed\",\"message\":\"no space\","
		"\"lastTransitionAt\":\"2026-01-02T03:04:05.5Z\"},"
		"\"createdAt\":\"2026-01-02T03:04:04.25Z\"}";
	static const char list[] =
		"{\"items\":[{\"id\":\"s2\",\"sandboxId\":\"b1\","
		"\"status\":{\"state\":\"Archived\"},\"createdAt\":\"x\"},"
		"{\"id\":\"s1\",\"status\":{\"state\":\"Ready\"}}],"
		"\"pagination\":{\"page\":2,\"pageSize\":2,\"totalItems\":5,"
		"\"totalPages\":3,\"hasNextPage\":true}}";
	static const char *const bad[] = {
		"[]",
		"{\"id\":\"s\"}",
		"{\"id\":1,\"status\":{\"state\":\"Ready\"}}",
		"{\"id\":\"s\",\"status\":{\"state\":7}}",
		"{\"id\":\"s\"",
	};
	struct osb_snapshot s;
	struct osb_snapshot_list l;

	CHECK(json_snapshot(one, strlen(one), &s) == 0, "one snapshot");
	CHECK(!strcmp(s.id, "s1") && !strcmp(s.sandbox_id, "b1") &&
		      !strcmp(s.name, "pre") && !strcmp(s.state, "Failed") &&
		      !strcmp(s.reason, "snapshot_capture_failed") &&
		      !strcmp(s.message, "no space"),
	      "its strings");
	CHECK(s.created.tv_sec == 1767323044 &&
		      s.created.tv_nsec == 250000000 &&
		      s.last_transition.tv_sec == 1767323045,
	      "its times: %lld %ld", (long long)s.created.tv_sec,
	      s.created.tv_nsec);
	osb_snapshot_release(&s);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(json_snapshot(bad[i], strlen(bad[i]), &s) == -EPROTO,
		      "refused: %s", bad[i]);

	CHECK(json_snapshot_list(list, strlen(list), &l) == 0, "a list");
	CHECK(l.n == 2 && !strcmp(l.items[0].state, "Archived") &&
		      !l.items[1].sandbox_id && !l.items[1].name &&
		      !l.items[1].created.tv_sec,
	      "its items");
	CHECK(l.pg.page == 2 && l.pg.page_size == 2 && l.pg.total_items == 5 &&
		      l.pg.total_pages == 3 && l.pg.has_next,
	      "its pagination");
	osb_snapshot_list_release(&l);
	static const char bad_item[] = "{\"items\":[{}]}";
	CHECK(json_snapshot_list(bad_item, strlen(bad_item), &l) == -EPROTO &&
		      !l.items && !l.n,
	      "a list with a bad item");

	char *body = json_snapshot_request("a \"b\"");
	CHECK(body && !strcmp(body, "{\"name\":\"a \\\"b\\\"\"}"), "named: %s",
	      body);
	free(body);
	body = json_snapshot_request(NULL);
	CHECK(body && !strcmp(body, "{}"), "unnamed: %s", body);
	free(body);

	struct osb_create_params p = { .snapshot_id = "s1" };
	body = json_create_request(&p);
	CHECK(body && strstr(body, "\"snapshotId\":\"s1\"") &&
		      !strstr(body, "\"image\""),
	      "a sandbox from a snapshot: %s", body);
	free(body);
}

int main(void)
{
	test_snapshots();
	test_policy();
	test_metrics();
	test_pieces();
	test_answers();
	test_caps();
	test_cut();
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("json stream: ok\n");
	return 0;
}

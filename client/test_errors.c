/*
 * test_errors.c - the HTTP/curl -> errno table (errors.c), row by row,
 * with the texts execd really sends (docs/SERVER.md §5, §7); the checks
 * of paths and UTF-8, and osb_escape().
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"

static int failures;

static void expect(int got, int want, const char *what)
{
	if (got != want) {
		fprintf(stderr, "FAIL %s: got %d (%s), want %d (%s)\n", what,
			got, strerror(got), want, strerror(want));
		failures++;
	}
}

int main(void)
{
	static const struct {
		int status;
		const char *code, *msg;
		int want;
	} rows[] = {
		{ 200, "", "", 0 },
		{ 404, "FILE_NOT_FOUND",
		  "file not found. stat /x: no such file or directory",
		  ENOENT },
		{ 404, "", "404 page not found", EOPNOTSUPP },
		{ 404, "DOCKER::SANDBOX_NOT_FOUND", "Sandbox abc not found",
		  ENOENT },
		{ 500, "RUNTIME_ERROR",
		  "error removing file /w/d. path is a directory: /w/d",
		  EISDIR },
		{ 500, "RUNTIME_ERROR", "destination path already exists: /w/b",
		  EEXIST },
		{ 500, "RUNTIME_ERROR", "mkdir /w/f/x: not a directory",
		  ENOTDIR },
		{ 500, "RUNTIME_ERROR", "open /etc/x: read-only file system",
		  EROFS },
		{ 500, "RUNTIME_ERROR", "open /w/x: permission denied",
		  EACCES },
		{ 500, "RUNTIME_ERROR",
		  "rename /a /b: invalid cross-device link", EXDEV },
		{ 500, "RUNTIME_ERROR", "write /w/x: no space left on device",
		  ENOSPC },
		{ 500, "RUNTIME_ERROR",
		  "path references undefined environment variables: FOO",
		  EINVAL },
		{ 500, "RUNTIME_ERROR",
		  "error interruptting code context. command session abc is "
		  "not running",
		  ESRCH },
		{ 500, "RUNTIME_ERROR",
		  "error interruptting code context. no such session", ENOENT },
		{ 500, "RUNTIME_ERROR", "something else entirely", EIO },
		{ 400, "INVALID_REQUEST_BODY", "path is not a directory: /w/f",
		  ENOTDIR },
		{ 400, "INVALID_REQUEST_BODY",
		  "path is a symbolic link, refusing to traverse: /w/l",
		  ENOTDIR },
		{ 400, "MISSING_QUERY", "missing path", EINVAL },
		{ 401, "INVALID_API_KEY", "bad key", EACCES },
		{ 401, "",
		  "Unauthorized: invalid or missing header "
		  "X-EXECD-ACCESS-TOKEN",
		  EACCES },
		{ 409, "DOCKER::SANDBOX_NOT_RUNNING", "not running", EBUSY },
		{ 413, "", "too many rules", EFBIG },
		{ 416, "", "", ERANGE },
		{ 422, "VALIDATION_ERROR", "body.timeout: too small", EINVAL },
		{ 502, "", "Bad Gateway", EIO },
		{ 503, "", "", EIO },
	};
	char what[256];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		snprintf(what, sizeof(what), "%d %s %s", rows[i].status,
			 rows[i].code, rows[i].msg);
		expect(osb_errno_from_http(rows[i].status, rows[i].code,
					   rows[i].msg),
		       rows[i].want, what);
	}
	expect(osb_errno_from_curl(CURLE_COULDNT_CONNECT), ECONNREFUSED,
	       "curl connect");
	expect(osb_errno_from_curl(CURLE_OPERATION_TIMEDOUT), ETIMEDOUT,
	       "curl timeout");
	expect(osb_errno_from_curl(CURLE_RECV_ERROR), ECONNRESET, "curl recv");
	expect(osb_errno_from_curl(CURLE_PEER_FAILED_VERIFICATION), EPROTO,
	       "curl tls");
	expect(osb_errno_from_curl(CURLE_COULDNT_RESOLVE_HOST), EHOSTUNREACH,
	       "curl dns");

	/* the helpers the errors depend on */
	expect(osb_path_is_safe("/w/Outer$Inner.class") ? 1 : 0, 0, "$ path");
	expect(osb_path_is_safe("/w/a b%#?&+") ? 1 : 0, 1, "odd path");
	expect(osb_path_is_safe("/w/\xff") ? 1 : 0, 0, "non-utf8 path");
	expect(osb_utf8_valid("\xc3\xa9t\xc3\xa9", 5) ? 1 : 0, 1, "utf8");
	expect(osb_utf8_valid("\xc0\xaf", 2) ? 1 : 0, 0, "overlong");
	expect(osb_utf8_valid("\xed\xa0\x80", 3) ? 1 : 0, 0, "surrogate");

	static const struct {
		const char *in;
		size_t len;
		const char *out;
	} esc[] = {
		{ "plain /w/a b.txt", 16, "plain /w/a b.txt" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
		  "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
		{ "a\nb\rc\td\\e", 9, "a\\nb\\rc\\td\\\\e" },
		{ "\x1b[31mred\x7f", 9, "\\x1b[31mred\\x7f" },
		{ "nul\0x", 5, "nul\\x00x" },
		{ "\xff\xc3", 2, "\\xff\\xc3" },
		{ "\xc0\xaf\xed\xa0\x80", 5, "\\xc0\\xaf\\xed\\xa0\\x80" },
		{ "c1 \xc2\x9b", 5, "c1 \\xc2\\x9b" },
		{ "rtl \xe2\x80\xae", 7, "rtl \\xe2\\x80\\xae" },
		{ "bad\xef\xbf\xbdname", 10, "bad\\ufffdname" },
		{ "", 0, "" },
	};
	for (size_t i = 0; i < sizeof(esc) / sizeof(*esc); i++) {
		char *e = osb_escape(esc[i].in, esc[i].len);
		if (!e || strcmp(e, esc[i].out) != 0) {
			fprintf(stderr, "FAIL osb_escape #%zu: got %s\n", i,
				e ? e : "NULL");
			failures++;
		}
		free(e);
	}

	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	else
		printf("all rows pass\n");
	return failures ? 1 : 0;
}

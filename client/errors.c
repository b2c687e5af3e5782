/*
 * errors.c - what an answer of the OpenSandbox servers means as an errno.
 *
 * execd reports "not found" as 404 and nearly everything else as
 * 500 RUNTIME_ERROR carrying Go's error text, so the text decides
 * (docs/SERVER.md §7). The table is ordered: the first row that matches wins.
 * A unit test (test_errors.c) checks every row.
 */
#include <curl/curl.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "osb_i.h"

struct text_rule {
	const char *needle; /* matched case-insensitively in the message */
	int err;
};

/* Go error texts (syscall.Errno strings) and execd's own phrases. */
static const struct text_rule text_rules[] = {
	{ "destination path already exists", EEXIST },
	{ "file exists", EEXIST },
	{ "no such file or directory", ENOENT },
	{ "file not found", ENOENT },
	{ "not a directory", ENOTDIR },
	{ "is a directory", EISDIR },
	{ "directory not empty", ENOTEMPTY },
	{ "permission denied", EACCES },
	{ "operation not permitted", EPERM },
	{ "read-only file system", EROFS },
	{ "no space left on device", ENOSPC },
	{ "disk quota exceeded", EDQUOT },
	{ "invalid cross-device link", EXDEV },
	{ "file name too long", ENAMETOOLONG },
	{ "too many levels of symbolic links", ELOOP },
	{ "too many open files", EMFILE },
	{ "file too large", EFBIG },
	{ "text file busy", ETXTBSY },
	{ "input/output error", EIO },
	{ "undefined environment variable", EINVAL },
	{ "refusing to traverse", ENOTDIR },
	{ "is not running", ESRCH },
	{ "no such session", ENOENT },
	{ "context not found", ENOENT },
	{ "command not found", ENOENT },
	{ "session is busy", EBUSY },
	{ "not running in background", EINVAL },
	{ "working directory does not exist", ENOENT },
	{ "metadata and file count mismatch", EINVAL },
	{ "language runtime server not configured", EOPNOTSUPP },
};

static int from_text(const char *message)
{
	if (!message)
		return 0;
	for (size_t i = 0; i < sizeof(text_rules) / sizeof(text_rules[0]); i++)
		if (strcasestr(message, text_rules[i].needle))
			return text_rules[i].err;
	return 0;
}

int osb_errno_from_http(int status, const char *code, const char *message)
{
	int e;

	if (status >= 200 && status < 300)
		return 0;
	switch (status) {
	case 400:
		/* execd says "path is not a directory" as a 400 */
		e = from_text(message);
		return e == ENOTDIR ? ENOTDIR : EINVAL;
	case 401:
	case 403:
		return EACCES;
	case 404:
		/* gin's text 404 means a route this execd does not have */
		if (code && !*code && message &&
		    strstr(message, "404 page not found"))
			return EOPNOTSUPP;
		return ENOENT;
	case 405:
		return EOPNOTSUPP;
	case 408:
		return ETIMEDOUT;
	case 409:
		return EBUSY;
	case 413:
		return EFBIG;
	case 416:
		return ERANGE;
	case 422:
		return EINVAL;
	case 429:
		return EAGAIN;
	case 501:
		return EOPNOTSUPP;
	case 502:
	case 503:
	case 504:
		return EIO;
	default:
		break;
	}
	if (code && strcmp(code, "FILE_NOT_FOUND") == 0)
		return ENOENT;
	if (code && strcmp(code, "CONTEXT_NOT_FOUND") == 0)
		return ENOENT;
	e = from_text(message);
	if (e)
		return e;
	if (status >= 400 && status < 500)
		return EINVAL;
	return EIO;
}

int osb_errno_from_curl(int curl_code)
{
	switch ((CURLcode)curl_code) {
	case CURLE_OK:
		return 0;
	case CURLE_COULDNT_CONNECT:
		return ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return ETIMEDOUT;
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2_STREAM:
		return ECONNRESET;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
		return EPROTO;
	case CURLE_ABORTED_BY_CALLBACK:
		return ECANCELED;
	case CURLE_OUT_OF_MEMORY:
		return ENOMEM;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return EINVAL;
	default: /* CURLE_READ_ERROR, CURLE_WRITE_ERROR and the rest */
		return EIO;
	}
}

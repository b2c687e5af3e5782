/*
 * osb_text.c - text in an encoding other than UTF-8, as the official
 * CLI's --encoding: `file cat --encoding E` decodes the file from E into
 * UTF-8, `file write --encoding E` encodes the UTF-8 text into E. Bytes
 * that do not convert stop the command with the offset where they are,
 * never replaced by a guess: a write then uploads nothing; a cat has
 * printed what converted before them, as iconv(1) does.
 */
#include <ctype.h>
#include <errno.h>
#include <iconv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "osb_tool.h"

struct text {
	char *data;
	size_t len, cap;
};

static int reserve(struct text *t, size_t more)
{
	if (t->cap - t->len >= more)
		return 0;
	size_t cap = t->cap ? t->cap : 4096;
	while (cap - t->len < more)
		cap *= 2;
	char *p = realloc(t->data, cap);
	if (!p)
		return -1;
	t->data = p;
	t->cap = cap;
	return 0;
}

bool cli_is_utf8(const char *encoding)
{
	return !encoding || strcasecmp(encoding, "utf-8") == 0 ||
	       strcasecmp(encoding, "utf8") == 0 ||
	       strcasecmp(encoding, "utf_8") == 0;
}

/* iconv's name for @name: as given, with _ for - (Python's utf_16), or
 * with neither (Python's latin-1 is iconv's latin1) */
static iconv_t open_named(const char *to, const char *from, bool name_is_to)
{
	const char *name = name_is_to ? to : from;
	char alt[64];
	for (int pass = 0; pass < 3; pass++) {
		size_t n = 0;
		for (const char *p = name; *p && n + 1 < sizeof(alt); p++) {
			char ch = *p;
			if (pass > 0 && ch == '_')
				ch = '-';
			if (pass == 2 && ch == '-')
				continue;
			alt[n++] = (char)toupper((unsigned char)ch);
		}
		alt[n] = '\0';
		iconv_t cd = name_is_to ? iconv_open(alt, from) :
					  iconv_open(to, alt);
		if (cd != (iconv_t)-1)
			return cd;
	}
	return (iconv_t)-1;
}

static int recoder_open(const char *encoding, bool to_utf8, iconv_t *cd)
{
	*cd = to_utf8 ? open_named("UTF-8", encoding, false) :
			open_named(encoding, "UTF-8", true);
	if (*cd == (iconv_t)-1)
		return cli_usage("unknown encoding %s (names as iconv -l "
				 "lists them: latin1, utf-16, cp1252...)",
				 encoding);
	return 0;
}

/* Converts @len bytes of @in (more may follow when @more) into @out,
 * growing it. Returns how many bytes of @in were taken (an incomplete
 * sequence at the end waits for the rest), or -1 with errno EILSEQ (or
 * EINVAL: the input ends inside a character) and *@bad its offset. */
static long recode(iconv_t cd, const char *in, size_t len, bool more,
		   struct text *out, size_t *bad)
{
	char *src = (char *)in;
	size_t left = len;
	while (left > 0) {
		if (reserve(out, left * 4 + 16))
			return errno = ENOMEM, -1;
		char *dst = out->data + out->len;
		size_t room = out->cap - out->len;
		size_t r = iconv(cd, &src, &left, &dst, &room);
		out->len = (size_t)(dst - out->data);
		if (r != (size_t)-1)
			break;
		if (errno == E2BIG)
			continue;
		if (errno == EINVAL && more)
			break;
		*bad = (size_t)(src - in);
		return -1;
	}
	/* the shift state's end (UTF-16's has none; ISO-2022's has) */
	if (!more) {
		if (reserve(out, 16))
			return errno = ENOMEM, -1;
		char *dst = out->data + out->len;
		size_t room = out->cap - out->len;
		iconv(cd, NULL, NULL, &dst, &room);
		out->len = (size_t)(dst - out->data);
	}
	return (long)(src - in);
}

static int recode_failed(const char *what, const char *encoding, bool to_utf8,
			 size_t at)
{
	if (errno == ENOMEM)
		return cli_fail(what, -ENOMEM, NULL);
	fprintf(stderr,
		errno == EINVAL ?
			"osb: %s: the text ends inside a character at byte "
			"%zu (%s%s)\n" :
			"osb: %s: byte %zu cannot be converted (%s%s)\n",
		what, at,
		to_utf8 ? "not valid " :
			  "UTF-8 text not valid or "
			  "not representable in ",
		encoding);
	return 1;
}

int cli_encode_text(const char *encoding, const char *text, size_t len,
		    char **ret, size_t *ret_len)
{
	iconv_t cd;
	int rc = recoder_open(encoding, false, &cd);
	if (rc)
		return rc;
	struct text out = { 0 };
	size_t bad = 0;
	long n = recode(cd, text, len, false, &out, &bad);
	iconv_close(cd);
	if (n < 0) {
		free(out.data);
		return recode_failed("write", encoding, false, bad);
	}
	*ret = out.data ? out.data : calloc(1, 1);
	*ret_len = out.len;
	return *ret ? 0 : cli_fail("write", -ENOMEM, NULL);
}

int cli_decode_fd(const char *encoding, int fd, FILE *out)
{
	iconv_t cd;
	int rc = recoder_open(encoding, true, &cd);
	if (rc)
		return rc;
	char in[65536];
	size_t have = 0, done = 0, bad = 0;
	struct text buf = { 0 };
	for (;;) {
		ssize_t r = read(fd, in + have, sizeof(in) - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = cli_fail("cat", -errno, NULL);
			break;
		}
		have += (size_t)r;
		buf.len = 0;
		long n = recode(cd, in, have, r > 0, &buf, &bad);
		if (n < 0) {
			rc = recode_failed("cat", encoding, true, done + bad);
			break;
		}
		if (buf.len && fwrite(buf.data, 1, buf.len, out) != buf.len) {
			rc = cli_fail("cat", -EIO, NULL);
			break;
		}
		/* what is left is the start of a character */
		memmove(in, in + n, have - (size_t)n);
		have -= (size_t)n;
		done += (size_t)n;
		if (r == 0)
			break;
	}
	free(buf.data);
	iconv_close(cd);
	return rc;
}

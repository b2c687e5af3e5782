/*
 * hex.c - bytes as lowercase hex digits (see hex.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "hex.h"

void hex_put(FILE *out, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		fprintf(out, "%02x", *p);
}

static int digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int hex_decode(const char *hex, size_t n, char *out, size_t size)
{
	if (n % 2 || n / 2 >= size)
		return -EINVAL;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (char)(hi << 4 | lo);
	}
	out[n / 2] = '\0';
	return 0;
}

char *hex_decode_dup(const char *hex, size_t n)
{
	char *out = malloc(n / 2 + 1);
	if (out && hex_decode(hex, n, out, n / 2 + 1)) {
		free(out);
		out = NULL;
	}
	return out;
}

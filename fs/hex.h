/*
 * hex.h - bytes as lowercase hex digits: how names of any bytes travel
 * through line-based text (the journal, shell command output).
 */
#ifndef OSBFS_HEX_H
#define OSBFS_HEX_H

#include <stddef.h>
#include <stdio.h>

/* Writes @s (up to its NUL) to @out as hex digits. */
void hex_put(FILE *out, const char *s);
/* Decodes the @n hex digits at @hex into @out (NUL-terminated; at most
 * @size bytes with the NUL). 0, or -EINVAL if malformed or too long. */
int hex_decode(const char *hex, size_t n, char *out, size_t size);
/* The same into a malloc'd string; NULL if malformed or ENOMEM. */
char *hex_decode_dup(const char *hex, size_t n);

#endif /* OSBFS_HEX_H */

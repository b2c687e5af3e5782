/*
 * fuzz_options.c - libFuzzer harness: osbfs's command line (the options
 * table, -o lists, the SANDBOX:DIR source). Arguments are the input's
 * NUL-separated pieces.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ARGS_MAX 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct osbfs_options o;
	char *argv[ARGS_MAX + 2];
	char msg[1024];
	int argc = 0;

	char *copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	argv[argc++] = (char *)"osbfs";
	for (char *p = copy; p <= copy + size && argc <= ARGS_MAX;
	     p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;
	options_parse(&o, argc, argv, msg, sizeof(msg));
	options_release(&o);
	free(copy);
	return 0;
}

/*
 * fuzz_code_recs.c - libFuzzer harness: the names of the code contexts'
 * records, read from a listing of the sandbox's /tmp/.osbfs/code. The
 * sandbox writes there, so a name may be anything.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "code_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct code_rec r;
	char *name = malloc(size + 1);
	if (!name)
		return 0;
	memcpy(name, data, size);
	name[size] = '\0';
	if (code_rec_parse(name, &r)) {
		/* what a record gives must make a record again */
		if (r.lang < 0 || r.lang >= CODE_NLANG || !r.id[0] ||
		    strchr(r.id, '/') ||
		    (r.name[0] && !code_name_valid(r.name)))
			abort();
	}
	free(name);
	return 0;
}

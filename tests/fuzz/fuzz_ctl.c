/*
 * fuzz_ctl.c - libFuzzer harness: what is written to `ctl` and to a job's
 * `ctl` (first byte: which), parsed as the mount parses it.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ctl_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_verbs vs;
	char msg[300];

	if (size < 1)
		return 0;
	int rc = ctl_parse((const char *)data + 1, size - 1, data[0] & 1, "ctl",
			   &vs, msg, sizeof(msg));
	if (rc == 0 && (vs.n == 0 || vs.n > CTL_VERBS_MAX))
		__builtin_trap(); /* accepted, yet nothing (or too much) to run
				   */
	if (rc && !msg[0] && rc != -ENOMEM)
		__builtin_trap(); /* refused without a reason */
	for (size_t i = 0; rc == 0 && i < vs.n; i++)
		if (vs.v[i].kind == CTL_JOB_SIGNAL && !vs.v[i].sig[0])
			__builtin_trap();
	return 0;
}

/*
 * fuzz_config.c - libFuzzer harness: the settings file osb and osbfs read
 * (~/.opensandbox/config.toml), and the durations it holds.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "osb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct osb_cfgfile f;
	struct osb_error err;
	long secs;

	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (osb_cfgfile_parse("config.toml", text, &f, &err) == 0) {
		if (f.timeout)
			osb_duration_parse(f.timeout, &secs);
		osb_cfgfile_release(&f);
	}
	osb_duration_parse(text, &secs);
	free(text);
	return 0;
}

/*
 * fuzz_holder.c - libFuzzer harness: reading a cache dir's lock file (a
 * record another osbfs wrote, or anything at all).
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "holder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	struct holder_record r;

	if (!path[0])
		snprintf(path, sizeof(path), "/tmp/fuzz-holder-%d",
			 (int)getpid());
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	ssize_t w = write(fd, data, size);
	close(fd);
	if (w == (ssize_t)size && holder_read(path, &r) == 0)
		holder_record_release(&r);
	return 0;
}

/*
 * fuzz_untar.c - libFuzzer harness: the tar reader, on archives the
 * sandbox makes (and a hostile one may make anything).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "osb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct osb_tar_entry e;
	int64_t pos = 0;

	if (fd < 0)
		fd = memfd_create("fuzz-untar", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 0) != 0 ||
	    pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	/* the end may claim more than there is: the reader must cope */
	int64_t end = (int64_t)size;
	for (int i = 0; i < 10000; i++) {
		int64_t before = pos;
		int rc = osb_tar_next(fd, &pos, end, &e);
		if (rc != 1)
			break;
		if (e.path)
			(void)strlen(e.path);
		osb_tar_entry_release(&e);
		if (pos <= before)
			__builtin_trap(); /* no progress: a reader would spin */
	}
	return 0;
}

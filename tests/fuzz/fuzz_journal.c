/*
 * fuzz_journal.c - libFuzzer harness: replaying a journal of dirty files,
 * as a crash may leave it (torn, truncated, or damaged on disk).
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_record(void *arg, uint64_t id, const struct journal_record *r)
{
	size_t *n = arg;
	*n += strnlen(r->path, sizeof(r->path)) + (size_t)(id & 1) +
	      (r->left ? 1 : 0) + (size_t)r->m.mode + (size_t)(r->file & 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char dir[] = "/tmp/fuzz-journal-XXXXXX";
	static int dir_fd = -1;
	size_t n = 0;

	if (dir_fd < 0) {
		if (!mkdtemp(dir))
			return 0;
		dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dir_fd < 0)
			return 0;
	}
	int fd = openat(dir_fd, "journal", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return 0;
	ssize_t w = write(fd, data, size);
	close(fd);
	if (w != (ssize_t)size)
		return 0;
	journal_replay_at(dir_fd, dir, on_record, &n);
	return 0;
}

/*
 * test_check.h - the CHECK() of the client's unit tests: a failed
 * condition is reported with its place and counted in `failures`.
 */
#ifndef OSB_TEST_CHECK_H
#define OSB_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			failures++;                                            \
		}                                                              \
	} while (0)

#endif /* OSB_TEST_CHECK_H */

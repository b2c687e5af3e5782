/*
 * fuzz_recs.c - libFuzzer harness: the jobs' records, read from a listing
 * of the sandbox's job directories. The sandbox writes there, so anything
 * may be in it: names, sizes, types.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_i.h"
#include "osb_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_stat_stream s;
	struct osb_stat *a = NULL;
	struct rec *recs = NULL;
	size_t n = 0, nr = 0;

	if (size < 1)
		return 0;
	json_stat_stream_init(&s);
	int rc = json_stat_stream_feed(&s, data + 1, size - 1);
	if (rc == 0)
		rc = json_stat_stream_finish(&s, &a, &n);
	json_stat_stream_release(&s);
	if (rc)
		return 0;
	if (recs_parse(data[0] & 1 ? LIVE_DIR : JOBS_DIR, a, n, &recs, &nr) ==
	    0) {
		for (size_t i = 0; i < nr; i++)
			(void)recs_find(recs, nr, recs[i].id);
		free(recs);
	}
	osb_stat_array_free(a, n);
	return 0;
}

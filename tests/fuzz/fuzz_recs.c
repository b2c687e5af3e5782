/*
 * fuzz_recs.c - libFuzzer harness: the jobs' records, read from a listing
 * of the sandbox's job directories. The sandbox writes there, so anything
 * may be in it: names, sizes, types.
 *
 * Besides not crashing, the parse must keep its promise: it succeeds;
 * every record has a valid id (job_id_valid), once, in order; every
 * directory of the listing with a valid name has its record, whatever
 * else is there (a bad name hides nothing); and a name told skipped is a
 * bad one.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_i.h"
#include "osb_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void skipped(void *arg, const char *name, size_t len)
{
	(void)arg;
	if (job_id_valid(name, len))
		abort(); /* a good record skipped */
}

/* Every entry DIR/ID or DIR/ID/... with a valid ID has a record. */
static void check_all_kept(const char *dir, const struct osb_stat *a, size_t n,
			   struct rec *recs, size_t nr)
{
	size_t plen = strlen(dir);
	for (size_t i = 0; i < n; i++) {
		const char *p = a[i].path;
		if (!p || strncmp(p, dir, plen) != 0 || p[plen] != '/')
			continue;
		const char *id = p + plen + 1;
		size_t len = strcspn(id, "/");
		if (!job_id_valid(id, len))
			continue;
		char buf[JOB_ID_MAX];
		memcpy(buf, id, len);
		buf[len] = '\0';
		if (!recs_find(recs, nr, buf))
			abort(); /* hidden */
	}
}

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
	const char *dir = data[0] & 1 ? LIVE_DIR : JOBS_DIR;
	/* no listing fails the parse (a long name made it -ENOMEM) */
	if (recs_parse(dir, a, n, skipped, NULL, &recs, &nr) != 0)
		abort();
	for (size_t i = 0; i < nr; i++) {
		if (!job_name_valid(recs[i].id) ||
		    recs_find(recs, nr, recs[i].id) != &recs[i] ||
		    (i && strcmp(recs[i - 1].id, recs[i].id) >= 0))
			abort();
	}
	check_all_kept(dir, a, n, recs, nr);
	free(recs);
	osb_stat_array_free(a, n);
	return 0;
}

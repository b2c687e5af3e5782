/*
 * fuzz_json.c - libFuzzer harness: every parser of a JSON answer from the
 * lifecycle, execd or egress servers. The first byte picks the parser;
 * the rest is the body.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A listing, fed in pieces of @cut bytes, as it arrives. */
static void listing(const char *body, size_t len, size_t cut, size_t max)
{
	struct json_stat_stream s;
	struct osb_stat *a = NULL;
	size_t n = 0;
	int rc = 0;

	json_stat_stream_init(&s);
	s.max = max;
	for (size_t off = 0; off < len && rc == 0; off += cut)
		rc = json_stat_stream_feed(&s, body + off,
					   len - off < cut ? len - off : cut);
	if ((rc == 0 || rc == -ECANCELED) &&
	    json_stat_stream_finish(&s, &a, &n) == 0)
		osb_stat_array_free(a, n);
	json_stat_stream_release(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char code[64], msg[512], id[OSB_ID_MAX], why[256];
	if (size < 1)
		return 0;
	unsigned which = data[0];
	/* the parsers take a body and its length, and must not read past
	 * it: a copy without a terminator lets ASan see that */
	size_t len = size - 1;
	char *body = malloc(len ? len : 1);
	if (!body)
		return 0;
	memcpy(body, data + 1, len);

	switch (which % 15) {
	case 0:
		json_error_body(body, len, code, sizeof(code), msg,
				sizeof(msg));
		break;
	case 1: {
		struct osb_stat st;
		if (json_stat_map_get(body, len, "/workspace/a", &st) == 0)
			osb_stat_release(&st);
		break;
	}
	case 2:
		listing(body, len, (which >> 4) + 1, which & 0x80 ? 3 : 0);
		break;
	case 3: {
		/* a sandbox, or a snapshot: objects of the same server */
		struct osb_sandbox_info info;
		struct osb_snapshot snap;
		if (json_sandbox(body, len, &info) == 0)
			osb_sandbox_info_release(&info);
		if (json_snapshot(body, len, &snap) == 0)
			osb_snapshot_release(&snap);
		break;
	}
	case 4: {
		struct osb_sandbox_list l;
		struct osb_snapshot_list sl;
		if (json_sandbox_list(body, len, &l) == 0)
			osb_sandbox_list_release(&l);
		if (json_snapshot_list(body, len, &sl) == 0)
			osb_snapshot_list_release(&sl);
		break;
	}
	case 5: {
		time_t t;
		json_renew_response(body, len, &t);
		break;
	}
	case 6: {
		struct osb_endpoint ep;
		if (json_endpoint(body, len, which & 0x10 ? "https" : "http",
				  &ep) == 0)
			osb_endpoint_release(&ep);
		break;
	}
	case 7: {
		long n;
		json_replace_count(body, len, "/workspace/a", &n);
		break;
	}
	case 8:
		json_session_id(body, len, id);
		break;
	case 9: {
		struct osb_command_status st;
		if (json_command_status(body, len, &st) == 0)
			osb_command_status_release(&st);
		break;
	}
	case 10: {
		struct osb_code_context ctx;
		if (json_code_context(body, len, &ctx) == 0)
			osb_code_context_release(&ctx);
		break;
	}
	case 11: {
		struct osb_code_context *a;
		size_t n;
		if (json_code_context_array(body, len, &a, &n) == 0)
			osb_code_context_array_free(a, n);
		break;
	}
	case 12: {
		struct osb_event ev;
		struct json_event_store store = { 0 };
		struct osb_error err;
		json_event(body, len, &ev, &store, &err);
		json_event_release(&store);
		break;
	}
	case 13: {
		/* the egress policy: a string (NUL-terminated) */
		char *s = strndup(body, len);
		if (s) {
			free(json_policy(s, which & 0x10 ? "deny" : NULL, why,
					 sizeof(why)));
			json_check_array(s);
		}
		free(s);
		break;
	}
	case 14: {
		/* a sample of GET /metrics, or a line of /metrics/watch */
		struct osb_metrics m;
		json_metrics(body, len, &m);
		json_error_field(body, len, msg,
				 which & 0x10 ? 8 : sizeof(msg));
		break;
	}
	}
	free(body);
	return 0;
}

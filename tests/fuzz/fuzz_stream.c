/*
 * fuzz_stream.c - libFuzzer harness: the event stream of a command, a
 * session run or a code run, as execd (or a hostile server) sends it,
 * cut into pieces at sizes the input's first bytes choose.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "osb_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_event(void *arg, const struct osb_event *ev)
{
	size_t *n = arg;
	/* read what a consumer reads */
	const char *s[] = { ev->type_name,   ev->text,  ev->results_json,
			    ev->result_text, ev->ename, ev->evalue };
	for (size_t i = 0; i < sizeof(s) / sizeof(*s); i++)
		if (s[i])
			*n += strlen(s[i]);
	for (size_t i = 0; ev->traceback && ev->traceback[i]; i++)
		*n += strlen(ev->traceback[i]);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct event_stream s;
	struct osb_error err;
	size_t seen = 0, cut = 1;

	if (size < 2)
		return 0;
	event_stream_init(&s, on_event, &seen);
	s.code_mode = data[0] & 1;
	cut = (size_t)data[1] + 1;
	data += 2;
	size -= 2;
	int rc = 0;
	for (size_t off = 0; off < size && rc == 0; off += cut) {
		size_t n = size - off < cut ? size - off : cut;
		rc = event_stream_sink(&s, data + off, n);
	}
	if (rc == 0)
		event_stream_finish(&s, &err);
	event_stream_release(&s);
	return 0;
}

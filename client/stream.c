/*
 * stream.c - the event streams of /command, /session/{id}/run and /code.
 *
 * execd writes each event as one JSON object followed by "\n\n", with no
 * "data:" prefix (docs/SERVER.md §8.2). Like the official SDKs, this
 * parser also accepts SSE framing: it splits on '\n', skips blank lines
 * and SSE field lines, strips a "data:" prefix. The terminal event is
 * execution_complete (exit 0) or error (exit code in evalue, "-1" for a
 * signal); the parser stops the transfer right there instead of waiting
 * out execd's one-second grace before the body ends (§8.5).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"

void event_stream_init(struct event_stream *s, osb_event_fn fn, void *arg)
{
	memset(s, 0, sizeof(*s));
	s->line.max = OSB_EVENT_LINE_MAX;
	s->fn = fn;
	s->arg = arg;
	s->exit_code = -1;
}

void event_stream_release(struct event_stream *s)
{
	buf_release(&s->line);
}

static int exit_code_of(const struct osb_event *ev)
{
	if (!ev->evalue)
		return -1;
	char *end;
	long v = strtol(ev->evalue, &end, 10);
	if (end == ev->evalue || *end)
		return -1; /* a spawn failure: Go's error text */
	return (int)v;
}

char *stream_payload(char *line, size_t *len)
{
	size_t n = *len;
	while (n && (line[n - 1] == '\r'))
		line[--n] = '\0';
	if (!n || line[0] == ':')
		return NULL;
	if (strncmp(line, "data:", 5) == 0) {
		line += 5;
		n -= 5;
		while (n && *line == ' ') {
			line++;
			n--;
		}
	} else if (strncmp(line, "event:", 6) == 0 ||
		   strncmp(line, "id:", 3) == 0 ||
		   strncmp(line, "retry:", 6) == 0) {
		return NULL;
	}
	*len = n;
	return n ? line : NULL;
}

static int handle_line(struct event_stream *s, char *line, size_t len)
{
	struct osb_event ev;
	struct json_event_store store;

	line = stream_payload(line, &len);
	if (!line)
		return 0;
	int rc = json_event(line, len, &ev, &store, &s->err);
	if (rc == -EPROTO) {
		osb_error_set(&s->err, 200, "",
			      "malformed event in the output stream: %.80s",
			      line);
		return rc;
	}
	if (rc)
		return rc;
	switch (ev.type) {
	case OSB_EV_INIT:
		if (ev.text)
			snprintf(s->id, sizeof(s->id), "%s", ev.text);
		break;
	case OSB_EV_COMPLETE:
		s->terminal = true;
		if (!s->failed)
			s->exit_code = 0;
		break;
	case OSB_EV_ERROR:
		s->failed = true;
		s->exit_code = exit_code_of(&ev);
		s->terminal = true;
		break;
	default:
		break;
	}
	if (s->fn && ev.type != OSB_EV_PING)
		rc = s->fn(s->arg, &ev);
	json_event_release(&store);
	return rc;
}

int event_stream_sink(void *arg, const void *data, size_t len)
{
	struct event_stream *s = arg;
	const char *p = data;

	while (len && !s->terminal) {
		const char *nl = memchr(p, '\n', len);
		size_t take = nl ? (size_t)(nl - p) : len;
		int rc = buf_append(&s->line, p, take);
		if (rc) {
			osb_error_set(&s->err, 200, "",
				      "an event of the output stream exceeds "
				      "%u bytes",
				      OSB_EVENT_LINE_MAX);
			s->rc = rc;
			return rc;
		}
		if (!nl)
			break;
		rc = handle_line(s, s->line.data, s->line.len);
		s->line.len = 0;
		if (s->line.data)
			s->line.data[0] = '\0';
		if (rc) {
			s->rc = rc;
			return rc;
		}
		p = nl + 1;
		len -= take + 1;
	}
	return s->terminal ? 1 : 0;
}

int event_stream_finish(struct event_stream *s, struct osb_error *err)
{
	if (!s->terminal && s->line.len) {
		/* the last event without its blank line */
		int rc = handle_line(s, s->line.data, s->line.len);
		s->line.len = 0;
		if (rc && !s->rc)
			s->rc = rc;
	}
	if (s->rc) {
		if (err)
			*err = s->err;
		return s->rc;
	}
	if (!s->terminal) {
		osb_error_set(err, 200, "",
			      "the output stream ended before the command did");
		return -EPROTO;
	}
	return 0;
}

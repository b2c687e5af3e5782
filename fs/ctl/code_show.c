/*
 * code_show.c - what a context's files say: `output` (for people and
 * agents), `result.json` (everything, every MIME type of the results),
 * `input` (the code of the last run).
 *
 * output's layout: a first line `status: S`, S one of `idle` (nothing
 * run yet), `running`, `ok`, `error` (the code raised one),
 * `failed: WHY` (it could not run to its end), `ran` (its answer was
 * lost, but the code ran: code_settle.c) or `unknown: WHY` (its answer
 * was lost, and whether it ran cannot be told); then a section for each
 * part the run gave, in this order and only when it is not empty, each
 * a line `--- NAME` and the text, ending with a newline:
 *   --- stdout       what the code printed
 *   --- stderr       what it printed to stderr
 *   --- value        the text/plain of the value of the last expression
 *                    (of each result, one after another)
 *   --- error        NAME: VALUE of the error
 *   --- traceback    the traceback, without terminal colours
 * Other MIME types are only in result.json; a section `--- note` says
 * so, and also when the output was cut, the sandbox had lost the
 * context (its variables gone: the code ran in a new one), or the
 * answer was lost (`ran`).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code_i.h"

static const char *status_name(enum code_status s)
{
	switch (s) {
	case CODE_IDLE:
		return "idle";
	case CODE_RUNNING:
		return "running";
	case CODE_OK:
		return "ok";
	case CODE_ERROR:
		return "error";
	case CODE_RAN:
		return "ran";
	case CODE_UNKNOWN:
		return "unknown";
	default:
		return "failed";
	}
}

/* Appends @s without ANSI escape sequences (Jupyter colours tracebacks). */
static int add_plain(struct text *t, const char *s)
{
	int rc = 0;
	while (!rc && *s) {
		if (s[0] == '\033' && s[1] == '[') {
			s += 2;
			while (*s && !(*s >= '@' && *s <= '~'))
				s++;
			if (*s)
				s++;
			continue;
		}
		size_t n = strcspn(s, "\033");
		if (!n)
			n = 1;
		rc = text_add(t, s, n);
		s += n;
	}
	return rc;
}

static int section(struct text *t, const char *name, const char *s, size_t n)
{
	if (!n)
		return 0;
	int rc = text_printf(t, "--- %s\n", name);
	if (!rc)
		rc = text_add(t, s, n);
	if (!rc && s[n - 1] != '\n')
		rc = text_add(t, "\n", 1);
	return rc;
}

int code_output_text(struct code *cd, struct code_ctx *cx, struct text *out)
{
	struct text tb = { 0 };
	pthread_mutex_lock(&cd->lock);
	const struct code_result *r = &cx->r;
	int rc = text_printf(out, "status: %s%s%s\n", status_name(r->status),
			     r->failure ? ": " : "",
			     r->failure ? r->failure : "");
	if (!rc)
		rc = section(out, "stdout", r->out.s, r->out.len);
	if (!rc)
		rc = section(out, "stderr", r->err.s, r->err.len);
	if (!rc)
		rc = section(out, "value", r->value.s, r->value.len);
	if (!rc && r->ename) {
		rc = text_printf(out, "--- error\n%s%s%s\n", r->ename,
				 r->evalue && *r->evalue ? ": " : "",
				 r->evalue ? r->evalue : "");
		if (!rc && r->tb_plain.len)
			rc = add_plain(&tb, r->tb_plain.s);
		if (!rc)
			rc = section(out, "traceback", tb.s, tb.len);
	}
	if (!rc && r->nimages) {
		rc = text_adds(out, "--- images\n");
		for (size_t i = 0; !rc && i < r->nimages; i++) {
			char name[32];
			code_image_file_name(r, i, name, sizeof(name));
			rc = text_printf(out, "%s\n", name);
		}
		if (!rc)
			rc = text_adds(out, "--- note\nthe images are files "
					    "beside this one; every MIME type "
					    "is in result.json\n");
	} else if (!rc && r->bundles.len &&
		   (strstr(r->bundles.s, "\"image/") ||
		    strstr(r->bundles.s, "\"text/html\""))) {
		rc = text_adds(out, "--- note\nmore MIME types (images, "
				    "HTML) are in result.json\n");
	}
	if (!rc && r->context_lost)
		rc = text_adds(out, "--- note\nthe sandbox had lost this "
				    "context (and its variables): the code ran "
				    "in a new one\n");
	if (!rc && r->status == CODE_RAN)
		rc = text_adds(out, "--- note\nthe answer was lost on its "
				    "way: the context's execution count shows "
				    "the code ran, once; what it printed, "
				    "returned or raised after the break is not "
				    "known\n");
	if (!rc && r->truncated)
		rc = text_adds(out, "--- note\nthe output was cut at 16 "
				    "MiB\n");
	pthread_mutex_unlock(&cd->lock);
	text_release(&tb);
	return rc;
}

static int json_text(struct text *t, const struct text *s)
{
	return text_json_str(t, s->s ? s->s : "");
}

int code_result_json(struct code *cd, struct code_ctx *cx, struct text *out)
{
	pthread_mutex_lock(&cd->lock);
	const struct code_result *r = &cx->r;
	int rc = text_adds(out, "{\"status\":");
	if (!rc)
		rc = text_json_str(out, status_name(r->status));
	if (!rc)
		rc = text_adds(out, ",\"failure\":");
	if (!rc)
		rc = text_json_str(out, r->failure);
	if (!rc)
		rc = text_adds(out, ",\"language\":");
	if (!rc)
		rc = text_json_str(out, code_langs[cx->lang]);
	if (!rc)
		rc = text_adds(out, ",\"context\":");
	if (!rc)
		rc = text_json_str(out, cx->id);
	if (!rc)
		rc = text_printf(
			out, ",\"execution_count\":%ld,\"stdout\":", r->count);
	if (!rc)
		rc = json_text(out, &r->out);
	if (!rc)
		rc = text_adds(out, ",\"stderr\":");
	if (!rc)
		rc = json_text(out, &r->err);
	if (!rc)
		rc = text_adds(out, ",\"results\":[");
	if (!rc && r->bundles.len)
		rc = text_add(out, r->bundles.s, r->bundles.len);
	if (!rc)
		rc = text_adds(out, "],\"error\":");
	if (!rc && !r->ename)
		rc = text_adds(out, "null");
	if (!rc && r->ename) {
		rc = text_adds(out, "{\"ename\":");
		if (!rc)
			rc = text_json_str(out, r->ename);
		if (!rc)
			rc = text_adds(out, ",\"evalue\":");
		if (!rc)
			rc = text_json_str(out, r->evalue);
		if (!rc)
			rc = text_adds(out, ",\"traceback\":");
		if (!rc)
			rc = r->traceback.len ? text_add(out, r->traceback.s,
							 r->traceback.len) :
						text_adds(out, "[]");
		if (!rc)
			rc = text_adds(out, "}");
	}
	if (!rc)
		rc = text_printf(out,
				 ",\"truncated\":%s,\"context_lost\":%s,"
				 "\"answer_lost\":%s,\"started_at\":",
				 r->truncated ? "true" : "false",
				 r->context_lost ? "true" : "false",
				 r->answer_lost ? "true" : "false");
	if (!rc)
		rc = text_json_time(out, r->started_at);
	if (!rc)
		rc = text_adds(out, ",\"finished_at\":");
	if (!rc)
		rc = text_json_time(out, r->status == CODE_RUNNING ?
						 (struct timespec){ 0 } :
						 r->finished_at);
	if (!rc)
		rc = text_adds(out, "}\n");
	pthread_mutex_unlock(&cd->lock);
	return rc;
}

int code_input_text(struct code *cd, struct code_ctx *cx, struct text *out)
{
	pthread_mutex_lock(&cd->lock);
	int rc = cx->code.len ? text_add(out, cx->code.s, cx->code.len) : 0;
	pthread_mutex_unlock(&cd->lock);
	return rc;
}

struct timespec code_mtime(struct code *cd, struct code_ctx *cx)
{
	pthread_mutex_lock(&cd->lock);
	struct timespec t = cx->r.status == CODE_RUNNING ? cx->r.started_at :
							   cx->r.finished_at;
	pthread_mutex_unlock(&cd->lock);
	return t;
}

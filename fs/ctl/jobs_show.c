/*
 * jobs_show.c - what a job's small files say: status (one line),
 * exit_code, and info (JSON), made from the table under js->lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_i.h"

void job_status_locked(const struct job *j, char *buf, size_t size)
{
	switch (j->state) {
	case JOB_CREATED:
		snprintf(buf, size, "created\n");
		return;
	case JOB_STARTING:
	case JOB_RUNNING:
		snprintf(buf, size, "running\n");
		return;
	case JOB_DONE:
		break;
	}
	const char *sig =
		j->exit_code > 128 ? job_signal_name(j->exit_code - 128) : NULL;
	if (j->error)
		snprintf(buf, size, "error: %s\n", j->error);
	else if (sig)
		snprintf(buf, size, "killed SIG%s\n", sig);
	else
		snprintf(buf, size, "exited %d\n", j->exit_code);
}

int job_status_text(struct jobs *js, struct job *j, struct text *out)
{
	char line[1200];
	pthread_mutex_lock(&js->lock);
	job_status_locked(j, line, sizeof(line));
	pthread_mutex_unlock(&js->lock);
	return text_adds(out, line);
}

int job_exit_code_text(struct jobs *js, struct job *j, struct text *out)
{
	pthread_mutex_lock(&js->lock);
	bool have = j->state == JOB_DONE && !j->error;
	int code = j->exit_code;
	pthread_mutex_unlock(&js->lock);
	return have ? text_printf(out, "%d\n", code) : 0;
}

int job_info_json(struct jobs *js, struct job *j, struct text *out)
{
	struct text cmd = { 0 };
	char status[1200];

	int rc = job_cmd_text(js, j, &cmd);
	if (rc == -ENOENT)
		rc = 0; /* a named job without a command */
	if (rc) {
		text_release(&cmd);
		return rc;
	}
	pthread_mutex_lock(&js->lock);
	job_status_locked(j, status, sizeof(status));
	status[strcspn(status, "\n")] = '\0';
	bool have_code = j->state == JOB_DONE && !j->error;
	rc = text_adds(out, "{\"id\":");
	rc = rc ? rc : text_json_str(out, j->id);
	rc = rc ? rc : text_adds(out, ",\"cmd\":");
	rc = rc ? rc :
		  text_json_str(out, j->state == JOB_CREATED ? NULL :
				     cmd.s                   ? cmd.s :
							       "");
	rc = rc ? rc : text_adds(out, ",\"cwd\":");
	rc = rc ? rc : text_json_str(out, j->cwd ? j->cwd : js->fs->root);
	rc = rc ? rc : text_adds(out, ",\"created_at\":");
	rc = rc ? rc :
		  text_json_time(out, j->created_at.tv_sec ? j->created_at :
							     j->started_at);
	rc = rc ? rc : text_adds(out, ",\"started_at\":");
	rc = rc ? rc : text_json_time(out, j->started_at);
	rc = rc ? rc : text_adds(out, ",\"finished_at\":");
	rc = rc ? rc : text_json_time(out, j->finished_at);
	if (!rc && have_code)
		rc = text_printf(out, ",\"exit_code\":%d", j->exit_code);
	else if (!rc)
		rc = text_adds(out, ",\"exit_code\":null");
	rc = rc ? rc : text_adds(out, ",\"status\":");
	rc = rc ? rc : text_json_str(out, status);
	rc = rc ? rc : text_adds(out, ",\"error\":");
	rc = rc ? rc :
		  text_json_str(out, j->state == JOB_DONE ? j->error : NULL);
	rc = rc ? rc :
		  text_printf(out,
			      ",\"stdout_bytes\":%lld,\"stderr_bytes\":%lld}\n",
			      (long long)j->size[JOB_STDOUT],
			      (long long)j->size[JOB_STDERR]);
	pthread_mutex_unlock(&js->lock);
	text_release(&cmd);
	return rc;
}

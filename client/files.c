/*
 * files.c - execd's file API: /files/... and /directories/...
 *
 * Every path is checked first (osb_path_is_safe): execd expands '$' in
 * paths with no escape, and JSON cannot carry names that are not UTF-8.
 * Downloads and uploads stream; a download broken half-way resumes from
 * the byte it reached, if the file is still the version it began with (as
 * far as its size tells).
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "osb_i.h"

void osb_stat_release(struct osb_stat *st)
{
	if (!st)
		return;
	free(st->path);
	st->path = NULL;
}

void osb_stat_array_free(struct osb_stat *sts, size_t n)
{
	if (!sts)
		return;
	for (size_t i = 0; i < n; i++)
		osb_stat_release(&sts[i]);
	free(sts);
}

static int check_path(const char *path, struct osb_error *err)
{
	if (!path || path[0] != '/') {
		osb_error_set(err, 0, "", "not an absolute path: \"%s\"",
			      path ? path : "");
		return -EINVAL;
	}
	if (!osb_utf8_valid(path, strlen(path))) {
		osb_error_set(
			err, 0, "",
			"path is not valid UTF-8, which the API cannot carry");
		return -EILSEQ;
	}
	if (strchr(path, '$')) {
		osb_error_set(err, 0, "",
			      "path %s holds '$', which execd would expand",
			      path);
		return -EINVAL;
	}
	return 0;
}

static int check_paths(const char *const *paths, size_t n,
		       struct osb_error *err)
{
	for (size_t i = 0; i < n; i++) {
		int rc = check_path(paths[i], err);
		if (rc)
			return rc;
	}
	return 0;
}

/* A simple execd call: a query of path parameters, an optional body. */
static int simple_call(struct osb_sandbox *sb, const char *method,
		       const char *api_path, const char *query,
		       const char *what, const char *json,
		       enum http_retry retry, struct http_response *rs,
		       struct osb_error *err)
{
	struct http_request rq = {
		.method = method,
		.path = api_path,
		.query = query,
		.what = what,
		.content_type = json ? "application/json" : NULL,
		.body = json,
		.body_len = json ? strlen(json) : 0,
		.retry = retry,
	};
	return execd_call(sb, &rq, rs, err);
}

static int paths_query(struct buf *q, const char *const *paths, size_t n)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++)
		rc = query_add(q, "path", paths[i]);
	return rc;
}

int osb_file_stat(struct osb_sandbox *sb, const char *path,
		  struct osb_stat *ret, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf q = { 0 };
	int rc = check_path(path, err);

	if (!rc)
		rc = query_add(&q, "path", path);
	if (!rc)
		rc = simple_call(sb, "GET", "/files/info", q.data, path, NULL,
				 HTTP_RETRY_IDEMPOTENT, &rs, err);
	if (!rc) {
		rc = json_stat_map_get(rs.body.data, rs.body.len, path, ret);
		if (rc)
			osb_error_set(err, rs.status, "",
				      "GET /files/info [%s]: unexpected answer",
				      path);
	}
	buf_release(&q);
	http_response_release(&rs);
	return rc;
}

static int stat_stream_sink(void *arg, const void *data, size_t len)
{
	return json_stat_stream_feed(arg, data, len);
}

/*
 * GET of a FileInfo array (a listing, a search), parsed as it arrives
 * (json.c): the caller gets the entries, and nothing else of the answer is
 * kept, however large. An answer broken mid-body is asked for again.
 */
static int stat_list_call(struct osb_sandbox *sb, const char *api_path,
			  const char *query, const char *what, size_t max,
			  struct osb_stat **ret_entries, size_t *ret_n,
			  bool *ret_cut, struct osb_error *err)
{
	struct json_stat_stream st;
	int rc;

	json_stat_stream_init(&st);
	st.max = max;
	for (int again = 0;; again++) {
		struct http_response rs = { 0 };
		struct http_request rq = {
			.method = "GET",
			.path = api_path,
			.query = query,
			.what = what,
			.sink = stat_stream_sink,
			.sink_arg = &st,
			.retry = HTTP_RETRY_IDEMPOTENT,
		};
		rc = execd_call(sb, &rq, &rs, err);
		if (rc && st.cut) {
			/* stopped at max on purpose: what came is the answer */
			osb_error_clear(err);
			rc = 0;
		}
		bool broken = rc && rs.delivered && rs.retryable;
		bool refused = rc && rs.sink_stopped; /* by the parser */
		int status = rs.status;
		http_response_release(&rs);
		if (broken && again < sb->c->max_retries) {
			json_stat_stream_release(&st);
			osb_error_clear(err);
			sleep_ms(http_backoff_ms(sb->c, again + 1));
			continue;
		}
		if (!rc) {
			rc = json_stat_stream_finish(&st, ret_entries, ret_n);
			refused = rc != 0;
		}
		if (refused && (rc == -EPROTO || rc == -EFBIG))
			osb_error_set(err, status, "", "GET %s [%s]: %s",
				      api_path, what,
				      rc == -EFBIG ? "answer too large" :
						     "unexpected answer");
		break;
	}
	if (ret_cut)
		*ret_cut = !rc && st.cut;
	json_stat_stream_release(&st);
	return rc;
}

int osb_dir_list(struct osb_sandbox *sb, const char *path, int depth,
		 struct osb_stat **ret_entries, size_t *ret_n,
		 struct osb_error *err)
{
	return osb_dir_walk(sb, path, depth, 0, ret_entries, ret_n, NULL, err);
}

int osb_dir_walk(struct osb_sandbox *sb, const char *path, int depth,
		 size_t max, struct osb_stat **ret_entries, size_t *ret_n,
		 bool *ret_cut, struct osb_error *err)
{
	struct buf q = { 0 };
	char d[16];
	int rc = check_path(path, err);

	snprintf(d, sizeof(d), "%d", depth > 0 ? depth : 1);
	if (!rc)
		rc = query_add(&q, "path", path);
	if (!rc)
		rc = query_add(&q, "depth", d);
	if (!rc)
		rc = stat_list_call(sb, "/directories/list", q.data, path, max,
				    ret_entries, ret_n, ret_cut, err);
	buf_release(&q);
	return rc;
}

/* ---- downloads ---- */

struct dl {
	struct http_response *rs;
	osb_sink_fn sink;
	void *arg;
	int64_t pos;       /* next file offset to hand over */
	int64_t remaining; /* bytes still wanted; <0 = to the end */
	int64_t skip;      /* bytes to drop first (a 200 to a ranged ask) */
	bool first;
	int64_t want;  /* the size asked for, or OSB_SIZE_* */
	int64_t size;  /* the file's size as the answers say; -1 */
	int64_t other; /* the size of a part that did not match; -1 */
};

/*
 * The file's size as the answer in d->rs states it (Content-Range's
 * total, or a whole answer's length), checked against the size the
 * download holds to: 0, or -ESTALE when it is another version.
 */
static int dl_check_size(struct dl *d)
{
	const struct http_response *rs = d->rs;
	int64_t total = rs->range_total;
	if (total < 0 && rs->status == 200)
		total = rs->content_length;
	if (total < 0)
		return 0; /* not said: nothing to hold it to */
	int64_t ref = d->want >= 0 ? d->want : d->size;
	if (ref >= 0 &&
	    (d->want == OSB_SIZE_GROWS ? total < ref : total != ref)) {
		d->other = total;
		return -ESTALE;
	}
	d->size = total;
	return 0;
}

static int dl_sink(void *arg, const void *data, size_t len)
{
	struct dl *d = arg;
	const char *p = data;

	if (d->first) {
		d->first = false;
		/* before the first byte of a part reaches the sink */
		int rc = dl_check_size(d);
		if (rc)
			return rc;
		/* a server (or proxy) that ignored the Range sends it all */
		d->skip = d->rs->status == 200 ? d->pos : 0;
	}
	if (d->skip) {
		size_t n = (int64_t)len < d->skip ? len : (size_t)d->skip;
		d->skip -= (int64_t)n;
		p += n;
		len -= n;
	}
	if (d->remaining >= 0 && (int64_t)len > d->remaining)
		len = (size_t)d->remaining;
	if (len) {
		int rc = d->sink(d->arg, p, len);
		if (rc)
			return rc < 0 ? rc : -EIO;
		d->pos += (int64_t)len;
		if (d->remaining >= 0)
			d->remaining -= (int64_t)len;
	}
	return d->remaining == 0 ? 1 : 0;
}

int osb_file_download_sized(struct osb_sandbox *sb, const char *path,
			    int64_t offset, int64_t length, int64_t size,
			    osb_sink_fn sink, void *arg, int64_t *ret_size,
			    struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf q = { 0 };
	struct dl d = { .rs = &rs,
			.sink = sink,
			.arg = arg,
			.pos = offset,
			.remaining = length,
			.want = size,
			.size = -1,
			.other = -1 };
	int rc = check_path(path, err);

	if (!rc && (offset < 0 || size < OSB_SIZE_GROWS))
		rc = -EINVAL;
	if (!rc)
		rc = query_add(&q, "path", path);
	for (int resumes = 0; !rc && d.remaining != 0; resumes++) {
		char range[80];
		if (d.remaining < 0)
			snprintf(range, sizeof(range), "bytes=%lld-",
				 (long long)d.pos);
		else
			snprintf(range, sizeof(range), "bytes=%lld-%lld",
				 (long long)d.pos,
				 (long long)(d.pos + d.remaining - 1));
		struct http_request rq = {
			.method = "GET",
			.path = "/files/download",
			.query = q.data,
			.what = path,
			.range = range,
			.sink = dl_sink,
			.sink_arg = &d,
			.streaming = true,
			.bulk = true,
			.retry = HTTP_RETRY_IDEMPOTENT,
		};
		d.first = true;
		rc = execd_call(sb, &rq, &rs, err);
		if (!rc || rs.status == 416) {
			/* a part with no body says its size here */
			int crc = dl_check_size(&d);
			if (crc)
				rc = crc;
		}
		if (d.other >= 0)
			break; /* another version: no resuming */
		if (!rc) {
			/* the whole asked range, or all there was */
			if (d.remaining > 0 && d.size >= 0 && d.pos >= d.size)
				d.remaining = 0;
			if (d.remaining < 0 || (d.size >= 0 && d.pos >= d.size))
				break;
			if (!rs.delivered)
				break;
			continue; /* a short 206: ask for the rest */
		}
		if (rs.status == 416) {
			/* at or past the end of the file: end of file */
			osb_error_clear(err);
			rc = 0;
			break;
		}
		if (rs.delivered && rs.retryable &&
		    resumes < sb->c->max_retries) {
			/* broken mid-body: go on from where it stopped */
			osb_error_clear(err);
			sleep_ms(http_backoff_ms(sb->c, resumes + 1));
			rc = 0;
			continue;
		}
	}
	if (rc == -ESTALE && d.other >= 0)
		osb_error_set(err, rs.status, "",
			      "GET /files/download [%s]: the file changed in "
			      "the sandbox during the download (%lld bytes, "
			      "then %lld)",
			      path, (long long)(d.want >= 0 ? d.want : d.size),
			      (long long)d.other);
	if (!rc && ret_size)
		*ret_size = d.size;
	buf_release(&q);
	http_response_release(&rs);
	return rc;
}

int osb_file_download(struct osb_sandbox *sb, const char *path, int64_t offset,
		      int64_t length, osb_sink_fn sink, void *arg,
		      int64_t *ret_size, struct osb_error *err)
{
	return osb_file_download_sized(sb, path, offset, length, OSB_SIZE_FIRST,
				       sink, arg, ret_size, err);
}

struct fd_sink {
	int fd;
	int64_t written;
};

static int fd_sink_write(void *arg, const void *data, size_t len)
{
	struct fd_sink *s = arg;
	const char *p = data;
	while (len) {
		ssize_t n = write(s->fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		s->written += n;
	}
	return 0;
}

int osb_file_download_fd(struct osb_sandbox *sb, const char *path,
			 int64_t offset, int64_t length, int fd,
			 int64_t *ret_bytes, struct osb_error *err)
{
	struct fd_sink s = { .fd = fd };
	int rc = osb_file_download(sb, path, offset, length, fd_sink_write, &s,
				   NULL, err);
	if (!rc && ret_bytes)
		*ret_bytes = s.written;
	return rc;
}

/* ---- uploads ---- */

struct up_src {
	const struct osb_upload *u;
	int64_t pos;
	bool shrank; /* the file got shorter while being sent */
};

struct up {
	const struct osb_upload *files;
	size_t n;
	char **meta; /* metadata JSON per file */
	struct up_src *src;
};

static size_t up_read(char *buffer, size_t size, size_t nitems, void *arg)
{
	struct up_src *s = arg;
	size_t want = size * nitems;
	int64_t left = s->u->size - s->pos;

	if (left <= 0)
		return 0;
	if ((int64_t)want > left)
		want = (size_t)left;
	if (s->u->data) {
		memcpy(buffer, (const char *)s->u->data + s->pos, want);
		s->pos += (int64_t)want;
		return want;
	}
	for (;;) {
		ssize_t n =
			pread(s->u->fd, buffer, want, s->u->fd_offset + s->pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return CURL_READFUNC_ABORT;
		if (n == 0) {
			s->shrank = true;
			return CURL_READFUNC_ABORT;
		}
		s->pos += n;
		return (size_t)n;
	}
}

static int up_seek(void *arg, curl_off_t offset, int origin)
{
	struct up_src *s = arg;
	if (origin != SEEK_SET || offset < 0 || offset > s->u->size)
		return CURL_SEEKFUNC_FAIL;
	s->pos = offset;
	return CURL_SEEKFUNC_OK;
}

static int up_mime(void *arg, void *curl, void **ret_mime)
{
	struct up *u = arg;
	curl_mime *mime = curl_mime_init(curl);
	if (!mime)
		return -ENOMEM;
	for (size_t i = 0; i < u->n; i++) {
		curl_mimepart *part = curl_mime_addpart(mime);
		if (!part || curl_mime_name(part, "metadata") ||
		    curl_mime_filename(part, "metadata") ||
		    curl_mime_type(part, "application/json") ||
		    curl_mime_data(part, u->meta[i], CURL_ZERO_TERMINATED))
			goto fail;
		part = curl_mime_addpart(mime);
		u->src[i].u = &u->files[i];
		u->src[i].pos = 0;
		u->src[i].shrank = false;
		if (!part || curl_mime_name(part, "file") ||
		    curl_mime_filename(part, "file") ||
		    curl_mime_type(part, "application/octet-stream") ||
		    curl_mime_data_cb(part, (curl_off_t)u->files[i].size,
				      up_read, up_seek, NULL, &u->src[i]))
			goto fail;
	}
	*ret_mime = mime;
	return 0;
fail:
	curl_mime_free(mime);
	return -ENOMEM;
}

int osb_file_upload(struct osb_sandbox *sb, const struct osb_upload *files,
		    size_t n, struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct up u = { .files = files, .n = n };
	int rc = 0;

	if (!n)
		return 0;
	for (size_t i = 0; !rc && i < n; i++) {
		rc = check_path(files[i].path, err);
		if (!rc &&
		    (files[i].size < 0 ||
		     (!files[i].data && files[i].fd < 0 && files[i].size > 0)))
			rc = -EINVAL;
	}
	if (rc)
		return rc;
	u.meta = calloc(n, sizeof(char *));
	u.src = calloc(n, sizeof(*u.src));
	if (!u.meta || !u.src)
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++) {
		u.meta[i] = json_upload_metadata(&files[i]);
		if (!u.meta[i])
			rc = -ENOMEM;
	}
	if (!rc) {
		struct http_request rq = {
			.method = "POST",
			.path = "/files/upload",
			.what = files[0].path,
			.mime = up_mime,
			.mime_arg = &u,
			.streaming = true,
			.bulk = true,
			/* writing whole files again gives the same result */
			.retry = HTTP_RETRY_IDEMPOTENT,
		};
		rc = execd_call(sb, &rq, &rs, err);
	}
	for (size_t i = 0; rc == -ECANCELED && u.src && i < n; i++) {
		if (u.src[i].shrank) {
			osb_error_set(
				err, 0, "",
				"%s got shorter while it was being uploaded",
				files[i].path);
			rc = -EAGAIN;
		}
	}
	for (size_t i = 0; u.meta && i < n; i++)
		free(u.meta[i]);
	free(u.meta);
	free(u.src);
	http_response_release(&rs);
	return rc;
}

/* ---- directories and metadata ---- */

/* POST of a map of paths to modes and owners to @api_path. */
static int perm_call(struct osb_sandbox *sb, const char *api_path,
		     const struct osb_perm *p, size_t n, struct osb_error *err)
{
	struct http_response rs = { 0 };
	char *body = NULL;
	int rc = 0;

	if (!n)
		return 0;
	for (size_t i = 0; !rc && i < n; i++)
		rc = check_path(p[i].path, err);
	if (!rc) {
		body = json_perm_map(p, n);
		rc = body ? 0 : -ENOMEM;
	}
	if (!rc)
		rc = simple_call(sb, "POST", api_path, NULL, p[0].path, body,
				 HTTP_RETRY_IDEMPOTENT, &rs, err);
	free(body);
	http_response_release(&rs);
	return rc;
}

int osb_dir_make(struct osb_sandbox *sb, const char *path, mode_t mode,
		 const char *owner, const char *group, struct osb_error *err)
{
	struct osb_perm p = { path, mode, owner, group };
	return perm_call(sb, "/directories", &p, 1, err);
}

int osb_dirs_make(struct osb_sandbox *sb, const struct osb_perm *dirs, size_t n,
		  struct osb_error *err)
{
	return perm_call(sb, "/directories", dirs, n, err);
}

static int remove_paths(struct osb_sandbox *sb, const char *api_path,
			const char *const *paths, size_t n,
			struct osb_error *err)
{
	struct http_response rs = { 0 };
	struct buf q = { 0 };
	int rc = check_paths(paths, n, err);

	if (!n)
		return 0;
	if (!rc)
		rc = paths_query(&q, paths, n);
	if (!rc)
		rc = simple_call(sb, "DELETE", api_path, q.data, paths[0], NULL,
				 HTTP_RETRY_IDEMPOTENT, &rs, err);
	buf_release(&q);
	http_response_release(&rs);
	return rc;
}

int osb_files_remove(struct osb_sandbox *sb, const char *const *paths, size_t n,
		     struct osb_error *err)
{
	return remove_paths(sb, "/files", paths, n, err);
}

int osb_dirs_remove(struct osb_sandbox *sb, const char *const *paths, size_t n,
		    struct osb_error *err)
{
	for (size_t i = 0; i < n; i++) {
		if (paths[i] && strspn(paths[i], "/") == strlen(paths[i])) {
			osb_error_set(err, 0, "", "refusing to remove \"/\"");
			return -EINVAL;
		}
	}
	return remove_paths(sb, "/directories", paths, n, err);
}

static bool path_exists(struct osb_sandbox *sb, const char *path)
{
	struct osb_stat st;
	if (osb_file_stat(sb, path, &st, NULL))
		return false;
	osb_stat_release(&st);
	return true;
}

/*
 * A move is not repeated blindly: after a lost answer, the pairs whose
 * source is gone and whose destination exists are taken as done, and the
 * request is sent again for the rest. A source not found by a request
 * sent again is looked for the same way: the first one may have moved
 * it after all. Only then: on a first request, a missing source is
 * ENOENT, whatever the destination holds.
 */
int osb_file_move(struct osb_sandbox *sb, const struct osb_move *moves,
		  size_t n, struct osb_error *err)
{
	size_t done = 0;
	int rc = 0;

	for (size_t i = 0; !rc && i < n; i++) {
		rc = check_path(moves[i].src, err);
		if (!rc)
			rc = check_path(moves[i].dest, err);
	}
	for (int attempt = 1; !rc && done < n; attempt++) {
		struct http_response rs = { 0 };
		char *body = json_moves(moves + done, n - done);
		if (!body)
			return -ENOMEM;
		rc = simple_call(sb, "POST", "/files/mv", NULL, moves[done].src,
				 body, HTTP_RETRY_UNSENT, &rs, err);
		/* a lost answer, or a 500 that names no cause: the move may
		 * or may not have happened */
		bool lost = rc &&
			    (rs.retryable || (rs.status == 500 && rc == -EIO));
		bool again_gone = rc == -ENOENT && attempt > 1;
		free(body);
		http_response_release(&rs);
		if (!rc || !(lost || again_gone) ||
		    (lost && attempt > sb->c->max_retries))
			break;
		size_t was = done;
		while (done < n && !path_exists(sb, moves[done].src) &&
		       path_exists(sb, moves[done].dest))
			done++;
		if (again_gone && done == was)
			break; /* missing indeed */
		osb_error_clear(err);
		rc = 0;
		if (done < n)
			sleep_ms(http_backoff_ms(sb->c, attempt));
	}
	return rc;
}

int osb_file_chmod(struct osb_sandbox *sb, const char *path, mode_t mode,
		   const char *owner, const char *group, struct osb_error *err)
{
	struct osb_perm p = { path, mode, owner, group };
	return perm_call(sb, "/files/permissions", &p, 1, err);
}

int osb_file_search(struct osb_sandbox *sb, const char *dir,
		    const char *pattern, struct osb_stat **ret_entries,
		    size_t *ret_n, struct osb_error *err)
{
	struct buf q = { 0 };
	int rc = check_path(dir, err);

	if (!rc)
		rc = query_add(&q, "path", dir);
	if (!rc && pattern)
		rc = query_add(&q, "pattern", pattern);
	if (!rc)
		rc = stat_list_call(sb, "/files/search", q.data, dir, 0,
				    ret_entries, ret_n, NULL, err);
	buf_release(&q);
	return rc;
}

int osb_file_replace(struct osb_sandbox *sb, const char *path, const char *old,
		     const char *new_text, long *ret_count,
		     struct osb_error *err)
{
	struct http_response rs = { 0 };
	int rc = check_path(path, err);
	char *body = NULL;

	if (!rc && (!old || !*old)) {
		osb_error_set(err, 0, "", "the text to replace is empty");
		rc = -EINVAL;
	}
	if (!rc) {
		body = json_replace(path, old, new_text ? new_text : "");
		rc = body ? 0 : -ENOMEM;
	}
	/* replacing twice is not replacing once: no blind retry */
	if (!rc)
		rc = simple_call(sb, "POST", "/files/replace", "?verbose=true",
				 path, body, HTTP_RETRY_UNSENT, &rs, err);
	if (!rc && ret_count &&
	    json_replace_count(rs.body.data, rs.body.len, path, ret_count))
		*ret_count = -1;
	free(body);
	http_response_release(&rs);
	return rc;
}

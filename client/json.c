/*
 * json.c - every JSON shape of the OpenSandbox APIs, both ways.
 *
 * cJSON lives in this file only: a body is parsed, copied out into our
 * own structs, and the tree deleted; a listing is parsed one entry at a
 * time as it arrives (json_stat_stream), never as one tree.
 * cJSON_ParseWithLengthOpts is used (never the global error pointer) since
 * callers run on many threads. Numbers that may exceed 2^31 are read from
 * valuedouble with a range check.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"

static cJSON *parse(const char *body, size_t len)
{
	if (!body || !len)
		return NULL;
	return cJSON_ParseWithLengthOpts(body, len, NULL, 0);
}

static const char *get_str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool get_i64(const cJSON *o, const char *name, int64_t *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
	    fabs(v->valuedouble) > 9.0e15)
		return false;
	*ret = (int64_t)v->valuedouble;
	return true;
}

static char *dup_str(const cJSON *o, const char *name)
{
	return xstrdup_or_null(get_str(o, name));
}

static char *print(cJSON *root)
{
	char *s = root ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	return s;
}

/* ---- errors ---- */

static void first_line(const char *body, size_t len, char *msg, size_t size)
{
	size_t n = 0;
	while (n < len && body[n] != '\n' && body[n] != '\r')
		n++;
	if (n >= size)
		n = size - 1;
	memcpy(msg, body, n);
	msg[n] = '\0';
}

int json_error_field(const char *body, size_t len, char *msg, size_t msg_size)
{
	cJSON *root = parse(body, len);
	const char *e = get_str(root, "error");
	bool found = e != NULL;
	if (found)
		snprintf(msg, msg_size, "%s", e);
	cJSON_Delete(root);
	return found ? 0 : -EPROTO;
}

void json_error_body(const char *body, size_t len, char *code, size_t code_size,
		     char *msg, size_t msg_size)
{
	code[0] = '\0';
	msg[0] = '\0';
	if (!body || !len)
		return;
	cJSON *root = parse(body, len);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		first_line(body, len, msg, msg_size);
		return;
	}
	const char *c = get_str(root, "code");
	const char *m = get_str(root, "message");
	const char *e = get_str(root, "error");
	const cJSON *detail = cJSON_GetObjectItemCaseSensitive(root, "detail");
	if (c)
		snprintf(code, code_size, "%s", c);
	if (m)
		snprintf(msg, msg_size, "%s", m);
	else if (e)
		snprintf(msg, msg_size, "%s", e);
	else if (cJSON_IsString(detail))
		snprintf(msg, msg_size, "%s", detail->valuestring);
	else if (cJSON_IsArray(detail)) {
		/* FastAPI validation: [{"loc":[..],"msg":..}, ...] */
		struct buf b = { 0 };
		const cJSON *item;
		cJSON_ArrayForEach(item, detail)
		{
			const cJSON *loc =
				cJSON_GetObjectItemCaseSensitive(item, "loc");
			const cJSON *part;
			if (b.len)
				buf_append(&b, "; ", 2);
			bool first = true;
			cJSON_ArrayForEach(part, loc)
			{
				if (!first)
					buf_append(&b, ".", 1);
				if (cJSON_IsString(part))
					buf_printf(&b, "%s", part->valuestring);
				else if (cJSON_IsNumber(part))
					buf_printf(&b, "%d", part->valueint);
				first = false;
			}
			const char *im = get_str(item, "msg");
			if (im)
				buf_printf(&b, ": %s", im);
		}
		snprintf(code, code_size, "VALIDATION_ERROR");
		snprintf(msg, msg_size, "%s", b.data ? b.data : "");
		buf_release(&b);
	}
	cJSON_Delete(root);
}

/* ---- FileInfo ---- */

/* execd writes mode 0755 as the decimal number 755. */
static mode_t mode_from_wire(int64_t v)
{
	mode_t m = 0, scale = 1;
	if (v < 0)
		return 0;
	while (v > 0) {
		m += (mode_t)(v % 10 & 7) * scale;
		scale *= 8;
		v /= 10;
	}
	return m & 07777;
}

/*
 * One allocation holds the path, then the owner and group names, so that an
 * entry of a listing costs its struct and one block.
 */
static int stat_from(const cJSON *o, struct osb_stat *st)
{
	const char *path = get_str(o, "path");
	const char *owner = get_str(o, "owner");
	const char *group = get_str(o, "group");
	const char *type = get_str(o, "type");
	const char *s;
	int64_t v;

	memset(st, 0, sizeof(*st));
	if (!path)
		return -EPROTO;
	owner = owner ? owner : "";
	group = group ? group : "";
	size_t pl = strlen(path) + 1, ol = strlen(owner) + 1;
	size_t gl = strlen(group) + 1;
	char *block = malloc(pl + ol + gl);
	if (!block)
		return -ENOMEM;
	memcpy(block, path, pl);
	memcpy(block + pl, owner, ol);
	memcpy(block + pl + ol, group, gl);
	st->path = block;
	st->owner = block + pl;
	st->group = block + pl + ol;
	if (!type || strcmp(type, "file") == 0)
		st->type = OSB_FILE;
	else if (strcmp(type, "directory") == 0)
		st->type = OSB_DIR;
	else if (strcmp(type, "symlink") == 0)
		st->type = OSB_SYMLINK;
	else
		st->type = OSB_OTHER;
	if (get_i64(o, "size", &v))
		st->size = v;
	if (get_i64(o, "mode", &v))
		st->mode = mode_from_wire(v);
	s = get_str(o, "modified_at");
	if (s)
		osb_time_parse(s, &st->mtime);
	s = get_str(o, "created_at");
	if (s)
		osb_time_parse(s, &st->ctime);
	return 0;
}

int json_stat_map_get(const char *body, size_t len, const char *key,
		      struct osb_stat *ret)
{
	cJSON *root = parse(body, len);
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, key);
	int rc = cJSON_IsObject(o) ? stat_from(o, ret) : -EPROTO;
	cJSON_Delete(root);
	return rc;
}

/*
 * The reader of a FileInfo array. Outside the elements it is a small
 * state machine over the array's punctuation; inside one it only tracks
 * strings (and their escapes) and nesting, to find where the element ends.
 */
enum {
	SA_OPEN,  /* before '[' */
	SA_FIRST, /* after '[': an element or ']' */
	SA_NEXT,  /* after an element: ',' or ']' */
	SA_ELEM,  /* after ',': an element */
	SA_IN,    /* inside an element */
	SA_DONE,  /* after ']' */
};

void json_stat_stream_init(struct json_stat_stream *s)
{
	memset(s, 0, sizeof(*s));
	s->elem.max = OSB_JSON_ELEM_MAX;
}

void json_stat_stream_release(struct json_stat_stream *s)
{
	size_t max = s->max;
	buf_release(&s->elem);
	osb_stat_array_free(s->a, s->n);
	json_stat_stream_init(s);
	s->max = max;
}

static bool json_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Parses the element in s->elem and appends it. */
static int stat_stream_add(struct json_stat_stream *s)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct osb_stat *a = realloc(s->a, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		s->a = a;
		s->cap = cap;
	}
	cJSON *o = parse(s->elem.data, s->elem.len);
	int rc = cJSON_IsObject(o) ? stat_from(o, &s->a[s->n]) : -EPROTO;
	cJSON_Delete(o);
	s->elem.len = 0;
	if (!rc)
		s->n++;
	return rc;
}

/* Bytes of the element at @p, up to its end or @len; *ret_end if it ends. */
static size_t stat_stream_scan(struct json_stat_stream *s, const char *p,
			       size_t len, bool *ret_end)
{
	for (size_t i = 0; i < len; i++) {
		char c = p[i];
		if (s->in_string) {
			if (s->escaped)
				s->escaped = false;
			else if (c == '\\')
				s->escaped = true;
			else if (c == '"')
				s->in_string = false;
		} else if (c == '"') {
			s->in_string = true;
		} else if (c == '{' || c == '[') {
			s->depth++;
		} else if ((c == '}' || c == ']') && --s->depth == 0) {
			*ret_end = true;
			return i + 1;
		}
	}
	*ret_end = false;
	return len;
}

int json_stat_stream_feed(struct json_stat_stream *s, const void *data,
			  size_t len)
{
	const char *p = data;
	size_t i = 0;

	s->total += len;
	if (s->total > OSB_JSON_BODY_MAX)
		return -EFBIG;
	while (i < len) {
		char c = p[i];
		if (s->state == SA_IN) {
			bool end;
			size_t n = stat_stream_scan(s, p + i, len - i, &end);
			int rc = buf_append(&s->elem, p + i, n);
			if (!rc && end)
				rc = stat_stream_add(s);
			if (rc)
				return rc;
			if (end)
				s->state = SA_NEXT;
			i += n;
			continue;
		}
		if ((s->state == SA_FIRST || s->state == SA_ELEM) && c == '{') {
			s->state = SA_IN; /* the brace is the element's */
			continue;
		}
		i++;
		if (json_space(c))
			continue;
		if (s->state == SA_OPEN && c == '[')
			s->state = SA_FIRST;
		else if ((s->state == SA_FIRST || s->state == SA_NEXT) &&
			 c == ']')
			s->state = SA_DONE;
		else if (s->state == SA_NEXT && c == ',' && s->max &&
			 s->n >= s->max) {
			s->cut = true; /* more than max: the rest is not wanted
					*/
			return -ECANCELED;
		} else if (s->state == SA_NEXT && c == ',')
			s->state = SA_ELEM;
		else
			return -EPROTO;
	}
	return 0;
}

int json_stat_stream_finish(struct json_stat_stream *s, struct osb_stat **ret,
			    size_t *ret_n)
{
	if (s->state != SA_DONE && !s->cut)
		return -EPROTO;
	/* give back what the doubling left unused (an empty array is not
	 * NULL: callers tell "no entries" by the count) */
	struct osb_stat *a = realloc(s->a, (s->n ? s->n : 1) * sizeof(*a));
	if (!a && !s->n)
		return -ENOMEM;
	*ret = a ? a : s->a;
	*ret_n = s->n;
	s->a = NULL;
	s->n = s->cap = 0;
	return 0;
}

/* ---- lifecycle ---- */

static int kv_from(const cJSON *o, struct osb_kvlist *l)
{
	const cJSON *item;
	cJSON_ArrayForEach(item, o)
	{
		/* an array has no keys: a server may send anything */
		if (cJSON_IsString(item) && item->string &&
		    osb_kvlist_add(l, item->string, item->valuestring))
			return -ENOMEM;
	}
	return 0;
}

static time_t time_of(const cJSON *o, const char *name)
{
	struct timespec ts = { 0, 0 };
	const char *s = get_str(o, name);
	if (s)
		osb_time_parse(s, &ts);
	return ts.tv_sec;
}

static int sandbox_from(const cJSON *o, struct osb_sandbox_info *info)
{
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(o, "status");
	const cJSON *image = cJSON_GetObjectItemCaseSensitive(o, "image");
	const cJSON *ep = cJSON_GetObjectItemCaseSensitive(o, "entrypoint");

	memset(info, 0, sizeof(*info));
	info->id = dup_str(o, "id");
	if (!info->id)
		return -EPROTO;
	info->state = dup_str(status, "state");
	if (!info->state)
		info->state = strdup("Unknown");
	info->reason = dup_str(status, "reason");
	info->message = dup_str(status, "message");
	info->image = dup_str(image, "uri");
	info->snapshot_id = dup_str(o, "snapshotId");
	kv_from(cJSON_GetObjectItemCaseSensitive(o, "metadata"),
		&info->metadata);
	if (cJSON_IsArray(ep)) {
		size_t n = (size_t)cJSON_GetArraySize(ep), i = 0;
		const cJSON *item;
		info->entrypoint = calloc(n + 1, sizeof(char *));
		cJSON_ArrayForEach(item, ep)
		{
			if (info->entrypoint && cJSON_IsString(item))
				info->entrypoint[i++] =
					strdup(item->valuestring);
		}
	}
	const char *created = get_str(o, "createdAt");
	if (created)
		osb_time_parse(created, &info->created);
	info->created_at = info->created.tv_sec;
	info->expires_at = time_of(o, "expiresAt");
	return info->state ? 0 : -ENOMEM;
}

int json_sandbox(const char *body, size_t len, struct osb_sandbox_info *ret)
{
	cJSON *root = parse(body, len);
	int rc = cJSON_IsObject(root) ? sandbox_from(root, ret) : -EPROTO;
	if (rc && cJSON_IsObject(root))
		osb_sandbox_info_release(ret);
	cJSON_Delete(root);
	return rc;
}

/* A list answer's "pagination" object; what is missing stays 0. */
static void page_from(const cJSON *pg, struct osb_page *ret)
{
	int64_t v;

	if (get_i64(pg, "page", &v))
		ret->page = (int)v;
	if (get_i64(pg, "pageSize", &v))
		ret->page_size = (int)v;
	if (get_i64(pg, "totalPages", &v))
		ret->total_pages = (int)v;
	if (get_i64(pg, "totalItems", &v))
		ret->total_items = (long)v;
	ret->has_next = cJSON_IsTrue(
		cJSON_GetObjectItemCaseSensitive(pg, "hasNextPage"));
}

static int items_from(const cJSON *root, void **ret, size_t *n, size_t size,
		      int (*from)(const cJSON *, void *),
		      void (*release)(void *));

/*
 * A list answer: its "items", each made by @from into an array of
 * elements of @size bytes (*ret, *n), and its page (*pg). On failure the
 * element being made is released with @release and the rc returned (the
 * caller releases the rest). -EPROTO when there is no array.
 */
static int list_from(const char *body, size_t len, void **ret, size_t *n,
		     size_t size, int (*from)(const cJSON *, void *),
		     void (*release)(void *), struct osb_page *pg)
{
	cJSON *root = parse(body, len);
	int rc = items_from(root, ret, n, size, from, release);

	memset(pg, 0, sizeof(*pg));
	page_from(cJSON_GetObjectItemCaseSensitive(root, "pagination"), pg);
	cJSON_Delete(root);
	return rc;
}

static int items_from(const cJSON *root, void **ret, size_t *n, size_t size,
		      int (*from)(const cJSON *, void *),
		      void (*release)(void *))
{
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
	const cJSON *item;

	if (!cJSON_IsArray(items))
		return -EPROTO;
	size_t count = (size_t)cJSON_GetArraySize(items);
	char *a = calloc(count ? count : 1, size);
	if (!a)
		return -ENOMEM;
	*ret = a;
	cJSON_ArrayForEach(item, items)
	{
		int rc = from(item, a + *n * size);
		if (rc) {
			release(a + *n * size);
			return rc;
		}
		(*n)++;
	}
	return 0;
}

static int sandbox_item(const cJSON *o, void *p)
{
	return sandbox_from(o, p);
}

static void sandbox_item_release(void *p)
{
	osb_sandbox_info_release(p);
}

int json_sandbox_list(const char *body, size_t len,
		      struct osb_sandbox_list *ret)
{
	struct osb_page pg;
	void *items = NULL;

	memset(ret, 0, sizeof(*ret));
	int rc = list_from(body, len, &items, &ret->n, sizeof(*ret->items),
			   sandbox_item, sandbox_item_release, &pg);
	ret->items = items;
	ret->page = pg.page;
	ret->page_size = pg.page_size;
	ret->total_pages = pg.total_pages;
	ret->total_items = pg.total_items;
	ret->has_next = pg.has_next;
	if (rc)
		osb_sandbox_list_release(ret);
	return rc;
}

static cJSON *kv_object(const struct osb_kvlist *l)
{
	cJSON *o = cJSON_CreateObject();
	for (size_t i = 0; o && l && i < l->n; i++)
		cJSON_AddStringToObject(o, l->items[i].key, l->items[i].value);
	return o;
}

char *json_create_request(const struct osb_create_params *p)
{
	static const char *const default_ep[] = { "tail", "-f", "/dev/null",
						  NULL };
	const char *const *ep = p->entrypoint ? p->entrypoint : default_ep;
	cJSON *root = cJSON_CreateObject();
	cJSON *image =
		p->snapshot_id ? NULL : cJSON_AddObjectToObject(root, "image");
	cJSON *arr = cJSON_AddArrayToObject(root, "entrypoint");
	cJSON *limits = cJSON_AddObjectToObject(root, "resourceLimits");

	if ((!image && !p->snapshot_id) || !arr || !limits) {
		cJSON_Delete(root);
		return NULL;
	}
	if (p->snapshot_id)
		cJSON_AddStringToObject(root, "snapshotId", p->snapshot_id);
	else
		cJSON_AddStringToObject(image, "uri", p->image ? p->image : "");
	if (image && (p->image_username || p->image_password)) {
		cJSON *auth = cJSON_AddObjectToObject(image, "auth");
		cJSON_AddStringToObject(auth, "username",
					p->image_username ? p->image_username :
							    "");
		cJSON_AddStringToObject(auth, "password",
					p->image_password ? p->image_password :
							    "");
	}
	for (size_t i = 0; ep[i]; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(ep[i]));
	if (p->timeout_s > 0)
		cJSON_AddNumberToObject(root, "timeout", (double)p->timeout_s);
	else
		cJSON_AddNullToObject(root, "timeout");
	if (p->cpu)
		cJSON_AddStringToObject(limits, "cpu", p->cpu);
	if (p->memory)
		cJSON_AddStringToObject(limits, "memory", p->memory);
	if (p->env && p->env->n)
		cJSON_AddItemToObject(root, "env", kv_object(p->env));
	if (p->metadata && p->metadata->n)
		cJSON_AddItemToObject(root, "metadata", kv_object(p->metadata));
	if (p->network_policy_json) {
		cJSON *np =
			cJSON_ParseWithOpts(p->network_policy_json, NULL, 1);
		if (!cJSON_IsObject(np)) {
			cJSON_Delete(np);
			cJSON_Delete(root);
			errno = EINVAL;
			return NULL;
		}
		cJSON_AddItemToObject(root, "networkPolicy", np);
	}
	if (p->extensions && p->extensions->n)
		cJSON_AddItemToObject(root, "extensions",
				      kv_object(p->extensions));
	if (p->credential_proxy)
		cJSON_AddBoolToObject(
			cJSON_AddObjectToObject(root, "credentialProxy"),
			"enabled", 1);
	if (p->volumes_json) {
		cJSON *v = cJSON_ParseWithOpts(p->volumes_json, NULL, 1);
		if (!cJSON_IsArray(v)) {
			cJSON_Delete(v);
			cJSON_Delete(root);
			errno = EINVAL;
			return NULL;
		}
		cJSON_AddItemToObject(root, "volumes", v);
	}
	return print(root);
}

char *json_renew_request(time_t expires_at)
{
	char ts[64];
	osb_time_format(expires_at, ts, sizeof(ts));
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "expiresAt", ts);
	return print(root);
}

int json_renew_response(const char *body, size_t len, time_t *ret)
{
	cJSON *root = parse(body, len);
	const char *s = get_str(root, "expiresAt");
	struct timespec ts;
	int rc = s && osb_time_parse(s, &ts) == 0 ? 0 : -EPROTO;
	if (!rc)
		*ret = ts.tv_sec;
	cJSON_Delete(root);
	return rc;
}

/* ---- snapshots ---- */

static int snapshot_from(const cJSON *o, struct osb_snapshot *snap)
{
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(o, "status");
	const char *t;

	memset(snap, 0, sizeof(*snap));
	if (!get_str(o, "id") || !get_str(status, "state"))
		return -EPROTO;
	snap->id = dup_str(o, "id");
	snap->state = dup_str(status, "state");
	snap->sandbox_id = dup_str(o, "sandboxId");
	snap->name = dup_str(o, "name");
	snap->reason = dup_str(status, "reason");
	snap->message = dup_str(status, "message");
	t = get_str(o, "createdAt");
	if (t)
		osb_time_parse(t, &snap->created);
	t = get_str(status, "lastTransitionAt");
	if (t)
		osb_time_parse(t, &snap->last_transition);
	return snap->id && snap->state ? 0 : -ENOMEM;
}

int json_snapshot(const char *body, size_t len, struct osb_snapshot *ret)
{
	cJSON *root = parse(body, len);
	int rc = cJSON_IsObject(root) ? snapshot_from(root, ret) : -EPROTO;
	if (rc && cJSON_IsObject(root))
		osb_snapshot_release(ret);
	cJSON_Delete(root);
	return rc;
}

static int snapshot_item(const cJSON *o, void *p)
{
	return snapshot_from(o, p);
}

static void snapshot_item_release(void *p)
{
	osb_snapshot_release(p);
}

int json_snapshot_list(const char *body, size_t len,
		       struct osb_snapshot_list *ret)
{
	void *items = NULL;

	memset(ret, 0, sizeof(*ret));
	int rc = list_from(body, len, &items, &ret->n, sizeof(*ret->items),
			   snapshot_item, snapshot_item_release, &ret->pg);
	ret->items = items;
	if (rc)
		osb_snapshot_list_release(ret);
	return rc;
}

char *json_snapshot_request(const char *name)
{
	cJSON *root = cJSON_CreateObject();
	if (root && name)
		cJSON_AddStringToObject(root, "name", name);
	return print(root);
}

static bool get_num(const cJSON *o, const char *name, double *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return false;
	*ret = v->valuedouble;
	return true;
}

int json_metrics(const char *body, size_t len, struct osb_metrics *ret)
{
	cJSON *root = parse(body, len);
	struct osb_metrics m;
	bool ok = get_num(root, "cpu_count", &m.cpu_count) &&
		  get_num(root, "cpu_used_pct", &m.cpu_used_pct) &&
		  get_num(root, "mem_total_mib", &m.mem_total_mib) &&
		  get_num(root, "mem_used_mib", &m.mem_used_mib) &&
		  get_i64(root, "timestamp", &m.timestamp_ms);
	cJSON_Delete(root);
	if (!ok)
		return -EPROTO;
	*ret = m;
	return 0;
}

int json_endpoint(const char *body, size_t len, const char *scheme,
		  struct osb_endpoint *ret)
{
	cJSON *root = parse(body, len);
	const char *ep = get_str(root, "endpoint");
	struct buf url = { 0 };
	int rc = -EPROTO;

	memset(ret, 0, sizeof(*ret));
	if (!ep || !*ep)
		goto out;
	/* the real servers send no scheme; accept one if a proxy adds it */
	if (strncmp(ep, "http://", 7) == 0 || strncmp(ep, "https://", 8) == 0)
		rc = buf_printf(&url, "%s", ep);
	else
		rc = buf_printf(&url, "%s://%s", scheme, ep);
	while (!rc && url.len && url.data[url.len - 1] == '/')
		url.data[--url.len] = '\0';
	if (!rc)
		rc = kv_from(cJSON_GetObjectItemCaseSensitive(root, "headers"),
			     &ret->headers);
	if (!rc)
		ret->url = buf_steal(&url);
out:
	buf_release(&url);
	if (rc)
		osb_kvlist_release(&ret->headers);
	cJSON_Delete(root);
	return rc;
}

/* ---- files ---- */

static void add_owner(cJSON *o, mode_t mode, const char *owner,
		      const char *group)
{
	if (mode) {
		char digits[16];
		snprintf(digits, sizeof(digits), "%o", (unsigned)(mode & 0777));
		cJSON_AddNumberToObject(o, "mode", atoi(digits));
	}
	if (owner)
		cJSON_AddStringToObject(o, "owner", owner);
	if (group)
		cJSON_AddStringToObject(o, "group", group);
}

char *json_upload_metadata(const struct osb_upload *u)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "path", u->path);
	add_owner(root, u->mode, u->owner, u->group);
	return print(root);
}

char *json_perm_map(const struct osb_perm *p, size_t n)
{
	cJSON *root = cJSON_CreateObject();
	for (size_t i = 0; root && i < n; i++) {
		cJSON *o = cJSON_AddObjectToObject(root, p[i].path);
		if (!o) {
			cJSON_Delete(root);
			return NULL;
		}
		add_owner(o, p[i].mode, p[i].owner, p[i].group);
	}
	return root ? print(root) : NULL;
}

char *json_moves(const struct osb_move *m, size_t n)
{
	cJSON *root = cJSON_CreateArray();
	for (size_t i = 0; root && i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "src", m[i].src);
		cJSON_AddStringToObject(o, "dest", m[i].dest);
		cJSON_AddItemToArray(root, o);
	}
	return print(root);
}

char *json_replace(const char *path, const char *old, const char *new_text)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *o = cJSON_AddObjectToObject(root, path);
	if (!o) {
		cJSON_Delete(root);
		return NULL;
	}
	cJSON_AddStringToObject(o, "old", old);
	cJSON_AddStringToObject(o, "new", new_text);
	return print(root);
}

int json_replace_count(const char *body, size_t len, const char *path,
		       long *ret)
{
	cJSON *root = parse(body, len);
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, path);
	int64_t v = 0;
	int rc = get_i64(o, "replacedCount", &v) ? 0 : -EPROTO;
	if (!rc)
		*ret = (long)v;
	cJSON_Delete(root);
	return rc;
}

char *json_string_array(const char *const *s, size_t n)
{
	cJSON *root = cJSON_CreateArray();
	for (size_t i = 0; root && i < n; i++)
		cJSON_AddItemToArray(root, cJSON_CreateString(s[i]));
	return print(root);
}

char *json_rule(const char *action, const char *target)
{
	cJSON *root = cJSON_CreateArray();
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "action", action);
	cJSON_AddStringToObject(o, "target", target);
	cJSON_AddItemToArray(root, o);
	return print(root);
}

static bool is_action(const cJSON *v)
{
	return cJSON_IsString(v) && (strcmp(v->valuestring, "allow") == 0 ||
				     strcmp(v->valuestring, "deny") == 0);
}

char *json_policy(const char *s, const char *default_action, char *why,
		  size_t why_size)
{
	cJSON *root = s ? cJSON_ParseWithOpts(s, NULL, 1) : NULL;
	cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "policy");
	if (!cJSON_IsObject(p))
		p = root;
	cJSON *def = cJSON_GetObjectItemCaseSensitive(p, "defaultAction");
	cJSON *rules = cJSON_GetObjectItemCaseSensitive(p, "egress");
	cJSON *out = NULL;
	snprintf(why, why_size, "%s", "");
	if (!cJSON_IsObject(p))
		snprintf(why, why_size, "a policy is a JSON object");
	else if (!default_action && !is_action(def))
		snprintf(why, why_size,
			 "the policy's defaultAction must be allow or deny");
	else if (rules && !cJSON_IsNull(rules) && !cJSON_IsArray(rules))
		snprintf(why, why_size,
			 "the policy's egress must be an array of rules");
	cJSON *r;
	cJSON *list = cJSON_IsArray(rules) ? rules : NULL;
	cJSON *check = why[0] ? NULL : list;
	cJSON_ArrayForEach(r, check)
	{
		cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "action");
		cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "target");
		if (!is_action(a) || !cJSON_IsString(t) || !t->valuestring[0]) {
			snprintf(why, why_size,
				 "each egress rule is {\"action\": \"allow\" "
				 "or \"deny\", \"target\": HOST}");
			break;
		}
	}
	if (!why[0]) {
		out = cJSON_CreateObject();
		cJSON_AddStringToObject(out, "defaultAction",
					default_action ? default_action :
							 def->valuestring);
		cJSON *arr = cJSON_AddArrayToObject(out, "egress");
		cJSON_ArrayForEach(r, list)
		{
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(
				o, "action",
				cJSON_GetObjectItemCaseSensitive(r, "action")
					->valuestring);
			cJSON_AddStringToObject(
				o, "target",
				cJSON_GetObjectItemCaseSensitive(r, "target")
					->valuestring);
			cJSON_AddItemToArray(arr, o);
		}
	}
	cJSON_Delete(root);
	return print(out);
}

int json_check_array(const char *s)
{
	cJSON *root = s ? cJSON_ParseWithOpts(s, NULL, 1) : NULL;
	int rc = cJSON_IsArray(root) && cJSON_GetArraySize(root) > 0 ? 0 :
								       -EINVAL;
	cJSON_Delete(root);
	return rc;
}

/* ---- commands and sessions ---- */

char *json_command_request(const char *cmd, const struct osb_command_opts *o,
			   bool background)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "command", cmd);
	if (o && o->cwd)
		cJSON_AddStringToObject(root, "cwd", o->cwd);
	if (background)
		cJSON_AddBoolToObject(root, "background", 1);
	if (o && o->timeout_ms > 0)
		cJSON_AddNumberToObject(root, "timeout", (double)o->timeout_ms);
	if (o && o->uid >= 0)
		cJSON_AddNumberToObject(root, "uid", o->uid);
	if (o && o->gid >= 0)
		cJSON_AddNumberToObject(root, "gid", o->gid);
	if (o && o->envs && o->envs->n)
		cJSON_AddItemToObject(root, "envs", kv_object(o->envs));
	return print(root);
}

char *json_session_run_request(const char *cmd, const char *cwd,
			       long timeout_ms)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "command", cmd);
	if (cwd)
		cJSON_AddStringToObject(root, "cwd", cwd);
	if (timeout_ms > 0)
		cJSON_AddNumberToObject(root, "timeout", (double)timeout_ms);
	return print(root);
}

char *json_cwd_request(const char *cwd)
{
	cJSON *root = cJSON_CreateObject();
	if (cwd)
		cJSON_AddStringToObject(root, "cwd", cwd);
	return print(root);
}

int json_session_id(const char *body, size_t len, char *ret_id)
{
	cJSON *root = parse(body, len);
	const char *id = get_str(root, "session_id");
	int rc = id && strlen(id) < OSB_ID_MAX ? 0 : -EPROTO;
	if (!rc)
		snprintf(ret_id, OSB_ID_MAX, "%s", id);
	cJSON_Delete(root);
	return rc;
}

int json_command_status(const char *body, size_t len,
			struct osb_command_status *ret)
{
	cJSON *root = parse(body, len);
	int64_t v;
	const char *s;

	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return -EPROTO;
	}
	memset(ret, 0, sizeof(*ret));
	ret->id = dup_str(root, "id");
	ret->content = dup_str(root, "content");
	ret->running =
		cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "running"));
	if (get_i64(root, "exit_code", &v)) {
		ret->exited = !ret->running;
		ret->exit_code = (int)v;
	}
	ret->error = dup_str(root, "error");
	s = get_str(root, "started_at");
	if (s)
		osb_time_parse(s, &ret->started_at);
	s = get_str(root, "finished_at");
	if (s)
		osb_time_parse(s, &ret->finished_at);
	if (!ret->running && !ret->exited && ret->error) {
		/* finished without exit_code: ended by a signal */
		ret->exited = true;
		ret->exit_code = -1;
	}
	cJSON_Delete(root);
	return 0;
}

/* ---- code contexts ---- */

char *json_code_context_request(const char *language, const char *cwd)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "language", language);
	if (cwd)
		cJSON_AddStringToObject(root, "cwd", cwd);
	return print(root);
}

static int context_from(const cJSON *o, struct osb_code_context *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->id = dup_str(o, "id");
	ret->language = dup_str(o, "language");
	ret->cwd = dup_str(o, "cwd");
	if (!ret->id) {
		osb_code_context_release(ret);
		return -EPROTO;
	}
	return 0;
}

int json_code_context(const char *body, size_t len,
		      struct osb_code_context *ret)
{
	cJSON *root = parse(body, len);
	int rc = cJSON_IsObject(root) ? context_from(root, ret) : -EPROTO;
	cJSON_Delete(root);
	return rc;
}

int json_code_context_array(const char *body, size_t len,
			    struct osb_code_context **ret, size_t *ret_n)
{
	cJSON *root = parse(body, len);
	const cJSON *item;
	size_t n = 0;

	if (!cJSON_IsArray(root)) {
		cJSON_Delete(root);
		return -EPROTO;
	}
	size_t count = (size_t)cJSON_GetArraySize(root);
	struct osb_code_context *a = calloc(count ? count : 1, sizeof(*a));
	if (!a) {
		cJSON_Delete(root);
		return -ENOMEM;
	}
	cJSON_ArrayForEach(item, root)
	{
		if (context_from(item, &a[n]) == 0)
			n++;
	}
	cJSON_Delete(root);
	*ret = a;
	*ret_n = n;
	return 0;
}

char *json_code_run_request(const char *context_id, const char *language,
			    const char *code)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *ctx = cJSON_AddObjectToObject(root, "context");
	if (!ctx) {
		cJSON_Delete(root);
		return NULL;
	}
	if (context_id)
		cJSON_AddStringToObject(ctx, "id", context_id);
	cJSON_AddStringToObject(ctx, "language", language ? language : "");
	cJSON_AddStringToObject(root, "code", code);
	return print(root);
}

/* ---- stream events ---- */

static const struct {
	const char *name;
	enum osb_event_type type;
} event_types[] = {
	{ "init", OSB_EV_INIT },
	{ "stdout", OSB_EV_STDOUT },
	{ "stderr", OSB_EV_STDERR },
	{ "result", OSB_EV_RESULT },
	{ "error", OSB_EV_ERROR },
	{ "execution_complete", OSB_EV_COMPLETE },
	{ "status", OSB_EV_STATUS },
	{ "execution_count", OSB_EV_EXECUTION_COUNT },
	{ "ping", OSB_EV_PING },
};

int json_event(const char *line, size_t len, struct osb_event *ev,
	       struct json_event_store *store, struct osb_error *err)
{
	cJSON *root = parse(line, len);
	int64_t v;

	memset(ev, 0, sizeof(*ev));
	memset(store, 0, sizeof(*store));
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return -EPROTO;
	}
	const char *type = get_str(root, "type");
	if (!type) {
		/* execd appends a bare error object to a started stream */
		const char *code = get_str(root, "code");
		const char *msg = get_str(root, "message");
		int e = osb_errno_from_http(500, code, msg);
		osb_error_set(err, 200, code, "%s%s%s", code ? code : "error",
			      msg ? ": " : "", msg ? msg : "");
		cJSON_Delete(root);
		return code || msg ? -(e ? e : EIO) : -EPROTO;
	}
	store->root = root;
	ev->type_name = type;
	ev->type = OSB_EV_OTHER;
	for (size_t i = 0; i < sizeof(event_types) / sizeof(event_types[0]);
	     i++)
		if (strcmp(type, event_types[i].name) == 0)
			ev->type = event_types[i].type;
	ev->text = get_str(root, "text");
	if (get_i64(root, "execution_count", &v))
		ev->execution_count = (long)v;
	if (get_i64(root, "execution_time", &v))
		ev->execution_time_ms = (long)v;
	cJSON *results = cJSON_GetObjectItemCaseSensitive(root, "results");
	if (cJSON_IsObject(results)) {
		store->results_json = cJSON_PrintUnformatted(results);
		ev->results_json = store->results_json;
		ev->result_text = get_str(results, "text");
	}
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (cJSON_IsObject(error)) {
		const cJSON *tb =
			cJSON_GetObjectItemCaseSensitive(error, "traceback");
		ev->ename = get_str(error, "ename");
		ev->evalue = get_str(error, "evalue");
		if (cJSON_IsArray(tb)) {
			size_t n = (size_t)cJSON_GetArraySize(tb), i = 0;
			const cJSON *item;
			store->traceback = calloc(n + 1, sizeof(char *));
			cJSON_ArrayForEach(item, tb)
			{
				if (store->traceback && cJSON_IsString(item))
					store->traceback[i++] =
						item->valuestring;
			}
			ev->traceback = store->traceback;
		}
	}
	return 0;
}

void json_event_release(struct json_event_store *store)
{
	cJSON_Delete(store->root);
	free(store->traceback);
	free(store->results_json);
	memset(store, 0, sizeof(*store));
}

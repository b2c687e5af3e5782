/*
 * snapshot_find.c - the snapshot a user names, by its id or by its name,
 * and waiting until it can be used (Ready). Several requests each, all of
 * them repeatable (gets and lists): what a tool or a mount does before it
 * makes a sandbox from a snapshot (docs/SERVER.md §2.10).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_i.h"

/* a list's pages are followed up to this many (200 snapshots a page) */
#define FIND_PAGES_MAX 500
/* the ids an ambiguous name's message shows */
#define FIND_IDS_SHOWN 3
/* the pauses between two questions of a wait, growing */
#define WAIT_PAUSE_MS 200
#define WAIT_PAUSE_MAX_MS 2000

/* Whether @s is the snapshot named @name: its name, and not going. */
static bool named(const struct osb_snapshot *s, const char *name)
{
	return s->name && strcmp(s->name, name) == 0 &&
	       !(s->state && strcmp(s->state, "Deleting") == 0);
}

/* "ids a, b, c" (and how many more) of the @n snapshots in @found. */
static void ids_text(char *buf, size_t size, char *const *found, size_t n)
{
	size_t len = (size_t)snprintf(buf, size, "ids");
	for (size_t i = 0; i < n && i < FIND_IDS_SHOWN && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s %s",
					i ? "," : "", found[i]);
	if (n > FIND_IDS_SHOWN && len < size)
		snprintf(buf + len, size - len, " and %zu more",
			 n - FIND_IDS_SHOWN);
}

/* The one snapshot named @name on every page of the list. */
static int find_by_name(struct osb_client *c, const char *name,
			struct osb_snapshot *ret, struct osb_error *err)
{
	struct osb_snapshot_list_params p = { .name = name, .page_size = 200 };
	char *found[FIND_IDS_SHOWN + 1] = { NULL };
	size_t n = 0;
	int rc = 0;

	for (p.page = 1; !rc && p.page <= FIND_PAGES_MAX; p.page++) {
		struct osb_snapshot_list l = { 0 };
		rc = osb_snapshot_list(c, &p, &l, err);
		for (size_t i = 0; !rc && i < l.n; i++) {
			struct osb_snapshot *s = &l.items[i];
			if (!named(s, name))
				continue;
			if (n < FIND_IDS_SHOWN && !(found[n] = strdup(s->id)))
				rc = -ENOMEM;
			if (n++ == 0) {
				*ret = *s;
				memset(s, 0, sizeof(*s));
			}
		}
		bool more = !rc && l.pg.has_next && l.n;
		osb_snapshot_list_release(&l);
		if (!more)
			break;
	}
	if (rc == -ENOMEM)
		osb_error_set(err, 0, "", "out of memory");
	if (!rc && n == 0) {
		osb_error_set(err, 404, "SNAPSHOT::NOT_FOUND",
			      "no snapshot has the id or the name \"%s\"",
			      name);
		rc = -ENOENT;
	}
	if (!rc && n > 1) {
		char ids[400];
		ids_text(ids, sizeof(ids), found, n);
		osb_error_set(err, 0, "",
			      "%zu snapshots are named \"%s\" (%s): give the "
			      "id of the one meant",
			      n, name, ids);
		rc = -ENOTUNIQ;
	}
	if (rc && n)
		osb_snapshot_release(ret);
	for (size_t i = 0; i < FIND_IDS_SHOWN; i++)
		free(found[i]);
	return rc;
}

int osb_snapshot_find(struct osb_client *c, const char *ref,
		      struct osb_snapshot *ret, struct osb_error *err)
{
	if (!ref || !*ref) {
		osb_error_set(err, 0, "", "a snapshot's id or name is needed");
		return -EINVAL;
	}
	memset(ret, 0, sizeof(*ret));
	/* an id holds no '/': a name that does is no id to ask for */
	if (!strchr(ref, '/')) {
		int rc = osb_snapshot_get(c, ref, ret, err);
		/* none by that id; or one the server takes for no id */
		if (rc != -ENOENT && rc != -EINVAL)
			return rc;
	}
	return find_by_name(c, ref, ret, err);
}

int osb_snapshot_wait(struct osb_client *c, struct osb_snapshot *s,
		      long timeout_ms, struct osb_error *err)
{
	long long until = now_ms() + timeout_ms;
	long pause = WAIT_PAUSE_MS;

	while (s->state && strcmp(s->state, "Creating") == 0) {
		long long left = until - now_ms();
		if (timeout_ms >= 0 && left <= 0) {
			osb_error_set(err, 0, "",
				      "snapshot %s is still Creating after "
				      "%ld s",
				      s->id, (timeout_ms + 999) / 1000);
			return -ETIMEDOUT;
		}
		sleep_ms(timeout_ms >= 0 && left < pause ? (long)left : pause);
		if (pause < WAIT_PAUSE_MAX_MS)
			pause = pause * 3 / 2;
		struct osb_snapshot now = { 0 };
		int rc = osb_snapshot_get(c, s->id, &now, err);
		if (rc)
			return rc;
		osb_snapshot_release(s);
		*s = now;
	}
	if (s->state && strcmp(s->state, "Ready") == 0)
		return 0;
	osb_error_set(err, 0, "", "snapshot %s is %s%s%s%s%s%s", s->id,
		      s->state ? s->state : "in no state",
		      s->reason ? " (" : "", s->reason ? s->reason : "",
		      s->reason ? ")" : "", s->message ? ": " : "",
		      s->message ? s->message : "");
	return -EIO;
}

/*
 * linkmap.c - the target readlink shows for a symlink of the sandbox (see
 * linkmap.h for the rules and why).
 *
 * Paths are cut into components (pointers into the strings given, never
 * copied) and "." and ".." are applied lexically; the result is joined
 * once, after its length is known.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "linkmap.h"

struct comp {
	const char *s;
	size_t n;
};

struct comps {
	struct comp *v;
	size_t n;
};

/* Room for the components of @s: never more than its slashes plus one. */
static size_t comps_bound(const char *s)
{
	size_t n = 1;
	for (; *s; s++)
		n += *s == '/';
	return n;
}

/* Applies path @p to @c: empty and "." components are dropped, ".." drops
 * the last component (at the top it stays there, as "/.." is "/"). */
static void comps_walk(struct comps *c, const char *p)
{
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (c->n)
				c->n--;
		} else if (n && !(n == 1 && p[0] == '.')) {
			c->v[c->n].s = p;
			c->v[c->n].n = n;
			c->n++;
		}
		p = *end ? end + 1 : end;
	}
}

static bool comp_eq(const struct comp *a, const struct comp *b)
{
	return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
}

/* How many leading components @a and @b share, from @from on. */
static size_t comps_common(const struct comps *a, const struct comps *b,
			   size_t from)
{
	size_t i = from;
	while (i < a->n && i < b->n && comp_eq(&a->v[i], &b->v[i]))
		i++;
	return i - from;
}

/* The joined path: @ups times "..", then the components @a[0..@na) and
 * @b[0..@nb); "." if that is nothing. */
static int join(size_t ups, const struct comp *a, size_t na,
		const struct comp *b, size_t nb, char **ret)
{
	size_t parts = ups + na + nb;
	size_t len = ups * 2 + (parts ? parts - 1 : 1);
	for (size_t i = 0; i < na + nb; i++)
		len += i < na ? a[i].n : b[i - na].n;
	if (len >= PATH_MAX)
		return -ENAMETOOLONG;
	char *out = malloc(len + 1), *p = out;
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < ups; i++) {
		memcpy(p, "../", 3);
		p += 3;
	}
	for (size_t i = 0; i < na + nb; i++) {
		const struct comp *c = i < na ? &a[i] : &b[i - na];
		memcpy(p, c->s, c->n);
		p += c->n;
		*p++ = '/';
	}
	if (p == out)
		*p++ = '.';
	else
		p--; /* the last '/' */
	*p = '\0';
	*ret = out;
	return 0;
}

int link_map(const char *target, const char *link, const char *root,
	     const char *control_dir, char **ret)
{
	struct comps r = { 0 }, dir = { 0 }, t = { 0 };
	const struct comp dead_end[2] = { { control_dir, strlen(control_dir) },
					  { "outside", 7 } };
	int rc = -ENOMEM;

	r.v = malloc(comps_bound(root) * sizeof(*r.v));
	dir.v = malloc(comps_bound(link) * sizeof(*dir.v));
	t.v = malloc((comps_bound(link) + comps_bound(target)) * sizeof(*t.v));
	if (!r.v || !dir.v || !t.v)
		goto out;
	comps_walk(&r, root);
	comps_walk(&dir, link);
	/* the link itself is below the root: its directory is at or below */
	if (dir.n <= r.n || comps_common(&r, &dir, 0) != r.n) {
		rc = -EINVAL;
		goto out;
	}
	dir.n--;
	size_t depth = dir.n - r.n; /* the ".." that reach the mount root */

	/* where the target leads, lexically; an empty one leads nowhere */
	if (target[0] && target[0] != '/') {
		memcpy(t.v, dir.v, dir.n * sizeof(*t.v));
		t.n = dir.n;
	}
	comps_walk(&t, target);
	bool inside = target[0] && t.n >= r.n &&
		      comps_common(&r, &t, 0) == r.n &&
		      !(t.n > r.n && comp_eq(&t.v[r.n], &dead_end[0]));
	if (inside) {
		size_t same = comps_common(&dir, &t, r.n);
		rc = join(depth - same, NULL, 0, t.v + r.n + same,
			  t.n - r.n - same, ret);
	} else {
		rc = join(depth, dead_end, 2, t.v, t.n, ret);
	}
out:
	free(r.v);
	free(dir.v);
	free(t.v);
	return rc;
}

/*
 * owners.c - the sandbox's owners as local numbers, and back (owners.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "node.h"
#include "options.h"
#include "osbfs.h"
#include "owners.h"
#include "remote.h"

#define OVERFLOW_ID 65534u
#define RELEARN_MS 60000

struct idname {
	char name[OWNERS_NAME_MAX];
	unsigned id;
};

struct idtable {
	struct idname *v;
	size_t n, cap;
};

struct owners {
	bool on;
	uid_t uid; /* the mount's user and group: the sandbox's root */
	gid_t gid;
	/* one reading of the tables at a time, held across its command */
	pthread_mutex_t learn_lock;
	/* guards what follows; a leaf */
	pthread_mutex_t lock;
	bool learned;
	long long learned_at; /* monotonic ms */
	struct idtable users, groups;
};

static const char learn_script[] = "cat /etc/passwd 2>/dev/null\n"
				   "echo --\n"
				   "cat /etc/group 2>/dev/null\n"
				   "exit 0\n";

int owners_init(struct osbfs *fs)
{
	struct owners *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->uid = fs->uid;
	o->gid = fs->gid;
	o->on = fs->opt->allow_other || fs->uid == 0;
	pthread_mutex_init(&o->learn_lock, NULL);
	pthread_mutex_init(&o->lock, NULL);
	fs->owners = o;
	return 0;
}

void owners_free(struct osbfs *fs)
{
	struct owners *o = fs->owners;
	if (!o)
		return;
	free(o->users.v);
	free(o->groups.v);
	pthread_mutex_destroy(&o->learn_lock);
	pthread_mutex_destroy(&o->lock);
	free(o);
	fs->owners = NULL;
}

bool owners_on(const struct osbfs *fs)
{
	return fs->owners && fs->owners->on;
}

bool owners_numeric(const char *name)
{
	if (!name || !*name)
		return false;
	for (const char *p = name; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return strlen(name) < 11;
}

/* With o->lock held. */
static const struct idname *by_name(const struct idtable *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->v[i].name, name) == 0)
			return &t->v[i];
	return NULL;
}

static const struct idname *by_id(const struct idtable *t, unsigned id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].id == id)
			return &t->v[i];
	return NULL;
}

/* The sandbox's number for @name: 0 and true when known. With o->lock
 * held. */
static bool number_of(const struct idtable *t, const char *name, unsigned *ret)
{
	if (!*name || strcmp(name, "root") == 0) {
		*ret = 0; /* "" is what execd gives when nothing is said */
		return true;
	}
	if (owners_numeric(name)) {
		*ret = (unsigned)strtoul(name, NULL, 10);
		return true;
	}
	const struct idname *e = by_name(t, name);
	if (e)
		*ret = e->id;
	return e != NULL;
}

void owners_show(struct osbfs *fs, const char *owner, const char *group,
		 uid_t *uid, gid_t *gid)
{
	struct owners *o = fs->owners;
	if (!owners_on(fs)) {
		*uid = fs->uid;
		*gid = fs->gid;
		return;
	}
	unsigned u, g;
	pthread_mutex_lock(&o->lock);
	if (!number_of(&o->users, owner, &u))
		u = OVERFLOW_ID;
	if (!number_of(&o->groups, group, &g))
		g = OVERFLOW_ID;
	pthread_mutex_unlock(&o->lock);
	*uid = u == 0 ? o->uid : (uid_t)u;
	*gid = g == 0 ? o->gid : (gid_t)g;
}

uid_t owners_sandbox_uid(const struct osbfs *fs, uid_t uid)
{
	return uid == fs->uid ? 0 : uid;
}

gid_t owners_sandbox_gid(const struct osbfs *fs, gid_t gid)
{
	return gid == fs->gid ? 0 : gid;
}

static int table_add(struct idtable *t, const char *name, unsigned id)
{
	if (strlen(name) >= OWNERS_NAME_MAX || by_name(t, name))
		return 0; /* the first line of a name counts, as in libc */
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct idname *v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	snprintf(t->v[t->n].name, sizeof(t->v[t->n].name), "%s", name);
	t->v[t->n].id = id;
	t->n++;
	return 0;
}

/* "NAME:x:ID:...": the name and the number, or false. */
static bool parse_line(char *line, char **name, unsigned *id)
{
	char *c1 = strchr(line, ':');
	char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	if (!c1 || !c2 || c1 == line)
		return false;
	char *end;
	unsigned long v = strtoul(c2 + 1, &end, 10);
	if (end == c2 + 1 || (*end != ':' && *end) || v > 0xffffffffUL)
		return false;
	*c1 = '\0';
	*name = line;
	*id = (unsigned)v;
	return true;
}

/* The output of learn_script into the tables (o->lock held). */
static size_t parse_tables(struct owners *o, char *out)
{
	struct idtable *t = &o->users;
	size_t taken = 0;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strcmp(line, "--") == 0) {
			t = &o->groups;
			continue;
		}
		char *name;
		unsigned id;
		if (parse_line(line, &name, &id) && table_add(t, name, id) == 0)
			taken++;
	}
	return taken;
}

/* Whether @name needs the tables and they may be read for it now. */
static bool wants(struct owners *o, const struct idtable *t, const char *name,
		  long long now)
{
	unsigned id;
	if (!name || number_of(t, name, &id))
		return false;
	return !o->learned || now - o->learned_at >= RELEARN_MS;
}

static void learn(struct osbfs *fs)
{
	struct owners *o = fs->owners;
	char *out = NULL, *errout = NULL;
	int code = 0;
	int rc = remote_shell(fs, learn_script, SHELL_IDEMPOTENT, &out, &errout,
			      &code);
	pthread_mutex_lock(&o->lock);
	o->learned = true;
	o->learned_at = mono_ms();
	if (!rc && out) {
		o->users.n = o->groups.n = 0;
		size_t n = parse_tables(o, out);
		pthread_mutex_unlock(&o->lock);
		log_info("owners: %zu users and groups learned from the "
			 "sandbox",
			 n);
	} else {
		pthread_mutex_unlock(&o->lock);
		log_warn("owners: the sandbox's users and groups could not "
			 "be read (%s): owners it names show as %u",
			 strerror(rc ? -rc : EIO), OVERFLOW_ID);
	}
	free(out);
	free(errout);
}

void owners_learn(struct osbfs *fs, const char *owner, const char *group)
{
	struct owners *o = fs->owners;
	if (!owners_on(fs))
		return;
	long long now = mono_ms();
	pthread_mutex_lock(&o->lock);
	bool want = wants(o, &o->users, owner, now) ||
		    wants(o, &o->groups, group, now);
	pthread_mutex_unlock(&o->lock);
	if (!want)
		return;
	pthread_mutex_lock(&o->learn_lock);
	/* another thread may have read them meanwhile */
	pthread_mutex_lock(&o->lock);
	want = wants(o, &o->users, owner, now) ||
	       wants(o, &o->groups, group, now);
	pthread_mutex_unlock(&o->lock);
	if (want)
		learn(fs);
	pthread_mutex_unlock(&o->learn_lock);
}

/* The sandbox's name for number @id of @t, else the number. */
static void name_of(struct owners *o, struct idtable *t, unsigned id,
		    char out[OWNERS_NAME_MAX])
{
	pthread_mutex_lock(&o->lock);
	const struct idname *e = by_id(t, id);
	if (e)
		snprintf(out, OWNERS_NAME_MAX, "%s", e->name);
	else if (id == 0)
		snprintf(out, OWNERS_NAME_MAX, "root");
	else
		snprintf(out, OWNERS_NAME_MAX, "%u", id);
	pthread_mutex_unlock(&o->lock);
}

static bool learned(struct owners *o)
{
	pthread_mutex_lock(&o->lock);
	bool l = o->learned;
	pthread_mutex_unlock(&o->lock);
	return l;
}

void owners_names(struct osbfs *fs, uid_t uid, gid_t gid,
		  char owner[OWNERS_NAME_MAX], char group[OWNERS_NAME_MAX])
{
	struct owners *o = fs->owners;
	unsigned u = owners_sandbox_uid(fs, uid),
		 g = owners_sandbox_gid(fs, gid);
	if ((u || g) && !learned(o)) {
		pthread_mutex_lock(&o->learn_lock);
		if (!learned(o))
			learn(fs);
		pthread_mutex_unlock(&o->learn_lock);
	}
	name_of(o, &o->users, u, owner);
	name_of(o, &o->groups, g, group);
}

/*
 * test_units.c - unit tests of osbfs's pure modules: hex encoding, the
 * option value parsers, the inode table (paths, moves, unlinks), the
 * journal (records written, replayed after a "crash", compacted), the
 * symlink targets shown in the mount (linkmap.c), and the wrapper that
 * makes a command take effect at most once (remote.c, run with /bin/sh),
 * the names of the code contexts' records (code.c), the JSON strings of
 * the control files (ctl_text.c), the escaping of what the log
 * writes (log.c), and the extended attributes' table and its log
 * (xattr.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cache_i.h"
#include "code_i.h"
#include "ctl_text.h"
#include "fprint.h"
#include "hex.h"
#include "holder.h"
#include "journal.h"
#include "linkmap.h"
#include "log.h"
#include "node.h"
#include "options.h"
#include "remote.h"
#include "writeback.h"
#include "xattr.h"

static int failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: FAIL %s\n", __FILE__,          \
				__LINE__, #cond);                              \
			failures++;                                            \
		}                                                              \
	} while (0)

static void test_hex(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	hex_put(m, "a\nb$\xff");
	fclose(m);
	CHECK(strcmp(buf, "610a6224ff") == 0);
	char out[16];
	CHECK(hex_decode(buf, len, out, sizeof(out)) == 0);
	CHECK(strcmp(out, "a\nb$\xff") == 0);
	CHECK(hex_decode("6", 1, out, sizeof(out)) == -EINVAL);
	CHECK(hex_decode("zz", 2, out, sizeof(out)) == -EINVAL);
	CHECK(hex_decode("6161", 4, out, 2) == -EINVAL); /* too long */
	char *d = hex_decode_dup("6869", 4);
	CHECK(d && strcmp(d, "hi") == 0);
	free(d);
	free(buf);
}

/* options_parse() of "osbfs [-o @opt] mnt". */
static int parse_one(struct osbfs_options *o, const char *opt, char *msg,
		     size_t msg_size)
{
	char prog[] = "osbfs", dash_o[] = "-o", mnt[] = "mnt";
	char *value = opt ? strdup(opt) : NULL;
	char *with[] = { prog, dash_o, value, mnt, NULL };
	char *without[] = { prog, mnt, NULL };
	int rc = opt ? options_parse(o, 4, with, msg, msg_size) :
		       options_parse(o, 2, without, msg, msg_size);
	free(value);
	return rc;
}

static void test_parsers(void)
{
	long ms;
	int64_t sz;
	CHECK(parse_duration_ms("30", &ms) == 0 && ms == 30000);
	CHECK(parse_duration_ms("250ms", &ms) == 0 && ms == 250);
	CHECK(parse_duration_ms("1.5s", &ms) == 0 && ms == 1500);
	CHECK(parse_duration_ms("15m", &ms) == 0 && ms == 900000);
	CHECK(parse_duration_ms("2h", &ms) == 0 && ms == 7200000);
	CHECK(parse_duration_ms("soon", &ms) == -EINVAL);
	CHECK(parse_duration_ms("-1", &ms) == -EINVAL);
	CHECK(parse_size("10G", &sz) == 0 && sz == 10LL << 30);
	CHECK(parse_size("512K", &sz) == 0 && sz == 512 << 10);
	CHECK(parse_size("4MiB", &sz) == 0 && sz == 4 << 20);
	CHECK(parse_size("12", &sz) == 0 && sz == 12);
	CHECK(parse_size("3X", &sz) == -EINVAL);

	/* -o symlinks: safe by default, raw on request, nothing else */
	struct osbfs_options o;
	char msg[256];
	CHECK(parse_one(&o, NULL, msg, sizeof(msg)) == 0 && !o.symlinks_raw);
	options_release(&o);
	CHECK(parse_one(&o, "symlinks=raw", msg, sizeof(msg)) == 0 &&
	      o.symlinks_raw);
	options_release(&o);
	CHECK(parse_one(&o, "symlinks=yes", msg, sizeof(msg)) == -EINVAL &&
	      strstr(msg, "symlinks"));
	options_release(&o);
}

static void test_nodes(void)
{
	struct node_table nt;
	CHECK(node_table_init(&nt, "/workspace") == 0);
	struct node *a = node_child_get(&nt, nt.root, "a");
	struct node *b = node_child_get(&nt, a, "b c");
	CHECK(a && b && a->ino != b->ino);
	CHECK(node_child_get(&nt, nt.root, "a") == a);
	char *p = node_path(&nt, b);
	CHECK(p && strcmp(p, "/workspace/a/b c") == 0);
	free(p);
	/* a rename moves the subtree and keeps inode numbers */
	uint64_t ino = b->ino;
	struct node *d = node_child_get(&nt, nt.root, "d");
	CHECK(node_move(&nt, a, d, "moved") == 0);
	p = node_path(&nt, b);
	CHECK(p && strcmp(p, "/workspace/d/moved/b c") == 0);
	free(p);
	CHECK(node_by_ino(&nt, ino) == b);
	CHECK(node_is_below(b, d) && !node_is_below(d, b));
	/* many names: the tables grow, every one is found again */
	for (int i = 0; i < 5000; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		CHECK(node_child_get(&nt, d, name) != NULL);
	}
	CHECK(node_child(&nt, d, "f4321") != NULL);
	/* an unlinked node held by the kernel stays until forgotten */
	b->nlookup = 1;
	node_unlink(&nt, b);
	CHECK(node_by_ino(&nt, ino) == b && b->unlinked);
	CHECK(node_path(&nt, b) == NULL);
	b->nlookup = 0;
	node_maybe_free(&nt, b);
	CHECK(node_by_ino(&nt, ino) == NULL);
	/* the root "/" makes "/x" paths */
	struct node_table nt2;
	CHECK(node_table_init(&nt2, "/") == 0);
	struct node *x = node_child_get(&nt2, nt2.root, "x");
	p = node_path(&nt2, x);
	CHECK(p && strcmp(p, "/x") == 0);
	free(p);
	p = node_path(&nt2, nt2.root);
	CHECK(p && strcmp(p, "/") == 0);
	free(p);
	node_table_release(&nt2);
	node_table_release(&nt);
}

struct seen {
	int n;
	char paths[8][64];
	mode_t modes[8];
	enum base_state bases[8];
	struct cache *c; /* takes up the links given */
	size_t nlinks;
	char links[4][64];
};

static void on_record(void *arg, const char *path, struct cfile *cf,
		      const struct plink *links, size_t nlinks)
{
	struct seen *sn = arg;
	for (size_t i = 0; i < nlinks; i++) {
		if (sn->nlinks < 4)
			snprintf(sn->links[sn->nlinks++], sizeof(sn->links[0]),
				 "%s", links[i].path);
		CHECK(links[i].file == cf->id);
		CHECK(cache_link_keep(sn->c, links[i].id, links[i].file,
				      links[i].path) == 0);
	}
	struct seen *s = arg;
	if (s->n < 8) {
		snprintf(s->paths[s->n], sizeof(s->paths[0]), "%s", path);
		s->modes[s->n] = cf->m.mode;
		s->bases[s->n] = cf->m.base;
		s->n++;
	}
}

static int data_file(struct cache *c, struct cfile *cf, const char *text)
{
	int fd = cache_fd(c, cf);
	if (fd < 0)
		return fd;
	ssize_t w = write(fd, text, strlen(text));
	close(fd);
	return w == (ssize_t)strlen(text) ? 0 : -EIO;
}

static bool ts_is(struct timespec t, time_t sec, long nsec)
{
	return t.tv_sec == sec && t.tv_nsec == nsec;
}

/* The sandbox answers that @n's ctime is @sec.@nsec: the ctime shown. */
static struct timespec answered(struct node *n, time_t sec, long nsec)
{
	struct fattr a = { .type = OSB_FILE, .ctime = { sec, nsec } };
	node_set_attr(n, &a, 0);
	return node_ctime(n);
}

/* A file's ctime holds (ARCHITECTURE.md): ours while the sandbox says
 * the ctime our change left, theirs after, never earlier than ours. */
static void test_node_ctime(void)
{
	struct node n;
	memset(&n, 0, sizeof(n));
	CHECK(ts_is(answered(&n, 100, 0), 100, 0));
	/* a change of ours made at 200 landed, leaving 150 there */
	node_ctime_landed(&n, &(struct timespec){ 200, 0 },
			  &(struct timespec){ 150, 0 });
	CHECK(ts_is(answered(&n, 150, 0), 200, 0));
	/* someone else's change, by a clock behind ours; then later */
	CHECK(ts_is(answered(&n, 160, 0), 200, 1));
	CHECK(ts_is(answered(&n, 160, 0), 200, 1));
	CHECK(ts_is(answered(&n, 300, 0), 300, 0));
	/* a change whose ctime is not known: the first answer says it */
	node_ctime_landed(&n, &(struct timespec){ 400, 0 },
			  &(struct timespec){ 0, 0 });
	CHECK(ts_is(answered(&n, 390, 5), 400, 0));
	CHECK(ts_is(answered(&n, 390, 5), 400, 0));
	/* a change made here never shows before the one shown */
	node_ctime_set(&n, &(struct timespec){ 0, 0 });
	struct timespec here = node_ctime(&n);
	CHECK(here.tv_sec > 400);
	CHECK(ts_is(node_ctime_local(&n, &(struct timespec){ 1, 0 }),
		    here.tv_sec, here.tv_nsec));
}

/* A name made in a directory here moves its times (ARCHITECTURE.md
 * "Directory times hold"): shown while the sandbox's ctime is older, or
 * was moved by a setting of the times begun before the name came. */
static void test_dir_changed_here(void)
{
	struct node n;
	memset(&n, 0, sizeof(n));
	struct fattr a = { .type = OSB_DIR,
			   .mtime = { 100, 0 },
			   .ctime = { 150, 0 } };
	n.changed_here = (struct timespec){ 200, 0 };
	node_set_attr(&n, &a, 0);
	CHECK(ts_is(n.attr.mtime, 200, 0));
	/* the setting's command moved the ctime, its answer is on its way */
	node_times_sent(&n);
	a.ctime = (struct timespec){ 210, 0 };
	node_set_attr(&n, &a, 0);
	CHECK(ts_is(n.attr.mtime, 200, 0));
	/* it said that ctime */
	node_times_done(&n, &(struct timespec){ 210, 0 });
	node_set_attr(&n, &a, 0);
	CHECK(ts_is(n.attr.mtime, 200, 0));
	/* someone else changed the directory since: theirs */
	a.ctime = (struct timespec){ 220, 0 };
	node_set_attr(&n, &a, 0);
	CHECK(ts_is(n.attr.mtime, 100, 0));
	CHECK(!n.changed_here.tv_sec);
}

static void test_journal(void)
{
	char dir[] = "/tmp/osbfs-unit-XXXXXX";
	char msg[256];
	struct cache *c;
	struct node_table nt;

	CHECK(mkdtemp(dir) != NULL);
	struct holder h = { .fd = -1 }, h2 = { .fd = -1 };
	CHECK(node_table_init(&nt, "/workspace") == 0);
	CHECK(cache_init(&c, dir, "sb1", 1 << 20, &nt, &h, msg, sizeof(msg)) ==
	      0);
	nt.on_free = cache_detach;
	nt.on_free_arg = c;
	struct node *n1 = node_child_get(&nt, nt.root, "kept");
	struct node *n2 = node_child_get(&nt, nt.root, "cleaned");
	struct cfile *f1 = cache_attach(c, n1);
	struct cfile *f2 = cache_attach(c, n2);
	CHECK(data_file(c, f1, "one") == 0 && data_file(c, f2, "two") == 0);
	f1->m.mode = 0640;
	f1->m.base = BASE_ABSENT;
	CHECK(cache_dirty(c, f1, "/workspace/kept") == 0);
	CHECK(cache_dirty(c, f2, "/workspace/cleaned") == 0);
	/* a rename and a chmod are journaled; an upload cleans f2 */
	CHECK(cache_record_update(c, f1, "/workspace/renamed$1") == 0);
	f1->m.mode = 0600;
	f1->m.sent = true; /* an upload sent, not answered */
	f1->m.sent_size = 3;
	f1->m.sent_print = 0xfedcba9876543210ull;
	CHECK(cache_dirty_meta(c, f1, "/workspace/renamed$1") == 0);
	/* links still to make: one moves with its directory, one is made */
	uint64_t l1, l2, l3;
	CHECK(cache_link_add(c, f1, "/workspace/l1", &l1) == 0);
	CHECK(cache_link_add(c, f1, "/workspace/d/l2", &l2) == 0);
	CHECK(cache_link_add(c, f1, "/workspace/l3", &l3) == 0);
	cache_links_follow(c, "/workspace/d", "/workspace/e");
	CHECK(cache_links_below(c, "/workspace/e"));
	CHECK(!cache_links_below(c, "/workspace/d"));
	cache_link_done(c, l3);
	CHECK(c->nplinks == 2 && l1 != l2);
	pthread_mutex_lock(&c->lock);
	cache_uploaded(c, f2, f2->wgen);
	/* two copies left by saves; one is removed */
	CHECK(cache_left_add(c, 0x11, "/workspace/.kept.tmp", 0) == 0);
	CHECK(cache_left_add(c, 0x12, "/workspace/gone.tmp", 0) == 0);
	CHECK(cache_left_add(c, 0x13, "/workspace/gone.tmp", 0) == 0);
	CHECK(c->nlefts == 2);
	pthread_mutex_unlock(&c->lock);
	struct left_take t;
	CHECK(cache_lefts_take(c, "/workspace/gone.tmp", 0, &t) == 1);
	cache_lefts_done(c, &t, 0);
	CHECK(cache_left_at(c, "/workspace/.kept.tmp"));
	CHECK(!cache_left_at(c, "/workspace/gone.tmp"));
	/* a torn last line, as a power loss could leave */
	FILE *j = fopen(strcat(strcpy(msg, c->dir), "/journal"), "a");
	CHECK(j != NULL);
	fputs("S 00000000000000ff path=2f78", j);
	fclose(j);
	/* "crash": forget everything in memory, keep the files */
	uint64_t id1 = f1->id;
	close(c->journal_fd);
	c->journal_fd = -1;
	struct cache *c2;
	char lockpath[300];
	snprintf(lockpath, sizeof(lockpath), "%s/lock", c->dir);
	unlink(lockpath); /* our own flock would refuse the second init */
	CHECK(cache_init(&c2, dir, "sb1", 1 << 20, &nt, &h2, msg,
			 sizeof(msg)) == 0);
	struct seen s = { .c = c2 };
	CHECK(cache_recover(c2, on_record, &s) == 4);
	CHECK(s.nlinks == 2 && c2->nplinks == 2);
	CHECK((strcmp(s.links[0], "/workspace/l1") == 0 &&
	       strcmp(s.links[1], "/workspace/e/l2") == 0) ||
	      (strcmp(s.links[1], "/workspace/l1") == 0 &&
	       strcmp(s.links[0], "/workspace/e/l2") == 0));
	CHECK(c2->nlefts == 1 &&
	      strcmp(c2->lefts[0].path, "/workspace/.kept.tmp") == 0);
	CHECK(s.n == 1 && strcmp(s.paths[0], "/workspace/renamed$1") == 0);
	CHECK(s.modes[0] == 0600 && s.bases[0] == BASE_ABSENT);
	CHECK(c2->ndirty == 1 && c2->dirty_first->id == id1);
	CHECK(c2->dirty_first->size == 3);
	CHECK(c2->dirty_first->m.sent && c2->dirty_first->m.sent_size == 3 &&
	      c2->dirty_first->m.sent_print == 0xfedcba9876543210ull);
	/* after recovery the journal holds just the live records */
	CHECK(c2->journal_bytes < 600);
	node_table_release(&nt);
	cache_release(c);
	cache_release(c2);
	holder_release(&h);
	holder_release(&h2);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/* The validator: size, mtime and ctime; a ctime not known on either side
 * is not compared, and one not known is taken from the next answer. */
static void test_validator(void)
{
	struct fmeta m = { .base = BASE_KNOWN,
			   .base_size = 3,
			   .base_mtime = { 100, 5 } };
	struct fattr a = { .type = OSB_FILE,
			   .size = 3,
			   .mtime = { 100, 5 },
			   .ctime = { 200, 7 } };
	CHECK(fmeta_base_is(&m, &a) && m.base_ctime.tv_sec == 0);
	CHECK(fmeta_base_take(&m, &a) && m.base_ctime.tv_sec == 200 &&
	      m.base_ctime.tv_nsec == 7);
	/* rewritten, size and mtime kept: only the ctime tells */
	a.ctime.tv_nsec = 8;
	CHECK(!fmeta_base_is(&m, &a) && !fmeta_base_take(&m, &a));
	CHECK(m.base_ctime.tv_nsec == 7);
	/* attributes made here know no ctime */
	a.ctime = (struct timespec){ 0, 0 };
	CHECK(fmeta_base_is(&m, &a));
	a.mtime.tv_nsec = 6;
	CHECK(!fmeta_base_is(&m, &a));
	m.base = BASE_UNKNOWN;
	a.mtime.tv_nsec = 5;
	CHECK(!fmeta_base_is(&m, &a));
}

struct replayed {
	int n;
	struct fmeta m[4];
};

static void on_line(void *arg, uint64_t id, const struct journal_record *r)
{
	struct replayed *rp = arg;
	(void)id;
	if (rp->n < 4)
		rp->m[rp->n++] = r->m;
}

/* A record keeps the base's ctime; one written before it was kept (no
 * ctime) replays with the ctime not known. */
static void test_journal_ctime(void)
{
	char dir[] = "/tmp/osbfs-unit-XXXXXX";
	char msg[256];
	struct cache *c;
	struct node_table nt;
	struct holder h = { .fd = -1 };

	CHECK(mkdtemp(dir) != NULL);
	CHECK(node_table_init(&nt, "/workspace") == 0);
	CHECK(cache_init(&c, dir, "sb2", 1 << 20, &nt, &h, msg, sizeof(msg)) ==
	      0);
	struct cfile *cf = cache_attach(c, node_child_get(&nt, nt.root, "f"));
	CHECK(cf && data_file(c, cf, "abc") == 0);
	cf->m.base = BASE_KNOWN;
	cf->m.base_size = 2;
	cf->m.base_mtime = (struct timespec){ 1700000000, 1 };
	cf->m.base_ctime = (struct timespec){ 1700000001, 999999999 };
	CHECK(cache_dirty(c, cf, "/workspace/f") == 0);
	FILE *j = fopen(strcat(strcpy(msg, c->dir), "/journal"), "a");
	CHECK(j != NULL);
	fputs("S 00000000000000aa path=2f776f726b73706163652f67 mode=644 "
	      "mtime=1.0 atime=1.0 times=0 chmod=0 base=5:1700000000.000000002 "
	      "owner= group=\n",
	      j);
	fclose(j);
	struct replayed rp = { 0 };
	CHECK(journal_replay(c, on_line, &rp) == 2 && rp.n == 2);
	CHECK(rp.m[0].base == BASE_KNOWN && rp.m[0].base_size == 2 &&
	      rp.m[0].base_mtime.tv_nsec == 1 &&
	      rp.m[0].base_ctime.tv_sec == 1700000001 &&
	      rp.m[0].base_ctime.tv_nsec == 999999999);
	CHECK(rp.m[1].base == BASE_KNOWN && rp.m[1].base_size == 5 &&
	      rp.m[1].base_mtime.tv_nsec == 2 &&
	      rp.m[1].base_ctime.tv_sec == 0 &&
	      rp.m[1].base_ctime.tv_nsec == 0);
	node_table_release(&nt);
	cache_release(c);
	holder_release(&h);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/* The fingerprint does not depend on how the bytes are cut, and tells
 * apart bytes, lengths and trailing zeros; fprint_fd agrees. */
static void test_fprint(void)
{
	char data[1000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7 + i / 13);
	struct fprint f;
	fprint_init(&f);
	fprint_add(&f, data, sizeof(data));
	uint64_t whole = fprint_end(&f);
	static const size_t cuts[] = { 1, 3, 7, 8, 9, 64, 333 };
	for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		fprint_init(&f);
		for (size_t off = 0; off < sizeof(data); off += cuts[k]) {
			size_t n = sizeof(data) - off < cuts[k] ?
					   sizeof(data) - off :
					   cuts[k];
			fprint_add(&f, data + off, n);
		}
		CHECK(fprint_end(&f) == whole);
	}
	fprint_init(&f);
	fprint_add(&f, data, sizeof(data) - 1);
	CHECK(fprint_end(&f) != whole);
	data[500] ^= 1;
	fprint_init(&f);
	fprint_add(&f, data, sizeof(data));
	CHECK(fprint_end(&f) != whole);
	data[500] ^= 1;
	uint64_t z1, z2;
	fprint_init(&f);
	fprint_add(&f, "ab", 2);
	z1 = fprint_end(&f);
	fprint_add(&f, "\0", 1);
	z2 = fprint_end(&f);
	CHECK(z1 != z2);
	char path[] = "/tmp/osbfs-fprint-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	unlink(path);
	CHECK(write(fd, data, sizeof(data)) == (ssize_t)sizeof(data));
	uint64_t got = 0;
	CHECK(fprint_fd(fd, sizeof(data), &got) == 0 && got == whole);
	CHECK(fprint_fd(fd, sizeof(data) + 1, &got) == -EIO);
	close(fd);
}

/* Symlink targets as the mount shows them: stored target, the link's
 * sandbox path, DIR, what readlink shows. */
static const struct link_case {
	const char *target, *link, *root, *want;
} link_cases[] = {
	/* absolute targets inside DIR: relative, from the link's directory */
	{ "/workspace/a/f", "/workspace/l", "/workspace", "a/f" },
	{ "/workspace/a/f", "/workspace/s/t/l", "/workspace", "../../a/f" },
	{ "/workspace/s/x", "/workspace/s/t/l", "/workspace", "../x" },
	{ "/workspace/s/t/x", "/workspace/s/t/l", "/workspace", "x" },
	{ "/workspace", "/workspace/s/l", "/workspace", ".." },
	{ "/workspace/", "/workspace/l", "/workspace", "." },
	{ "/workspace/s/t", "/workspace/s/t/l", "/workspace", "." },
	{ "//workspace//a/./f/", "/workspace/l", "/workspace", "a/f" },
	{ "/workspace/../workspace/a", "/workspace/l", "/workspace", "a" },
	/* relative targets: normalised, only leading ".." remain */
	{ "a/f", "/workspace/l", "/workspace", "a/f" },
	{ "./a/./f", "/workspace/l", "/workspace", "a/f" },
	{ "../a/f", "/workspace/s/l", "/workspace", "../a/f" },
	{ "../s/../a/f", "/workspace/s/l", "/workspace", "../a/f" },
	{ "../s/x", "/workspace/s/l", "/workspace", "x" },
	{ ".", "/workspace/s/l", "/workspace", "." },
	{ "..", "/workspace/s/l", "/workspace", ".." },
	/* "d -> ." then "d/../x": the kernel would climb from the mount
	 * root through d; lexically it is x, in the mount */
	{ "d/../x", "/workspace/l", "/workspace", "x" },
	{ "d/../../x", "/workspace/s/l", "/workspace", "../x" },
	{ "d/d/../../x", "/workspace/l", "/workspace", "x" },
	/* leaving DIR: a dead end in the control tree, from the mount root */
	{ "/home/user/.ssh/id_rsa", "/workspace/x", "/workspace",
	  ".osb/outside/home/user/.ssh/id_rsa" },
	{ "/etc/passwd", "/workspace/a/b/x", "/workspace",
	  "../../.osb/outside/etc/passwd" },
	{ "../../../etc/passwd", "/workspace/x", "/workspace",
	  ".osb/outside/etc/passwd" },
	{ "../../../../../../../../../../tmp/s", "/workspace/a/x", "/workspace",
	  "../.osb/outside/tmp/s" },
	{ "..", "/workspace/x", "/workspace", ".osb/outside" },
	{ "d/../..", "/workspace/x", "/workspace", ".osb/outside" },
	{ "d/../../../etc", "/workspace/x", "/workspace", ".osb/outside/etc" },
	{ "/", "/workspace/a/x", "/workspace", "../.osb/outside" },
	{ "/workspace2/f", "/workspace/x", "/workspace",
	  ".osb/outside/workspace2/f" },
	{ "/work", "/workspace/x", "/workspace", ".osb/outside/work" },
	{ "", "/workspace/a/x", "/workspace", "../.osb/outside" },
	/* the sandbox's own DIR/.osb is hidden by the control tree */
	{ ".osb/ctl", "/workspace/x", "/workspace",
	  ".osb/outside/workspace/.osb/ctl" },
	{ "/workspace/.osb", "/workspace/a/x", "/workspace",
	  "../.osb/outside/workspace/.osb" },
	{ "../.osb/run", "/workspace/a/x", "/workspace",
	  "../.osb/outside/workspace/.osb/run" },
	{ "a/.osb/f", "/workspace/x", "/workspace", "a/.osb/f" },
	{ ".osbx", "/workspace/x", "/workspace", ".osbx" },
	/* DIR "/": nothing is outside but the hidden control tree */
	{ "/etc/passwd", "/root/x", "/", "../etc/passwd" },
	{ "../../../etc", "/x", "/", "etc" },
	{ "/", "/a/b/x", "/", "../.." },
	{ "/.osb/f", "/x", "/", ".osb/outside/.osb/f" },
	/* a DIR that ends in "/", deeper DIRs */
	{ "/w/d/a", "/w/d/s/l", "/w/d/", "../a" },
	{ "/w/d", "/w/d/l", "/w/d", "." },
	{ "/w", "/w/d/s/l", "/w/d", "../.osb/outside/w" },
	/* names are bytes: no decoding, no escaping */
	{ "a\n b/$x/\xff", "/workspace/l", "/workspace", "a\n b/$x/\xff" },
};

static void test_linkmap(void)
{
	const char *w = "/workspace";

	for (size_t i = 0; i < sizeof(link_cases) / sizeof(link_cases[0]);
	     i++) {
		const struct link_case *c = &link_cases[i];
		char *got = NULL;
		int rc = link_map(c->target, c->link, c->root, ".osb", &got);
		if (rc || strcmp(got, c->want) != 0) {
			fprintf(stderr,
				"link %s -> %s (DIR %s): got \"%s\" "
				"(rc %d), want \"%s\"\n",
				c->link, c->target, c->root, rc ? "" : got, rc,
				c->want);
			failures++;
		}
		free(got);
	}
	/* another control tree name */
	char *got = NULL;
	CHECK(link_map("/etc", "/workspace/x", w, "ctl", &got) == 0 &&
	      strcmp(got, "ctl/outside/etc") == 0);
	free(got);

	/* a link not below DIR is a caller's error */
	got = NULL;
	CHECK(link_map("a", "/elsewhere/l", w, ".osb", &got) == -EINVAL &&
	      !got);
	CHECK(link_map("a", "/workspace", w, ".osb", &got) == -EINVAL);
	CHECK(link_map("a", "/workspacex/l", w, ".osb", &got) == -EINVAL);

	/* the result must fit PATH_MAX: a deep link to a long target */
	char *deep = malloc(4200), *far = malloc(4200);
	CHECK(deep && far);
	if (deep && far) {
		strcpy(deep, "/workspace");
		for (int i = 0; i < 1400; i++)
			strcat(deep, "/d");
		strcat(deep, "/l");
		memset(far, 'x', 4000);
		far[0] = '/';
		far[4000] = '\0';
		CHECK(link_map(far, deep, w, ".osb", &got) == -ENAMETOOLONG);
		CHECK(link_map("/workspace/f", deep, w, ".osb", &got) ==
		      -ENAMETOOLONG);
		CHECK(link_map("x", deep, w, ".osb", &got) == 0 &&
		      strcmp(got, "x") == 0);
		free(got);
	}
	free(deep);
	free(far);
}

/* Runs @script with /bin/sh (a POSIX shell, dash on Debian, as execd
 * uses when a sandbox has no bash); its exit code, and its stderr in
 * @err. */
static int sh(const char *script, char *err, size_t err_size)
{
	char ef[] = "/tmp/osbfs-unit-errXXXXXX";
	int efd = mkstemp(ef);
	if (efd < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(efd, 2);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	int status = -1;
	waitpid(pid, &status, 0);
	ssize_t n = pread(efd, err, err_size - 1, 0);
	err[n > 0 ? n : 0] = '\0';
	close(efd);
	unlink(ef);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A command wrapped to run at most once: a repeat reports the first
 * run's outcome and does nothing again (remote.c). */
static void test_once(void)
{
	char dir[] = "/tmp/osbfs-unit-onceXXXXXX", err[512];
	if (!mkdtemp(dir)) {
		CHECK(0);
		return;
	}
	char ops[128], body[512];
	snprintf(ops, sizeof(ops), "%s/ops", dir);
	snprintf(body, sizeof(body), "echo x >>%s/count; exit 3", dir);
	char *once = remote_once_script(ops, "0123abcd", body, true);
	CHECK(once != NULL);
	CHECK(sh(once, err, sizeof(err)) == 3);
	CHECK(sh(once, err, sizeof(err)) == 3); /* answer lost: again */
	char count[128], line[64] = "";
	snprintf(count, sizeof(count), "%s/count", dir);
	FILE *f = fopen(count, "r");
	size_t lines = 0;
	while (f && fgets(line, sizeof(line), f))
		lines++;
	if (f)
		fclose(f);
	CHECK(lines == 1);
	free(once);

	/* the error text of the first run comes back with its code */
	snprintf(body, sizeof(body), "mv %s/missing %s/b", dir, dir);
	once = remote_once_script(ops, "4567cdef", body, false);
	CHECK(sh(once, err, sizeof(err)) == 1);
	CHECK(strstr(err, "No such file or directory") != NULL);
	err[0] = '\0';
	CHECK(sh(once, err, sizeof(err)) == 1);
	CHECK(strstr(err, "No such file or directory") != NULL);
	CHECK(strstr(err, "cannot overwrite") == NULL); /* the claim's own */
	free(once);

	/* the records' directory replaced by a file, or by a link to a
	 * directory: made again, the link's target left alone */
	char cmd[512];
	snprintf(body, sizeof(body), "echo y >>%s/count2", dir);
	for (int k = 0; k < 2; k++) {
		snprintf(cmd, sizeof(cmd),
			 k ? "rm -rf %1$s/ops && mkdir %1$s/t && "
			     "ln -s %1$s/t %1$s/ops" :
			     "rm -rf %1$s/ops && echo x >%1$s/ops",
			 dir);
		CHECK(sh(cmd, err, sizeof(err)) == 0);
		once = remote_once_script(ops, k ? "2" : "1", body, true);
		CHECK(once && sh(once, err, sizeof(err)) == 0);
		free(once);
		snprintf(cmd, sizeof(cmd),
			 "test -d %1$s/ops && test ! -L %1$s/ops && "
			 "test ! -e %1$s/t/1.c && test ! -e %1$s/t/2.c",
			 dir);
		CHECK(sh(cmd, err, sizeof(err)) == 0);
	}
	/* the directory above it a link: refused at once, nothing there */
	char sub[160], sub_ops[192];
	snprintf(sub, sizeof(sub), "%s/up", dir);
	snprintf(sub_ops, sizeof(sub_ops), "%s/ops", sub);
	snprintf(cmd, sizeof(cmd), "ln -s %1$s/t %1$s/up", dir);
	CHECK(sh(cmd, err, sizeof(err)) == 0);
	once = remote_once_script(sub_ops, "3", body, false);
	CHECK(once && sh(once, err, sizeof(err)) == 76);
	CHECK(strstr(err, "is a symbolic link") != NULL);
	free(once);
	snprintf(cmd, sizeof(cmd), "test ! -e %1$s/t/ops", dir);
	CHECK(sh(cmd, err, sizeof(err)) == 0);

	char rm[256];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	CHECK(sh(rm, err, sizeof(err)) == 0);
}

static void test_code_recs(void)
{
	struct code_rec r;
	memset(&r, 0, sizeof(r));
	CHECK(code_rec_parse("python@@0123abcd", &r));
	CHECK(r.lang == code_lang_index("python") && !r.name[0] &&
	      strcmp(r.id, "0123abcd") == 0);
	CHECK(code_rec_parse("bash@side.1@ff", &r));
	CHECK(strcmp(r.name, "side.1") == 0 && strcmp(r.id, "ff") == 0);
	CHECK(!code_rec_parse("cobol@@ff", &r));      /* no such language */
	CHECK(!code_rec_parse("python@@", &r));       /* no id */
	CHECK(!code_rec_parse("python@x", &r));       /* one @ */
	CHECK(!code_rec_parse("python@-bad@ff", &r)); /* a name mkdir refuses */
	CHECK(!code_rec_parse("python@a@b@c", &r));   /* @ in the name */
	CHECK(!code_rec_parse("", &r));
	CHECK(!code_rec_parse("python@@ab/cd", &r)); /* not an id */
	CHECK(!code_rec_parse("python@@ab%2e", &r));
	CHECK(!code_rec_parse("python@input@ff", &r)); /* a file's name */
	CHECK(!code_rec_parse("python@latest@ff", &r));
}

static void test_json_str(void)
{
	static const struct {
		const char *in, *out;
	} rows[] = {
		{ "plain \"q\" \\", "\"plain \\\"q\\\" \\\\\"" },
		{ "a\nb\x1b\x7f", "\"a\\nb\\u001b\\u007f\"" },
		{ "caf\xc3\xa9 \xe2\x82\xac", "\"caf\xc3\xa9 \xe2\x82\xac\"" },
		{ "c1\xc2\x9b ls\xe2\x80\xa8", "\"c1\\u009b ls\\u2028\"" },
		{ "bad\xff\xc3", "\"bad\\ufffd\\ufffd\"" },
		{ "cut\xe2\x82", "\"cut\\ufffd\\ufffd\"" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		struct text t = { 0 };
		CHECK(text_json_str(&t, rows[i].in) == 0);
		CHECK(t.s && strcmp(t.s, rows[i].out) == 0);
		if (t.s && strcmp(t.s, rows[i].out) != 0)
			fprintf(stderr, "  json #%zu: %s\n", i, t.s);
		text_release(&t);
	}
}

static void test_log_escapes(void)
{
	long long when;
	log_quiet_stderr();
	log_error("job %s: %s", "a\n2026-01-01T00:00:00Z error: forged",
		  "\x1b]0;title\x07\xff caf\xc3\xa9 \\");
	char *last = log_last_error(&when);
	CHECK(last && strcmp(last, "job a\\n2026-01-01T00:00:00Z error: "
				   "forged: \\x1b]0;title\\x07\\xff "
				   "caf\xc3\xa9 \\\\") == 0);
	free(last);
	char *recent = log_recent();
	CHECK(recent && strchr(recent, '\n') == recent + strlen(recent) - 1);
	free(recent);

	/* cut to LOG_LINE_MAX, never inside an escape */
	char *big = malloc(LOG_LINE_MAX);
	CHECK(big != NULL);
	if (!big)
		return;
	memset(big, '\x1b', LOG_LINE_MAX - 1);
	big[LOG_LINE_MAX - 1] = '\0';
	log_error("x%s", big);
	last = log_last_error(&when);
	size_t n = last ? strlen(last) : 0;
	CHECK(n <= LOG_LINE_MAX && n > LOG_LINE_MAX - 8);
	CHECK(last && strcmp(last + n - 7, "\\x1b...") == 0);
	free(last);
	free(big);
}

/* The name a conflicting version is kept under fits 255 bytes, is cut
 * between characters, and tells long names that begin alike apart. */
static void test_conflict_names(void)
{
	char name[300], path[320];
	time_t t = 1796380000; /* in 2026 */
	char *p = wb_conflict_path("/w/short", t);
	CHECK(p && strncmp(p, "/w/short.conflict-2026", 22) == 0);
	free(p);
	/* "a" then "é" (2 bytes): the cut at 220 falls inside one */
	size_t n = 0;
	name[n++] = 'a';
	while (n + 2 <= 249) {
		name[n++] = (char)0xc3;
		name[n++] = (char)0xa9;
	}
	name[n] = '\0';
	snprintf(path, sizeof(path), "/w/%s", name);
	p = wb_conflict_path(path, t);
	CHECK(p != NULL);
	const char *base = p ? strrchr(p, '/') + 1 : "";
	CHECK(strlen(base) <= 255);
	CHECK(osb_utf8_valid(base, strlen(base)));
	CHECK(strstr(base, ".conflict-") && strchr(base, '~'));
	CHECK(strncmp(base, name, (size_t)(strchr(base, '~') - base)) == 0);
	/* the same first 250 bytes, another end: another name */
	path[strlen(path) - 1] = 'x';
	char *q = wb_conflict_path(path, t);
	CHECK(q && p && strcmp(p, q) != 0);
	free(p);
	free(q);
}

/* The output of the command that finds special mode bits, from a sandbox
 * that may lie: only whole lines of a hex mode and a hex path count. */
static void test_specials_parse(void)
{
	/* "a/b" = 612f62, "t" = 74, "odd" name of 3 hex digits */
	char out[] = "89ed 612f62\n"
		     "43ff 74\n"
		     "zz 74\n"
		     "81a4\n"
		     "81a4 \n"
		     "81a4 746\n"
		     "ffffffff 74\n"
		     /* a file with a second name, and lines that lie */
		     "81a4 2 1234 6c\n"
		     "81a4 x 1234 6c\n"
		     "41ed 2 99 64";
	struct rdent *d = NULL;
	size_t n = 0;
	CHECK(remote_specials_parse(out, &d, &n) == 0);
	CHECK(n == 5);
	CHECK(n >= 1 && strcmp(d[0].name, "a/b") == 0 &&
	      d[0].attr.mode == 04755 && d[0].attr.mode_full && !d[0].nlink);
	CHECK(n >= 2 && strcmp(d[1].name, "t") == 0 && d[1].attr.mode == 01777);
	CHECK(n >= 3 && d[2].attr.mode == 07777); /* masked */
	CHECK(n >= 4 && strcmp(d[3].name, "l") == 0 && d[3].nlink == 2 &&
	      d[3].ino == 1234 && d[3].attr.mode == 0644);
	/* a directory's count is not of links */
	CHECK(n >= 5 && strcmp(d[4].name, "d") == 0 && !d[4].nlink);
	rdent_array_free(d, n);
	CHECK(remote_specials_parse(NULL, &d, &n) == 0 && n == 0);
	rdent_array_free(d, n);
}

static bool listed_only_b(const char *name, void *arg)
{
	(void)arg;
	return strcmp(name, "b") == 0;
}

/* Whether @path's @name reads @want ("" and NULL: has none). */
static bool xval_is(struct xattrs *x, const char *path, const char *name,
		    const char *want)
{
	char buf[64];
	ssize_t n = xattrs_get(x, path, name, buf, sizeof(buf));
	if (!want)
		return n == -ENODATA;
	return n == (ssize_t)strlen(want) && memcmp(buf, want, (size_t)n) == 0;
}

static void test_xattrs(void)
{
	char dir[] = "/tmp/osbfs-unit-XXXXXX", msg[256], path[300];
	struct xattrs *x;
	CHECK(mkdtemp(dir) != NULL);
	CHECK(xattrs_open(&x, dir, 1 << 20, msg, sizeof(msg)) == 0);
	CHECK(xattrs_empty(x));
	CHECK(xattrs_set(x, "/w/d/f", "user.a", "1", 1, 0) == 0);
	CHECK(xattrs_set(x, "/w/d/e/g", "user.a", "2", 1, 0) == 0);
	CHECK(xattrs_set(x, "/w/d2", "user.a", "3", 1, 0) == 0);
	CHECK(xattrs_set(x, "/w/d/f", "user.a", "x", 1, XATTR_CREATE) ==
	      -EEXIST);
	CHECK(xattrs_set(x, "/w/d/f", "user.b", "x", 1, XATTR_REPLACE) ==
	      -ENODATA);
	CHECK(xattrs_set(x, "/w/d/f", "user.b", "bb", 2, 0) == 0);
	CHECK(xattrs_get(x, "/w/d/f", "user.b", NULL, 0) == 2);
	CHECK(xattrs_get(x, "/w/d/f", "user.b", msg, 1) == -ERANGE);
	CHECK(xattrs_list(x, "/w/d/f", NULL, 0) == 14);
	/* a directory moves what is below it, not its namesake d2 */
	xattrs_move(x, "/w/d", "/w/n");
	CHECK(xval_is(x, "/w/n/f", "user.b", "bb"));
	CHECK(xval_is(x, "/w/n/e/g", "user.a", "2"));
	CHECK(xval_is(x, "/w/d/f", "user.a", NULL));
	CHECK(xval_is(x, "/w/d2", "user.a", "3"));
	/* a rename over: what was there goes */
	CHECK(xattrs_set(x, "/w/o", "user.o", "o", 1, 0) == 0);
	xattrs_move(x, "/w/d2", "/w/o");
	CHECK(xval_is(x, "/w/o", "user.o", NULL) &&
	      xval_is(x, "/w/o", "user.a", "3"));
	/* a listing of /w/n with b only: f and e (and e/g) go */
	CHECK(xattrs_set(x, "/w/n/b", "user.a", "b", 1, 0) == 0);
	xattrs_keep_listed(x, "/w/n", listed_only_b, NULL);
	CHECK(xval_is(x, "/w/n/f", "user.b", NULL));
	CHECK(xval_is(x, "/w/n/e/g", "user.a", NULL));
	CHECK(xval_is(x, "/w/n/b", "user.a", "b"));
	CHECK(xattrs_remove(x, "/w/n/b", "user.a") == 0);
	CHECK(xattrs_remove(x, "/w/n/b", "user.a") == -ENODATA);
	CHECK(xattrs_set(x, "/w/z/y", "user.a", "y", 1, 0) == 0);
	xattrs_drop(x, "/w/z");
	CHECK(xval_is(x, "/w/z/y", "user.a", NULL));
	/* the cap */
	char big[40000] = { 0 };
	CHECK(xattrs_set(x, "/w/o", "user.big", big, sizeof(big), 0) == 0);
	xattrs_close(x);
	CHECK(xattrs_open(&x, dir, 50000, msg, sizeof(msg)) == 0);
	CHECK(xattrs_get(x, "/w/o", "user.big", NULL, 0) == sizeof(big));
	CHECK(xattrs_set(x, "/w/o", "user.big2", big, sizeof(big), 0) ==
	      -ENOSPC);
	xattrs_close(x);
	/* replayed after a "crash": a torn line and a damaged one skipped */
	snprintf(path, sizeof(path), "%s/xattrs", dir);
	FILE *f = fopen(path, "a");
	CHECK(f != NULL);
	fputs("D 2f772f6f 0123456789abcdef\nD 2f772f", f);
	fclose(f);
	CHECK(xattrs_open(&x, dir, 1 << 20, msg, sizeof(msg)) == 0);
	CHECK(xval_is(x, "/w/o", "user.a", "3"));
	CHECK(!xattrs_empty(x));
	xattrs_drop(x, "/");
	CHECK(xattrs_empty(x));
	xattrs_close(x);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	test_hex();
	test_parsers();
	test_nodes();
	test_node_ctime();
	test_dir_changed_here();
	test_journal();
	test_validator();
	test_journal_ctime();
	test_fprint();
	test_linkmap();
	test_once();
	test_code_recs();
	test_json_str();
	test_log_escapes();
	test_conflict_names();
	test_specials_parse();
	test_xattrs();
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("all pass\n");
	return 0;
}

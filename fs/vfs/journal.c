/*
 * journal.c - the record of every file with changes the sandbox does not
 * have yet: an append-only log, CACHE/journal.
 *
 * One line per event, written with one write(2) on an O_APPEND fd, so a
 * crash of osbfs leaves every line whole (a torn last line after a power
 * loss is ignored):
 *   S <id> path=<hex> mode=<octal> mtime=<s.ns> atime=<s.ns> times=<0|1>
 *     chmod=<0|1> base=absent|unknown|<size>:<s.ns>[:<s.ns>]
 *     [sent=<size>:<print>]
 *     owner=<hex> group=<hex> [dir=1]
 *   L <id> path=<hex>
 *   K <id> path=<hex> file=<id>
 *   D <id>
 * "S" states what dirty file <id> (its data in files/<id>) is now; "L"
 * that the sandbox's file at path is a copy left behind by a file resent
 * under another name, to be removed; "K" that path is a hard link still
 * to make to dirty file <file> (made after its upload); "D" says it is
 * clean or gone (a link: made, or no longer to make). With dir=1
 * the record is of a directory made or chmodded here (no data; base=absent:
 * made here), not yet in the sandbox. A known base is the size, mtime
 * and ctime of the sandbox's version the data derives from; a record
 * without the ctime (one written before it was kept, or when it is not
 * known) leaves it to the next answer of the sandbox. "sent" is the size and
 * fingerprint (fprint.h) of the bytes last sent whose landing no answer
 * confirmed: a copy in the sandbox like it is ours. The last line about an id
 * wins. Appending costs microseconds where a file per record cost a create and
 * a rename, which made a burst of small files (tar x) crawl. The log is
 * rewritten with only the live records at start and when it grows big. Every
 * line is on disk within a second (the writeback syncer's syncfs), so the
 * journal survives a power loss too, not only a crash of osbfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_i.h"
#include "hex.h"
#include "journal.h"
#include "log.h"

#define HEADER "osbfs-journal 1\n"
#define COMPACT_BYTES (16ll << 20)
/* space kept allocated past the journal's end, so that records (a rename
 * of an unsaved file, above all) can still be written when the disk
 * fills up with cached data */
#define RESERVE_BYTES (1ll << 20)

static void put_hex(FILE *m, const char *key, const char *s)
{
	fprintf(m, " %s=", key);
	hex_put(m, s);
}

/* Appends the "S" line of @cf at @path to @m (c->lock held). */
static void record_line(FILE *m, const struct cfile *cf, const char *path)
{
	fprintf(m, "S %016llx", (unsigned long long)cf->id);
	put_hex(m, "path", path);
	fprintf(m,
		" mode=%o mtime=%lld.%09ld atime=%lld.%09ld times=%d chmod=%d",
		(unsigned)cf->m.mode, (long long)cf->m.mtime.tv_sec,
		cf->m.mtime.tv_nsec, (long long)cf->m.atime.tv_sec,
		cf->m.atime.tv_nsec, cf->m.times_set, cf->m.chmod_needed);
	if (cf->m.base == BASE_ABSENT)
		fprintf(m, " base=absent");
	else if (cf->m.base == BASE_KNOWN)
		fprintf(m, " base=%lld:%lld.%09ld", (long long)cf->m.base_size,
			(long long)cf->m.base_mtime.tv_sec,
			cf->m.base_mtime.tv_nsec);
	if (cf->m.base == BASE_KNOWN &&
	    (cf->m.base_ctime.tv_sec || cf->m.base_ctime.tv_nsec))
		fprintf(m, ":%lld.%09ld", (long long)cf->m.base_ctime.tv_sec,
			cf->m.base_ctime.tv_nsec);
	else
		fprintf(m, " base=unknown");
	if (cf->m.sent)
		fprintf(m, " sent=%lld:%016llx", (long long)cf->m.sent_size,
			(unsigned long long)cf->m.sent_print);
	put_hex(m, "owner", cf->m.owner);
	put_hex(m, "group", cf->m.group);
	if (cf->m.dir)
		fputs(" dir=1", m);
	fputc('\n', m);
}

/* Appends the "L" line of copy @id left at @path to @m. */
static void left_line(FILE *m, uint64_t id, const char *path)
{
	fprintf(m, "L %016llx", (unsigned long long)id);
	put_hex(m, "path", path);
	fputc('\n', m);
}

/* Appends the "K" line of link @id at @path to file @file to @m. */
static void link_line(FILE *m, uint64_t id, uint64_t file, const char *path)
{
	fprintf(m, "K %016llx", (unsigned long long)id);
	put_hex(m, "path", path);
	fprintf(m, " file=%016llx\n", (unsigned long long)file);
}

/* Keeps RESERVE_BYTES allocated past the end (best effort: a
 * filesystem without fallocate has no reserve). */
static void reserve(struct cache *c)
{
	if (c->journal_reserved - c->journal_bytes >= RESERVE_BYTES / 2)
		return;
	if (fallocate(c->journal_fd, FALLOC_FL_KEEP_SIZE,
		      (off_t)c->journal_bytes, (off_t)RESERVE_BYTES) == 0)
		c->journal_reserved = c->journal_bytes + RESERVE_BYTES;
}

static int append(struct cache *c, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(c->journal_fd, s, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Appends @len bytes, whole lines, and counts them (c->lock held). */
static int append_counted(struct cache *c, const char *s, size_t len)
{
	int rc = append(c, s, len);
	if (!rc) {
		c->journal_bytes += (int64_t)len;
		c->unsynced++;
		reserve(c);
	}
	return rc;
}

/* Appends the "S" line of @cf at @path, or with @cf NULL the "L" line
 * of copy @id left at @path, or with @file the "K" line of link @id
 * (c->lock held). */
static int put_line(struct cache *c, const struct cfile *cf, uint64_t id,
		    uint64_t file, const char *path)
{
	char *line = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&line, &len);
	if (!m)
		return -ENOMEM;
	if (cf)
		record_line(m, cf, path);
	else if (file)
		link_line(m, id, file, path);
	else
		left_line(m, id, path);
	if (fclose(m) != 0) {
		free(line);
		return -ENOMEM;
	}
	int rc = append_counted(c, line, len);
	free(line);
	return rc;
}

int journal_put(struct cache *c, const struct cfile *cf, const char *path)
{
	return put_line(c, cf, cf->id, 0, path);
}

int journal_put_left(struct cache *c, uint64_t id, const char *path)
{
	return put_line(c, NULL, id, 0, path);
}

int journal_put_link(struct cache *c, uint64_t id, uint64_t file,
		     const char *path)
{
	return put_line(c, NULL, id, file, path);
}

int journal_del(struct cache *c, uint64_t id)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "D %016llx\n",
			 (unsigned long long)id);
	return append_counted(c, line, (size_t)n);
}

/* Writes a new journal holding the records of the dirty files, and puts
 * it in place of the old one (c->lock held). */
int journal_compact(struct cache *c)
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m)
		return -ENOMEM;
	fputs(HEADER, m);
	for (struct cfile *cf = c->dirty_first; cf; cf = cf->dnext)
		if (cf->record_path)
			record_line(m, cf, cf->record_path);
	for (size_t i = 0; i < c->nlefts; i++)
		left_line(m, c->lefts[i].id, c->lefts[i].path);
	for (size_t i = 0; i < c->nplinks; i++)
		link_line(m, c->plinks[i].id, c->plinks[i].file,
			  c->plinks[i].path);
	if (fclose(m) != 0) {
		free(text);
		return -ENOMEM;
	}
	int rc = 0;
	int fd = openat(c->dir_fd, "journal.tmp",
			O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		rc = -errno;
	for (size_t off = 0; !rc && off < len;) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno != EINTR)
			rc = -errno;
		else if (w > 0)
			off += (size_t)w;
	}
	if (!rc && fdatasync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (!rc && renameat(c->dir_fd, "journal.tmp", c->dir_fd, "journal") < 0)
		rc = -errno;
	if (!rc) {
		fd = openat(c->dir_fd, "journal",
			    O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
		} else {
			close(c->journal_fd);
			c->journal_fd = fd;
			c->journal_bytes = (int64_t)len;
			c->journal_reserved = 0;
			reserve(c);
		}
	} else {
		unlinkat(c->dir_fd, "journal.tmp", 0);
	}
	free(text);
	return rc;
}

bool journal_wants_compaction(const struct cache *c)
{
	return c->journal_bytes > COMPACT_BYTES;
}

/* ---- recovery ---- */

static void parse_ts(const char *s, struct timespec *ts)
{
	long long sec = 0;
	long nsec = 0;
	sscanf(s, "%lld.%ld", &sec, &nsec);
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = nsec;
}

/* Fills @r from the tokens of an "S" line. */
static int parse_record(char *rest, struct journal_record *r)
{
	char *save = NULL;
	memset(r, 0, sizeof(*r));
	for (char *tok = strtok_r(rest, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq++ = '\0';
		if (strcmp(tok, "path") == 0) {
			if (hex_decode(eq, strlen(eq), r->path,
				       sizeof(r->path)))
				return -EINVAL;
		} else if (strcmp(tok, "mode") == 0) {
			r->m.mode = (mode_t)strtoul(eq, NULL, 8);
		} else if (strcmp(tok, "mtime") == 0) {
			parse_ts(eq, &r->m.mtime);
		} else if (strcmp(tok, "atime") == 0) {
			parse_ts(eq, &r->m.atime);
		} else if (strcmp(tok, "times") == 0) {
			r->m.times_set = atoi(eq) != 0;
		} else if (strcmp(tok, "chmod") == 0) {
			r->m.chmod_needed = atoi(eq) != 0;
		} else if (strcmp(tok, "dir") == 0) {
			r->m.dir = atoi(eq) != 0;
		} else if (strcmp(tok, "base") == 0) {
			long long size;
			char ts[64];
			if (strcmp(eq, "absent") == 0) {
				r->m.base = BASE_ABSENT;
			} else if (sscanf(eq, "%lld:%63s", &size, ts) == 2) {
				/* "mtime" or "mtime:ctime" */
				char *ct = strchr(ts, ':');
				r->m.base = BASE_KNOWN;
				r->m.base_size = size;
				parse_ts(ts, &r->m.base_mtime);
				if (ct)
					parse_ts(ct + 1, &r->m.base_ctime);
			}
		} else if (strcmp(tok, "sent") == 0) {
			long long size;
			unsigned long long print;
			if (sscanf(eq, "%lld:%16llx", &size, &print) == 2 &&
			    size >= 0) {
				r->m.sent = true;
				r->m.sent_size = size;
				r->m.sent_print = print;
			}
		} else if (strcmp(tok, "file") == 0) {
			unsigned long long file = 0;
			if (sscanf(eq, "%16llx", &file) == 1)
				r->file = file;
		} else if (strcmp(tok, "owner") == 0) {
			hex_decode(eq, strlen(eq), r->m.owner,
				   sizeof(r->m.owner));
		} else if (strcmp(tok, "group") == 0) {
			hex_decode(eq, strlen(eq), r->m.group,
				   sizeof(r->m.group));
		}
	}
	return r->path[0] == '/' ? 0 : -EINVAL;
}

struct live {
	uint64_t id;
	char *line; /* the rest of its last "S", "L" or "K" line */
	char kind;  /* which */
};

static struct live *find_live(struct live *v, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].id == id)
			return &v[i];
	return NULL;
}

int journal_replay(struct cache *c, journal_replay_fn fn, void *arg)
{
	return journal_replay_at(c->dir_fd, c->dir, fn, arg);
}

int journal_replay_at(int dir_fd, const char *dir, journal_replay_fn fn,
		      void *arg)
{
	struct live *v = NULL;
	size_t n = 0, cap = 0;
	int count = 0;

	FILE *f = NULL;
	int fd = openat(dir_fd, "journal", O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		f = fdopen(fd, "r");
	if (!f) {
		if (fd >= 0)
			close(fd);
		return 0; /* no journal: nothing to recover */
	}
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	while ((len = getline(&line, &lcap, f)) > 0) {
		if (line[len - 1] != '\n')
			break; /* torn last line */
		line[len - 1] = '\0';
		unsigned long long id;
		int off = 0;
		if (sscanf(line, "%*c %16llx%n", &id, &off) != 1)
			continue;
		struct live *l = find_live(v, n, id);
		if (line[0] == 'D') {
			if (l) {
				free(l->line);
				*l = v[--n];
			}
			continue;
		}
		if (line[0] != 'S' && line[0] != 'L' && line[0] != 'K')
			continue;
		char *rest = strdup(line + off);
		if (!rest)
			break;
		if (l) {
			free(l->line);
			l->line = rest;
			l->kind = line[0];
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			struct live *g = realloc(v, cap * sizeof(*v));
			if (!g) {
				free(rest);
				break;
			}
			v = g;
		}
		v[n].id = id;
		v[n].line = rest;
		v[n].kind = line[0];
		n++;
	}
	free(line);
	fclose(f);
	for (size_t i = 0; i < n; i++) {
		struct journal_record r;
		if (parse_record(v[i].line, &r) == 0 &&
		    (v[i].kind != 'K' || r.file)) {
			r.left = v[i].kind == 'L';
			r.link = v[i].kind == 'K';
			fn(arg, v[i].id, &r);
			count++;
		} else {
			log_error("journal record %016llx in %s is unreadable; "
				  "its data stays in files/",
				  (unsigned long long)v[i].id, dir);
		}
		free(v[i].line);
	}
	free(v);
	return count;
}

int journal_open(struct cache *c)
{
	c->journal_fd = openat(c->dir_fd, "journal",
			       O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (c->journal_fd < 0)
		return -errno;
	off_t end = lseek(c->journal_fd, 0, SEEK_END);
	if (end == 0 && append(c, HEADER, strlen(HEADER)) < 0)
		return -EIO;
	c->journal_bytes = end > 0 ? end : (off_t)strlen(HEADER);
	reserve(c);
	return 0;
}

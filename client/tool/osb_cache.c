/*
 * osb_cache.c - where a sandbox's execd was, kept on disk between runs
 * of osb so that the next command skips the endpoint lookup.
 *
 * One file per lifecycle server (its URL and whether it proxies) and
 * sandbox, in $XDG_CACHE_HOME/osb (else ~/.cache/osb): the endpoint's
 * headers may hold execd's access token, so the directory is 0700 and
 * the files 0600, both owned by the user, never reached through a
 * symbolic link, and written whole (a new file renamed over the old).
 * A file that fails any of these checks is ignored. The file names a
 * hash of the key; the key is stored inside too and checked on reading,
 * so a collision is a miss.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "osb_tool.h"

#define CACHE_MAGIC "osb-endpoint 1"
#define CACHE_FILE_MAX 16384

static bool cache_off(const struct osb_cli *cli)
{
	const char *e = getenv("OSB_NO_CACHE");
	return cli->no_cache || (e && *e && strcmp(e, "0") != 0) ||
	       !cli->client;
}

/* The directory that holds osb's: $XDG_CACHE_HOME when absolute (as
 * the specification wants), else ~/.cache. */
static int cache_base(char *buf, size_t size)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;
	if (x && x[0] == '/')
		n = snprintf(buf, size, "%s", x);
	else if (home && home[0] == '/')
		n = snprintf(buf, size, "%s/.cache", home);
	else
		return -ENOENT;
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

/* osb's directory, opened (-1 when it cannot be trusted): a directory
 * of ours that no one else may enter; made when @make. */
static int cache_dir(bool make)
{
	char base[4096];
	if (cache_base(base, sizeof(base)))
		return -1;
	if (make)
		(void)mkdir(base, 0700); /* the specification's mode */
	int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (bfd < 0)
		return -1;
	if (make)
		(void)mkdirat(bfd, "osb", 0700);
	int fd = openat(bfd, "osb",
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(bfd);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || st.st_uid != geteuid() ||
	    ((st.st_mode & 077) && fchmod(fd, 0700))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The file's name: a hash (FNV-1a) of what keys it. */
static void cache_name(const char *key, char *buf, size_t size)
{
	uint64_t h = 14695981039346656037ULL;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		h ^= *p;
		h *= 1099511628211ULL;
	}
	snprintf(buf, size, "ep-%016llx", (unsigned long long)h);
}

static bool one_line(const char *s)
{
	return s && !strpbrk(s, "\r\n");
}

/* "server URL\nproxy 0|1\nid ID\n": the head of the file, and its key;
 * NULL when out of memory or when the URL or id are not one line. */
static char *cache_key(const struct osb_cli *cli, const char *id)
{
	char *key = NULL;
	const char *url = osb_client_base_url(cli->client);
	if (!one_line(url) || !one_line(id) ||
	    asprintf(&key, "server %s\nproxy %d\nid %s\n", url,
		     cli->cfg && cli->cfg->use_server_proxy ? 1 : 0, id) < 0)
		return NULL;
	return key;
}

/* Reads the file (all of it: it is small) into a string. */
static char *read_entry(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *s = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid() && !(st.st_mode & 077) &&
	    st.st_size < CACHE_FILE_MAX)
		s = malloc(CACHE_FILE_MAX);
	size_t len = 0;
	while (s && len < CACHE_FILE_MAX - 1) {
		ssize_t n = read(fd, s + len, CACHE_FILE_MAX - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(s);
			s = NULL;
		}
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (s)
		s[len] = '\0';
	return s;
}

/* The endpoint in @text after its head: "url URL" then "header NAME:
 * VALUE" lines. */
static int parse_entry(char *text, struct osb_endpoint *ret)
{
	memset(ret, 0, sizeof(*ret));
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (!next)
			break; /* a last line without its end: cut short */
		*next++ = '\0';
		char *colon;
		if (strncmp(line, "url ", 4) == 0 && !ret->url) {
			ret->url = strdup(line + 4);
			if (!ret->url)
				break;
		} else if (strncmp(line, "header ", 7) == 0 &&
			   (colon = strstr(line + 7, ": ")) != NULL) {
			*colon = '\0';
			if (osb_kvlist_add(&ret->headers, line + 7, colon + 2))
				break;
		} else if (strcmp(line, "end") == 0 && ret->url) {
			return 0;
		}
	}
	osb_endpoint_release(ret);
	return -ENOENT;
}

int cli_cache_load(struct osb_cli *cli, const char *id,
		   struct osb_endpoint *ret)
{
	if (cache_off(cli))
		return -ENOENT;
	char *key = cache_key(cli, id), name[64];
	int dfd = key ? cache_dir(false) : -1;
	char *text = NULL;
	if (dfd >= 0) {
		cache_name(key, name, sizeof(name));
		text = read_entry(dfd, name);
		close(dfd);
	}
	size_t hl = strlen(CACHE_MAGIC);
	int rc = -ENOENT;
	if (text && strncmp(text, CACHE_MAGIC "\n", hl + 1) == 0 &&
	    strncmp(text + hl + 1, key, strlen(key)) == 0)
		rc = parse_entry(text + hl + 1 + strlen(key), ret);
	if (text) {
		explicit_bzero(text, strlen(text));
		free(text);
	}
	free(key);
	return rc;
}

/* The whole file, or NULL when something in it would not read back. */
static char *format_entry(const char *key, const struct osb_endpoint *ep)
{
	if (!one_line(ep->url))
		return NULL;
	size_t len = strlen(CACHE_MAGIC) + strlen(key) + strlen(ep->url) + 16;
	for (size_t i = 0; i < ep->headers.n; i++) {
		const struct osb_kv *h = &ep->headers.items[i];
		if (!one_line(h->key) || !one_line(h->value) ||
		    strstr(h->key, ": "))
			return NULL;
		len += strlen(h->key) + strlen(h->value) + 16;
	}
	char *s = malloc(len);
	if (!s)
		return NULL;
	size_t n = (size_t)snprintf(s, len, "%s\n%surl %s\n", CACHE_MAGIC, key,
				    ep->url);
	for (size_t i = 0; i < ep->headers.n; i++)
		n += (size_t)snprintf(s + n, len - n, "header %s: %s\n",
				      ep->headers.items[i].key,
				      ep->headers.items[i].value);
	snprintf(s + n, len - n, "end\n");
	return s;
}

/* Writes @text into a new file of @dfd, then renames it @name. */
static void write_entry(int dfd, const char *name, const char *text)
{
	char tmp[128];
	int fd = -1;
	for (unsigned i = 0; fd < 0 && i < 8; i++) {
		snprintf(tmp, sizeof(tmp), ".%s.%ld.%u", name, (long)getpid(),
			 i);
		fd = openat(dfd, tmp,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC,
			    0600);
		if (fd < 0 && errno != EEXIST)
			return;
	}
	if (fd < 0)
		return;
	size_t len = strlen(text), done = 0;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	if (close(fd) || done < len || renameat(dfd, tmp, dfd, name))
		unlinkat(dfd, tmp, 0);
}

void cli_cache_store(struct osb_cli *cli, const char *id,
		     const struct osb_endpoint *ep)
{
	if (cache_off(cli))
		return;
	char *key = cache_key(cli, id), name[64];
	char *text = key ? format_entry(key, ep) : NULL;
	int dfd = text ? cache_dir(true) : -1;
	if (dfd >= 0) {
		cache_name(key, name, sizeof(name));
		write_entry(dfd, name, text);
		close(dfd);
	}
	if (text) {
		explicit_bzero(text, strlen(text));
		free(text);
	}
	free(key);
}

void cli_cache_drop(struct osb_cli *cli, const char *id)
{
	if (cache_off(cli))
		return;
	char *key = cache_key(cli, id), name[64];
	int dfd = key ? cache_dir(false) : -1;
	if (dfd >= 0) {
		cache_name(key, name, sizeof(name));
		unlinkat(dfd, name, 0);
		close(dfd);
	}
	free(key);
}

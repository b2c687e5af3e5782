/*
 * setup_decl.h - the software a sandbox declares (-o setup=FILE): the
 * hosted-sandbox seed's `sandbox:` section, read from YAML.
 *
 *   sandbox:              (optional: the bare mapping is taken too)
 *     toolchain: auto     (or never; default auto)
 *     python:
 *       version: "3.12"
 *       packages: [numpy]
 *     node:
 *       version: "22"
 *       packages: [tsx]
 *     packages: [poppler-utils]
 *
 * Pure: no I/O but setup_decl_load()'s read of the file; fuzzed
 * (tests/fuzz/fuzz_setup.c).
 */
#ifndef OSBFS_SETUP_DECL_H
#define OSBFS_SETUP_DECL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* caps on what a declaration may hold */
#define SETUP_FILE_MAX ((size_t)64 * 1024)
#define SETUP_LIST_MAX 256
#define SETUP_NAME_MAX 200
#define SETUP_VERSION_MAX 16

struct setup_list {
	char **v; /* malloc'd names */
	size_t n;
};

struct setup_decl {
	bool toolchain_never;  /* toolchain: never */
	char *python_version;  /* NULL: not declared */
	char *node_version;    /* NULL: not declared */
	struct setup_list pip; /* python.packages */
	struct setup_list npm; /* node.packages */
	struct setup_list sys; /* packages */
};

/*
 * setup_decl_parse() - the declaration in @text (@len bytes) of file
 * @file (named in messages). Returns 0 and fills *ret (release with
 * setup_decl_release()), or -EINVAL with "FILE:LINE: cause" in @msg
 * (unknown key, wrong type, duplicate key or item, bad name or
 * version, YAML syntax), or -ENOMEM.
 */
int setup_decl_parse(const char *text, size_t len, const char *file,
		     struct setup_decl *ret, char *msg, size_t msg_size);
/* Reads @path (at most SETUP_FILE_MAX bytes) and parses it. */
int setup_decl_load(const char *path, struct setup_decl *ret, char *msg,
		    size_t msg_size);
void setup_decl_release(struct setup_decl *d);
void setup_list_release(struct setup_list *l);
/* Nothing declared: no setup runs. */
bool setup_decl_empty(const struct setup_decl *d);

/* true when @s may name a package: 1-200 of [A-Za-z0-9._+:=@/-],
 * starting with a letter, a digit or '@' (never '-': it would be taken
 * as an option). No character the shell treats specially. */
bool setup_name_valid(const char *s);
/* true for "3", "3.12", "22.1.0": digits and dots, at most 16. */
bool setup_version_valid(const char *s);

/* A hash of what @d declares (FNV-1a 64 over a canonical text), as 16
 * hex digits into @buf (17 bytes). */
void setup_decl_hash(const struct setup_decl *d, char buf[17]);

#endif /* OSBFS_SETUP_DECL_H */

/*
 * config_i.h - what the settings file's reader (config.c) shares with its
 * editor (config_edit.c).
 */
#ifndef OSB_CONFIG_I_H
#define OSB_CONFIG_I_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "osb.h"

enum val_type { VAL_STR, VAL_INT, VAL_BOOL };

/* A key the file means something for, with its type. */
struct known {
	const char *section, *key;
	enum val_type type;
	size_t str_off; /* offset of the char * field, for strings */
};

/* The known key @section.@key, or NULL. */
const struct known *cfg_find_key(const char *section, const char *key);
/* A character of a bare TOML name: letters, digits, '_', '-'. */
bool cfg_bare_char(char c);
const char *cfg_skip_ws(const char *p);
/* A bare name at *pp, copied into @out; *pp moves past it. */
int cfg_bare_name(const char **pp, char *out, size_t size);
/* "1", "true", "yes", "on" -> 1; "0", "false", "no", "off" -> 0; else -1. */
int cfg_bool_word(const char *s);
/* The file at @path (at most 64 KiB, no NUL), malloc'd; *st its stat.
 * -ENOENT (no message) when it is missing. */
int cfg_read_file(const char *path, char **ret, struct stat *st,
		  struct osb_error *err);

#endif /* OSB_CONFIG_I_H */

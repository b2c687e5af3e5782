/*
 * osb_config.c - `osb config init|show|set`: the settings file the
 * official CLI keeps (~/.opensandbox/config.toml), which osbfs reads too.
 * The key is never printed: `show` masks it as the official CLI does.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "osb_tool.h"

static const char *need_path(struct osb_cli *cli)
{
	if (!cli->config_path)
		cli_usage("no settings file: set HOME or give --config FILE");
	return cli->config_path;
}

int cmd_config_init(struct osb_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	struct osb_error err;
	bool force = false;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'f')
			return 2;
		force = true;
	}
	if (optind != argc)
		return cli_usage("usage: osb config init [--force]");
	const char *path = need_path(cli);
	if (!path)
		return 2;
	int rc = osb_cfgfile_init(path, force, &err);
	if (rc)
		return cli_fail(NULL, rc, &err);
	cli_done(cli, "wrote %s", path);
	return 0;
}

/* The key masked: at most 4 of its characters shown, and never more
 * than a third of them, half at each end (the official CLI's shows four
 * of any key longer than 4, so most of a short one). */
static char *mask(const char *key)
{
	size_t n = strlen(key);
	size_t shown = n / 3 < 4 ? n / 3 : 4;
	size_t head = (shown + 1) / 2, tail = shown / 2;
	char *m = malloc(n + 1);
	if (!m)
		return NULL;
	for (size_t i = 0; i < n; i++)
		m[i] = i < head || i >= n - tail ? key[i] : '*';
	m[n] = '\0';
	return m;
}

int cmd_config_show(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_cfgfile file;
	struct osb_error err;
	(void)argv;

	if (argc != 1)
		return cli_usage("usage: osb config show");
	const char *path = need_path(cli);
	if (!path)
		return 2;
	int rc = osb_cfgfile_load(path, &file, &err);
	if (rc)
		return cli_fail(NULL, rc, &err);
	struct osb_config cfg = *cli->cfg;
	osb_config_layer(&cfg, &file);
	char *key = cfg.api_key ? mask(cfg.api_key) : NULL;
	struct cli_rec *r = rec_object();
	rec_str(r, "api_key", key);
	rec_str(r, "domain", cfg.domain ? cfg.domain : "localhost:8080");
	rec_str(r, "protocol", cfg.protocol ? cfg.protocol : "http");
	rec_int(r, "request_timeout",
		cfg.request_timeout_ms ? cfg.request_timeout_ms / 1000 : 30);
	rec_bool(r, "use_server_proxy", cfg.use_server_proxy);
	rec_str(r, "default_image", file.image);
	rec_str(r, "default_timeout", file.timeout);
	rec_str(r, "config_path", path);
	rec_bool(r, "config_file_exists", file.exists);
	free(key);
	cli_warn_key_exposed(&file);
	osb_cfgfile_release(&file);
	return cli_print(cli, r, NULL);
}

/* The keys `config set` writes, and what each takes. */
enum set_kind {
	SET_WORD,     /* no white space, no control character */
	SET_PROTOCOL, /* http or https */
	SET_INT,      /* a positive integer (osb_cfgfile_set() checks) */
	SET_BOOL,     /* true or false */
	SET_TTL,      /* a duration or none */
};

static const struct {
	const char *name;
	enum set_kind kind;
} set_keys[] = {
	{ "connection.api_key", SET_WORD },
	{ "connection.domain", SET_WORD },
	{ "connection.protocol", SET_PROTOCOL },
	{ "connection.request_timeout", SET_INT },
	{ "connection.use_server_proxy", SET_BOOL },
	{ "defaults.image", SET_WORD },
	{ "defaults.timeout", SET_TTL },
	{ "output.color", SET_BOOL }, /* the official CLI's; osb has none */
};
#define N_SET_KEYS (sizeof(set_keys) / sizeof(set_keys[0]))

static bool is_word(const char *v)
{
	if (!*v)
		return false;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			return false;
	return true;
}

/* NULL when @value suits @kind, else what it must be. */
static const char *bad_value(enum set_kind kind, const char *value)
{
	long secs;
	switch (kind) {
	case SET_WORD:
		return is_word(value) ? NULL :
					"must be one word, without white space";
	case SET_PROTOCOL:
		return strcmp(value, "http") == 0 ||
				       strcmp(value, "https") == 0 ?
			       NULL :
			       "must be http or https";
	case SET_BOOL:
		return strcmp(value, "true") == 0 ||
				       strcmp(value, "false") == 0 ?
			       NULL :
			       "must be true or false";
	case SET_TTL:
		return osb_duration_parse(value, &secs) == 0 &&
				       (secs > 0 ||
					strcmp(value, "none") == 0) ?
			       NULL :
			       "must be a duration (90s, 10m, 1h30m) or none";
	default:
		return NULL;
	}
}

static void say_keys(void)
{
	fputs("osb: the keys are", stderr);
	for (size_t i = 0; i < N_SET_KEYS; i++)
		fprintf(stderr, "%s %s", i ? "," : "", set_keys[i].name);
	fputc('\n', stderr);
}

void cli_print_config_keys(FILE *out)
{
	for (size_t i = 0; i < N_SET_KEYS; i++)
		fprintf(out, "%s\n", set_keys[i].name);
}

int cmd_config_set(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;
	size_t k = 0;

	if (argc != 3)
		return cli_usage("usage: osb config set SECTION.KEY VALUE");
	while (k < N_SET_KEYS && strcmp(set_keys[k].name, argv[1]) != 0)
		k++;
	if (k == N_SET_KEYS) {
		char *esc = osb_escape(argv[1], strlen(argv[1]));
		fprintf(stderr, "osb: config set: no key \"%s\"\n",
			esc ? esc : "?");
		free(esc);
		say_keys();
		return 1;
	}
	const char *why = bad_value(set_keys[k].kind, argv[2]);
	if (why) {
		fprintf(stderr, "osb: config set: %s %s\n", argv[1], why);
		return 1;
	}
	const char *path = need_path(cli);
	if (!path)
		return 2;
	int rc = osb_cfgfile_set(path, argv[1], argv[2], &err);
	if (rc)
		return cli_fail(NULL, rc, &err);
	/* the key's value is not said back */
	if (strcmp(argv[1], "connection.api_key") == 0)
		cli_done(cli, "set %s in %s", argv[1], path);
	else
		cli_done(cli, "set %s = %s in %s", argv[1], argv[2], path);
	return 0;
}

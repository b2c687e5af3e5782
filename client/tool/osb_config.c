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

/* The official CLI's mask: the first and last two characters kept. */
static char *mask(const char *key)
{
	size_t n = strlen(key);
	char *m = malloc(n + 1);
	if (!m)
		return NULL;
	for (size_t i = 0; i < n; i++)
		m[i] = n > 4 && (i < 2 || i >= n - 2) ? key[i] : '*';
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

int cmd_config_set(struct osb_cli *cli, int argc, char **argv)
{
	struct osb_error err;

	if (argc != 3)
		return cli_usage("usage: osb config set SECTION.KEY VALUE");
	const char *path = need_path(cli);
	if (!path)
		return 2;
	int rc = osb_cfgfile_set(path, argv[1], argv[2], &err);
	if (rc)
		return cli_fail(NULL, rc, &err);
	/* the key's value is not said back */
	cli_done(cli, "set %s in %s", argv[1], path);
	return 0;
}

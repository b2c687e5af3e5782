/*
 * osb_complete.c - shell completion for `osb`. The scripts of `osb
 * completion bash|zsh` (what `meson install` puts where bash-completion
 * and zsh look; `_OSB_COMPLETE=bash_source osb`, the official CLI's way,
 * prints them too) are small: on TAB they run `osb __complete WORD...`
 * with the words typed so far, the last one the word being completed,
 * and offer the lines it prints. The answer comes from the command table
 * of osb_help.c, so it never falls behind the commands: the groups, a
 * group's commands, a command's options (read from its help text), the
 * values of -o, the keys of `config set`, the verbs of `command session`
 * and, where a SANDBOX_ID goes, the ids of the sandboxes (one GET of the
 * list, not retried, 3 s at most). Nothing printed: the shell offers
 * file names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osb_tool.h"

static const char bash_script[] =
	"# bash completion of osb (osb completion bash)\n"
	"_osb() {\n"
	"\tlocal IFS=$'\\n' cur=${COMP_WORDS[COMP_CWORD]}\n"
	"\tCOMPREPLY=($(compgen -W \"$(\"${COMP_WORDS[0]}\" __complete "
	"\"${COMP_WORDS[@]:1:COMP_CWORD}\" 2>/dev/null)\" -- \"$cur\"))\n"
	"}\n"
	"complete -o default -o nosort -F _osb osb\n";

static const char zsh_script[] =
	"#compdef osb\n"
	"# zsh completion of osb (osb completion zsh)\n"
	"local -a cands\n"
	"cands=(\"${(@f)$(${words[1]} __complete \"${(@)words[2,CURRENT]}\" "
	"2>/dev/null)}\")\n"
	"if (( ${#cands} )) && [[ -n ${cands[1]} ]]; then\n"
	"\tcompadd -Q -- \"${(@)cands}\"\n"
	"else\n"
	"\t_files\n"
	"fi\n";

/* `osb completion bash|zsh` */
int cmd_completion(struct osb_cli *cli, int argc, char **argv)
{
	(void)cli;
	if (argc == 2 && strcmp(argv[1], "bash") == 0)
		fputs(bash_script, stdout);
	else if (argc == 2 && strcmp(argv[1], "zsh") == 0)
		fputs(zsh_script, stdout);
	else
		return cli_usage("usage: osb completion bash|zsh");
	return 0;
}

/* _OSB_COMPLETE=bash_source|zsh_source: the script, as the official
 * CLI (click) prints its own; -1 when not asked. */
int cli_complete_env(void)
{
	const char *e = getenv("_OSB_COMPLETE");
	if (!e || !*e)
		return -1;
	if (strcmp(e, "bash_source") == 0)
		fputs(bash_script, stdout);
	else if (strcmp(e, "zsh_source") == 0)
		fputs(zsh_script, stdout);
	else
		return cli_usage("_OSB_COMPLETE takes bash_source or "
				 "zsh_source");
	return 0;
}

/*
 * The options of a help text, to @fn: every "-x" and "--name" of its
 * option lines (a line that starts with spaces and a '-', up to the two
 * spaces before the description), and whether a value follows (a word
 * that is no option: "--image IMAGE", "-o, --output table|json...").
 */
#define SEP " ,/;()"
static void help_options(const char *help,
			 void (*fn)(void *arg, const char *opt, size_t len,
				    bool value),
			 void *arg)
{
	for (const char *l = help; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t ll = nl ? (size_t)(nl - l) : strlen(l);
		size_t i = strspn(l, " ");
		if (i >= 2 && i < ll && l[i] == '-') {
			const char *gap = strstr(l + i, "  ");
			size_t end =
				gap && gap < l + ll ? (size_t)(gap - l) : ll;
			while (i < end) {
				size_t w = strcspn(l + i, SEP);
				if (i + w > end)
					w = end - i;
				const char *next = l + i + w;
				next += strspn(next, SEP);
				bool value = next < l + end && *next != '-';
				if (l[i] == '-' && w > 1)
					fn(arg, l + i, w, value);
				i += w;
				i += strspn(l + i, SEP);
			}
		}
		l += ll + (nl ? 1 : 0);
	}
}

static void print_opt(void *arg, const char *opt, size_t len, bool value)
{
	(void)arg;
	(void)value;
	printf("%.*s\n", (int)len, opt);
}

/* Does @word name an option of @help that takes a value? */
struct takes {
	const char *word;
	bool yes;
};

static void check_opt(void *arg, const char *opt, size_t len, bool value)
{
	struct takes *t = arg;
	if (strlen(t->word) == len && strncmp(t->word, opt, len) == 0)
		t->yes |= value;
}

/* Whether @word is an option of the help text (t->yes). */
static void seen_opt(void *arg, const char *opt, size_t len, bool value)
{
	struct takes *t = arg;
	(void)value;
	if (strlen(t->word) == len && strncmp(t->word, opt, len) == 0)
		t->yes = true;
}

static bool takes_value(const char *help, const char *word)
{
	struct takes t = { .word = word };
	if (strcmp(word, "-o") == 0 || strcmp(word, "--output") == 0)
		return true;
	help_options(help, check_opt, &t);
	return t.yes;
}

static const char *const formats[] = { "table", "json", "yaml", "raw", NULL };

static void print_all(const char *const *v)
{
	for (; *v; v++)
		printf("%s\n", *v);
}

/* The ids of the sandboxes: one request, no retry, 3 s at most. */
static void print_ids(struct osb_cli *cli)
{
	struct osb_config cfg = *cli->cfg;
	struct osb_client *c = NULL;
	struct osb_list_params p = { .page_size = 200 };
	struct osb_sandbox_list l;
	struct osb_error err;

	cfg.max_retries = -1;
	cfg.request_timeout_ms = 3000;
	cfg.connect_timeout_ms = 2000;
	if (osb_client_new(&cfg, &c, &err))
		return;
	if (osb_sandbox_list(c, &p, &l, &err) == 0) {
		for (size_t i = 0; i < l.n; i++)
			printf("%s\n", l.items[i].id);
		osb_sandbox_list_release(&l);
	}
	osb_client_free(c);
}

/* A command with help (no older spelling) of @group, or NULL. */
static const struct cli_cmd *find(const char *group, const char *name)
{
	const struct cli_cmd *c = cli_find_cmd(group, name);
	return c && c->help ? c : NULL;
}

/* The words after the command: what goes where @cur is. */
static void complete_args(struct osb_cli *cli, const struct cli_cmd *c,
			  char **w, int n)
{
	const char *cur = w[n - 1], *prev = n > 1 ? w[n - 2] : "";
	int npos = 0;
	for (int i = 0; i < n - 1; i++) {
		if (strcmp(w[i], "--") == 0)
			return; /* the command's own words: files */
		if (w[i][0] != '-')
			npos++;
		else if (takes_value(c->help, w[i]))
			i++;
	}
	if (strcmp(prev, "-o") == 0 || strcmp(prev, "--output") == 0) {
		print_all(formats);
	} else if (prev[0] == '-' && takes_value(c->help, prev)) {
		return; /* a value of another option: files */
	} else if (cur[0] == '-') {
		/* its own, then those every command takes */
		static const char *const common[] = {
			"-o", "--output", "-q", "--quiet", "-h", "--help", NULL
		};
		help_options(c->help, print_opt, NULL);
		for (size_t k = 0; common[k]; k++) {
			struct takes t = { .word = common[k] };
			help_options(c->help, seen_opt, &t);
			if (!t.yes)
				printf("%s\n", common[k]);
		}
	} else if (strcmp(c->name, "completion") == 0 && npos == 0) {
		puts("bash\nzsh");
	} else if (c->group && strcmp(c->name, "set") == 0 && npos == 0) {
		cli_print_config_keys(stdout);
	} else if (strcmp(c->name, "session") == 0 && npos == 0) {
		puts("create\nrun\ndelete");
	} else if ((strncmp(c->synopsis, "SANDBOX_ID", 10) == 0 && npos == 0) ||
		   (strcmp(c->name, "session") == 0 && npos == 1)) {
		print_ids(cli); /* a session's id follows its verb */
	}
}

/* The groups, then the commands outside them. */
static void print_commands(void)
{
	for (size_t g = 0; g < cli_ngroups; g++)
		printf("%s\n", cli_groups[g].name);
	for (size_t k = 0; k < cli_ncmds; k++)
		if (!cli_cmds[k].group && cli_cmds[k].help &&
		    find(NULL, cli_cmds[k].name) == &cli_cmds[k])
			printf("%s\n", cli_cmds[k].name);
}

/* Global options that take a value (the next word is not a command). */
static bool global_takes_value(const char *w)
{
	static const char *const v[] = {
		"--domain", "--protocol", "--api-key", "--api-key-file",
		"--cacert", "--timeout",  "--retries", "--request-timeout",
		"--config", "-o",         "--output",  "-H",
		"--header", "-s",         "--sandbox", NULL,
	};
	for (size_t i = 0; v[i]; i++)
		if (strcmp(v[i], w) == 0)
			return true;
	return false;
}

/* `osb __complete WORD...`: argv[1..] the words after osb, the last
 * the one being completed; a candidate a line. */
int cmd_complete(struct osb_cli *cli, int argc, char **argv)
{
	char **w = argv + 1;
	int n = argc - 1, i = 0;

	if (n < 1)
		return 0;
	while (i < n - 1 && w[i][0] == '-')
		i += global_takes_value(w[i]) ? 2 : 1;
	if (i > n - 1) /* the value of the last global option */
		i = n - 1;
	if (i == n - 1) {
		const char *prev = n > 1 ? w[n - 2] : "";
		if (strcmp(prev, "-o") == 0 || strcmp(prev, "--output") == 0)
			print_all(formats);
		else if (strcmp(prev, "-s") == 0 ||
			 strcmp(prev, "--sandbox") == 0)
			print_ids(cli);
		else if (n > 1 && global_takes_value(prev))
			return 0;
		else if (w[i][0] == '-')
			help_options(cli_global_help, print_opt, NULL);
		else
			print_commands();
		return 0;
	}
	const char *group = cli_is_group(w[i]) ? w[i++] : NULL;
	if (group && i == n - 1) {
		for (size_t k = 0; k < cli_ncmds; k++)
			if (cli_cmds[k].group &&
			    strcmp(cli_cmds[k].group, group) == 0)
				printf("%s\n", cli_cmds[k].name);
		return 0;
	}
	const struct cli_cmd *c = find(group, w[i]);
	if (c)
		complete_args(cli, c, w + i + 1, n - i - 1);
	return 0;
}

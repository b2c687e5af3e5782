/*
 * setup_script.c - the setup job's script, and the marker it leaves
 * (setup_script.h).
 *
 * The script is bash (the job wrapper runs every job with bash). It
 * checks the declared interpreters first (fast failures first), then
 * installs the system packages, then pip's, then npm's, and writes the
 * marker last, only when everything succeeded. Every failure writes one
 * line to SETUP_REASON (what failed, with the package manager's exit
 * code) and exits with that code; the package manager's own message is
 * already on the job's stderr.
 *
 * Names reach the script only after setup_name_valid() and versions
 * after setup_version_valid(): no quote or shell character can be in
 * them, so they are pasted inside single quotes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "setup_script.h"

/* ---- the marker ---- */

/* "pkg", "pip", "pip3.12", "npm", "npm22" */
static bool kind_valid(const char *k, size_t n)
{
	if (n == 3 && strncmp(k, "pkg", 3) == 0)
		return true;
	if (n < 3 || (strncmp(k, "pip", 3) != 0 && strncmp(k, "npm", 3) != 0))
		return false;
	if (n == 3)
		return true;
	char v[SETUP_VERSION_MAX + 1];
	if (n - 3 > SETUP_VERSION_MAX)
		return false;
	memcpy(v, k + 3, n - 3);
	v[n - 3] = '\0';
	return setup_version_valid(v);
}

static bool item_valid(const char *s, size_t n)
{
	const char *sp = memchr(s, ' ', n);
	if (!sp || !kind_valid(s, (size_t)(sp - s)))
		return false;
	size_t nl = n - (size_t)(sp - s) - 1;
	char name[SETUP_NAME_MAX + 1];
	if (!nl || nl > SETUP_NAME_MAX)
		return false;
	memcpy(name, sp + 1, nl);
	name[nl] = '\0';
	return strlen(name) == nl && setup_name_valid(name);
}

int setup_marker_parse(const char *text, size_t len, char ret_hash[17],
		       struct setup_list *ret_items)
{
	static const char head[] = "osbfs-setup 1\nhash ";
	struct setup_list l = { 0 };
	const char *p = text, *end = text + len;

	if (len > SETUP_MARKER_MAX || len < sizeof(head) - 1 + 17 ||
	    memcmp(text, head, sizeof(head) - 1) != 0)
		return -EINVAL;
	p += sizeof(head) - 1;
	for (int i = 0; i < 16; i++)
		if (!strchr("0123456789abcdef", p[i]) || !p[i])
			return -EINVAL;
	if (p[16] != '\n')
		return -EINVAL;
	char hash[17];
	memcpy(hash, p, 16);
	hash[16] = '\0';
	p += 17;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl || !item_valid(p, (size_t)(nl - p)) ||
		    l.n == SETUP_ITEMS_MAX) {
			setup_list_release(&l);
			return -EINVAL;
		}
		if (l.n % 64 == 0) {
			char **v = realloc(l.v, (l.n + 64) * sizeof(*v));
			if (!v) {
				setup_list_release(&l);
				return -ENOMEM;
			}
			l.v = v;
		}
		l.v[l.n] = strndup(p, (size_t)(nl - p));
		if (!l.v[l.n]) {
			setup_list_release(&l);
			return -ENOMEM;
		}
		l.n++;
		p = nl + 1;
	}
	memcpy(ret_hash, hash, 17);
	*ret_items = l;
	return 0;
}

/* ---- the script ---- */

static const char prelude[] =
	"set -u\n"
	"S='" SETUP_DIR "'\n"
	"mkdir -p \"$S\" || exit 1\n"
	"rm -f \"$S/failed\"\n"
	"say() { printf 'osbfs setup: %s\\n' \"$*\"; }\n"
	/* fail CODE MESSAGE: the reason for osbfs, and an exit status */
	"fail() {\n"
	"  printf '%s\\n' \"$2\" >\"$S/failed\"\n"
	"  printf 'osbfs setup: failed: %s\\n' \"$2\" >&2\n"
	"  [ \"$1\" -gt 0 ] 2>/dev/null && exit \"$1\"\n"
	"  exit 1\n"
	"}\n"
	"root() {\n"
	"  if [ \"$(id -u)\" = 0 ]; then \"$@\"\n"
	"  elif command -v sudo >/dev/null 2>&1; then sudo -n \"$@\"\n"
	"  else \"$@\"; fi\n"
	"}\n"
	"pm=\n"
	"for c in apt-get dnf yum apk; do\n"
	"  if command -v \"$c\" >/dev/null 2>&1; then pm=$c; break; fi\n"
	"done\n"
	"updated=\n"
	"apt_update() {\n"
	"  updated=1\n"
	"  say \"apt-get update ($1)\"\n"
	"  root apt-get update || say 'apt-get update failed; going on with "
	"the package lists there are'\n"
	"}\n"
	"apt_install() {\n"
	"  root env LC_ALL=C DEBIAN_FRONTEND=noninteractive apt-get install "
	"-y --no-install-recommends \"$@\"\n"
	"}\n"
	/* sys_install NAME...: sets $what; returns the manager's status */
	"sys_install() {\n"
	"  if [ -z \"$pm\" ]; then\n"
	"    what='no package manager (apt-get, dnf, yum or apk) was found'\n"
	"    printf 'osbfs setup: %s\\n' \"$what\" >&2; return 127\n"
	"  fi\n"
	"  say \"installing with $pm: $*\"\n"
	"  case $pm in\n"
	"  apt-get)\n"
	"    what='apt-get install'\n"
	"    if [ -z \"$updated\" ] && ! ls /var/lib/apt/lists/*_Packages* "
	">/dev/null 2>&1; then\n"
	"      apt_update 'no package lists yet'\n"
	"    fi\n"
	"    apt_install \"$@\" 2>\"$S/err\"; r=$?\n"
	"    cat \"$S/err\" >&2\n"
	"    if [ $r -ne 0 ] && [ -z \"$updated\" ] && grep -q 'Unable to "
	"locate package' \"$S/err\"; then\n"
	"      apt_update 'a package was not found'\n"
	"      apt_install \"$@\"; r=$?\n"
	"    fi\n"
	"    rm -f \"$S/err\"\n"
	"    return $r ;;\n"
	"  dnf|yum) what=\"$pm install\"; root \"$pm\" install -y \"$@\" ;;\n"
	"  apk) what='apk add'; root apk add --no-cache \"$@\" ;;\n"
	"  esac\n"
	"}\n";

static int add_names(struct text *out, char **names, size_t n)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++)
		rc = text_printf(out, " '%s'", names[i]);
	return rc;
}

static int python_part(const struct setup_decl *d, struct text *out)
{
	const char *v = d->python_version;
	int rc = text_adds(out, "py=python3\n");
	if (!v) {
		/* no version declared: python3 must be there for pip */
		return rc ? rc :
			    text_adds(out,
				      "if ! command -v python3 >/dev/null "
				      "2>&1; then\n"
				      "  [ \"$toolchain\" = auto ] || fail 1 "
				      "'python.packages: the sandbox has no "
				      "python3 (toolchain: never)'\n"
				      "  sys_install python3 || fail $? "
				      "\"python.packages: the sandbox has no "
				      "python3, and $what of python3 failed\"\n"
				      "fi\n");
	}
	rc = rc ? rc : text_printf(out, "pyver='%s'\n", v);
	return rc ? rc :
		    text_adds(
			    out,
			    "pyok() {\n"
			    "  v=$(\"$1\" --version 2>&1) || return 1\n"
			    "  case $v in \"Python $pyver\"|\"Python "
			    "$pyver\".*) return 0 ;; esac\n"
			    "  return 1\n"
			    "}\n"
			    "found=$(python3 --version 2>&1 | head -n 1)\n"
			    "command -v python3 >/dev/null 2>&1 || found='no "
			    "python3'\n"
			    "if pyok python3; then py=python3\n"
			    "elif command -v \"python$pyver\" >/dev/null 2>&1 "
			    "&& pyok \"python$pyver\"; then py=python$pyver\n"
			    "elif [ \"$toolchain\" = never ]; then\n"
			    "  fail 1 \"python.version is $pyver, the sandbox "
			    "has $found (toolchain: never)\"\n"
			    "else\n"
			    "  sys_install \"python$pyver\" || fail $? "
			    "\"python.version is $pyver, the sandbox has "
			    "$found, and python$pyver could not be installed "
			    "($what exited $?)\"\n"
			    "  pyok \"python$pyver\" || fail 1 "
			    "\"python.version is $pyver, and python$pyver "
			    "is not Python $pyver\"\n"
			    "  py=python$pyver\n"
			    "fi\n"
			    "say \"python: $py, $($py --version 2>&1)\"\n");
}

static int node_part(const struct setup_decl *d, struct text *out)
{
	const char *v = d->node_version;
	int rc = 0;
	if (!v)
		return 0;
	rc = text_printf(out, "nodever='%s'\n", v);
	return rc ? rc :
		    text_adds(
			    out,
			    "nodeok() {\n"
			    "  v=$(node --version 2>/dev/null) || return 1\n"
			    "  case $v in \"v$nodever\"|\"v$nodever\".*) "
			    "return 0 ;; esac\n"
			    "  return 1\n"
			    "}\n"
			    "found=$(node --version 2>/dev/null) || "
			    "found='no node'\n"
			    "if nodeok; then :\n"
			    "elif [ \"$toolchain\" = never ]; then\n"
			    "  fail 1 \"node.version is $nodever, the sandbox "
			    "has $found (toolchain: never)\"\n"
			    "else\n"
			    "  tried=\n"
			    "  if ! command -v node >/dev/null 2>&1; then\n"
			    "    tried='nodejs npm'; sys_install nodejs npm\n"
			    "  fi\n"
			    "  if ! nodeok; then\n"
			    "    m=${nodever%%.*}\n"
			    "    tried=\"${tried:+$tried, }nodejs$m\"; "
			    "sys_install \"nodejs$m\"\n"
			    "  fi\n"
			    "  nodeok || fail 1 \"node.version is $nodever, "
			    "the sandbox has $found, and installing $tried "
			    "with ${pm:-no package manager} did not give "
			    "Node $nodever\"\n"
			    "fi\n"
			    "say \"node: $(node --version 2>&1)\"\n");
}

/* Whether @item ("pip3.12 numpy") is in @l. */
static bool has_item(const struct setup_list *l, const char *item)
{
	for (size_t i = 0; l && i < l->n; i++)
		if (strcmp(l->v[i], item) == 0)
			return true;
	return false;
}

/* The names of @names whose item (@kind NAME) is not in @installed,
 * into @ret (pointers into @names). */
static size_t todo(char **names, size_t n, const char *kind,
		   const struct setup_list *installed, char **ret)
{
	size_t k = 0;
	char item[SETUP_NAME_MAX + SETUP_VERSION_MAX + 8];
	for (size_t i = 0; i < n; i++) {
		snprintf(item, sizeof(item), "%s %s", kind, names[i]);
		if (!has_item(installed, item))
			ret[k++] = names[i];
	}
	return k;
}

static void kinds(const struct setup_decl *d, char pip[24], char npm[24])
{
	snprintf(pip, 24, "pip%s", d->python_version ? d->python_version : "");
	snprintf(npm, 24, "npm%s", d->node_version ? d->node_version : "");
}

static int marker_part(const struct setup_decl *d, const char *hash,
		       const struct setup_list *installed, struct text *out)
{
	char pip[24], npm[24];
	const struct {
		const char *kind;
		const struct setup_list *l;
	} parts[3] = { { "pkg", &d->sys }, { pip, &d->pip }, { npm, &d->npm } };

	kinds(d, pip, npm);
	int rc = text_printf(out,
			     "cat >\"$S/installed.new\" <<'OSBFS_MARKER' || "
			     "fail 1 \"cannot write $S/installed.new\"\n"
			     "osbfs-setup 1\nhash %s\n",
			     hash);
	/* what was there stays (nothing is uninstalled), then the new */
	for (size_t i = 0; !rc && installed && i < installed->n; i++)
		rc = text_printf(out, "%s\n", installed->v[i]);
	for (int p = 0; p < 3 && !rc; p++) {
		for (size_t i = 0; !rc && i < parts[p].l->n; i++) {
			char item[SETUP_NAME_MAX + SETUP_VERSION_MAX + 8];
			snprintf(item, sizeof(item), "%s %s", parts[p].kind,
				 parts[p].l->v[i]);
			if (!has_item(installed, item))
				rc = text_printf(out, "%s\n", item);
		}
	}
	return rc ? rc :
		    text_adds(out,
			      "OSBFS_MARKER\n"
			      "mv -f \"$S/installed.new\" \"$S/installed\" || "
			      "fail 1 \"cannot write $S/installed\"\n"
			      "say done\n");
}

/* pip's or npm's part: @ensure (the tool is there, or is installed),
 * then @cmd with the names; a failure says "@what exited N". */
static int tool_part(struct text *out, char **names, size_t n,
		     const char *ensure, const char *tool, const char *cmd,
		     const char *what)
{
	int rc = text_adds(out, ensure);
	rc = rc ? rc : text_printf(out, "say \"installing with %s:", tool);
	for (size_t i = 0; !rc && i < n; i++)
		rc = text_printf(out, " %s", names[i]);
	rc = rc ? rc : text_printf(out, "\"\n%s", cmd);
	rc = rc ? rc : add_names(out, names, n);
	return rc ? rc :
		    text_printf(out,
				" || { r=$?; fail $r \"%s exited $r\"; }\n",
				what);
}

static const char pip_ensure[] =
	"if ! \"$py\" -m pip --version >/dev/null 2>&1; then\n"
	"  [ \"$toolchain\" = auto ] || fail 1 \"python.packages: $py has no "
	"pip (toolchain: never)\"\n"
	"  \"$py\" -m ensurepip >/dev/null 2>&1 ||\n"
	"    case $pm in apk) sys_install py3-pip ;; *) sys_install "
	"python3-pip ;; esac\n"
	"  \"$py\" -m pip --version >/dev/null 2>&1 || fail 1 "
	"\"python.packages: $py has no pip, and it could not be installed\"\n"
	"fi\n";

static const char npm_ensure[] =
	"if ! command -v npm >/dev/null 2>&1; then\n"
	"  [ \"$toolchain\" = auto ] || fail 1 'node.packages: the sandbox "
	"has no npm (toolchain: never)'\n"
	"  sys_install npm || fail $? \"node.packages: the sandbox has no npm, "
	"and $what of npm failed\"\n"
	"fi\n";

int setup_script(const struct setup_decl *d, const char *hash,
		 const struct setup_list *installed, struct text *out,
		 size_t *ret_count)
{
	char pip[24], npm[24];
	size_t nmax = d->sys.n + d->pip.n + d->npm.n;
	char **names = calloc(nmax ? nmax : 1, sizeof(*names));
	if (!names)
		return -ENOMEM;
	kinds(d, pip, npm);

	int rc = text_printf(out,
			     "# osbfs setup %s: the software declared by the "
			     "mount's setup= file\n",
			     hash);
	rc = rc ? rc : text_adds(out, prelude);
	rc = rc ? rc :
		  text_printf(out, "toolchain=%s\n",
			      d->toolchain_never ? "never" : "auto");
	/* the interpreters first: a mismatch fails before any install */
	if (!rc && (d->python_version || d->pip.n))
		rc = python_part(d, out);
	if (!rc && (d->node_version || d->npm.n))
		rc = node_part(d, out);

	size_t n = todo(d->sys.v, d->sys.n, "pkg", installed, names);
	size_t count = n;
	if (!rc && n) {
		rc = text_adds(out, "sys_install");
		rc = rc ? rc : add_names(out, names, n);
		rc = rc ? rc :
			  text_adds(out,
				    " || { r=$?; fail $r \"$what exited $r\"; "
				    "}\n");
	}
	n = todo(d->pip.v, d->pip.n, pip, installed, names);
	count += n;
	if (!rc && n)
		rc = tool_part(out, names, n, pip_ensure, "pip",
			       "PIP_BREAK_SYSTEM_PACKAGES=1 "
			       "PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "
			       "\"$py\" -m pip install",
			       "pip install");
	n = todo(d->npm.v, d->npm.n, npm, installed, names);
	count += n;
	if (!rc && n)
		rc = tool_part(out, names, n, npm_ensure, "npm",
			       "npm install -g --no-audit --no-fund",
			       "npm install -g");
	free(names);
	rc = rc ? rc : marker_part(d, hash, installed, out);
	if (!rc && ret_count)
		*ret_count = count;
	return rc;
}

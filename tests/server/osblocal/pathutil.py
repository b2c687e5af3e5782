"""execd's path handling (pkg/util/pathutil): $VAR expansion, "~", Abs.

ExpandPath: every $NAME / ${NAME} (NAME = [A-Za-z_][A-Za-z0-9_]*) must be
defined in execd's environment, else "path references undefined environment
variables: A,B" (sorted, comma-joined); then Go's os.Expand replaces
variables, eating "$1", "$$", "$*", "$#", "$@", "$!", "$?", "$-" and "${}";
then a leading "~" or "~/" becomes $HOME (filepath.Join, so cleaned).
ExpandAbsPath adds filepath.Abs: relative paths are joined to execd's cwd and
the result is cleaned lexically.
"""

import re

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_SPECIAL = set("*#$@!?-0123456789")


class ExpandError(Exception):
    pass


def _alnum(c):
    return c == "_" or c.isascii() and c.isalnum()


def _shell_name(s):
    if s[0] == "{":
        if len(s) > 2 and s[1] in _SPECIAL and s[2] == "}":
            return s[1:2], 3
        for i in range(1, len(s)):
            if s[i] == "}":
                if i == 1:
                    return "", 2
                return s[1:i], i + 1
        return "", 1
    if s[0] in _SPECIAL:
        return s[0:1], 1
    i = 0
    while i < len(s) and _alnum(s[i]):
        i += 1
    return s[:i], i


def go_expand(s, mapping):
    """Go's os.Expand."""
    buf = None
    i = 0
    j = 0
    n = len(s)
    while j < n:
        if s[j] == "$" and j + 1 < n:
            if buf is None:
                buf = []
            buf.append(s[i:j])
            name, w = _shell_name(s[j + 1:])
            if name == "" and w > 0:
                pass
            elif name == "":
                buf.append(s[j])
            else:
                buf.append(mapping(name))
            j += w
            i = j + 1
        j += 1
    if buf is None:
        return s
    return "".join(buf) + s[i:]


def go_clean(p):
    """Go's path/filepath.Clean for Unix paths."""
    if p == "":
        return "."
    rooted = p.startswith("/")
    out = []
    for c in p.split("/"):
        if c in ("", "."):
            continue
        if c == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not rooted:
                out.append("..")
            continue
        out.append(c)
    s = "/".join(out)
    if rooted:
        return "/" + s
    return s or "."


def expand_path(path, env):
    if path == "":
        return ""
    missing = set()
    for m in _VAR.finditer(path):
        name = m.group(1) or m.group(2)
        if name not in env:
            missing.add(name)
    if missing:
        raise ExpandError("path references undefined environment variables: %s" % ",".join(sorted(missing)))
    expanded = go_expand(path, lambda k: env.get(k, ""))
    if expanded == "~" or expanded.startswith("~/"):
        home = env.get("HOME") or "/root"
        if expanded == "~":
            return home
        return go_clean(home + "/" + expanded[2:])
    return expanded


def abs_path(p, cwd="/"):
    if not p.startswith("/"):
        p = cwd.rstrip("/") + "/" + p
    return go_clean(p)


def expand_abs(path, env, cwd="/"):
    return abs_path(expand_path(path, env), cwd)

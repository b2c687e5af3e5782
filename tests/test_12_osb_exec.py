"""`osb exec|spawn|status|logs|interrupt|session|code|egress` on a sandbox
of the local server.  Streaming is proven by reading osb's output while the
command in the sandbox still waits for a file the test creates."""

import re

import pytest

from osbhelp import W, Osb, egress_policy
from osbtest import wait_until

GO = W + "/go"
WAIT_GO = "while [ ! -e %s ]; do sleep 0.05; done" % GO


# ---------------------------------------------------------------- exec

def test_exec_streams_output_as_it_comes(server, osb, sandbox, running):
    r = running(osb, "exec", "--", "echo first; %s; echo second" % WAIT_GO)
    assert r.readline() == "first\n"
    server.write_file(sandbox, GO, b"")
    res = r.finish()
    assert (res.rc, res.out, res.err) == (0, "second\n", "")


def test_exec_separates_stdout_and_stderr(osb):
    res = osb.run("exec", "--", "echo out1; echo err1 >&2; echo out2; echo err2 >&2")
    assert (res.rc, res.out, res.err) == (0, "out1\nout2\n", "err1\nerr2\n")


@pytest.mark.parametrize("cmd, code", [
    ("true", 0), ("exit 3", 3), ("exit 255", 255), ("false", 1),
    ("kill -TERM $$", 128 + 15), ("kill -KILL $$", 128 + 9),
])
def test_exec_exit_codes(osb, cmd, code):
    res = osb.run("exec", "--", cmd)
    assert (res.rc, res.out, res.err) == (code, "", ""), res.describe()


def test_exec_output_then_exit_code(osb):
    res = osb.run("exec", "--", "echo partial; exit 3")
    assert (res.rc, res.out) == (3, "partial\n")


def test_exec_cwd(osb):
    assert osb.ok("exec", "--cwd", "/tmp", "--", "pwd").out == "/tmp\n"


def test_exec_missing_cwd(osb):
    res = osb.run("exec", "--cwd", "/nope", "--", "pwd")
    assert res.rc == 255 and res.out == "", res.describe()
    assert res.err.startswith("osb: exec: ") and "working directory does not exist" in res.err


def test_exec_env(osb):
    res = osb.ok("exec", "--env", "A=1", "--env", "B=x y", "--env", "C=", "--", 'echo "$A|$B|${C-unset}"')
    assert res.out == "1|x y|\n"


def test_exec_as_another_user(osb):
    assert osb.ok("exec", "--uid", "65534", "--gid", "65534", "--", "id -u; id -g").out == "65534\n65534\n"


def test_exec_gid_needs_uid(osb):
    res = osb.run("exec", "--gid", "1", "--", "true")
    assert res.rc == 255 and "uid is required when gid is provided" in res.err, res.describe()


def test_exec_timeout_kills(osb):
    res = osb.run("exec", "--timeout", "500", "--", "echo before; sleep 30; echo after")
    assert (res.rc, res.out) == (128 + 9, "before\n"), res.describe()
    assert res.seconds < 15


def test_exec_several_words_are_quoted(osb):
    res = osb.ok("exec", "--", "printf", "%s\\n", "a b", "it's", "$HOME", "*")
    assert res.out == "a b\nit's\n$HOME\n*\n"


def test_exec_one_word_is_a_shell_line(osb):
    assert osb.ok("exec", "--", "echo $((6*7)) | tr 4 X").out == "X2\n"


def test_exec_keeps_empty_lines(osb):
    assert osb.ok("exec", "--", "printf 'a\\n\\nb\\n'").out == "a\n\nb\n"


def test_exec_runs_where_files_are(server, osb, sandbox):
    server.write_file(sandbox, W + "/x.py", b"print(6 * 7)\n")
    assert osb.ok("exec", "--cwd", W, "--", "python3 x.py").out == "42\n"


def test_exec_without_command(osb):
    res = osb.run("exec")
    assert res.rc == 255 and res.err == "osb: no command given (osb --help for usage)\n"


# ---------------------------------------------------------------- spawn / status / logs

ID = re.compile(r"^[0-9a-f]{32}\n$")


def status(osb, cid):
    return dict(line.split(": ", 1) for line in osb.ok("status", cid).lines())


def test_spawn_status_logs(server, osb, sandbox):
    res = osb.ok("spawn", "--", "echo started; %s; echo done; exit 4" % WAIT_GO)
    assert ID.match(res.out), res.describe()
    cid = res.out.strip()
    st = status(osb, cid)
    assert st["id"] == cid and st["running"] == "true" and "exit_code" not in st and "finished" not in st
    assert st["command"] == "echo started; %s; echo done; exit 4" % WAIT_GO
    wait_until(lambda: osb.ok("logs", cid).out == "started\n", 30, "output of the spawned command")
    server.write_file(sandbox, GO, b"")
    res = osb.run("logs", "-f", cid)
    assert (res.rc, res.out, res.err) == (4, "started\ndone\n", "")
    st = status(osb, cid)
    assert (st["running"], st["exit_code"], st["error"]) == ("false", "4", "exit status 4")
    assert "finished" in st and "started" in st
    # byte cursors
    assert osb.ok("logs", "--cursor", "8", cid).out == "done\n"
    assert osb.ok("logs", "--cursor", "13", cid).out == ""
    assert osb.ok("logs", "--cursor", "999", cid).out == ""


def test_logs_follow_streams(server, osb, sandbox, running):
    cid = osb.ok("spawn", "--", "echo one; %s; echo two; echo three >&2" % WAIT_GO).out.strip()
    r = running(osb, "logs", "-f", cid)
    assert r.readline() == "one\n"
    server.write_file(sandbox, GO, b"")
    res = r.finish()
    assert (res.rc, res.out, res.err) == (0, "two\nthree\n", "")


def test_logs_to_a_full_stdout(server, osb, sandbox):
    cid = osb.ok("spawn", "--", "echo some output").out.strip()
    assert osb.run("logs", "-f", cid).rc == 0
    with open("/dev/full", "wb") as full:
        res = osb.run("logs", cid, stdout=full)
    assert (res.rc, res.err) == (1, "osb: stdout: write error\n"), res.describe()


def test_exec_to_a_full_stdout(osb):
    with open("/dev/full", "wb") as full:
        res = osb.run("exec", "--", "echo lost", stdout=full)
    assert (res.rc, res.err) == (1, "osb: stdout: write error\n"), res.describe()


def test_spawn_options(osb):
    cid = osb.ok("spawn", "--cwd", "/tmp", "--env", "V=val", "--", 'echo "$PWD $V"').out.strip()
    res = osb.run("logs", "-f", cid)
    assert (res.rc, res.out) == (0, "/tmp val\n")


def test_spawn_with_timeout(osb):
    cid = osb.ok("spawn", "--timeout", "300", "--", "sleep 30").out.strip()
    res = osb.run("logs", "-f", cid)
    assert res.rc == 255, res.describe()
    assert status(osb, cid)["exit_code"] == "-1"


def test_interrupt(osb):
    cid = osb.ok("spawn", "--", "sleep 60").out.strip()
    osb.ok("interrupt", cid)
    st = status(osb, cid)
    assert (st["running"], st["exit_code"], st["error"]) == ("false", "-1", "signal: terminated")
    res = osb.fails("interrupt", cid)
    assert "is not running" in res.err, res.describe()


def test_status_unknown(osb):
    res = osb.fails("status", "0" * 32)
    assert "HTTP 404" in res.err and "command not found" in res.err, res.describe()


def test_logs_of_a_foreground_command(osb):
    cid = osb.ok("spawn", "--", "true").out.strip()
    res = osb.run("logs", "-f", cid)
    assert res.rc == 0
    res = osb.fails("logs", "f" * 32)
    assert "HTTP 400" in res.err and "command not found" in res.err, res.describe()


@pytest.mark.parametrize("args", [["status", "not-hex!"], ["interrupt", "../x"], ["logs", "a b"]])
def test_bad_command_ids(osb, args):
    res = osb.fails(*args)
    assert res.err == 'osb: %s: invalid id "%s"\n' % (args[0], args[1])


# ---------------------------------------------------------------- sessions

def test_session_keeps_exported_variables_and_cwd(osb):
    sid = osb.ok("session", "create").out.strip()
    assert re.fullmatch(r"[0-9a-f-]{36}", sid)
    assert osb.ok("session", "run", sid, "export FOO=bar; LOCAL=x; cd /tmp").out == ""
    assert osb.ok("session", "run", sid, 'echo "$FOO|${LOCAL-unset}"; pwd').out == "bar|unset\n/tmp\n"
    osb.ok("session", "delete", sid)
    res = osb.run("session", "run", sid, "echo x")
    assert res.rc == 255 and "context not found" in res.err, res.describe()


def test_session_create_with_cwd(server, osb, sandbox):
    sid = osb.ok("session", "create", "--cwd", W + "/s1").out.strip()
    assert server.stat(sandbox, W + "/s1")["type"] == "directory"
    assert osb.ok("session", "run", sid, "pwd").out == W + "/s1\n"


def test_session_exit_code_and_merged_output(osb):
    sid = osb.ok("session", "create").out.strip()
    res = osb.run("session", "run", sid, "echo out; echo err >&2; false")
    assert res.rc == 1 and sorted(res.out.splitlines()) == ["err", "out"], res.describe()


def test_session_delete_unknown(osb):
    res = osb.fails("session", "delete", "00000000-0000-0000-0000-000000000000")
    assert "HTTP 404" in res.err, res.describe()


# ---------------------------------------------------------------- code

def test_code_state_kept_between_runs(osb):
    assert osb.ok("code", "x = 41").out == ""
    res = osb.ok("code", 'print("hi"); x + 1')
    assert res.out == "hi\n42\n"


def test_code_error_with_traceback(osb):
    res = osb.run("code", "def f():\n    return 1 / 0\nf()")
    assert res.rc == 1 and res.out == "", res.describe()
    assert res.err.startswith("Traceback (most recent call last):\n")
    assert "ZeroDivisionError: division by zero" in res.err


def test_code_from_stdin(osb):
    assert osb.ok("code", "-", stdin=b"import sys\nprint(sys.version_info[0])\n").out == "3\n"


def test_code_contexts(osb):
    a = osb.ok("code", "new", "python").out.strip()
    b = osb.ok("code", "new", "python").out.strip()
    assert a != b
    listed = osb.ok("code", "contexts").lines()
    assert "%s\tpython" % a in listed and "%s\tpython" % b in listed
    osb.ok("code", "--context", a, "v = 'in a'")
    assert osb.ok("code", "--context", a, "v").out == "'in a'\n"
    res = osb.run("code", "--context", b, "v")
    assert res.rc == 1 and "NameError" in res.err
    osb.ok("code", "delete", a)
    assert "%s\tpython" % a not in osb.ok("code", "contexts", "python").lines()
    res = osb.fails("code", "delete", a)
    assert "HTTP 404 CONTEXT_NOT_FOUND" in res.err, res.describe()


def test_code_bash(osb):
    osb.ok("code", "--language", "bash", "N=5")
    assert osb.ok("code", "--language", "bash", "echo $((N * 2))").out == "10\n"


def test_code_javascript(osb):
    osb.ok("code", "--language", "javascript", "var n = 20;")
    assert osb.ok("code", "--language", "javascript", "console.log(n + 1)").out == "21\n"


def test_code_unsupported_language(osb):
    res = osb.fails("code", "--language", "go", "package main")
    assert "HTTP 500" in res.err, res.describe()


def test_code_interrupt(osb, running):
    ctx = osb.ok("code", "new", "python").out.strip()
    r = running(osb, "code", "--context", ctx, "import time\nprint('go', flush=True)\ntime.sleep(60)")
    assert r.readline() == "go\n"
    osb.ok("code", "interrupt", ctx)
    res = r.finish()
    assert res.rc == 1 and "KeyboardInterrupt" in res.err, res.describe()
    # the context lives on
    assert osb.ok("code", "--context", ctx, "1 + 1").out == "2\n"


# ---------------------------------------------------------------- egress

POLICY = {"defaultAction": "deny", "egress": [{"action": "allow", "target": "pypi.org"}]}


@pytest.fixture
def psb(server):
    """A sandbox created with a network policy (so with a sidecar)."""
    sid = server.create_sandbox(networkPolicy=POLICY)
    yield sid
    server.delete_sandbox(sid)


def rules(server, sid):
    st, b = egress_policy(server, sid)
    assert st == 200, (st, b)
    return b["policy"]["egress"], b["policy"]["defaultAction"]


def test_egress_get(server, psb):
    import json
    res = Osb(server, psb).ok("egress")
    assert json.loads(res.out) == egress_policy(server, psb)[1]
    assert Osb(server, psb).ok("egress", "get").out == res.out


def test_egress_allow_deny(server, psb):
    o = Osb(server, psb)
    o.ok("egress", "allow", "github.com")
    o.ok("egress", "deny", "*.evil.example")
    assert rules(server, psb) == ([{"action": "deny", "target": "*.evil.example"},
                                   {"action": "allow", "target": "github.com"},
                                   {"action": "allow", "target": "pypi.org"}], "deny")


def test_egress_patch_and_delete(server, psb):
    o = Osb(server, psb)
    o.ok("egress", "patch", '[{"action":"deny","target":"pypi.org"},{"action":"allow","target":"10.0.0.0/8"}]')
    assert rules(server, psb)[0] == [{"action": "deny", "target": "pypi.org"},
                                     {"action": "allow", "target": "10.0.0.0/8"}]
    o.ok("egress", "delete", "PyPI.org", "10.0.0.0/8")
    assert rules(server, psb) == (None, "deny") or rules(server, psb) == ([], "deny")


@pytest.mark.parametrize("args", [["patch", "{}"], ["patch", "[]"], ["allow", "a b"], ["block", "x.org"]])
def test_egress_bad_arguments(server, psb, args):
    res = Osb(server, psb).run("egress", *args)
    assert res.rc in (1, 2) and res.out == "", res.describe()
    assert rules(server, psb) == (POLICY["egress"], "deny")


def test_egress_without_a_sidecar(osb, sandbox):
    for args in (["egress"], ["egress", "allow", "x.org"], ["egress", "delete", "x.org"]):
        res = osb.fails(*args)
        assert res.err == ("osb: egress: sandbox %s has no egress sidecar (it was created without "
                           "a network policy)\n" % sandbox)

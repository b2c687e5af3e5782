"""`osb` in the official OpenSandbox CLI's grammar (sandbox, command, file,
egress, config; exec ID -- CMD), its global options, -o json, the settings
file (~/.opensandbox/config.toml) that osb and osbfs read, and the progress
line of transfers on a terminal."""

import calendar
import json
import os
import pty
import re
import stat
import subprocess
import threading
import time

import pytest

from mounthelp import Mount, fsync_path, is_mounted
from osbhelp import OSB, W, Osb, egress_policy
from osbtest import ROOT, wait_until

IMG = ["--image", "python:3.11", "--entrypoint", "tail", "--entrypoint", "-f", "--entrypoint", "/dev/null"]
POLICY = {"defaultAction": "deny", "egress": [{"action": "allow", "target": "pypi.org"}]}


def version():
    with open(ROOT / "meson.build") as f:
        return re.search(r"version : '([^']+)'", f.read()).group(1)


def js(res):
    """The JSON an osb run printed (it must have succeeded)."""
    assert res.rc == 0, res.describe()
    return json.loads(res.out)


def utc(stamp):
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))


def ttl(sb):
    """A sandbox record's TTL in seconds (its expiry less its creation)."""
    return utc(sb["expires_at"]) - utc(sb["created_at"])


@pytest.fixture
def home(tmp_path):
    """A HOME of its own (for ~/.opensandbox/config.toml)."""
    h = tmp_path / "home"
    h.mkdir()
    return h


def cfg_path(home):
    return home / ".opensandbox" / "config.toml"


def write_cfg(home, text):
    p = cfg_path(home)
    p.parent.mkdir(exist_ok=True)
    p.write_text(text)
    p.chmod(0o600)
    return p


# ---------------------------------------------------------------- help, version, usage

GROUPS = {
    "sandbox": ["create", "list", "get", "kill", "pause", "resume", "renew", "endpoint", "health", "metrics"],
    "command": ["run", "status", "logs", "interrupt", "session"],
    "file": ["cat", "write", "upload", "download", "rm", "mv", "mkdir", "rmdir", "search", "info",
             "chmod", "replace", "ls"],
    "egress": ["get", "patch"],
    "config": ["init", "show", "set"],
}
# osb's own groups, which the official CLI has not (so not in its grammar)
OSB_ONLY = {
    "snapshot": ["create", "list", "get", "delete"],
}
ALL_GROUPS = dict(GROUPS, **OSB_ONLY)


@pytest.mark.parametrize("args", [["--help"], ["-h"]] + [[g, "--help"] for g in ALL_GROUPS]
                         + [[g] for g in ALL_GROUPS]
                         + [[g, c, "--help"] for g, cs in ALL_GROUPS.items() for c in cs]
                         + [["exec", "--help"], ["file", "write", "-h"]])
def test_help(osbc, args):
    res = osbc.ok(*args)
    assert res.out.startswith("usage:"), res.describe()
    if len(args) == 3:
        assert "osb %s %s" % (args[0], args[1]) in res.out


def test_main_help_leads_with_the_official_grammar(osbc):
    out = osbc.ok("--help").out
    assert out.index("osb sandbox create") < out.index("Older spellings") < out.index("  osb create")
    assert "OPEN_SANDBOX_API_KEY" in out[out.index("--api-key KEY"):]


def test_version(osbc):
    assert osbc.ok("--version").out == "osb %s\n" % version()


@pytest.mark.parametrize("args, err", [
    (["sandbox", "frob"], 'osb: unknown command "sandbox frob" (osb --help for usage)\n'),
    (["-o", "xml", "sandbox", "list"], 'osb: -o takes table, json, yaml or raw, not "xml" (osb --help for usage)\n'),
    (["sandbox", "renew", "abc", "--timeout", "soon"], "osb: bad timeout soon (osb --help for usage)\n"),
    (["command", "run", "a", "b", "--", "true"], "osb: usage: osb run SANDBOX_ID [OPTIONS] -- COMMAND... "
                                                 "(osb --help for usage)\n"),
    (["egress", "patch", "abc", "--rule", "block=x.org"], "osb: bad --rule: ACTION=TARGET, ACTION allow or deny "
                                                           "(osb --help for usage)\n"),
])
def test_usage_errors(osbc, args, err):
    res = osbc.run(*args)
    assert (res.rc, res.out, res.err) == (2, "", err), res.describe()


# ---------------------------------------------------------------- sandbox

def test_sandbox_create_json_get_list_kill(server, osbc, cleanup_sandboxes):
    res = osbc.run("sandbox", "create", *IMG, "--timeout", "30m", "-m", "run=cli16", "-o", "json")
    d = js(res)
    cleanup_sandboxes.append(d["id"])
    assert d["image"] == "python:3.11" and d["status"]["state"] == "Running" and ttl(d) == 1800
    sid = d["id"]
    g = js(osbc.run("sandbox", "get", sid, "-o", "json"))
    assert g["id"] == sid and g["status"]["state"] == "Running"
    assert g["entrypoint"] == ["tail", "-f", "/dev/null"] and g["metadata"] == {"run": "cli16"}
    lst = js(osbc.run("-o", "json", "sandbox", "list", "--metadata", "run=cli16"))
    assert [i["id"] for i in lst["items"]] == [sid] and lst["pagination"]["page"] >= 0
    # one shape for a sandbox: create, get and list say the same
    assert d == g == lst["items"][0], (d, g, lst)
    table = osbc.ok("sandbox", "list", "-m", "run=cli16", "-o", "table").lines()
    assert table[0].split() == ["ID", "STATUS", "IMAGE", "CREATED_AT", "EXPIRES_AT"]
    assert table[1].split()[:3] == [sid, "Running", "python:3.11"]
    k = js(osbc.run("sandbox", "kill", sid, "-o", "json"))
    assert k == [{"sandbox_id": sid, "status": "terminated"}]
    assert server.request("GET", "/v1/sandboxes/" + sid)[0] == 404


def test_sandbox_create_raw_prints_the_id(server, osbc, cleanup_sandboxes):
    res = osbc.ok("sandbox", "create", *IMG, "-t", "none")
    sid = res.out.strip()
    cleanup_sandboxes.append(sid)
    assert "expiresAt" not in server.request("GET", "/v1/sandboxes/" + sid)[2]


def test_sandbox_pause_resume_renew_endpoint(server, osbc, sandbox):
    osbc.ok("sandbox", "pause", sandbox)
    assert server.request("GET", "/v1/sandboxes/" + sandbox)[2]["status"]["state"] == "Paused"
    assert js(osbc.run("sandbox", "resume", sandbox, "-o", "json"))["status"] == "ok"
    assert server.request("GET", "/v1/sandboxes/" + sandbox)[2]["status"]["state"] == "Running"
    t0 = time.time()
    r = js(osbc.run("sandbox", "renew", sandbox, "--timeout", "1h30m", "-o", "json"))
    exp = time.mktime(time.strptime(r["expires_at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert r["sandbox_id"] == sandbox and abs(exp - (t0 + 5400)) < 60
    url, hdrs = server.endpoint(sandbox)
    e = js(osbc.run("sandbox", "endpoint", sandbox, "--port", "44772", "-o", "json"))
    assert e == {"endpoint": url, "headers": hdrs}


def test_sandbox_create_takes_the_defaults_of_the_settings_file(server, osbc, cleanup_sandboxes, home):
    write_cfg(home, '[defaults]\nimage = "python:3.11"\ntimeout = "15m"\n')
    d = js(osbc.run("sandbox", "create", "-o", "json", env={"HOME": str(home)}))
    cleanup_sandboxes.append(d["id"])
    b = server.request("GET", "/v1/sandboxes/" + d["id"])[2]
    assert b["image"] == {"uri": "python:3.11"} and ttl(d) == 900


# ---------------------------------------------------------------- command, exec

def test_exec_with_the_id_and_without(osbc, osb, sandbox):
    res = osbc.run("exec", sandbox, "--", "echo out; echo err >&2; exit 3")
    assert (res.rc, res.out, res.err) == (3, "out\n", "err\n"), res.describe()
    assert osbc.ok("command", "run", sandbox, "-w", "/tmp", "--", "pwd").out == "/tmp\n"
    assert osb.ok("exec", "--", "printf", "%s|", "a b", "c").out == "a b|c|\n"


def test_command_run_timeout_is_a_duration(osbc, sandbox):
    res = osbc.run("command", "run", sandbox, "-t", "1s", "--", "sleep 30; echo late")
    assert res.rc != 0 and "late" not in res.out and res.seconds < 20, res.describe()


def test_command_background_status_logs_interrupt(osbc, sandbox):
    d = js(osbc.run("command", "run", sandbox, "-d", "-o", "json", "--", "echo started; sleep 60"))
    assert d["sandbox_id"] == sandbox and d["mode"] == "background"
    eid = d["execution_id"]
    wait_until(lambda: js(osbc.run("command", "logs", sandbox, eid, "-o", "json"))["content"] == "started\n",
               30, "the background command's output")
    st = js(osbc.run("command", "status", sandbox, eid, "-o", "json"))
    assert st["id"] == eid and st["running"] is True and st["exit_code"] is None
    osbc.ok("command", "interrupt", sandbox, eid)
    wait_until(lambda: not js(osbc.run("command", "status", sandbox, eid, "-o", "json"))["running"], 30,
               "the command to stop")
    logs = js(osbc.run("command", "logs", sandbox, eid, "--cursor", "8", "-o", "json"))
    assert logs["content"] == "" and logs["cursor"] == 8


def test_command_session(osbc, sandbox):
    d = js(osbc.run("command", "session", "create", sandbox, "-w", "/tmp", "-o", "json"))
    sess = d["session_id"]
    assert d["sandbox_id"] == sandbox and d["working_directory"] == "/tmp"
    assert osbc.ok("command", "session", "run", sandbox, sess, "--", "export FOO=bar").out == ""
    assert osbc.ok("command", "session", "run", sandbox, sess, "--", "echo $FOO; pwd").out == "bar\n/tmp\n"
    osbc.ok("command", "session", "delete", sandbox, sess)


def test_api_key_is_not_in_the_command_line(server, sandbox):
    o = Osb(server, api_key="")
    argv = [str(OSB), "--api-key", server.api_key, "command", "run", sandbox, "--", "sleep 3; echo done"]
    p = subprocess.Popen(argv, env=o.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        def scrubbed():
            with open("/proc/%d/cmdline" % p.pid, "rb") as f:
                return b"*" * len(server.api_key) in f.read()
        wait_until(scrubbed, 10, "osb to overwrite its --api-key")
        with open("/proc/%d/cmdline" % p.pid, "rb") as f:
            cmdline = f.read()
        assert server.api_key.encode() not in cmdline
        out, err = p.communicate(timeout=60)
        assert (p.returncode, out, err) == (0, b"done\n", b""), (p.returncode, out, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_verbose_prints_a_line_per_call_without_the_key(osbc, sandbox):
    res = osbc.run("-v", "sandbox", "get", sandbox, "-o", "json")
    assert res.rc == 0 and re.search(r"^osb: GET /v1/sandboxes/%s -> 200, \d+ ms$" % sandbox, res.err, re.M), \
        res.describe()
    assert osbc.server.api_key not in res.err


# ---------------------------------------------------------------- file

def test_file_write_cat_info(server, osbc, sandbox):
    osbc.ok("file", "write", sandbox, W + "/hello.txt", "-c", "hello\n", "--mode", "600")
    assert server.read_file(sandbox, W + "/hello.txt") == b"hello\n"
    osbc.ok("file", "write", sandbox, W + "/bin.dat", stdin=b"a\x00b\xff")
    assert server.read_file(sandbox, W + "/bin.dat") == b"a\x00b\xff"
    assert osbc.ok("file", "cat", sandbox, W + "/hello.txt").out == "hello\n"
    rows = js(osbc.run("file", "info", sandbox, W + "/hello.txt", W + "/bin.dat", "-o", "json"))
    assert [(r["path"], r["type"], r["size"]) for r in rows] == [
        (W + "/hello.txt", "file", 6), (W + "/bin.dat", "file", 4)]
    assert rows[0]["mode"] == "0600" and rows[0]["owner"] == "root"


def test_names_from_the_sandbox_are_escaped_for_a_terminal(server, osbc, sandbox):
    # a name may hold an escape sequence or a newline: a table (what a
    # terminal gets) and an error message show them escaped; the raw
    # lines scripts read, and JSON, give the name as it is
    odd = "\x1b]0;owned\x07odd\nname"
    code, _, err = server.run(sandbox, "mkdir -p %s/esc && touch %s/esc/\"$(printf '"
                              "\\033]0;owned\\007odd\\nname')\"" % (W, W))
    assert code == 0, err
    shown = "\\x1b]0;owned\\x07odd\\nname"
    assert osbc.ok("-o", "table", "ls", sandbox, W + "/esc").out == shown + "\n"
    assert osbc.ok("-o", "table", "ls", "-l", sandbox, W + "/esc").out.endswith(" " + shown + "\n")
    table = osbc.ok("-o", "table", "file", "info", sandbox, W + "/esc/" + odd).out
    assert "\x1b" not in table and W + "/esc/" + shown in table, table
    assert osbc.ok("ls", sandbox, W + "/esc").out == odd + "\n"
    assert js(osbc.run("file", "info", sandbox, W + "/esc/" + odd, "-o", "json"))[0]["path"] == \
        W + "/esc/" + odd
    r = osbc.fails("file", "cat", sandbox, W + "/esc/" + odd + "-gone")
    assert "\x1b" not in r.err and shown + "-gone" in r.err, r.err


def test_file_upload_download(server, osbc, sandbox, workdir):
    src = os.path.join(workdir, "up.bin")
    data = os.urandom(300000)
    with open(src, "wb") as f:
        f.write(data)
    osbc.ok("file", "upload", sandbox, src, W + "/up.bin")
    assert server.read_file(sandbox, W + "/up.bin") == data
    dst = os.path.join(workdir, "down.bin")
    d = js(osbc.run("file", "download", sandbox, W + "/up.bin", dst, "-o", "json"))
    assert d["status"] == "ok"
    with open(dst, "rb") as f:
        assert f.read() == data


def test_file_mkdir_mv_search_chmod_replace_rm_rmdir(server, osbc, sandbox):
    rows = js(osbc.run("file", "mkdir", sandbox, W + "/d1", W + "/d2/sub", "--mode", "750", "-o", "json"))
    assert rows == [{"path": W + "/d1", "status": "created"}, {"path": W + "/d2/sub", "status": "created"}]
    assert server.stat(sandbox, W + "/d1")["mode"] == 750
    server.write_file(sandbox, W + "/d1/a.txt", b"one two one")
    osbc.ok("file", "mv", sandbox, W + "/d1/a.txt", W + "/d2/b.txt")
    found = js(osbc.run("file", "search", sandbox, W, "--pattern", "*.txt", "-o", "json"))
    assert [r["path"] for r in found] == [W + "/d2/b.txt"]
    osbc.ok("file", "chmod", sandbox, W + "/d2/b.txt", "--mode", "640")
    assert server.stat(sandbox, W + "/d2/b.txt")["mode"] == 640
    osbc.ok("file", "replace", sandbox, W + "/d2/b.txt", "--old", "one", "--new", "1")
    assert server.read_file(sandbox, W + "/d2/b.txt") == b"1 two 1"
    assert js(osbc.run("file", "rm", sandbox, W + "/d2/b.txt", "-o", "json")) == [
        {"path": W + "/d2/b.txt", "status": "deleted"}]
    osbc.ok("file", "rmdir", sandbox, W + "/d1", W + "/d2")
    res = osbc.run("file", "info", sandbox, W + "/d2")
    assert res.rc == 1 and "No such file" in res.err or "not found" in res.err, res.describe()


def test_file_commands_take_the_sandbox_of_s(osb, server, sandbox):
    osb.ok("file", "write", W + "/s.txt", "-c", "via -s")
    assert osb.ok("file", "cat", W + "/s.txt").out == "via -s"
    osb.ok("file", "rm", W + "/s.txt")
    with pytest.raises(AssertionError):
        server.read_file(sandbox, W + "/s.txt")


# ---------------------------------------------------------------- egress

def test_egress_patch_rule_and_get(server, osbc):
    sid = server.create_sandbox(networkPolicy=POLICY)
    try:
        d = js(osbc.run("egress", "patch", sid, "--rule", "allow=github.com", "--rule", "deny=pypi.org",
                        "-o", "json"))
        assert d["patched_rules"] == [{"action": "allow", "target": "github.com"},
                                      {"action": "deny", "target": "pypi.org"}]
        st, b = egress_policy(server, sid)
        assert st == 200 and b["policy"]["egress"][:2] == d["patched_rules"]
        g = js(osbc.run("egress", "get", sid, "-o", "json"))
        assert g["egress"]["policy"]["defaultAction"] == "deny"
    finally:
        server.delete_sandbox(sid)


# ---------------------------------------------------------------- config

def test_config_init_set_show(osbc, home):
    env = {"HOME": str(home), "OPEN_SANDBOX_API_KEY": "", "OPEN_SANDBOX_DOMAIN": ""}
    osbc.ok("config", "init", env=env)
    p = cfg_path(home)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    res = osbc.run("config", "init", env=env)
    assert res.rc == 1 and "exists already" in res.err, res.describe()
    osbc.ok("config", "init", "--force", env=env)
    osbc.ok("config", "set", "connection.domain", "example.org:9", env=env)
    osbc.ok("config", "set", "connection.api_key", "abcdefgh12", env=env)
    osbc.ok("config", "set", "connection.request_timeout", "45", env=env)
    osbc.ok("config", "set", "defaults.timeout", "20m", env=env)
    text = p.read_text()
    assert '# domain = "localhost:8080"\ndomain = "example.org:9"\n' in text and "# use_server_proxy" in text
    res = osbc.run("config", "set", "connection.request_timeout", "soon", env=env)
    assert res.rc == 1 and "must be a positive integer" in res.err
    d = js(osbc.run("config", "show", "-o", "json", env=env))
    assert d["api_key"] == "ab*******2" and "abcdefgh12" not in json.dumps(d)
    assert (d["domain"], d["request_timeout"], d["default_timeout"]) == ("example.org:9", 45, "20m")
    assert d["config_path"] == str(p) and d["config_file_exists"] is True
    osbc.ok("--config", str(home / "other.toml"), "config", "set", "defaults.image", "x:1")
    assert 'image = "x:1"' in (home / "other.toml").read_text()


def test_precedence_flag_over_env_over_file(osbc, home):
    write_cfg(home, '[connection]\ndomain = "file:1"\nprotocol = "https"\nrequest_timeout = 7\n')
    env = {"HOME": str(home), "OPEN_SANDBOX_DOMAIN": "env:2"}

    def show(*flags, e=env):
        return js(osbc.run(*flags, "config", "show", "-o", "json", env=e))
    d = show()
    assert (d["domain"], d["protocol"], d["request_timeout"]) == ("env:2", "https", 7)
    d = show("--domain", "flag:3", "--protocol", "http", "--timeout", "9")
    assert (d["domain"], d["protocol"], d["request_timeout"]) == ("flag:3", "http", 9)
    e2 = dict(env, OPEN_SANDBOX_DOMAIN="")
    assert show(e=e2)["domain"] == "file:1"


def test_the_settings_file_alone_reaches_the_server(server, home):
    write_cfg(home, '[connection]\ndomain = "%s:%d"\napi_key = "%s"\n' % (server.host, server.port,
                                                                       server.api_key))
    o = Osb(server, api_key="", env={"HOME": str(home), "OPEN_SANDBOX_DOMAIN": ""})
    assert "items" in js(o.run("sandbox", "list", "-o", "json"))
    # and a flag still wins over it
    res = o.run("--domain", "127.0.0.1:1", "--retries", "0", "sandbox", "list")
    assert res.rc == 1 and "127.0.0.1:1" in res.err, res.describe()


def test_a_malformed_settings_file_names_its_line(osbc, home):
    p = write_cfg(home, '[connection]\ndomain = "ok"\nprotocol = http\n')
    res = osbc.fails("sandbox", "list", env={"HOME": str(home)})
    assert res.err == "osb: %s:3: a value that is not a string, an integer or a boolean\n" % p


def test_a_key_file_others_may_read_is_warned_of(osbc, home, server):
    p = write_cfg(home, '[connection]\napi_key = "%s"\n' % server.api_key)
    p.chmod(0o644)
    res = osbc.run("sandbox", "list", env={"HOME": str(home)})
    assert res.rc == 0 and "others may read it" in res.err and server.api_key not in res.err, res.describe()


# ---------------------------------------------------------------- progress

def run_on_pty(argv, env, timeout=60):
    """@argv with stderr on a pseudo-terminal: (exit status, stderr)."""
    master, slave = pty.openpty()
    got = []

    def reader():
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:
                break
            if not b:
                break
            got.append(b)
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave,
                         start_new_session=True)
    os.close(slave)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        rc = p.wait(timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    t.join(10)
    os.close(master)
    return rc, b"".join(got).decode("utf-8", "replace")


def test_transfers_show_progress_on_a_terminal_only(server, osbc, sandbox, workdir):
    src = os.path.join(workdir, "big.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(8 << 20))
    rc, err = run_on_pty([str(OSB), "file", "upload", sandbox, src, W + "/big.bin"], osbc.env())
    assert rc == 0, err
    assert re.search(r"up 8\.0 MiB / 8\.0 MiB  100%  [0-9.]+ [KMG]?i?B/s", err), err
    rc, err = run_on_pty([str(OSB), "file", "download", sandbox, W + "/big.bin",
                          os.path.join(workdir, "back.bin")], osbc.env())
    assert rc == 0 and re.search(r"down 8\.0 MiB / 8\.0 MiB  100%", err), err
    # not a terminal: nothing on stderr
    osbc.ok("file", "upload", sandbox, src, W + "/big2.bin")


# ---------------------------------------------------------------- osbfs and the settings file

class SettingsMount(Mount):
    """A mount whose domain and key come from the settings file only."""

    def __init__(self, server, home, **kw):
        super().__init__(server, api_key="", env={"HOME": str(home)}, **kw)
        for k in list(self.env):
            if k.startswith(("OPEN_SANDBOX_", "OPENSANDBOX_")):
                del self.env[k]

    def argv(self):
        a = super().argv()
        i = a.index("-o")
        a[i + 1] = ",".join(o for o in a[i + 1].split(",") if not o.startswith("domain="))
        return a


def test_osbfs_mounts_with_the_settings_file_alone(server, make_sandbox, home, tmp_path):
    write_cfg(home, '[connection]\ndomain = "%s:%d"\napi_key = "%s"\n' % (server.host, server.port,
                                                                       server.api_key))
    sid = make_sandbox()
    m = SettingsMount(server, home, sandbox_id=sid, workdir=str(tmp_path / "m"))
    try:
        m.start()
        with open(m.p("f.txt"), "w") as f:
            f.write("through the settings file")
        fsync_path(m.p("f.txt"))
        assert server.read_file(sid, W + "/f.txt") == b"through the settings file"
    finally:
        m.stop()
    assert not is_mounted(m.path)


def test_osbfs_fails_at_once_on_a_malformed_settings_file(server, home, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[connection]\n\ndomain = "%s:%d"\nrequest_timeout = "30"\n' % (server.host, server.port))
    before = server.request("GET", "/v1/sandboxes?pageSize=200")[2]["pagination"]["totalItems"]
    m = SettingsMount(server, home, options=["config=%s" % bad], workdir=str(tmp_path / "m"))
    try:
        m.start(expect_fail=True)
        assert m.exit_code == 2
        assert "osbfs: %s:4: connection.request_timeout must be an integer" % bad in m.log()
    finally:
        m.stop(check=False)
    after = server.request("GET", "/v1/sandboxes?pageSize=200")[2]["pagination"]["totalItems"]
    assert after == before


def test_osbfs_options_win_over_the_settings_file(make_mount, home):
    # the file names a server that is not there; domain= and the key in
    # the environment (what make_mount gives) are what count
    write_cfg(home, '[connection]\ndomain = "127.0.0.1:1"\napi_key = "wrong"\n')
    m = make_mount(env={"HOME": str(home)})
    with open(m.p("x.txt"), "w") as f:
        f.write("x")
    fsync_path(m.p("x.txt"))


def test_osbfs_makes_a_sandbox_with_the_files_defaults(server, home, tmp_path):
    write_cfg(home, '[connection]\ndomain = "%s:%d"\napi_key = "%s"\n[defaults]\nimage = "python:3.12"\n'
              'timeout = "15m"\n' % (server.host, server.port, server.api_key))
    m = SettingsMount(server, home, options=["destroy_on_unmount"], workdir=str(tmp_path / "m"))
    try:
        m.start()
        st, _, b = server.request("GET", "/v1/sandboxes/" + m.sandbox_id)
        assert st == 200 and b["image"] == {"uri": "python:3.12"}, b
        created = time.mktime(time.strptime(b["createdAt"][:19], "%Y-%m-%dT%H:%M:%S"))
        expires = time.mktime(time.strptime(b["expiresAt"][:19], "%Y-%m-%dT%H:%M:%S"))
        assert abs(expires - created - 900) < 5, b
    finally:
        m.stop()
    assert server.request("GET", "/v1/sandboxes/" + m.sandbox_id)[0] == 404


def test_older_exec_keeps_dash_h_and_dash_o_for_the_command(osb):
    assert osb.ok("exec", "echo", "-h", "-o", "x").out == "-h -o x\n"


def test_sandbox_create_short_options(server, osbc, cleanup_sandboxes):
    sid = osbc.ok("sandbox", "create", "-i", "python:3.11", "-t", "1h", "-e", "A=1", "-m", "k=v").out.strip()
    cleanup_sandboxes.append(sid)
    b = server.request("GET", "/v1/sandboxes/" + sid)[2]
    assert b["image"] == {"uri": "python:3.11"} and b["metadata"] == {"k": "v"}
    assert server.run(sid, 'echo "$A"')[:2] == (0, "1\n")


# ---------------------------------------------------------------- config: the key masked, keys checked

@pytest.mark.parametrize("key, shown", [("k", "*"), ("ab", "**"), ("abc", "a**"), ("trustey", "t*****y"),
                                        ("abcdefgh12", "ab*******2"), ("abcdefghijkl", "ab********kl"),
                                        ("a" * 40 + "wxyz", "aa" + "*" * 40 + "yz")])
def test_the_key_is_masked(osbc, home, key, shown):
    d = js(osbc.run("config", "show", "-o", "json", env={"HOME": str(home), "OPEN_SANDBOX_API_KEY": key}))
    assert d["api_key"] == shown
    visible = sum(1 for c in shown if c != "*")
    assert visible <= 4 and 3 * visible <= len(key)


@pytest.mark.parametrize("key, value, err", [
    ("connection.domian", "x:1", 'osb: config set: no key "connection.domian"\nosb: the keys are '
     "connection.api_key, connection.domain, connection.protocol, connection.request_timeout, "
     "connection.use_server_proxy, defaults.image, defaults.timeout, output.color\n"),
    ("image", "x", 'osb: config set: no key "image"\n'),
    ("connection.protocol", "ftp", "osb: config set: connection.protocol must be http or https\n"),
    ("connection.domain", "exa mple.org", "osb: config set: connection.domain must be one word, without white "
     "space\n"),
    ("defaults.timeout", "soon", "osb: config set: defaults.timeout must be a duration (90s, 10m, 1h30m) or "
     "none\n"),
    ("connection.use_server_proxy", "maybe", "osb: config set: connection.use_server_proxy must be true or "
     "false\n"),
    ("output.color", "blue", "osb: config set: output.color must be true or false\n"),
    ("connection.request_timeout", "-3", "osb: connection.request_timeout must be a positive integer\n"),
])
def test_config_set_checks_keys_and_values(osbc, home, key, value, err):
    env = {"HOME": str(home)}
    osbc.ok("config", "init", env=env)
    before = cfg_path(home).read_text()
    res = osbc.run("config", "set", key, value, env=env)
    assert res.rc == 1 and res.out == "" and res.err.startswith(err), res.describe()
    assert cfg_path(home).read_text() == before


def test_config_set_takes_the_official_clis_keys(osbc, home):
    env = {"HOME": str(home)}
    for key, value in (("connection.protocol", "https"), ("defaults.timeout", "none"), ("output.color", "false"),
                       ("connection.use_server_proxy", "true"), ("defaults.image", "python:3.12")):
        osbc.ok("config", "set", key, value, env=env)
    text = cfg_path(home).read_text()
    assert 'protocol = "https"' in text and 'timeout = "none"' in text and "[output]\ncolor = false" in text
    d = js(osbc.run("config", "show", "-o", "json", env=env))
    assert (d["protocol"], d["use_server_proxy"], d["default_image"]) == ("https", True, "python:3.12")


# ---------------------------------------------------------------- -o yaml, -o raw

def yaml_load(text):
    """The YAML osb writes (block mappings and sequences, plain and
    double-quoted scalars, {} and []) as Python values; stdlib only, and
    strict: anything else fails the test."""
    lines = [l for l in text.split("\n") if l.strip()]
    pos = [0]

    def scalar(s):
        if s.startswith('"'):
            v, end = json.JSONDecoder().raw_decode(s)
            assert end == len(s), s
            return v
        if s in ("{}", "[]", "null", "true", "false") or re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", s):
            return json.loads(s)
        assert re.fullmatch(r"[A-Za-z/][A-Za-z0-9_./:@+=-]*", s), "not plain: %r" % s
        return s

    def key_rest(s):
        if s.startswith('"'):
            k, end = json.JSONDecoder().raw_decode(s)
            assert s[end] == ":", s
            return k, s[end + 1:].strip()
        m = re.match(r"([^\s:]+):(?: (.*))?$", s)
        assert m, "not a key: %r" % s
        return scalar(m.group(1)), (m.group(2) or "").strip()

    def node(indent):
        line = lines[pos[0]]
        assert len(line) - len(line.lstrip()) == indent, (indent, line)
        if line.strip().startswith("- ") or line.strip() == "-":
            out = []
            while pos[0] < len(lines) and lines[pos[0]].startswith(" " * indent + "- "):
                rest = lines[pos[0]][indent + 2:]
                if rest.startswith("- ") or (":" in rest and not rest.startswith('"')) or \
                        re.match(r'"[^"]*":', rest):
                    lines[pos[0]] = " " * (indent + 2) + rest
                    out.append(node(indent + 2))
                else:
                    out.append(scalar(rest))
                    pos[0] += 1
            return out
        out = {}
        while pos[0] < len(lines):
            line = lines[pos[0]]
            if len(line) - len(line.lstrip()) != indent or line.strip().startswith("- "):
                break
            k, rest = key_rest(line.strip())
            pos[0] += 1
            out[k] = scalar(rest) if rest else node(indent + 2)
        return out

    if len(lines) == 1 and ":" not in lines[0]:
        return scalar(lines[0])
    v = node(0)
    assert pos[0] == len(lines), "left over: %r" % lines[pos[0]:]
    return v


@pytest.mark.parametrize("words", [["sandbox", "get", "{sid}"], ["sandbox", "list", "-m", "run=yaml16"],
                                   ["file", "info", "{sid}", W + "/odd", W], ["file", "ls", "{sid}", W],
                                   ["sandbox", "health", "{sid}"], ["config", "show"]])
def test_yaml_says_what_json_says(server, osbc, cleanup_sandboxes, home, words):
    sid = osbc.ok("sandbox", "create", *IMG, "-m", "run=yaml16", "-m", "n=true", "-m", "x1=0.5").out.strip()
    cleanup_sandboxes.append(sid)
    # a name of the sandbox that no plain scalar may carry
    code, _, err = server.run(sid, "touch %s/\"$(printf 'odd\\033]0;x\\007: # - \\nname')\"; "
                                   "ln -s \"$(printf 'odd\\033]0;x\\007: # - \\nname')\" %s/odd" % (W, W))
    assert code == 0, err
    env = {"HOME": str(home)}
    args = [w.format(sid=sid) for w in words]
    want = js(osbc.run(*args, "-o", "json", env=env))
    res = osbc.run(*args, "-o", "yaml", env=env)
    assert res.rc == 0 and "\x1b" not in res.out, res.describe()
    assert yaml_load(res.out) == want, res.out


def test_create_in_yaml_is_get_in_json(osbc, cleanup_sandboxes):
    res = osbc.run("sandbox", "create", *IMG, "-t", "15m", "-o", "yaml")
    assert res.rc == 0, res.describe()
    d = yaml_load(res.out)
    cleanup_sandboxes.append(d["id"])
    assert d == js(osbc.run("sandbox", "get", d["id"], "-o", "json")) and ttl(d) == 900


def test_yaml_of_a_metadata_that_looks_like_another_type(osbc, cleanup_sandboxes):
    sid = osbc.ok("sandbox", "create", *IMG, "-m", "n=true", "-m", "x1=0.5", "-m", "y=null").out.strip()
    cleanup_sandboxes.append(sid)
    out = osbc.ok("sandbox", "get", sid, "-o", "yaml").out
    assert '  "n": "true"\n' in out and '  x1: "0.5"\n' in out and '  "y": "null"\n' in out, out
    assert 'created_at: "20' in out, out


def test_config_show_raw_is_raw(osbc, home):
    env = {"HOME": str(home), "OPEN_SANDBOX_API_KEY": "0123456789abcdef", "OPEN_SANDBOX_DOMAIN": "example.org:9"}
    out = osbc.ok("config", "show", "-o", "raw", env=env).out
    lines = out.splitlines()
    assert "KEY" not in out and lines[0] == "api_key: 01************ef", out
    assert "domain: example.org:9" in lines and "default_image:" in lines, out
    table = osbc.ok("config", "show", "-o", "table", env=env).lines()
    assert table[0].split() == ["KEY", "VALUE"] and table[1].split() == ["api_key", "01************ef"]


# ---------------------------------------------------------------- help

def all_commands(osbc):
    """Every command `osb --help` lists: (words, is_older_spelling)."""
    out = osbc.ok("--help").out
    head, older = out.split("Older spellings", 1)
    cmds = []
    for part, old in ((head, False), (older, True)):
        for line in part.splitlines():
            m = re.match(r"  osb ((?:sandbox|command|file|egress|config|snapshot) )?([a-z]+)", line)
            if m:
                words = (m.group(1) or "").split() + [m.group(2)]
                if (words, old) not in cmds:
                    cmds.append((words, old))
    return cmds


def test_every_command_has_help_with_examples(osbc):
    cmds = all_commands(osbc)
    assert len(cmds) > 60, cmds
    for words, old in cmds:
        if words[0] in GROUPS and len(words) == 1:
            continue  # the older `osb egress`: its group's help, below
        out = osbc.ok(*words, "--help").out
        assert out.startswith("usage:\n  osb %s" % " ".join(words)), out
        ex = out.split("\nExamples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert ex and all(l.startswith("  ") for l in ex), (words, out)
        if not old:
            # each example is a use of the command itself
            pat = r"\bosb (-s \$ID )?%s\b" % re.escape(" ".join(words))
            assert all(re.search(pat, l) for l in ex), (words, ex)
    for group in ALL_GROUPS:
        out = osbc.ok(group, "--help").out
        assert "\nExamples:\n" in out and "  osb %s %s " % (group, ALL_GROUPS[group][0]) in out, out
    assert "\nExamples:\n  osb config init" in osbc.ok("--help").out


@pytest.mark.parametrize("args", [["exec", "abc", "--help"], ["exec", "abc", "-h"],
                                  ["command", "run", "abc", "--help"],
                                  ["command", "session", "run", "abc", "s1", "--help"]])
def test_help_of_a_command_that_runs_words(server, osbc, args):
    server.reset_stats()
    res = osbc.ok(*args)
    assert res.out.startswith("usage:\n  osb %s" % " ".join(args[:2] if args[0] == "command" else args[:1])), \
        res.describe()
    assert "\nExamples:\n" in res.out
    assert server.stats().get("sandboxes", {}) == {}


def test_file_ls_in_the_official_grammar(server, osbc, sandbox):
    server.write_file(sandbox, W + "/d/a.txt", b"a")
    server.write_file(sandbox, W + "/d/sub/b.txt", b"bb")
    assert osbc.ok("file", "ls", sandbox, W + "/d").lines() == ["a.txt", "sub"]
    assert osbc.ok("ls", sandbox, W + "/d").lines() == ["a.txt", "sub"]
    assert sorted(osbc.ok("file", "ls", sandbox, W + "/d", "-R").lines()) == ["a.txt", "sub", "sub/b.txt"]
    long = osbc.ok("file", "ls", sandbox, W + "/d", "-l").lines()
    assert long[0].startswith("-rw") and long[0].endswith(" a.txt") and long[1].startswith("d"), long
    rows = js(osbc.run("file", "ls", sandbox, W + "/d", "-o", "json"))
    assert [(r["path"], r["type"], r["size"]) for r in rows] == [(W + "/d/a.txt", "file", 1),
                                                                   (W + "/d/sub", "directory", rows[1]["size"])]


def test_bash_completion_offers_commands_options_and_ids(server, osbc, sandbox, tmp_path):
    script = tmp_path / "osb.bash"
    script.write_text(osbc.ok("completion", "bash").out)

    def complete(*words):
        words = (str(OSB),) + words
        cmd = ("source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _osb; printf '%%s\\n' \"${COMPREPLY[@]}\""
               % (script, " ".join("'%s'" % w for w in words), len(words) - 1))
        r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60,
                           env=osbc.env())
        assert r.returncode == 0, r.stderr
        return set(r.stdout.split())
    assert complete("sandbox", "g") == {"get"}
    assert complete("sa") == {"sandbox"}
    assert sandbox in complete("sandbox", "get", "")
    assert sandbox in complete("exec", "")
    assert complete("-o", "y") == {"yaml"}
    assert complete("sandbox", "list", "-o", "") == {"table", "json", "yaml", "raw"}
    assert "--image" in complete("sandbox", "create", "--i")
    assert complete("config", "set", "connection.d") == {"connection.domain"}
    # the same script from the official CLI's variable
    env = dict(osbc.env(), _OSB_COMPLETE="bash_source")
    r = subprocess.run([str(OSB)], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0 and r.stdout == script.read_text()
    assert "compadd" in osbc.ok("completion", "zsh").out


# ---------------------------------------------------------------- the official CLI's grammar

GRAMMAR = ROOT / "tests" / "data" / "official-cli.grammar"
# groups of the official CLI that osb does not have, and why (README's
# "osb and the official CLI" says the same)
NOT_CARRIED = {
    "credential-vault": "the egress sidecar's credential vault: not in osb yet",
    "diagnostics": "server-defined diagnostics routes outside the lifecycle API",
    "devops": "server-defined diagnostics routes outside the lifecycle API",
    "skills": "installs the official CLI's agent skill files on the local machine",
}


def official_grammar():
    """[(path words, [argument], [[spelling...]], [-o format])] of the
    official CLI, as scripts/official-cli-grammar read it from its source."""
    rows = []
    for line in GRAMMAR.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        path, args, opts = (x.strip() for x in line.split("|"))
        words = [] if path == "-" else path.split()
        spellings, formats = [], []
        for opt in filter(None, (o.strip() for o in opts.split(","))):
            if "=" in opt:
                opt, fmts = opt.split("=", 1)
                formats = fmts.split(",")
            spellings.append(opt.split())
        rows.append((words, args.split(), spellings, formats))
    return rows


def carried(rows):
    return [pytest.param(*r, id=" ".join(r[0]) or "osb") for r in rows if not r[0] or r[0][0] not in NOT_CARRIED]


def test_the_official_grammar_has_only_groups_osb_has_or_says_it_has_not():
    rows = official_grammar()
    assert len(rows) > 50, rows
    groups = {r[0][0] for r in rows if r[0]}
    assert groups == set(GROUPS) | set(NOT_CARRIED), groups
    # osb's own groups are not the official CLI's
    assert not groups & set(OSB_ONLY), groups
    for g in GROUPS:
        ours = {tuple(r[0][1:2]) for r in rows if r[0] and r[0][0] == g and len(r[0]) > 1}
        assert ours <= {(c,) for c in GROUPS[g]}, (g, ours)


def has_word(text, word):
    return re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(word), text) is not None


@pytest.mark.parametrize("words,args,spellings,formats", carried(official_grammar()))
def test_every_official_command_argument_and_option_is_in_osbs_help(osbc, words, args, spellings, formats):
    out = osbc.ok(*words, "--help").out
    for sp in spellings:
        for s in sp:
            assert has_word(out, s), (words, s, out)
    if formats:
        line = next((l for l in out.splitlines() if "--output" in l), "")
        for f in formats:
            assert has_word(line, f), (words, f, line)
    usage = out.split("\n\n", 1)[0]
    for a in args:
        # PATHS... is our PATH...; SANDBOX_IDS... our SANDBOX_ID...
        name = a.rstrip(".")
        name = name[:-1] if a.endswith("...") and name.endswith("S") else name
        assert has_word(usage, name), (words, a, usage)
        if a.endswith("..."):
            assert name + "..." in usage, (words, a, usage)


# ---------------------------------------------------------------- options the grammar brought

def create_record(server, sid):
    st, b = server.admin("GET", "/_admin/sandboxes/%s" % sid)
    assert st == 200, (st, b)
    return b["create"]


def test_create_sends_extensions_volumes_credential_proxy_and_a_registry_login(server, osbc, cleanup_sandboxes,
                                                                              tmp_path):
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(POLICY))
    vols = [{"name": "data", "host": {"path": "/srv/data"}, "mountPath": "/data", "readOnly": True}]
    vfile = tmp_path / "volumes.json"
    vfile.write_text(json.dumps(vols))
    pw = tmp_path / "pw"
    pw.write_text("s3cret-token\n")
    d = js(osbc.run("sandbox", "create", *IMG, "--extension", "tier=gold", "--extension", "zone=a",
                    "--volumes-file", vfile, "--credential-proxy", "--network-policy-file", pol,
                    "--image-auth-username", "robot", "--image-auth-password-file", pw,
                    "--skip-health-check", "-o", "json"))
    cleanup_sandboxes.append(d["id"])
    rec = create_record(server, d["id"])
    assert rec["extensions"] == {"tier": "gold", "zone": "a"}
    assert rec["volumes"] == vols
    assert rec["credentialProxy"] == {"enabled": True}
    import hashlib
    assert rec["imageAuth"] == {"username": "robot",
                                "passwordSha256": hashlib.sha256(b"s3cret-token").hexdigest()}
    # the password on the command line works too
    sid = osbc.ok("sandbox", "create", *IMG, "--image-auth-username", "robot", "--image-auth-password", "pw2",
                  "--skip-health-check", "-q").lines()[0]
    cleanup_sandboxes.append(sid)
    assert create_record(server, sid)["imageAuth"]["passwordSha256"] == hashlib.sha256(b"pw2").hexdigest()


@pytest.mark.parametrize("args,rc,says", [
    (["--credential-proxy"], 2, "--credential-proxy needs --network-policy-file"),
    (["--image-auth-username", "robot"], 2, "--image-auth-username and --image-auth-password go together"),
    (["--image-auth-password", "x"], 2, "--image-auth-username and --image-auth-password go together"),
    (["--extension", "novalue"], 2, "bad --extension novalue"),
    (["--volumes-file", "OBJ"], 1, "OBJ: not a JSON array"),
    (["--volumes-file", "BAD"], 1, "BAD: not valid JSON"),
])
def test_create_refuses_what_the_server_would_not_get_right_before_asking(server, osbc, tmp_path, args, rc, says):
    (tmp_path / "OBJ").write_text('{"name": "x"}')
    (tmp_path / "BAD").write_text('[{"name": ')
    args = [str(tmp_path / a) if a in ("OBJ", "BAD") else a for a in args]
    server.reset_stats()
    res = osbc.fails("sandbox", "create", *IMG, *args, rc=rc)
    assert says in res.err, res.describe()
    assert server.stats().get("sandboxes", {}) == {}, server.stats()


def test_file_cat_and_write_in_another_encoding(server, osbc, sandbox):
    server.write_file(sandbox, W + "/latin.txt", "café crème\n".encode("latin-1"))
    assert osbc.ok("file", "cat", sandbox, W + "/latin.txt", "--encoding", "latin-1").out == "café crème\n"
    assert osbc.ok("file", "cat", sandbox, W + "/latin.txt", "--encoding", "ISO-8859-1", "-o", "raw").out \
        == "café crème\n"
    # utf-8 (the default) is the bytes as they are
    assert osbc.run("file", "cat", sandbox, W + "/latin.txt", "--encoding", "utf-8").out_bytes \
        == "café crème\n".encode("latin-1")
    osbc.ok("file", "write", sandbox, W + "/u16.txt", "--encoding", "utf_16", "-c", "naïve ☃", "-q")
    assert server.read_file(sandbox, W + "/u16.txt").decode("utf-16") == "naïve ☃"
    assert osbc.ok("file", "cat", sandbox, W + "/u16.txt", "--encoding", "utf-16").out == "naïve ☃"
    osbc.ok("file", "write", sandbox, W + "/l1.txt", "--encoding", "latin1", "-q", stdin="déjà vu".encode())
    assert server.read_file(sandbox, W + "/l1.txt") == "déjà vu".encode("latin-1")


def test_text_that_does_not_convert_is_refused_with_where_and_nothing_is_written(server, osbc, sandbox):
    res = osbc.fails("file", "write", sandbox, W + "/a.txt", "--encoding", "ascii", "-c", "ok é")
    assert "byte 3 cannot be converted" in res.err and "ascii" in res.err, res.describe()
    assert server.stat(sandbox, W + "/a.txt") is None
    server.write_file(sandbox, W + "/odd.bin", b"a\x00b")
    res = osbc.run("file", "cat", sandbox, W + "/odd.bin", "--encoding", "utf-16le")
    assert res.rc == 1 and res.err.count("\n") == 1 and "ends inside a character at byte 2" in res.err, res.describe()
    assert res.out == "a"  # what converted, as iconv(1) prints it
    res = osbc.fails("file", "cat", sandbox, W + "/odd.bin", "--encoding", "klingon", rc=2)
    assert "unknown encoding klingon" in res.err, res.describe()


def test_metrics_watch_prints_a_sample_a_second_until_stopped(server, osbc, sandbox):
    p = subprocess.Popen([str(OSB), "sandbox", "metrics", sandbox, "--watch", "-o", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=osbc.env())
    try:
        t0 = time.monotonic()
        samples = [json.loads(p.stdout.readline()) for _ in range(3)]
        took = time.monotonic() - t0
    finally:
        p.kill()
        p.wait()
    for s in samples:
        assert set(s) == {"cpu_count", "cpu_used_percentage", "memory_total_in_mib", "memory_used_in_mib",
                          "timestamp"}, s
        assert s["cpu_count"] >= 1 and s["memory_total_in_mib"] > 0
    assert samples[0]["timestamp"] < samples[1]["timestamp"] < samples[2]["timestamp"]
    assert took >= 1.5, took  # execd's cadence, not osb asking again and again
    assert server.stats()["sandboxes"][sandbox].get("GET /metrics/watch") == 1
    lines = []
    q = subprocess.Popen([str(OSB), "sandbox", "metrics", sandbox, "--watch"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=osbc.env())
    try:
        lines = [q.stdout.readline() for _ in range(2)]
    finally:
        q.kill()
        q.wait()
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ cpu [\d.]+% of \d+ cores, memory [\d.]+/[\d.]+ MiB\n$", l)
               for l in lines), lines


def test_a_session_run_is_stopped_at_its_timeout(osbc, sandbox):
    sess = osbc.ok("command", "session", "create", sandbox, "-o", "raw").lines()[0]
    t0 = time.monotonic()
    res = osbc.run("command", "session", "run", sandbox, sess, "-t", "1s", "--", "sleep 20; echo late")
    assert time.monotonic() - t0 < 15, res.describe()
    assert res.rc != 0 and "late" not in res.out and "timeout" in res.err, res.describe()


def test_readme_osb_session_runs_as_printed(server, osbc, home, tmp_path):
    """README's `osb` block, line by line as printed, in a HOME of its own,
    against the local server (its address and key from the environment,
    which come before the settings file the block writes)."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("## The `osb` tool"):].split("```sh\n", 1)[1].split("```", 1)[0]
    assert "osb sandbox create" in block and "osb sandbox kill $ID" in block, block
    env = dict(osbc.env(), HOME=str(home), PATH="%s:%s" % (OSB.resolve().parent, os.environ["PATH"]))
    r = subprocess.run(["bash", "-e", "-x", "-c", block], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env=env)
    ids = re.findall(r"\+ ID=([0-9a-f-]{36})", r.stderr)
    for sid in ids:
        if r.returncode:
            server.delete_sandbox(sid)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "42\n" in r.stdout and "hello" in r.stdout, r.stdout
    assert cfg_path(home).is_file() and oct(cfg_path(home).stat().st_mode & 0o777) == "0o600"

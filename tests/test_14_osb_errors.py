"""What `osb` says when things go wrong (server down, wrong key, unknown
sandbox, missing file, bad arguments), how it behaves under injected
faults (idempotent calls retried until they succeed, the others never
repeated), and libosb used from 8 threads at once (client/test_threads.c).

Fault rules are set on the server's /_admin/faults; every test that sets
one runs on a server of its own (make_server), so nothing leaks."""

import hashlib
import os
import re
import uuid

import pytest

from osbhelp import TEST_THREADS, W, Osb, check_sanitizer, sandbox_stats, spawn
from osbtest import make_ca, wait_until

IMG = ["--image", "python:3.11", "--entrypoint", "sleep", "--entrypoint", "infinity"]


@pytest.fixture
def fsrv(make_server):
    """A server of the test's own, for fault injection, with a sandbox;
    (server, sandbox id, Osb on it). The fault RNG is seeded: a failure
    replays the same faults."""
    s = make_server(extra_args=["--fault-seed", "20260612"])
    sid = s.create_sandbox()
    return s, sid, Osb(s, sid)


def injected(server):
    st, b = server.admin("GET", "/_admin/faults")
    assert st == 200, b
    return b["injected"]


def local(workdir, name, data):
    path = os.path.join(workdir, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---------------------------------------------------------------- server down

def stopped_server(make_server):
    s = make_server()
    s.stop()
    return s


def test_server_down(make_server):
    s = stopped_server(make_server)
    res = Osb(s).fails("list")
    url = "http://127.0.0.1:%d/v1/sandboxes" % s.port
    assert res.err.startswith("osb: list: GET %s: " % url), res.describe()
    assert "Couldn't connect to server (6 attempts)" in res.err, res.describe()


def test_server_down_no_retries(make_server):
    s = stopped_server(make_server)
    res = Osb(s).fails("--retries", "0", "info", "abc")
    assert res.err.startswith("osb: abc: GET http://127.0.0.1:%d/v1/sandboxes/abc: " % s.port), res.describe()
    assert "attempts" not in res.err


@pytest.mark.parametrize("args", [["ls", "/"], ["get", "/etc/hostname", "-"], ["exec", "--", "true"]])
def test_server_down_for_sandbox_commands(make_server, args):
    s = stopped_server(make_server)
    res = Osb(s, "sb1").run("--retries", "1", *args)
    assert res.rc == (255 if args[0] == "exec" else 1) and res.out == "", res.describe()
    assert res.err.count("\n") == 1
    assert res.err.startswith("osb: sb1: GET http://127.0.0.1:%d/v1/sandboxes/sb1/endpoints/44772: " % s.port)


def test_a_paused_sandbox_is_resumed_first(server, osb, sandbox):
    # a paused sandbox's execd accepts connections and never answers: its
    # state, asked beside the endpoint, has osb resume it, as a mount does
    server.request("POST", "/v1/sandboxes/%s/pause" % sandbox)
    res = osb.run("--request-timeout", "5", "exec", "--", "echo", "hi")
    assert res.rc == 0 and res.out == "hi\n", res.describe()
    assert res.err == "osb: sandbox %s is paused: resuming it\n" % sandbox, res.describe()
    assert res.seconds < 5, res.describe()
    st, _, b = server.request("GET", "/v1/sandboxes/%s" % sandbox)
    assert st == 200 and b["status"]["state"] == "Running", b


def test_a_hanging_execd_times_out(server, osb, sandbox):
    server.set_faults(path="/directories/list", kinds=["delay"], delay_ms=8000, rate=1.0)
    try:
        res = osb.fails("--request-timeout", "1", "ls", "/")
    finally:
        server.clear_faults()
    assert res.err.startswith("osb: ls: GET %s/directories/list [/]: " % server.execd_url(sandbox)), res.describe()
    assert "Operation timed out" in res.err and "(2 attempts)" in res.err, res.describe()
    # one retry, then a hang is a hang
    assert res.seconds < 10, res.describe()


# ---------------------------------------------------------------- keys

SECRET = "s3cr3t-" + uuid.uuid4().hex


@pytest.fixture
def keyed(make_server):
    s = make_server(api_key=SECRET)
    return s, s.create_sandbox()


def no_secret(res):
    assert SECRET not in res.out and SECRET not in res.err, res.describe()


def test_wrong_key(keyed):
    s, _ = keyed
    wrong = "wrong-" + uuid.uuid4().hex
    res = Osb(s, api_key=wrong).fails("list")
    assert res.err == ("osb: list: GET %s/v1/sandboxes: HTTP 401 INVALID_API_KEY: Invalid API key."
                       " (the API key given was refused: check OPEN_SANDBOX_API_KEY, the"
                       " api_key_file= option or osb's config)\n" % s.url)
    assert wrong not in res.err


def test_missing_key(keyed):
    s, _ = keyed
    res = Osb(s, api_key="").fails("list")
    assert "HTTP 401 MISSING_API_KEY" in res.err, res.describe()
    # the fix is named: where a key comes from
    assert "no API key was given" in res.err and "OPEN_SANDBOX_API_KEY" in res.err, res.describe()
    assert "--api-key" in res.err and "connection.api_key" in res.err, res.describe()


def test_wrong_key_from_a_file(keyed, workdir):
    s, sid = keyed
    wrong = "filekey-" + uuid.uuid4().hex
    path = local(workdir, "key", (wrong + "\n").encode())
    res = Osb(s, sid, api_key="").fails("--api-key-file", path, "info")
    assert "HTTP 401 INVALID_API_KEY" in res.err and wrong not in res.err, res.describe()


def test_key_file_missing(keyed, workdir):
    s, _ = keyed
    path = os.path.join(workdir, "nokey")
    res = Osb(s).fails("--api-key-file", path, "list")
    assert res.err == "osb: API key file %s: No such file or directory\n" % path


def test_right_key_never_printed(keyed, workdir):
    s, sid = keyed
    o = Osb(s, sid)
    for args in (["info"], ["list"], ["endpoint", "44772"], ["stat", "/nope"], ["info", "nope"],
                 ["-s", "nope", "ls", "/"], ["get", "/nope", "-"], ["exec", "--", "exit 3"],
                 ["--header", "X-Debug: 1", "create", "--timeout", "5"], ["egress"]):
        no_secret(o.run(*args))
    s.stop()
    no_secret(o.run("--retries", "0", "info"))


# ---------------------------------------------------------------- unknown sandbox

NOPE = "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize("args", [
    ["info", NOPE], ["pause", NOPE], ["resume", NOPE], ["kill", NOPE], ["renew", NOPE, "600"],
    ["-s", NOPE, "endpoint", "44772"], ["-s", NOPE, "ls", "/"], ["-s", NOPE, "get", "/x", "-"],
    ["-s", NOPE, "stat", "/x"], ["-s", NOPE, "egress"],
])
def test_unknown_sandbox(osbc, args):
    res = osbc.fails(*args)
    assert "HTTP 404 DOCKER::SANDBOX_NOT_FOUND: Sandbox %s not found\n" % NOPE in res.err, res.describe()
    assert res.err.startswith("osb: %s: " % NOPE), res.describe()


def test_unknown_sandbox_exec(osbc):
    res = osbc.run("-s", NOPE, "exec", "--", "true")
    assert res.rc == 255 and "HTTP 404 DOCKER::SANDBOX_NOT_FOUND" in res.err, res.describe()


@pytest.mark.parametrize("sid", ["a/b", ""])
def test_malformed_sandbox_id(osbc, sid):
    res = osbc.run("info", sid) if sid else osbc.run("-s", "", "info")
    assert res.rc in (1, 2) and res.out == "" and res.err.count("\n") == 1, res.describe()


# ---------------------------------------------------------------- missing files

MISSING = W + "/missing/file.txt"


@pytest.mark.parametrize("args", [
    ["stat", MISSING], ["get", MISSING, "-"], ["get", "--offset", "5", MISSING, "-"], ["ls", MISSING],
    ["mv", MISSING, W + "/x"], ["chmod", "600", MISSING], ["replace", MISSING, "a", "b"],
    ["search", W + "/missing", "*"],
])
def test_missing_file(osb, args):
    res = osb.fails(*args)
    assert re.search(r": HTTP 404 FILE_NOT_FOUND: .*no such file or directory", res.err), res.describe()
    assert res.err.startswith("osb: %s: " % args[0])


def test_missing_file_in_a_command(osb):
    res = osb.run("exec", "--", "cat " + MISSING)
    assert res.rc == 1 and res.out == "" and "No such file or directory" in res.err, res.describe()


# ---------------------------------------------------------------- bad arguments

@pytest.mark.parametrize("args, err", [
    (["frobnicate"], 'osb: unknown command "frobnicate" (osb --help for usage)\n'),
    (["--request-timeout", "0", "list"], "osb: bad --request-timeout 0 (osb --help for usage)\n"),
    (["--retries", "x", "list"], "osb: bad --retries x (osb --help for usage)\n"),
    (["-H", "NoColon", "list"], 'osb: bad header "NoColon" (osb --help for usage)\n'),
    (["info"], "osb: no sandbox: give an id, -s ID or OPEN_SANDBOX_ID (osb --help for usage)\n"),
    (["get", "/x"], "osb: usage: osb get SANDBOX_PATH LOCAL_PATH|- (osb --help for usage)\n"),
    (["mv", "/a"], "osb: usage: osb mv SRC DEST (osb --help for usage)\n"),
])
def test_bad_arguments(osbc, args, err):
    res = osbc.run(*args)
    assert (res.rc, res.out, res.err) == (2, "", err), res.describe()


def test_no_sandbox_for_a_sandbox_command(osbc):
    # said as a usage error, but the exit status is 1 (cli_sandbox()
    # cannot tell its caller which kind of failure it printed)
    res = osbc.run("ls", "/")
    assert (res.rc, res.out, res.err) == (
        1, "", "osb: no sandbox: give -s ID or set OPEN_SANDBOX_ID (osb --help for usage)\n"), res.describe()


def test_no_command(osbc):
    res = osbc.run()
    assert res.rc == 2 and res.out == "" and res.err.startswith("usage: osb "), res.describe()


def test_unknown_option(osbc):
    res = osbc.run("--bogus", "list")
    assert res.rc == 2 and "unrecognized option" in res.err, res.describe()


def test_help(osbc):
    res = osbc.ok("--help")
    for cmd in ("create", "list", "info", "pause", "resume", "renew", "kill", "endpoint", "ls", "stat",
                "get", "put", "rm", "mkdir", "mv", "chmod", "search", "replace", "exec", "spawn",
                "status", "logs", "interrupt", "session", "code", "egress"):
        assert "\n  osb %s" % cmd in res.out, cmd


def test_bad_protocol(server):
    # a scheme in the domain would pick the protocol itself
    res = Osb(server, env={"OPEN_SANDBOX_DOMAIN": "%s:%d" % (server.host, server.port)}).fails(
        "--protocol", "ftp", "list")
    assert res.err == 'osb: protocol must be http or https, not "ftp"\n'


# ---------------------------------------------------------------- faults: idempotent calls

RETRIED_KINDS = ["reset", "reset_after", "500", "502", "503", "504"]


def test_faults_idempotent_calls_succeed(fsrv, workdir):
    s, sid, o = fsrv
    files = [os.urandom(200_000 + i * 1_000_003 % 900_000) for i in range(8)]
    s.set_faults(rate=0.2, kinds=RETRIED_KINDS, scope="execd")
    for i, data in enumerate(files):
        path = "%s/f/%d.bin" % (W, i)
        o.ok("put", local(workdir, "up", data), path)
        dst = os.path.join(workdir, "down")
        o.ok("get", path, dst)
        with open(dst, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == hashlib.sha256(data).hexdigest()
        assert o.ok("get", "--offset", "1000", "--length", "500", path, "-").out_bytes == data[1000:1500]
        assert o.ok("stat", path).lines()[2] == "size: %d" % len(data)
        assert "%d.bin" % i in o.ok("ls", W + "/f").lines()
        o.ok("mkdir", "-m", "750", "%s/d%d" % (W, i))
        o.ok("chmod", "700", path)
        assert len(o.ok("search", W + "/f", "*.bin").lines()) == i + 1
    s.clear_faults()
    assert injected(s) >= 10
    # the sandbox agrees with what osb said
    for i, data in enumerate(files):
        assert s.read_file(sid, "%s/f/%d.bin" % (W, i)) == data
        assert s.stat(sid, "%s/f/%d.bin" % (W, i))["mode"] == 700
        assert s.stat(sid, "%s/d%d" % (W, i))["mode"] == 750


def test_fault_500_without_a_known_cause_is_retried(fsrv):
    # execd's RUNTIME_ERROR text names the cause when there is one; an
    # unknown one ("injected fault") is taken as a hiccup and retried
    s, sid, o = fsrv
    s.write_file(sid, W + "/f", b"x")
    s.reset_stats()
    s.set_faults(next=1, kinds=["500"], path="/files/info")
    assert o.ok("stat", W + "/f").lines()[0] == "path: %s/f" % W
    assert sandbox_stats(s, sid)["GET /files/info"] == 2


def test_500_with_a_known_cause_is_not_retried(fsrv):
    s, sid, o = fsrv
    s.run(sid, "mkdir %s/d" % W)
    s.reset_stats()
    res = o.fails("rm", W + "/d")
    assert "HTTP 500 RUNTIME_ERROR" in res.err and "is a directory" in res.err, res.describe()
    assert sandbox_stats(s, sid)["DELETE /files"] == 1


def test_fault_delay_times_out_then_retries(fsrv):
    s, sid, o = fsrv
    s.write_file(sid, W + "/f", b"x")
    s.reset_stats()
    s.set_faults(next=1, kinds=["delay"], delay_ms=2500, path="/files/info")
    res = o.ok("--request-timeout", "1", "stat", W + "/f")
    assert res.lines()[0] == "path: %s/f" % W
    assert sandbox_stats(s, sid)["GET /files/info"] == 2


def test_fault_lifecycle_get_retried(fsrv):
    s, sid, o = fsrv
    s.set_faults(next=2, kinds=["503", "reset"], scope="lifecycle", path="^/v1/sandboxes/[^/]+$", method="GET")
    assert o.ok("info").lines()[0] == "id: " + sid
    assert injected(s) == 2


def test_faults_with_8_threads(fsrv):
    s, sid, o = fsrv
    s.set_faults(rate=0.1, kinds=RETRIED_KINDS, scope="execd", path="/files|/directories")
    run_threads(s, sid, rounds=3)
    assert injected(s) > 0


# ---------------------------------------------------------------- faults: no duplicate effects

@pytest.mark.parametrize("kind, sent", [("reset_after", 1), ("reset", 2)])
def test_mv_moves_once(fsrv, kind, sent):
    # reset_after: the move happened and its answer was lost; osb sees the
    # source gone and the destination there, and does not resend.
    # reset: nothing happened; osb sees the source still there and resends.
    s, sid, o = fsrv
    s.write_file(sid, W + "/src", b"payload\n")
    s.reset_stats()
    s.set_faults(next=1, kinds=[kind], path="/files/mv")
    o.ok("mv", W + "/src", W + "/dst")
    assert s.stat(sid, W + "/src") is None and s.read_file(sid, W + "/dst") == b"payload\n"
    assert sandbox_stats(s, sid)["POST /files/mv"] == sent


APPEND = "echo line >> %s/log" % W


@pytest.mark.parametrize("verb", ["exec", "spawn"])
def test_command_answer_lost_is_not_rerun(fsrv, verb):
    s, sid, o = fsrv
    s.reset_stats()
    s.set_faults(next=1, kinds=["reset_after"], path="/command$", method="POST")
    res = o.run(verb, "--", APPEND)
    # osb cannot know the outcome: it says so and fails...
    assert res.rc == (255 if verb == "exec" else 1) and res.out == "", res.describe()
    assert res.err.startswith("osb: %s: POST %s/command: " % (verb, s.execd_url(sid))), res.describe()
    assert "reset" in res.err, res.describe()
    # ...but never runs the command a second time
    wait_until(lambda: s.stat(sid, W + "/log"), 30, "the command's line")
    assert sandbox_stats(s, sid)["POST /command"] == 1
    assert s.read_file(sid, W + "/log") == b"line\n"
    code, out, _ = s.run(sid, "cat %s/log" % W)
    assert out == "line\n"


def test_command_reset_before_it_ran(fsrv):
    s, sid, o = fsrv
    s.reset_stats()
    s.set_faults(next=1, kinds=["reset"], path="/command$", method="POST")
    res = o.run("exec", "--", APPEND)
    assert res.rc == 255 and "reset" in res.err, res.describe()
    assert sandbox_stats(s, sid)["POST /command"] == 1
    assert s.stat(sid, W + "/log") is None


def test_replace_answer_lost_is_not_redone(fsrv):
    s, sid, o = fsrv
    s.write_file(sid, W + "/t", b"a")
    s.set_faults(next=1, kinds=["reset_after"], path="/files/replace")
    res = o.fails("replace", W + "/t", "a", "aa")
    assert "reset" in res.err, res.describe()
    assert s.read_file(sid, W + "/t") == b"aa"


def test_pause_answer_lost_checks_the_state(fsrv):
    s, sid, o = fsrv
    s.reset_stats()
    s.set_faults(next=1, kinds=["reset_after"], scope="lifecycle", path="/pause$")
    o.ok("pause")
    st, _, b = s.request("GET", "/v1/sandboxes/" + sid)
    assert b["status"]["state"] == "Paused"
    assert sandbox_stats(s, sid)["POST /v1/sandboxes/{sandboxId}/pause"] == 1


def test_kill_answer_lost_is_still_success(fsrv):
    s, sid, o = fsrv
    s.set_faults(next=1, kinds=["reset_after"], scope="lifecycle", method="DELETE")
    o.ok("kill")
    st, _, _ = s.request("GET", "/v1/sandboxes/" + sid)
    assert st == 404


def create_with_fault(fsrv, kind):
    """osb create under a @kind fault on POST /v1/sandboxes: its Result
    and the ids of the sandboxes that carry its label."""
    s, sid, o = fsrv
    run = uuid.uuid4().hex[:10]
    s.reset_stats()
    s.set_faults(next=1, kinds=[kind], scope="lifecycle", path="^/v1/sandboxes$", method="POST")
    res = o.fails("create", *IMG, "--metadata", "run=" + run)
    # never resent
    assert s.stats()["total"]["POST /v1/sandboxes"] == 1
    st, _, b = s.request("GET", "/v1/sandboxes?metadata=" + "run%3D" + run)
    assert st == 200, b
    return res, run, [i["id"] for i in b["items"]]


def test_create_reset_creates_nothing(fsrv):
    # the request died before it had any effect; osb cannot tell that
    # from a lost answer, so it neither resends nor claims success
    res, _, ids = create_with_fault(fsrv, "reset")
    assert res.err == ("osb: create: POST %s/v1/sandboxes: Recv failure: Connection reset by peer; "
                       "the sandbox may exist all the same (osb list shows it)\n" % fsrv[0].url)
    assert ids == []


def test_create_answer_lost_makes_one_sandbox(fsrv):
    res, run, ids = create_with_fault(fsrv, "reset_after")
    assert "the sandbox may exist all the same (osb list shows it)" in res.err, res.describe()
    # exactly one, never two, and the hint finds it
    assert len(ids) == 1
    assert [r.split("\t")[0] for r in fsrv[2].ok("list", "--metadata", "run=" + run).lines()] == ids


# ---------------------------------------------------------------- threads

def run_threads(server, sid, rounds=6, ca_file=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPEN_SANDBOX_", "OPENSANDBOX_"))}
    env.update(OPEN_SANDBOX_DOMAIN=server.url, OPEN_SANDBOX_API_KEY=server.api_key, OPEN_SANDBOX_ID=sid,
               OSB_TEST_ROUNDS=str(rounds))
    if ca_file:
        env["OSB_TEST_CA_FILE"] = str(ca_file)
    rc, out, err, _, secs, killed = spawn([str(TEST_THREADS)], env, timeout=300)
    report = "%s (%.1fs) exit %s\nstdout: %s\nstderr: %s" % (TEST_THREADS, secs, rc, out.decode(), err[-6000:])
    check_sanitizer(str(TEST_THREADS), err)
    assert not killed and rc == 0 and err == "", report
    assert out.decode().startswith("8 threads x %d rounds: " % rounds) and out.decode().endswith(
        " 0 mismatches\n"), report
    return out.decode()


def test_8_threads_share_one_client(server, sandbox, capsys):
    out = run_threads(server, sandbox)
    with capsys.disabled():
        print("\n  " + out.strip())
    # the threads cleaned up after themselves
    assert server.stat(sandbox, W + "/threads") is None


def test_8_threads_share_tls_sessions(make_server, tmp_path, capsys):
    """Over https, the 8 threads' connections resume TLS sessions they
    share, begun together as they are (the handshakes' code runs on all
    threads at once, checked under TSan)."""
    pki = make_ca(tmp_path)
    srv = make_server(extra_args=["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key")])
    sid = srv.create_sandbox()
    out = run_threads(srv, sid, rounds=2, ca_file=pki / "ca.pem")
    with capsys.disabled():
        print("\n  " + out.strip())
    m = re.search(r" (\d+) connections, (\d+) TLS handshakes \((\d+) full\),", out)
    assert m, out
    conns, hs, full = map(int, m.groups())
    assert conns >= 8 and hs == conns, out
    # one full handshake per host (lifecycle and execd) but those begun
    # before any session to resume
    assert full <= 2 + 7, out

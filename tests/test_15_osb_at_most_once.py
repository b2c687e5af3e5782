"""A call that must not run twice (a command, a move) is sent at most once,
even when its answer is lost on a kept-alive connection.

The server's reset_after fault performs the request, throws its answer
away and resets the connection. libcurl, seeing a *reused* connection die
before any answer, sends the request again by itself unless told not to;
libosb sends such calls over a connection of their own (client/http.c).
A plain `osb exec` opens a new connection to execd anyway, so these tests
use `osb --server-proxy`, where the endpoint lookup and the call go to the
same server and the call rides the lookup's connection, and a mount, whose
daemon keeps its connections. Each test runs on a server of its own, so no
fault rule leaks."""

import os
import subprocess

import pytest

from osbhelp import W, Osb, sandbox_stats
from osbtest import wait_until

APPEND = "echo x >> %s/count" % W


@pytest.fixture
def fsrv(make_server):
    """(server, sandbox id, Osb on it that reaches execd through the
    lifecycle server's proxy route)."""
    s = make_server(extra_args=["--fault-seed", "20261201"])
    sid = s.create_sandbox()
    return s, sid, Osb(s, sid)


def lose_answer(server, path, scope="execd"):
    """The next POST to a path matching @path is performed, its answer lost."""
    server.set_faults(next=1, kinds=["reset_after"], scope=scope, method="POST", path=path)


def commands_sent(server, sid):
    return sandbox_stats(server, sid).get("POST /command", 0)


def test_exec_whose_answer_is_lost_runs_once(fsrv):
    s, sid, o = fsrv
    lose_answer(s, "/proxy/44772/command$", scope="lifecycle")
    res = o.run("--server-proxy", "exec", "--", APPEND)
    assert s.read_file(sid, W + "/count") == b"x\n"
    assert commands_sent(s, sid) == 1
    # osb cannot know the outcome, and says so
    assert res.rc == 255 and res.out == "", res.describe()
    assert res.err.endswith("; the command may have run all the same\n"), res.describe()


def test_spawn_whose_answer_is_lost_starts_once(fsrv):
    s, sid, o = fsrv
    lose_answer(s, "/proxy/44772/command$", scope="lifecycle")
    res = o.run("--server-proxy", "spawn", "--", APPEND)
    # osb has returned: a second start, if any, was sent before
    assert commands_sent(s, sid) == 1
    wait_until(lambda: s.stat(sid, W + "/count"), 30, "the command's line")
    assert s.read_file(sid, W + "/count") == b"x\n"
    assert res.rc == 1 and res.out == "", res.describe()
    assert res.err.endswith("; the command may have started all the same\n"), res.describe()


def test_mv_whose_answer_is_lost_moves_once(fsrv):
    s, sid, o = fsrv
    s.write_file(sid, W + "/src", b"payload\n")
    lose_answer(s, "/proxy/44772/files/mv$", scope="lifecycle")
    o.ok("--server-proxy", "mv", W + "/src", W + "/dst")
    assert s.stat(sid, W + "/src") is None
    assert s.read_file(sid, W + "/dst") == b"payload\n"
    assert sandbox_stats(s, sid)["POST /files/mv"] == 1


def test_rename_through_a_mount_whose_answer_is_lost_succeeds(fsrv, make_mount):
    s, sid, _ = fsrv
    s.write_file(sid, W + "/src", b"payload\n")
    m = make_mount(sandbox_id=sid, srv=s, create=False)
    assert "src" in os.listdir(m.path)
    lose_answer(s, "/files/mv$")
    os.rename(m.p("src"), m.p("dst"))
    assert s.stat(sid, W + "/src") is None
    assert s.read_file(sid, W + "/dst") == b"payload\n"
    assert sandbox_stats(s, sid)["POST /files/mv"] == 1


def test_job_whose_start_answer_is_lost_runs_once(fsrv, make_mount):
    s, sid, _ = fsrv
    m = make_mount(sandbox_id=sid, srv=s, create=False)
    os.listdir(m.path)
    before = commands_sent(s, sid)
    lose_answer(s, "/command$")
    with open(m.p(".osb", "run"), "w") as f:
        f.write(APPEND + "\n")
    # the start is sent while the write is closed. Its wrapper claims the
    # job in the record first, so a copy sent again (by libcurl over the
    # reused connection, or by the daemon) finds the claim and runs nothing
    sent = commands_sent(s, sid) - before
    assert 1 <= sent <= 5, sent
    # the daemon could not confirm the start: it takes the job as started
    # and learns its end from the sandbox
    r = subprocess.run(["cat", m.p(".osb", "jobs", "latest", "wait")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert (r.returncode, r.stdout) == (0, b"exited 0\n"), (r, m.log())
    assert s.read_file(sid, W + "/count") == b"x\n"

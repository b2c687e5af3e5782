"""What a job costs in requests, and that its start runs the command once.

A job whose command can travel in its wrapper is started as one
foreground command whose stream tells its start and its end: a run and a
wait of it send that one request, no upload of its record and no listing
of the jobs. Its start may be resent (the wrapper claims the job in its
record first), and a start whose answer is lost still runs it once."""

import os

from jobhelp import osb, read, start, start_losing_answers, start_named, wait
from osbtest import execd_routes


def quiet_mount(make_mount):
    """A mount whose jobs are loaded (the first look at jobs/ lists them)."""
    m = make_mount()
    os.listdir(osb(m, "jobs"))
    return m


def job_routes(server, m):
    return {r: n for r, n in execd_routes(server, m.sandbox_id).items()
            if r != "GET /ping"}


def test_a_run_and_wait_of_true_is_one_command(make_mount, server):
    m = quiet_mount(make_mount)
    # a first job: the connection is open and pooled afterwards
    assert wait(m, start(m, "true")) == "exited 0"
    server.reset_stats()
    jid = start(m, "true")
    assert wait(m, jid) == "exited 0"
    got = job_routes(server, m)
    print("run+wait:", got)
    assert got == {"POST /command": 1}, got


def test_a_named_job_start_and_wait_is_one_command(make_mount, server):
    m = quiet_mount(make_mount)
    os.mkdir(osb(m, "jobs", "quick"))
    server.reset_stats()
    with open(osb(m, "jobs", "quick", "cmd"), "w") as f:
        f.write("echo hi; exit 3")
    assert wait(m, "quick") == "exited 3"
    got = job_routes(server, m)
    print("named start+wait:", got)
    assert got == {"POST /command": 1}, got
    # what the stream said of the output holds: it reads whole
    assert read(osb(m, "jobs", "quick", "stdout")) == "hi\n"


def test_a_command_that_cannot_travel_inline_is_uploaded(make_mount, server):
    m = quiet_mount(make_mount)
    server.reset_stats()
    # longer than the wrapper carries (64 KiB): uploaded as the record
    cmd = "echo big > big.out\n" + "#" * 70000 + "\n"
    jid = start(m, cmd)
    assert wait(m, jid) == "exited 0"
    got = job_routes(server, m)
    assert got.get("POST /files/upload", 0) == 1, got
    assert read(osb(m, "jobs", jid, "cmd")) == cmd
    with open(m.p("big.out")) as f:
        assert f.read() == "big\n"


def test_a_start_whose_answer_is_lost_runs_once(make_mount, server):
    m = quiet_mount(make_mount)
    start_losing_answers(server, m, ["reset_after", "reset", "502", "500"])


def test_a_named_start_whose_answer_is_lost_runs_once(make_mount, server):
    m = quiet_mount(make_mount)
    for kind in ["reset_after", "reset"]:
        server.set_faults(next=1, kinds=[kind], method="POST", path="/command$")
        try:
            start_named(m, "n-" + kind, "echo %s >> named.log" % kind)
        finally:
            server.clear_faults()
        assert wait(m, "n-" + kind) == "exited 0", kind
    with open(m.p("named.log")) as f:
        assert f.read().splitlines() == ["reset_after", "reset"]


def test_the_claim_outlives_the_job(make_mount, server):
    # the claim stays in the record: a copy of the start that arrives
    # after the job ended finds it and runs nothing
    m = quiet_mount(make_mount)
    jid = start(m, "echo once >> late.log")
    assert wait(m, jid) == "exited 0"
    st, _, body = server.execd(m.sandbox_id, "POST", "/command",
                               body={"command": "ls /tmp/.osbfs/jobs/%s" % jid}, raw=True)
    assert st == 200 and b"claim" in body, body
    with open(m.p("late.log")) as f:
        assert f.read() == "once\n"


def test_the_record_holds_the_command_as_written(make_mount, server):
    m = quiet_mount(make_mount)
    cmd = "printf '%s\\n' \"it's $((1+1))\" > q.out\n# '\\'' EOF \\ %s %1$s\n"
    jid = start(m, cmd)
    assert wait(m, jid) == "exited 0"
    st, _, body = server.execd(m.sandbox_id, "GET", "/files/download",
                               {"path": "/tmp/.osbfs/jobs/%s/cmd" % jid}, raw=True)
    assert st == 200 and body.decode() == cmd, body
    with open(m.p("q.out")) as f:
        assert f.read() == "it's 2\n"

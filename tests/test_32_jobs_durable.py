"""Jobs outlive the mount that started them: their records and output
live in the sandbox, so a new mount (new cache dir, as on another
machine) lists them, and another mount at the same time sees them."""

import errno
import json
import os

from jobhelp import (expect_errno, job_file, kill_quietly, osb, read, read_bytes, start,
                     start_losing_answers, start_named, status, wait, write)
from osbtest import wait_until


def test_a_new_mount_lists_the_jobs_with_status_and_output(make_mount, server, make_sandbox):
    sid = make_sandbox()
    m1 = make_mount(sandbox_id=sid)
    done = start(m1, "echo out; echo err >&2; exit 3")
    killed = start(m1, "sleep 60")
    os.mkdir(osb(m1, "jobs", "later"))
    long = start(m1, "sleep 60")
    assert wait(m1, done) == "exited 3"
    write(osb(m1, "jobs", killed, "ctl"), "kill")
    assert wait(m1, killed) == "killed SIGTERM"
    m1.stop()

    m2 = make_mount(sandbox_id=sid)
    assert m2.cache_dir != m1.cache_dir
    assert os.listdir(osb(m2, "jobs")) == [done, killed, "later", long, "latest"]
    assert status(m2, done) == "exited 3"
    assert job_file(m2, done, "exit_code") == "3\n"
    assert job_file(m2, done, "stdout") == "out\n"
    assert job_file(m2, done, "stderr") == "err\n"
    assert job_file(m2, done, "cmd") == "echo out; echo err >&2; exit 3"
    assert status(m2, killed) == "killed SIGTERM"
    assert status(m2, "later") == "created"
    assert status(m2, long) == "running"
    # the new mount controls the old mount's job
    write(osb(m2, "jobs", long, "ctl"), "kill")
    assert wait(m2, long) == "killed SIGTERM"


def test_a_job_keeps_running_after_unmount(make_mount, server, make_sandbox):
    sid = make_sandbox()
    m1 = make_mount(sandbox_id=sid)
    jid = start(m1, "sleep 3; echo made > result.txt; echo finished")
    m1.stop()
    m2 = make_mount(sandbox_id=sid)
    assert wait(m2, jid) == "exited 0"
    assert job_file(m2, jid, "stdout") == "finished\n"
    assert read(m2.p("result.txt")) == "made\n"


def test_the_record_lives_in_the_sandbox(make_mount, server):
    m = make_mount()
    jid = start(m, "echo hi; exit 5")
    wait(m, jid)
    names = set(os.listdir(osb(m, "jobs", jid)))
    assert "stdout" in names
    rec = "/tmp/.osbfs/jobs/" + jid
    assert server.read_file(m.sandbox_id, rec + "/cmd") == b"echo hi; exit 5"
    assert server.read_file(m.sandbox_id, rec + "/stdout") == b"hi\n"
    assert server.read_file(m.sandbox_id, rec + "/cwd") == b"/workspace"
    assert server.stat(m.sandbox_id, rec + "/exit.5")["type"] == "file"
    # the wrapper removes live/ID just after the exit marker the mount saw
    wait_until(lambda: server.stat(m.sandbox_id, "/tmp/.osbfs/live/" + jid) is None, 10,
               "the wrapper to remove the job's live/ directory")


def test_two_mounts_at_once_see_each_others_jobs(make_mount, server, make_sandbox):
    sid = make_sandbox()
    m1 = make_mount(sandbox_id=sid)
    m2 = make_mount(sandbox_id=sid)
    jid = start(m1, "sleep 2; echo from m1")
    # m2 finds it by name at once, and follows it to its end
    assert status(m2, jid) == "running"
    assert wait(m2, jid) == "exited 0"
    assert job_file(m2, jid, "stdout") == "from m1\n"
    start_named(m2, "named", "sleep 60")
    assert status(m1, "named") == "running"
    write(osb(m1, "jobs", "named", "ctl"), "kill")
    assert wait(m2, "named") == "killed SIGTERM"
    expect_errno(errno.EEXIST, os.mkdir, osb(m1, "jobs", "named"))
    # a job removed by one mount leaves the other's listing
    os.rmdir(osb(m2, "jobs", jid))
    wait_until(lambda: jid not in os.listdir(osb(m1, "jobs")), 30,
               "the removed job to leave the other mount's listing", step=0.5)


def test_a_job_whose_process_vanished_is_an_error(make_server, make_mount, make_sandbox):
    srv = make_server()
    sid = make_sandbox(srv)
    m = make_mount(sandbox_id=sid, srv=srv)
    jid = start(m, "sleep 300")
    try:
        assert status(m, jid) == "running"
        # a restart of the server is a restart of the sandbox: every
        # process in it is gone, and execd forgets its commands
        srv.restart()
        line = wait(m, jid, timeout=90)
        assert line.startswith("error: the job's process vanished"), line
        assert job_file(m, jid, "exit_code") == ""
        rec = srv.read_file(sid, "/tmp/.osbfs/jobs/%s/error" % jid).decode()
        assert rec.startswith("the job's process vanished")
        assert srv.stat(sid, "/tmp/.osbfs/live/" + jid) is None
    finally:
        kill_quietly(m, jid)


def test_a_start_that_failed_on_the_way_is_sent_again_and_runs_once(server, mount):
    # the soak found it: a start whose POST /command met a 5xx or a reset
    # was taken as started and ended "vanished" 12 s later, never run.
    # The wrapper claims its job, so the start is sent again; a second
    # copy of it (the first answer lost, reset_after) runs nothing.
    start_losing_answers(server, mount, ["502", "reset", "reset_after", "500"],
                         faults=lambda kind: 2 if kind != "reset_after" else 1)


def test_a_bad_record_is_skipped_and_hides_no_other(make_mount, server, make_sandbox):
    # anything in the sandbox may write /tmp/.osbfs: a record whose name is
    # no job name (too long, a reserved name, a byte outside the names'
    # set) is left out, named once in the log, and hides no other job
    sid = make_sandbox()
    m1 = make_mount(sandbox_id=sid)
    done = start(m1, "echo out")
    assert wait(m1, done) == "exited 0"
    m1.stop()
    long = "a" * 72
    bad = [long, "b" * 65, "latest", "sp ace", "-dash"]
    code, _, err = server.run(sid, "".join(
        "mkdir -p '/tmp/.osbfs/jobs/%s' && echo 'echo hi' > '/tmp/.osbfs/jobs/%s/cmd' && "
        % (n, n) for n in bad) +
        # the wrappers' live/ too, which the monitor lists every round
        "mkdir -p /tmp/.osbfs/live/%s && touch /tmp/.osbfs/live/%s/alive" % (long, long))
    assert code == 0, err

    m2 = make_mount(sandbox_id=sid)
    ok = "c" * 64  # the longest name that is one
    start_named(m2, ok, "sleep 2.5")
    assert os.listdir(osb(m2, "jobs")) == [done, ok, "latest"]
    assert os.readlink(osb(m2, "jobs", "latest")) == ok
    assert status(m2, done) == "exited 0"
    # while it runs, the monitor lists live/ round after round, and the
    # listing of jobs/ is read again after it
    assert wait(m2, ok) == "exited 0"
    assert os.listdir(osb(m2, "jobs")) == [done, ok, "latest"]
    expect_errno(errno.ENOENT, os.stat, osb(m2, "jobs", long))
    log = m2.log()
    for path in ["jobs/" + n for n in bad] + ["live/" + long]:
        lines = [l for l in log.splitlines() if '/tmp/.osbfs/%s"' % path in l]
        assert len(lines) == 1, (path, lines)
        assert "no job's record" in lines[0], lines[0]
    assert "cannot read the jobs" not in log and "cannot follow" not in log


def test_the_error_a_record_holds_is_shown_escaped(make_mount, server, make_sandbox):
    # a record's error file is the sandbox's to write: status, wait and
    # info show its text escaped, as the log would (no escape sequence
    # reaches whoever cats them to a terminal), and info stays JSON
    sid = make_sandbox()
    code, _, err = server.run(sid, "mkdir -p /tmp/.osbfs/jobs/odd && cd /tmp/.osbfs/jobs/odd && "
                              "echo 'true' > cmd && printf 'bad \\377 \\302\\233\\033[31m\\n' > error")
    assert code == 0, err
    m = make_mount(sandbox_id=sid)
    raw = read_bytes(osb(m, "jobs", "odd", "info"))
    for b in (b"\xff", b"\xc2\x9b", b"\x1b"):
        assert b not in raw, raw
    shown = "bad \\xff \\xc2\\x9b\\x1b[31m"
    assert json.loads(raw.decode())["error"] == shown
    assert status(m, "odd") == "error: " + shown
    assert wait(m, "odd") == "error: " + shown

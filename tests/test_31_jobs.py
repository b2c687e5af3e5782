"""Jobs through the control tree: run, jobs/ID/{cmd,status,exit_code,
stdout,stderr,wait,ctl,info}, named jobs, signals, and every bad use."""

import errno
import json
import os
import re
import signal
import subprocess
import threading
import time

from jobhelp import (expect_errno, info, job_file, kill_quietly, last_error, last_log_line, osb, read, read_bytes,
                     start, start_named, status, wait, wait_all, write)
from osbtest import execd_routes, wait_until

ID_RE = re.compile(r"\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{6}")
JOB_FILES = {"cmd", "status", "exit_code", "stdout", "stderr", "ctl", "info"}  # and wait, unlisted


def record(server, m, jid, name):
    """A file of the job's record in the sandbox."""
    return server.read_file(m.sandbox_id, "/tmp/.osbfs/jobs/%s/%s" % (jid, name))


# ---- one job ----

def test_job_prints_to_both_streams_and_exits_3(mount, server):
    jid = start(mount, "echo out; echo err >&2; exit 3")
    assert ID_RE.fullmatch(jid)
    assert set(os.listdir(osb(mount, "jobs", jid))) == JOB_FILES
    assert wait(mount, jid) == "exited 3"
    assert status(mount, jid) == "exited 3"
    assert job_file(mount, jid, "exit_code") == "3\n"
    assert job_file(mount, jid, "stdout") == "out\n"
    assert job_file(mount, jid, "stderr") == "err\n"
    assert os.stat(osb(mount, "jobs", jid, "stdout")).st_size == 4
    # the record and the output live in the sandbox
    assert record(server, mount, jid, "stdout") == b"out\n"
    assert record(server, mount, jid, "stderr") == b"err\n"
    assert record(server, mount, jid, "cmd") == b"echo out; echo err >&2; exit 3"


def test_job_info_is_json(mount):
    jid = start(mount, "exit 0")
    wait(mount, jid)
    i = json.loads(job_file(mount, jid, "info"))
    assert i["id"] == jid and i["cmd"] == "exit 0" and i["cwd"] == "/workspace"
    assert i["exit_code"] == 0 and i["status"] == "exited 0" and i["error"] is None
    assert i["started_at"] <= i["finished_at"]
    assert i["started_at"][:16].replace("-", "").replace(":", "") == jid[:13]


def test_job_runs_in_the_mounted_directory(mount):
    jid = start(mount, "pwd; echo $OSBFS_JOB")
    wait(mount, jid)
    assert job_file(mount, jid, "stdout") == "/workspace\n%s\n" % jid


def test_exit_code_is_empty_while_running(mount):
    jid = start(mount, "sleep 60")
    try:
        assert status(mount, jid) == "running"
        assert job_file(mount, jid, "exit_code") == ""
        assert json.loads(job_file(mount, jid, "info"))["exit_code"] is None
    finally:
        kill_quietly(mount, jid)


def test_output_reads_at_any_offset(mount):
    jid = start(mount, "python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 400)'")
    assert wait(mount, jid) == "exited 0"
    want = bytes(range(256)) * 400
    path = osb(mount, "jobs", jid, "stdout")
    assert os.stat(path).st_size == len(want)
    fd = os.open(path, os.O_RDONLY)
    try:
        for off, n in ((0, 10), (255, 300), (50000, 60000), (len(want) - 5, 100)):
            assert os.pread(fd, n, off) == want[off:off + n]
        assert os.pread(fd, 100, len(want)) == b""
        assert os.pread(fd, 100, len(want) + 1000) == b""
    finally:
        os.close(fd)
    assert read_bytes(path) == want


def test_output_size_is_known_when_a_listing_sees_the_end_without_it(mount):
    """The wrapper writes the exit marker into live/ID and removes the
    directory; a listing that walks it meanwhile can find the marker with
    the links to the output already gone. Here the job makes that state
    itself (it drops the links, writes, and marks its end in live/ while
    it still runs): the output's size comes from the record."""
    live = "/tmp/.osbfs/live/$OSBFS_JOB"
    jid = start(mount, "rm -f %s/stdout %s/stderr; "
                       "python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 400)'; "
                       "echo oops >&2; : >%s/exit.0; sleep 2" % (live, live, live))
    assert wait(mount, jid) == "exited 0"
    path = osb(mount, "jobs", jid, "stdout")
    assert os.stat(path).st_size == 102400
    assert read_bytes(path) == bytes(range(256)) * 400
    assert os.stat(osb(mount, "jobs", jid, "stderr")).st_size == 5


def test_follow_stdout_of_a_20s_job_while_two_readers_wait(mount):
    jid = start(mount, "for i in $(seq 1 20); do echo line $i; sleep 1; done; echo err >&2")
    results = {}

    def waiter(k):
        fd = os.open(osb(mount, "jobs", jid, "wait"), os.O_RDONLY)
        try:
            results[k] = (os.read(fd, 100).decode(), time.monotonic())
        finally:
            os.close(fd)

    threads = [threading.Thread(target=waiter, args=(k,), daemon=True) for k in (1, 2)]
    for t in threads:
        t.start()
    tail = subprocess.Popen(["tail", "-f", osb(mount, "jobs", jid, "stdout")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # follow the growing file as tail -f does: watch the size, read
        # what was added
        t0 = time.monotonic()
        seen, got, pos = [], b"", 0
        path = osb(mount, "jobs", jid, "stdout")
        fd = os.open(path, os.O_RDONLY)

        def follow():
            """Reads what was added; true once the job has ended."""
            nonlocal got, pos
            size = os.fstat(fd).st_size
            assert size >= pos, "the size went down: %d < %d" % (size, pos)
            if size > pos:
                data = os.pread(fd, size - pos, pos)
                pos += len(data)
                got += data
                seen.append((time.monotonic() - t0, got.count(b"\n")))
            return status(mount, jid) != "running"

        try:
            wait_until(follow, 60, "the job to end", step=0.25)
        finally:
            os.close(fd)
        for t in threads:
            t.join(60)
        assert results[1][0] == results[2][0] == "exited 0\n"
        ended = max(results[1][1], results[2][1]) - t0
        # lines arrived while the job ran, not all at its end
        assert any(n >= 3 for when, n in seen if when < ended - 10), seen
        assert any(10 <= n < 20 for _, n in seen), seen
        assert ended >= 18
    finally:
        time.sleep(1.5)  # tail -f checks once a second
        tail.send_signal(signal.SIGTERM)
        out, err = tail.communicate(10)
    assert out.decode() == "".join("line %d\n" % i for i in range(1, 21))
    assert b"truncated" not in err
    assert job_file(mount, jid, "stderr") == "err\n"


def test_wait_answers_many_readers_of_many_jobs(mount):
    jids = [start(mount, "sleep %d; exit %d" % (1 + i % 3, i)) for i in range(8)]
    # four readers per job, all blocked at once
    done = wait_all(mount, jids * 4)
    for i, jid in enumerate(jids):
        assert done[jid] == "exited %d" % i


def test_ctrl_c_interrupts_a_wait_read_not_the_job(mount):
    jid = start(mount, "sleep 60")
    try:
        cat = subprocess.Popen(["cat", osb(mount, "jobs", jid, "wait")])
        time.sleep(0.5)
        assert cat.poll() is None
        t0 = time.monotonic()
        cat.send_signal(signal.SIGINT)
        assert cat.wait(10) == -signal.SIGINT
        assert time.monotonic() - t0 < 5
        assert status(mount, jid) == "running"
    finally:
        kill_quietly(mount, jid)


def test_wait_all_blocks_until_every_job_running_at_its_open_ends(make_mount):
    m = make_mount()
    assert read(osb(m, "jobs", "wait-all")) == ""  # none runs: at once
    os.mkdir(osb(m, "jobs", "named"))  # made, no command: not waited for
    a = start(m, "sleep 1; exit 2")
    b = start(m, "sleep 3")
    t0 = time.monotonic()
    with open(osb(m, "jobs", "wait-all")) as f:
        later = start(m, "sleep 30")  # started after the open: not waited for
        try:
            out = f.read()
        finally:
            kill_quietly(m, later)
    assert time.monotonic() - t0 >= 2, out
    assert sorted(out.splitlines()) == sorted(["%s exited 2" % a, "%s exited 0" % b]), out
    assert status(m, b) == "exited 0"
    # not listed, as a job's wait is not: a walker never blocks on it
    assert "wait-all" not in os.listdir(osb(m, "jobs"))
    expect_errno(errno.EEXIST, os.mkdir, osb(m, "jobs", "wait-all"))


def test_ctrl_c_interrupts_a_wait_all_read_not_the_jobs(make_mount):
    m = make_mount()
    jid = start(m, "sleep 60")
    try:
        cat = subprocess.Popen(["cat", osb(m, "jobs", "wait-all")])
        time.sleep(0.5)
        assert cat.poll() is None
        cat.send_signal(signal.SIGINT)
        assert cat.wait(10) == -signal.SIGINT
        assert status(m, jid) == "running"
    finally:
        kill_quietly(m, jid)


# ---- signals ----

def test_kill_stops_a_job_with_sigterm(mount):
    jid = start(mount, "sleep 60")
    write(osb(mount, "jobs", jid, "ctl"), "kill\n")
    assert wait(mount, jid) == "killed SIGTERM"
    assert job_file(mount, jid, "exit_code") == "143\n"


def test_kill_follows_up_with_sigkill(mount):
    jid = start(mount, "trap '' TERM; sleep 60 & wait; sleep 60")
    time.sleep(0.5)
    t0 = time.monotonic()
    write(osb(mount, "jobs", jid, "ctl"), "kill")
    assert wait(mount, jid) == "killed SIGKILL"
    assert 4 <= time.monotonic() - t0 < 30


def test_signal_by_name_reaches_the_job(mount):
    jid = start(mount, "trap 'echo got INT; exit 7' INT; sleep 60 & wait")
    time.sleep(0.5)
    write(osb(mount, "jobs", jid, "ctl"), "signal INT")
    assert wait(mount, jid) == "exited 7"
    assert job_file(mount, jid, "stdout") == "got INT\n"
    for name, shown in (("SIGUSR1", "killed SIGUSR1"), ("9", "killed SIGKILL"),
                        ("hup", "killed SIGHUP")):
        jid = start(mount, "sleep 60")
        write(osb(mount, "jobs", jid, "ctl"), "signal %s\n" % name)
        assert wait(mount, jid) == shown


def test_signal_reaches_the_whole_process_group(mount, server):
    jid = start(mount, "sleep 60 & sleep 61 & wait")
    write(osb(mount, "jobs", jid, "ctl"), "signal TERM")
    assert wait(mount, jid) == "killed SIGTERM"


def test_kill_of_a_finished_job_is_esrch(mount):
    jid = start(mount, "true")
    wait(mount, jid)
    expect_errno(errno.ESRCH, write, osb(mount, "jobs", jid, "ctl"), "kill")
    assert "not running" in last_error(mount)
    expect_errno(errno.ESRCH, write, osb(mount, "jobs", jid, "ctl"), "signal TERM")


def test_bad_job_ctl_writes_are_einval(mount):
    jid = start(mount, "sleep 60")
    try:
        for bad in ("explode", "signal", "signal FOO", "signal 0", "signal 99", "kill now",
                    "signal TERM INT", "forget now", "\n", b"\x00kill"):
            expect_errno(errno.EINVAL, write, osb(mount, "jobs", jid, "ctl"), bad)
        assert status(mount, jid) == "running"
        assert "ctl" in last_error(mount)
    finally:
        kill_quietly(mount, jid)


# ---- many jobs ----

def test_fifty_jobs_started_at_once_all_finish(mount):
    ids = [None] * 50

    def one(i):
        ids[i] = start(mount, "echo job %d; echo err %d >&2; exit %d" % (i, i, i % 7))

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(ids) and len(set(ids)) == 50
    done = wait_all(mount, ids)
    for i, jid in enumerate(ids):
        assert done[jid] == "exited %d" % (i % 7)
        assert job_file(mount, jid, "stdout") == "job %d\n" % i
        assert job_file(mount, jid, "stderr") == "err %d\n" % i
    assert info(mount)["jobs"] == {"running": 0, "total": 50}


def test_jobs_are_listed_oldest_first_and_latest_is_the_newest(mount):
    ids = [start(mount, "true") for _ in range(4)]
    names = os.listdir(osb(mount, "jobs"))
    assert names == ids + ["latest"]
    assert sorted(ids) == ids
    assert os.readlink(osb(mount, "jobs", "latest")) == ids[-1]
    assert read(osb(mount, "jobs", "latest", "cmd")) == "true"


def test_run_read_without_a_write_gives_nothing(mount):
    with open(osb(mount, "run")) as f:
        assert f.read() == ""
    assert os.listdir(osb(mount, "jobs")) == []


def test_run_started_by_close(mount):
    with open(osb(mount, "run"), "w") as f:
        f.write("echo closed\n")
    jid = os.readlink(osb(mount, "jobs", "latest"))
    assert wait(mount, jid) == "exited 0"
    assert job_file(mount, jid, "stdout") == "closed\n"


# ---- named jobs ----

def test_named_job_starts_when_cmd_is_closed(mount, tmp_path):
    os.mkdir(osb(mount, "jobs", "build"))
    assert status(mount, "build") == "created"
    assert job_file(mount, "build", "exit_code") == ""
    assert job_file(mount, "build", "cmd") == ""
    script = tmp_path / "script.sh"
    script.write_text("".join("echo step %d\n" % i for i in range(20000)))
    # cat writes it in several pieces; the job starts at the close
    subprocess.run("cat %s > %s" % (script, osb(mount, "jobs", "build", "cmd")), shell=True,
                   check=True)
    assert wait(mount, "build") == "exited 0"
    assert job_file(mount, "build", "stdout") == script.read_text().replace("echo ", "")
    assert job_file(mount, "build", "cmd") == script.read_text()


def test_mkdir_of_a_taken_name_is_eexist(mount):
    start_named(mount, "twice", "true")
    expect_errno(errno.EEXIST, os.mkdir, osb(mount, "jobs", "twice"))
    expect_errno(errno.EEXIST, os.mkdir, osb(mount, "jobs", "latest"))


def test_mkdir_of_a_bad_name_is_einval(mount):
    for bad in ("a b", ".hidden", "-x", "x" * 65, "caf\u00e9", "a$b", "a:b"):
        expect_errno(errno.EINVAL, os.mkdir, osb(mount, "jobs", bad))
    assert "job name" in last_error(mount)
    os.mkdir(osb(mount, "jobs", "x" * 64))


def test_cmd_of_a_started_job_is_read_only(mount):
    start_named(mount, "once", "echo once")
    expect_errno(errno.EACCES, write, osb(mount, "jobs", "once", "cmd"), "echo twice")
    jid = start(mount, "true")
    expect_errno(errno.EACCES, write, osb(mount, "jobs", jid, "cmd"), "echo twice")
    assert wait(mount, "once") == "exited 0"
    assert job_file(mount, "once", "stdout") == "once\n"


def test_a_name_used_again_says_why_and_how_to_free_it(mount):
    start_named(mount, "reused", "true")
    assert wait(mount, "reused") == "exited 0"
    os.makedirs(osb(mount, "jobs", "reused"), exist_ok=True)  # mkdir -p: no error
    expect_errno(errno.EACCES, write, osb(mount, "jobs", "reused", "cmd"), "echo again")
    msg = ("jobs/reused/cmd: the job has a command already (status: exited 0); a job runs "
           "one command: name a new job, or forget this one first "
           "(echo forget > .osb/jobs/reused/ctl)")
    assert last_error(mount) == msg
    assert last_log_line(mount).endswith(msg)
    # as it says
    write(osb(mount, "jobs", "reused", "ctl"), "forget")
    start_named(mount, "reused", "echo again")
    assert wait(mount, "reused") == "exited 0"
    assert job_file(mount, "reused", "stdout") == "again\n"


def test_wait_on_a_named_job_blocks_until_it_runs_and_ends(mount):
    os.mkdir(osb(mount, "jobs", "later"))
    out = {}
    t = threading.Thread(target=lambda: out.update(s=job_file(mount, "later", "wait")),
                         daemon=True)
    t.start()
    time.sleep(1)
    assert t.is_alive()
    write(osb(mount, "jobs", "later", "cmd"), "exit 4")
    t.join(60)
    assert out["s"] == "exited 4\n"


# ---- rmdir ----

def test_rmdir_forgets_a_finished_job_and_its_record(mount, server):
    jid = start(mount, "echo bye")
    wait(mount, jid)
    os.rmdir(osb(mount, "jobs", jid))
    assert jid not in os.listdir(osb(mount, "jobs"))
    assert server.stat(mount.sandbox_id, "/tmp/.osbfs/jobs/" + jid) is None
    expect_errno(errno.ENOENT, os.rmdir, osb(mount, "jobs", jid))


def test_rmdir_of_a_running_job_is_ebusy(mount):
    jid = start(mount, "sleep 60")
    try:
        expect_errno(errno.EBUSY, os.rmdir, osb(mount, "jobs", jid))
        assert "running" in last_error(mount)
    finally:
        kill_quietly(mount, jid)
    wait(mount, jid)
    os.rmdir(osb(mount, "jobs", jid))


def test_forget_in_ctl_removes_a_finished_job_and_its_record_in_one_request(mount, server):
    jid = start(mount, "echo bye")
    wait(mount, jid)
    server.reset_stats()
    write(osb(mount, "jobs", jid, "ctl"), "forget\n")
    assert execd_routes(server, mount.sandbox_id) == {"DELETE /directories": 1}
    assert jid not in os.listdir(osb(mount, "jobs"))
    assert server.stat(mount.sandbox_id, "/tmp/.osbfs/jobs/" + jid) is None
    expect_errno(errno.ENOENT, os.stat, osb(mount, "jobs", jid))
    # a named job that never ran goes too
    os.mkdir(osb(mount, "jobs", "never"))
    write(osb(mount, "jobs", "never", "ctl"), "forget")
    expect_errno(errno.ENOENT, os.stat, osb(mount, "jobs", "never"))


def test_forget_of_a_running_job_is_ebusy_and_says_to_kill_it_first(mount):
    jid = start(mount, "sleep 60")
    try:
        expect_errno(errno.EBUSY, write, osb(mount, "jobs", jid, "ctl"), "forget")
        assert last_error(mount) == (
            "jobs/%s/ctl: forget: the job is running: kill it first "
            "(echo kill > .osb/jobs/%s/ctl), then forget it" % (jid, jid))
        assert status(mount, jid) == "running"
    finally:
        kill_quietly(mount, jid)
    wait(mount, jid)
    write(osb(mount, "jobs", jid, "ctl"), "forget")
    assert jid not in os.listdir(osb(mount, "jobs"))


def test_rmdir_of_a_named_job_without_command(mount):
    os.mkdir(osb(mount, "jobs", "never"))
    os.rmdir(osb(mount, "jobs", "never"))
    os.mkdir(osb(mount, "jobs", "never"))


# ---- bad uses ----

def test_an_unknown_job_is_enoent(mount):
    expect_errno(errno.ENOENT, read, osb(mount, "jobs", "nope", "status"))
    expect_errno(errno.ENOENT, read, osb(mount, "jobs", "20200101T000000.000Z-000000", "wait"))
    expect_errno(errno.ENOENT, os.rmdir, osb(mount, "jobs", "nope"))
    expect_errno(errno.ENOENT, os.readlink, osb(mount, "jobs", "latest"))


def test_a_one_mib_command_runs(mount, server):
    cmd = ": " + "x" * (1 << 20) + "\necho ok\n"
    jid = start(mount, cmd)
    assert wait(mount, jid) == "exited 0"
    assert job_file(mount, jid, "stdout") == "ok\n"
    assert record(server, mount, jid, "cmd") == cmd.encode()
    assert read(osb(mount, "jobs", jid, "cmd")) == cmd


def test_an_empty_command_is_einval(mount):
    expect_errno(errno.EINVAL, write, osb(mount, "run"), "\n")
    assert "empty" in last_error(mount)
    expect_errno(errno.EINVAL, write, osb(mount, "run"), "   \n\t\n")
    # closing without writing starts nothing and is no error
    os.close(os.open(osb(mount, "run"), os.O_WRONLY | os.O_TRUNC))
    assert info(mount)["jobs"]["total"] == 0


def test_a_binary_command_is_einval(mount):
    expect_errno(errno.EINVAL, write, osb(mount, "run"), b"echo \x00\x01\x02")
    assert "binary" in last_error(mount)
    expect_errno(errno.EINVAL, write, osb(mount, "run"), b"echo \xff\xfe\n")
    os.mkdir(osb(mount, "jobs", "bin"))
    expect_errno(errno.EINVAL, write, osb(mount, "jobs", "bin", "cmd"), b"\x7fELF\x00\x00")
    assert status(mount, "bin") == "created"
    assert info(mount)["jobs"]["total"] == 1


def test_a_utf8_command_cut_between_writes_runs(mount):
    cmd = "echo 'caf\u00e9 \u2603'\n".encode()
    cut = cmd.index(b"\xc3") + 1
    fd = os.open(osb(mount, "run"), os.O_RDWR)
    try:
        os.write(fd, cmd[:cut])
        os.write(fd, cmd[cut:])
        jid = os.read(fd, 100).decode().strip()
    finally:
        os.close(fd)
    assert wait(mount, jid) == "exited 0"
    assert job_file(mount, jid, "stdout") == "caf\u00e9 \u2603\n"


def test_a_command_over_16_mib_is_efbig(mount):
    fd = os.open(osb(mount, "run"), os.O_WRONLY | os.O_TRUNC)
    try:
        chunk = b"#" * (1 << 20)
        for _ in range(16):
            os.write(fd, chunk)
        expect_errno(errno.EFBIG, os.write, fd, b"more\n")
    finally:
        expect_errno(errno.EFBIG, os.close, fd)
    assert "16777216" in last_error(mount)
    assert info(mount)["jobs"]["total"] == 0


def test_writes_after_the_start_on_the_same_file_are_ebusy(mount):
    fd = os.open(osb(mount, "run"), os.O_RDWR)
    try:
        os.write(fd, b"true\n")
        jid = os.read(fd, 100).decode().strip()
        expect_errno(errno.EBUSY, os.write, fd, b"echo again\n")
    finally:
        os.close(fd)
    wait(mount, jid)
    assert info(mount)["jobs"]["total"] == 1

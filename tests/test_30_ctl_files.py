"""The control tree's own files: README, info, ctl, egress, log, and
the errors every bad use gets (the tree is described in README.md,
"Running commands: the control tree", and in its own .osb/README)."""

import errno
import json
import os
import re
import subprocess
import sys
import time

import pytest

from jobhelp import (expect_errno, info, kill_quietly, last_error, last_log_line, osb, read, read_bytes, start,
                     status, wait, write)
from mounthelp import OSBFS
from osbtest import http_request, wait_until

ROOT_FILES = {"README", "info", "ctl", "egress", "log", "run", "jobs", "code", "snapshots"}


def readme_block(text, title):
    """The indented example lines under the README heading @title."""
    lines = text.split("\n")
    i = lines.index(title) + 1
    while i < len(lines) and lines[i] and not lines[i].startswith("  "):
        i += 1  # the prose before the example
    block = []
    while i < len(lines) and lines[i].startswith("  "):
        block.append(lines[i][2:])
        i += 1
    assert block, "no example under %r" % title
    return "\n".join(block) + "\n"


def bash(script, timeout=120):
    return subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True,
                          timeout=timeout)


def log_lines(m, word):
    return [l for l in read(osb(m, "log")).splitlines() if word in l]


# ---- the tree ----

def test_control_dir_lists_its_files(mount, server):
    assert set(os.listdir(osb(mount))) == ROOT_FILES
    # it exists only in the mount, never in the sandbox
    assert server.stat(mount.sandbox_id, mount.spath(".osb")) is None


def test_control_dir_is_reachable_by_name_but_not_listed(mount):
    with open(mount.p("f.txt"), "w") as f:
        f.write("x")
    assert os.listdir(mount.p()) == ["f.txt"]
    assert [e.name for e in os.scandir(mount.p())] == ["f.txt"]
    assert os.path.isdir(osb(mount))
    assert set(os.listdir(osb(mount))) == ROOT_FILES
    r = subprocess.run(["ls", "-la", mount.p()], capture_output=True, text=True, check=True)
    assert ".osb" not in r.stdout
    r = subprocess.run(["cat", osb(mount, "info")], capture_output=True, text=True, check=True)
    assert json.loads(r.stdout)["sandbox_id"] == mount.sandbox_id


def test_wait_is_reachable_by_name_but_not_listed(mount):
    jid = start(mount, "exit 4")
    names = set(os.listdir(osb(mount, "jobs", jid)))
    assert "wait" not in names and {"stdout", "status", "ctl"} <= names
    r = subprocess.run(["cat", osb(mount, "jobs", jid, "wait")], capture_output=True,
                       text=True, timeout=120, check=True)
    assert r.stdout == "exited 4\n"
    assert os.stat(osb(mount, "jobs", jid, "wait")).st_size == len("exited 4\n")


# what walks a whole tree and reads every file in it (tar reads st_size
# bytes of each file; cp and grep read to the end)
WALKERS = {
    "grep": lambda top, dest: ["grep", "-r", "no such text", top],
    "tar": lambda top, dest: ["tar", "-cf", "-", top],
    "find": lambda top, dest: ["find", top],
    "cp": lambda top, dest: ["cp", "-r", top, dest],
}


@pytest.mark.parametrize("tool", sorted(WALKERS))
def test_recursive_readers_finish_while_a_job_runs(mount, tool, tmp_path):
    with open(mount.p("a.txt"), "w") as f:
        f.write("some text\n")
    jid = start(mount, "sleep 60")
    try:
        outs = {}
        for i, top in enumerate((mount.p(), osb(mount), osb(mount, "jobs", jid))):
            # a reader that blocked on the job would wait for its 60 s
            r = subprocess.run(WALKERS[tool](top, str(tmp_path / ("copy%d" % i))),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=40)
            outs[top] = r.stdout.decode(errors="replace")
        assert status(mount, jid) == "running"
        if tool == "find":
            assert outs[mount.p()].split() == [mount.p(), mount.p("a.txt")]
            assert osb(mount, "jobs", jid, "stdout") in outs[osb(mount)].split("\n")
            assert "/wait" not in outs[osb(mount)]
        if tool == "tar":
            assert "some text" in outs[mount.p()]
        if tool == "cp":
            assert sorted(os.listdir(tmp_path / "copy0")) == ["a.txt"]
            assert "stdout" in os.listdir(tmp_path / "copy2")
    finally:
        kill_quietly(mount, jid)


def test_reading_a_running_jobs_files_to_the_end_does_not_block(mount):
    jid = start(mount, "echo started; sleep 60")
    try:
        for name in ("stdout", "stderr", "status", "exit_code", "info", "cmd"):
            r = subprocess.run(["cat", osb(mount, "jobs", jid, name)], capture_output=True,
                               timeout=30)
            assert r.returncode == 0, (name, r.stderr)
        for name in ("run", "info", "README", "log", "egress"):
            r = subprocess.run(["cat", osb(mount, name)], capture_output=True, timeout=30)
            assert r.returncode == 0, (name, r.stderr)
        # reading run without writing starts nothing
        assert info(mount)["jobs"]["total"] == 1
    finally:
        kill_quietly(mount, jid)


def test_control_dir_option_renames_the_tree(make_mount, server):
    m = make_mount(options=["control_dir=.ctl"])
    assert set(os.listdir(m.p(".ctl"))) == ROOT_FILES
    assert m.p(".ctl") in read(m.p(".ctl", "README"))
    # .osb is an ordinary name now: it goes to the sandbox
    os.mkdir(m.p(".osb"))
    write(m.p(".ctl", "ctl"), "sync")
    assert server.stat(m.sandbox_id, m.spath(".osb"))["type"] == "directory"


def test_files_are_read_with_cat(mount):
    out = subprocess.run(["cat", osb(mount, "info")], capture_output=True, check=True)
    assert json.loads(out.stdout)["sandbox_id"] == mount.sandbox_id


# ---- README ----

def test_readme_run_example_works_as_printed(mount):
    text = read(osb(mount, "README"))
    r = bash(readme_block(text, "Run a command and read its output"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "exited 0\nhello from the sandbox\n"


def test_readme_named_job_example_works_as_printed(mount):
    text = read(osb(mount, "README"))
    r = bash(readme_block(text, "A named job"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "exited 3\nhello\noops\n"


def test_readme_open_write_read_example_works_as_printed(mount):
    text = read(osb(mount, "README"))
    r = bash(readme_block(text, "Start a job and learn its id with open/write/read only"))
    assert r.returncode == 0, r.stderr
    jid, status, out = r.stdout.split("\n")[:3]
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{6}", jid), jid
    assert (status, out) == ("exited 0", "done")


def test_readme_code_example_works_as_printed(mount):
    text = read(osb(mount, "README"))
    r = bash(readme_block(text, "Run Python with state kept between runs"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "status: ok\n--- stdout\n42\n"


def test_project_readme_python_session_works_as_printed(mount):
    """README.md's three-line Python session, run with its mnt/."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "README.md")) as f:
        text = f.read()
    block = text.split("```sh\necho 'x = 6 * 7'")[1].split("```")[0]
    script = "echo 'x = 6 * 7'" + block
    lines = [ln.split("  #")[0].rstrip() for ln in script.strip().split("\n")]
    assert len(lines) == 3, lines
    r = bash("cd %s/..\n" % mount.p() + "\n".join(l.replace("mnt/", os.path.basename(mount.p()) + "/") for l in lines))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "status: ok\n--- stdout\n42\n"


def test_readme_names_this_mount_and_sandbox(mount):
    text = read(osb(mount, "README"))
    assert osb(mount) in text
    assert mount.sandbox_id in text


# ---- info ----

def test_info_describes_the_sandbox(mount, server):
    i = info(mount)
    assert i["sandbox_id"] == mount.sandbox_id
    assert i["state"] == "Running"
    assert i["image"] == "python:3.11"
    assert i["dir"] == "/workspace"
    assert i["mountpoint"] == os.path.realpath(mount.p())
    assert i["endpoint"].startswith("http://127.0.0.1:")
    assert i["server"] == "reachable"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", i["created_at"])
    assert i["expires_at"] > i["created_at"]
    assert set(i["cache"]) == {"dir", "pending", "dirty_files", "dirty_dirs", "dirty_bytes", "uploading",
                               "uploaded_files", "uploaded_bytes", "failed_uploads",
                               "conflicts", "failing"}
    assert i["pid"] == mount.proc.pid
    assert i["jobs"] == {"running": 0, "total": 0}
    assert i["last_error"] is None
    assert i["server_silent_s"] == 0


def test_info_has_one_key_a_line(mount):
    text = read(osb(mount, "info"))
    i = json.loads(text)
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}", text
    for key in i:  # each top-level key starts a line of its own
        assert sum(1 for l in lines if l.startswith('\t"%s":' % key)) == 1, (key, text)


def test_no_secret_in_any_control_file(mount, server):
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "bogus")
    for name in ("README", "info", "log"):
        assert server.api_key not in read(osb(mount, name)), name


def test_info_counts_jobs(mount):
    jid = start(mount, "sleep 30")
    try:
        assert info(mount)["jobs"] == {"running": 1, "total": 1}
    finally:
        write(osb(mount, "jobs", jid, "ctl"), "signal KILL")
    wait(mount, jid)
    assert info(mount)["jobs"] == {"running": 0, "total": 1}


# ---- ctl ----

def test_sync_uploads_dirty_files_and_info_shows_it(make_mount, server):
    m = make_mount(options=["writeback_delay=600s"])
    with open(m.p("notes.txt"), "w") as f:
        f.write("kept on local disk\n")
    before = info(m)["cache"]
    assert before["dirty_files"] == 1 and before["dirty_bytes"] == 19
    assert server.stat(m.sandbox_id, m.spath("notes.txt")) is None
    write(osb(m, "ctl"), "sync\n")
    assert server.read_file(m.sandbox_id, m.spath("notes.txt")) == b"kept on local disk\n"
    after = info(m)["cache"]
    assert after["dirty_files"] == 0 and after["uploaded_files"] >= 1


def test_sync_fails_with_eio_when_uploads_fail(make_mount, server):
    m = make_mount(options=["writeback_delay=600s"])
    with open(m.p("a.txt"), "w") as f:
        f.write("x")
    server.set_faults(path="/files/upload", kinds=["500"], rate=1.0)
    try:
        expect_errno(errno.EIO, write, osb(m, "ctl"), "sync")
        assert "could not be uploaded" in last_error(m)
        assert info(m)["cache"]["dirty_files"] == 1
    finally:
        server.clear_faults()
    write(osb(m, "ctl"), "sync")
    assert server.read_file(m.sandbox_id, m.spath("a.txt")) == b"x"


def test_invalidate_shows_a_change_made_in_the_sandbox(make_mount, server):
    m = make_mount(options=["attr_timeout=600s", "dir_timeout=600s"])
    server.write_file(m.sandbox_id, m.spath("v.txt"), b"one\n")
    assert read(m.p("v.txt")) == "one\n"
    server.write_file(m.sandbox_id, m.spath("v.txt"), b"two, longer\n")
    server.write_file(m.sandbox_id, m.spath("new.txt"), b"new\n")
    write(osb(m, "ctl"), "invalidate")
    assert read(m.p("v.txt")) == "two, longer\n"
    assert "new.txt" in os.listdir(m.p())


def test_a_working_directory_in_the_mount_survives_every_cache_dropped(make_mount, server):
    """Dropping every cache (invalidate, a job's end, a burst of changes the
    feed reports) leaves a process's working directory in the mount: its
    getcwd (git, a shell's pwd) still works, and it sees the changes."""
    m = make_mount(options=["attr_timeout=600s", "dir_timeout=600s"])
    server.write_file(m.sandbox_id, m.spath("proj", "src", "a.txt"), b"a\n")
    assert os.listdir(m.p("proj", "src")) == ["a.txt"]
    server.write_file(m.sandbox_id, m.spath("proj", "src", "later.txt"), b"later\n")
    ctl = osb(m, "ctl")
    r = subprocess.run(["sh", "-c", "cd proj/src && echo invalidate > ../../.osb/ctl && "
                        "sleep 0.5 && %s -c 'import os; print(os.getcwd())' && ls && cat later.txt" % sys.executable],
                       cwd=m.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:4] == [m.p("proj", "src"), "a.txt", "later.txt", "later"], r.stdout
    assert os.path.exists(ctl)


def test_renew_sets_the_expiry(mount, server):
    write(osb(mount, "ctl"), "renew 7200")
    exp = info(mount)["expires_at"]
    st, _, sb = server.request("GET", "/v1/sandboxes/" + mount.sandbox_id)
    assert st == 200
    assert sb["expiresAt"][:19] == exp[:19]
    got = time.mktime(time.strptime(exp[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert abs(got - (time.time() + 7200)) < 120


def test_pause_then_a_read_resumes_the_sandbox(mount, server):
    sid = mount.sandbox_id
    server.write_file(sid, mount.spath("data.bin"), bytes(range(256)) * 64)
    assert info(mount)["state"] == "Running"
    write(osb(mount, "ctl"), "pause")
    assert info(mount)["state"] == "Paused"
    # reading info does not wake the sandbox
    assert server.request("GET", "/v1/sandboxes/" + sid)[2]["status"]["state"] == "Paused"
    assert read_bytes(mount.p("data.bin")) == bytes(range(256)) * 64
    assert info(mount)["state"] == "Running"
    assert server.request("GET", "/v1/sandboxes/" + sid)[2]["status"]["state"] == "Running"


def test_pause_and_resume_verbs(mount, server):
    write(osb(mount, "ctl"), "pause\n")
    assert info(mount)["state"] == "Paused"
    write(osb(mount, "ctl"), "resume\n")
    assert info(mount)["state"] == "Running"
    st, _, sb = server.request("GET", "/v1/sandboxes/" + mount.sandbox_id)
    assert sb["status"]["state"] == "Running"


def test_several_verbs_run_in_order(mount):
    write(osb(mount, "ctl"), "invalidate\n  renew 3600 \n\nsync\n")
    done = [l for l in log_lines(mount, "ctl: ") if l.endswith(" done")]
    assert [l.split("ctl: ", 1)[1] for l in done][-3:] == ["invalidate done", "renew 3600 done",
                                                           "sync done"]


def test_a_write_with_one_bad_line_runs_none_of_them(mount):
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "invalidate\nfrobnicate\nrenew 3600\n")
    assert "frobnicate" in last_error(mount)
    assert not log_lines(mount, "ctl: invalidate done")
    assert not log_lines(mount, "ctl: renew")
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "sync\nrenew soon\n")
    assert 'renew: "soon" is not a number of seconds' in last_error(mount)
    assert not log_lines(mount, "ctl: sync done")
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "sync\n" * 17)
    assert "more than 16 commands" in last_error(mount)


def test_kill_destroys_the_sandbox(make_mount, server, make_sandbox):
    sid = make_sandbox()
    m = make_mount(sandbox_id=sid)
    jid = start(m, "sleep 60")
    write(osb(m, "ctl"), "kill")
    assert server.request("GET", "/v1/sandboxes/" + sid)[0] == 404
    assert info(m)["state"] == "Deleted"
    # nobody waits forever for a job of a sandbox that is gone
    assert wait(m, jid, timeout=30) == "error: the sandbox was deleted"
    # the sandbox is gone, but nothing was lost: the daemon ends with 0
    m.stop()
    assert "nothing was waiting to be uploaded" in m.log()


# ---- bad writes ----

def test_unknown_verb_is_einval_with_last_error(mount):
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "frobnicate\n")
    assert 'unknown command "frobnicate"' in last_error(mount)
    assert info(mount)["last_error_at"] is not None
    assert log_lines(mount, "frobnicate")


def test_empty_ctl_write_is_einval(mount):
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "\n")
    assert "empty" in last_error(mount)
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "  \t \n")


def test_binary_ctl_write_is_einval(mount):
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), b"\x00\xff\xfepause")
    assert "binary" in last_error(mount)
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), b"\xffpause")
    assert info(mount)["state"] == "Running"


def test_verb_with_a_bad_argument_is_einval(mount):
    for bad in ("renew soon", "renew -5", "renew 0", "pause now", "sync all", "renew 5 6"):
        expect_errno(errno.EINVAL, write, osb(mount, "ctl"), bad)
    assert "renew" in last_error(mount)


def test_read_only_files_refuse_writing_with_eacces(mount):
    jid = start(mount, "true")
    wait(mount, jid)
    for path in [osb(mount, n) for n in ("README", "info", "log")] + \
                [osb(mount, "jobs", jid, n) for n in ("status", "exit_code", "stdout", "stderr",
                                                         "wait", "info", "cmd")]:
        expect_errno(errno.EACCES, os.open, path, os.O_WRONLY)
        expect_errno(errno.EACCES, os.open, path, os.O_RDWR | os.O_TRUNC)


def test_write_only_ctl_refuses_reading_with_eacces(mount):
    expect_errno(errno.EACCES, os.open, osb(mount, "ctl"), os.O_RDONLY)


def test_nothing_new_can_be_made_in_the_tree(mount):
    # but a writer's temporary file (test_42_ctl_writers.py), in .osb/ or
    # a job's directory
    expect_errno(errno.EACCES, os.open, osb(mount, "jobs", "newfile"),
                 os.O_WRONLY | os.O_CREAT, 0o644)
    expect_errno(errno.EPERM, os.mkdir, osb(mount, "dir"))
    expect_errno(errno.EPERM, os.unlink, osb(mount, "info"))
    expect_errno(errno.EPERM, os.rmdir, osb(mount, "jobs"))
    expect_errno(errno.EPERM, os.rename, osb(mount, "info"), osb(mount, "info2"))


def test_log_shows_recent_lines(mount):
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "frobnicate")
    lines = read(osb(mount, "log")).splitlines()
    assert any("mounted sandbox %s" % mount.sandbox_id in l for l in lines)
    assert "frobnicate" in lines[-1]


def test_log_keeps_a_long_path_and_the_reason_after_it(make_mount, server):
    m = make_mount(options=["writeback_delay=600s"])
    # a path of about 4 KiB (each name at most 255 bytes)
    parts = ["d%02d" % i + "x" * 246 for i in range(15)]
    os.makedirs(m.p(*parts))
    long_path = m.spath(*parts, "f.txt")
    assert len(long_path) > 3700
    with open(m.p(*parts, "f.txt"), "w") as f:
        f.write("x")
    server.set_faults(path="/files/upload", kinds=["500"], rate=1.0)
    try:
        expect_errno(errno.EIO, write, osb(m, "ctl"), "sync")
    finally:
        server.clear_faults()
    lines = [l for l in read(osb(m, "log")).splitlines() if "upload of 1 file(s) failed" in l]
    assert lines, read(osb(m, "log"))[-3000:]
    assert long_path in lines[0]
    assert lines[0].endswith("kept locally and retried"), lines[0][-200:]
    assert [l for l in m.log().splitlines() if long_path in l and l.endswith("retried")]
    write(osb(m, "ctl"), "sync")


def repeated(lines):
    """How many times the lines say their message came: 1 each, or N + 1
    for "... (repeated N times)"."""
    n = 0
    for l in lines:
        r = re.search(r" \(repeated (\d+) times\)$", l)
        n += int(r.group(1)) if r else 1
    return n


def test_log_file_gets_every_line(make_mount, tmp_path):
    f = tmp_path / "osbfs.log"
    m = make_mount(options=["log_file=%s" % f])
    expect_errno(errno.EINVAL, write, osb(m, "ctl"), "frobnicate")
    text = f.read_text()
    assert "mounted sandbox %s" % m.sandbox_id in text
    assert re.search(r"^\S+Z error: .*frobnicate", text, re.M), text
    assert os.stat(f).st_mode & 0o777 == 0o600


def test_debug_logs_one_line_per_api_call_without_the_key(make_mount, server):
    m = make_mount(options=["debug"])
    os.listdir(m.p())
    with open(m.p("traced.txt"), "w") as f:
        f.write("x")
    write(osb(m, "ctl"), "sync")
    log = m.log()
    assert re.search(r"api: GET /v1/sandboxes/%s -> 200, \d+ ms" % m.sandbox_id, log), log[-3000:]
    assert re.search(r"api: POST \S*/files/upload -> 200, \d+ ms", log), log[-3000:]
    assert server.api_key not in log


def daemon(server, sid, mnt, options=()):
    """osbfs in the background (no -f): its stderr, and how to stop it."""
    mnt.mkdir()
    argv = [str(OSBFS), "-o", ",".join(["domain=127.0.0.1:%d" % server.port] + list(options)),
            sid, str(mnt)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, OPEN_SANDBOX_API_KEY=server.api_key))
    assert r.returncode == 0, r.stderr
    with open(os.path.join(mnt, ".osb", "info")) as f:
        pid = json.load(f)["pid"]

    def stop():
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
        wait_until(lambda: not os.path.exists("/proc/%d" % pid), 60, "the daemon to exit")
    return r.stderr, stop


def test_a_daemon_without_syslog_logs_to_a_file_it_names(server, make_sandbox, tmp_path):
    if os.path.exists("/dev/log"):
        pytest.skip("this machine has syslog: the daemon logs there")
    sid = make_sandbox()
    err, stop = daemon(server, sid, tmp_path / "mnt", ["cache_dir=%s" % (tmp_path / "cache")])
    try:
        path = str(tmp_path / "cache" / sid / "log")
        assert "no syslog here: the log goes to %s" % path in err
        expect_errno(errno.EINVAL, write, str(tmp_path / "mnt" / ".osb" / "ctl"), "frobnicate")
        with open(path) as f:
            text = f.read()
        assert "mounted sandbox %s" % sid in text and "frobnicate" in text
    finally:
        stop()


def test_a_daemon_with_log_file_logs_there(server, make_sandbox, tmp_path):
    sid = make_sandbox()
    f = tmp_path / "d.log"
    err, stop = daemon(server, sid, tmp_path / "mnt",
                       ["cache_dir=%s" % (tmp_path / "cache"), "log_file=%s" % f])
    try:
        assert "no syslog" not in err
        expect_errno(errno.EINVAL, write, str(tmp_path / "mnt" / ".osb" / "ctl"), "frobnicate")
        text = f.read_text()
        assert "mounted sandbox %s" % sid in text and "frobnicate" in text
    finally:
        stop()


def test_log_collapses_a_message_repeated_in_a_loop(mount):
    # the change feed's start, logged, would come between the repeats
    wait_until(lambda: info(mount)["change_feed"].startswith("live"), 30, "the feed to go live")
    for _ in range(2000):
        expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "frobnicate")
    # what a loop repeats costs a few lines, and says how many it stands for
    lines = log_lines(mount, '"frobnicate"')
    assert len(lines) <= 4, lines
    assert repeated(lines) == 2000, lines
    # a different message after the storm
    expect_errno(errno.EINVAL, write, osb(mount, "ctl"), "other")
    lines = log_lines(mount, '"frobnicate"')
    assert len(lines) <= 4 and repeated(lines) == 2000, lines
    assert '"other"' in last_log_line(mount)
    stderr = [l for l in mount.log().splitlines() if '"frobnicate"' in l]
    assert len(stderr) <= 4 and repeated(stderr) == 2000, stderr
    assert 'unknown command "frobnicate"' in last_error(mount) or '"other"' in last_error(mount)


def test_the_log_escapes_what_it_quotes(make_mount, make_sandbox, server, tmp_path):
    # names from the sandbox (here job records it made, skipped and
    # named in the log) and from anyone (a bad mkdir) forge no log line
    # and send no escape sequence to a terminal, in every sink
    sid = make_sandbox()
    forged = "evil\n2026-01-01T00:00:00Z error: forged\x1b]0;owned\x07"
    code, _, err = server.run(sid, "mkdir -p /tmp/.osbfs/jobs/\"$(printf 'evil\\n"
                              "2026-01-01T00:00:00Z error: forged\\033]0;owned\\007')\"")
    assert code == 0, err
    # and a name that is not UTF-8, as a hostile execd could list it
    server.inject_listing(sid, "/tmp/.osbfs/jobs", [b"bad\xff\xfe\xc2\x9bname"])
    f = tmp_path / "osbfs.log"
    m = make_mount(sandbox_id=sid, options=["log_file=%s" % f])
    assert os.listdir(osb(m, "jobs")) == []
    expect_errno(errno.EINVAL, os.mkdir, osb(m, "jobs", "x\x1b[2Jy\\z"))
    shown = {
        forged: "evil\\n2026-01-01T00:00:00Z error: forged\\x1b]0;owned\\x07",
        "bad": "bad\\xff\\xfe\\xc2\\x9bname",
        "mkdir": "mkdir jobs/x\\x1b[2Jy\\\\z: ",
    }
    sinks = {"stderr": m.log().encode(), ".osb/log": read_bytes(osb(m, "log")),
             "log_file": f.read_bytes()}
    for sink, text in sinks.items():
        assert b"\x1b" not in text and b"\x07" not in text and b"\xff" not in text, sink
        lines = text.decode().splitlines()
        assert not [l for l in lines if "Z error: forged" in l[:40]], (sink, lines)
        for what in shown.values():
            assert len([l for l in lines if what in l]) == 1, (sink, what, lines)
    assert last_error(m).startswith(shown["mkdir"]), last_error(m)


# ---- egress ----

POLICY = {"defaultAction": "deny", "egress": [{"action": "allow", "target": "pypi.org"}]}


def sidecar_policy(server, sid):
    url, hdrs = server.endpoint(sid, port=18080)
    st, _, body = http_request(url, "GET", "/policy", headers=hdrs)
    assert st == 200, (st, body)
    return body["policy"]


def test_egress_reads_and_patches_the_policy(make_mount, server, make_sandbox):
    sid = make_sandbox(networkPolicy=POLICY)
    m = make_mount(sandbox_id=sid)
    pol = json.loads(read(osb(m, "egress")))
    assert pol["policy"]["egress"] == [{"action": "allow", "target": "pypi.org"}]
    write(osb(m, "egress"), "allow example.com\n")
    write(osb(m, "egress"), '[{"action":"deny","target":"*.example.org"}]\n')
    rules = json.loads(read(osb(m, "egress")))["policy"]["egress"]
    assert {"action": "allow", "target": "example.com"} in rules
    assert {"action": "deny", "target": "*.example.org"} in rules
    assert {"action": "allow", "target": "pypi.org"} in rules
    assert sidecar_policy(server, sid)["egress"] == rules


def test_egress_read_can_be_written_back_whole(make_mount, server, make_sandbox):
    sid = make_sandbox(networkPolicy=POLICY)
    m = make_mount(sandbox_id=sid)
    write(osb(m, "egress"), "allow example.com\ndeny *.example.org\n")
    text = read(osb(m, "egress"))
    before = sidecar_policy(server, sid)
    # what was read, written back as it is: the same policy
    write(osb(m, "egress"), text)
    assert sidecar_policy(server, sid) == before
    # edited, as in an editor: a rule gone, the default changed
    doc = json.loads(text)
    doc["policy"]["egress"] = [r for r in doc["policy"]["egress"] if r["target"] != "pypi.org"]
    doc["policy"]["defaultAction"] = "allow"
    write(osb(m, "egress"), json.dumps(doc, indent=2) + "\n")
    after = sidecar_policy(server, sid)
    assert after["defaultAction"] == "allow"
    assert after["egress"] == [r for r in before["egress"] if r["target"] != "pypi.org"]
    # a bare policy object works too
    write(osb(m, "egress"), '{"defaultAction": "deny", "egress": []}')
    assert sidecar_policy(server, sid)["defaultAction"] == "deny"
    assert not sidecar_policy(server, sid)["egress"]
    assert json.loads(read(osb(m, "egress")))["mode"] == "deny_all"


def test_egress_lines_set_the_default_and_remove_rules(make_mount, server, make_sandbox):
    sid = make_sandbox(networkPolicy=POLICY)
    m = make_mount(sandbox_id=sid)
    write(osb(m, "egress"), "allow example.com\ndefault allow\n")
    pol = sidecar_policy(server, sid)
    assert pol["defaultAction"] == "allow"
    assert {"action": "allow", "target": "example.com"} in pol["egress"]
    assert {"action": "allow", "target": "pypi.org"} in pol["egress"]
    write(osb(m, "egress"), "remove pypi.org\ndefault deny\n")
    pol = sidecar_policy(server, sid)
    assert pol["defaultAction"] == "deny"
    assert pol["egress"] == [{"action": "allow", "target": "example.com"}]
    shown = json.loads(read(osb(m, "egress")))["policy"]
    assert shown["defaultAction"] == "deny" and shown["egress"] == pol["egress"]


def test_egress_bad_input_is_einval(make_mount, server, make_sandbox):
    sid = make_sandbox(networkPolicy=POLICY)
    m = make_mount(sandbox_id=sid)
    for bad in ("permit example.com\n", "allow\n", "allow a b\n", '{"action":"allow"}\n',
                "[]\n", b"\x00\x01", "default maybe\n", "remove\n",
                '{"policy": {"egress": []}}', '{"defaultAction": "allow", "egress": [{"target": "x"}]}'):
        expect_errno(errno.EINVAL, write, osb(m, "egress"), bad)
    assert "egress" in last_error(m)
    # a bad line is named, with what is wrong with it
    for bad, why in (("permit example.com", "first word is not allow"),
                     ("allow", "names no host"), ("deny a b", "one host a line"),
                     ("default maybe", "default wants allow or deny")):
        expect_errno(errno.EINVAL, write, osb(m, "egress"), bad + "\n")
        err = last_error(m)
        assert '"%s"' % bad in err and why in err, err
    # an unfinished JSON array fails when the file is closed
    expect_errno(errno.EINVAL, write, osb(m, "egress"), '[{"action":"allow",')
    assert sidecar_policy(server, sid)["egress"] == POLICY["egress"]


def test_egress_without_a_sidecar_explains_itself(mount):
    text = json.loads(read(osb(mount, "egress")))
    assert text["sidecar"] is False and "no egress sidecar" in text["message"]
    expect_errno(errno.EOPNOTSUPP, write, osb(mount, "egress"), "allow pypi.org\n")
    assert "no egress sidecar" in last_error(mount)


# ---- allow_other ----

def as_nobody(op, path, data=None):
    """open(2) of @path as user nobody: for reading (op "r": the bytes
    read) or for writing @data (op "w"); or a listing of directory @path
    (op "l": the names, sorted, one a line); an errno name on failure."""
    code = ("import errno, os, sys\n"
            "try:\n"
            "    if sys.argv[1] == 'r':\n"
            "        sys.stdout.write(open(sys.argv[2]).read())\n"
            "    elif sys.argv[1] == 'l':\n"
            "        print('\\n'.join(sorted(os.listdir(sys.argv[2]))))\n"
            "    else:\n"
            "        fd = os.open(sys.argv[2], os.O_WRONLY | os.O_TRUNC)\n"
            "        os.write(fd, sys.argv[3].encode())\n"
            "        os.close(fd)\n"
            "        print('written')\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno])\n")
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            "/usr/bin/python3", "-c", code, op, path] + ([data] if data is not None else [])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_allow_other_checks_modes_for_other_users(make_mount, shared_dir):
    m = make_mount(options=["allow_other"], workdir=shared_dir)
    for name, mode in (("secret.txt", 0o600), ("public.txt", 0o644)):
        with open(m.p(name), "w") as f:
            f.write("text of %s\n" % name)
        os.chmod(m.p(name), mode)
    assert as_nobody("r", m.p("secret.txt")) == "EACCES"
    assert as_nobody("r", m.p("public.txt")) == "text of public.txt"
    assert as_nobody("w", m.p("public.txt"), "mine now") == "EACCES"
    assert read(m.p("public.txt")) == "text of public.txt\n"


def test_allow_other_keeps_other_users_out_of_the_control_files(make_mount, shared_dir):
    m = make_mount(options=["allow_other"], workdir=shared_dir)
    jid = start(m, "sleep 60")
    try:
        assert as_nobody("w", osb(m, "run"), "touch /workspace/pwned") == "EACCES"
        assert as_nobody("w", osb(m, "ctl"), "pause") == "EACCES"
        assert as_nobody("w", osb(m, "egress"), "allow example.com") == "EACCES"
        assert as_nobody("w", osb(m, "jobs", jid, "ctl"), "kill") == "EACCES"
        assert info(m)["jobs"] == {"running": 1, "total": 1}
        assert info(m)["state"] == "Running"
        assert not os.path.exists(m.p("pwned"))
        # the state of a job stays readable
        assert as_nobody("r", osb(m, "jobs", jid, "status")) == "running"
    finally:
        kill_quietly(m, jid)


def test_allow_other_shows_what_the_sandbox_holds_to_the_owner_only(make_mount, shared_dir,
                                                                    server):
    # under allow_other the kernel checks modes: what reveals the
    # sandbox's content (a job's output, the code run and its result) or
    # the mount's pending state (info's list, the log) is the owner's
    m = make_mount(options=["allow_other", "writeback_delay=600s"], workdir=shared_dir)
    jid = start(m, "echo secret-out; echo secret-err >&2")
    assert wait(m, jid) == "exited 0"
    write(osb(m, "code", "python", "input"), "print('secret-code')")
    # (written after them: a start uploads every file first)
    os.mkdir(m.p("private"), 0o700)
    with open(m.p("private", "plans-for-q3.txt"), "w") as f:
        f.write("x")
    owner_only = [osb(m, "info"), osb(m, "log")] + \
        [osb(m, "jobs", jid, n) for n in ("cmd", "stdout", "stderr", "info")] + \
        [osb(m, "code", "python", n) for n in ("input", "output", "result.json")]
    for path in owner_only:
        assert as_nobody("r", path) == "EACCES", path
        assert read(path), path  # the owner reads it as before
    assert "plans-for-q3" in read(osb(m, "info"))
    assert as_nobody("l", m.p("private")) == "EACCES"
    # code/ is the owner's: another user's listing starts no interpreter
    server.reset_stats()
    assert as_nobody("l", osb(m, "code")) == "EACCES"
    assert server.stats().get("sandboxes", {}).get(m.sandbox_id, {}).get(
        "POST /code/context", 0) == 0
    # what stays readable: the tree, the README, a job's state
    assert as_nobody("l", osb(m, "jobs")) == "\n".join(sorted([jid, "latest"]))
    assert as_nobody("r", osb(m, "jobs", jid, "status")) == "exited 0"
    assert as_nobody("r", osb(m, "jobs", jid, "wait")) == "exited 0"
    assert m.sandbox_id in as_nobody("r", osb(m, "README"))
    # every node is the mount's user's
    for path in owner_only + [osb(m), osb(m, "jobs", jid)]:
        st = os.stat(path)
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()), path
    write(osb(m, "ctl"), "sync")

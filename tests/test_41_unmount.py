"""Unmounting without losing track of the data: `osbfs -u MOUNTPOINT`
flushes, unmounts, waits for the daemon and says what did not reach the
sandbox; a new mount of the same cache dir waits for a daemon that is
still finishing its uploads, and is refused once every slot of the cache
dir is taken (test_44 has mounts sharing one)."""

import fcntl
import os
import re
import shlex
import subprocess

from jobhelp import info, osb
from mounthelp import OSBFS, fusermount_u, is_mounted


def osbfs_u(m, timeout=300):
    return subprocess.run([str(OSBFS), "-u", m.path], capture_output=True, text=True,
                          timeout=timeout)


def reap(m, timeout=120, expect_status=0):
    """The exit status of @m's daemon, once it has been unmounted."""
    assert not is_mounted(m.path)
    return m.stop(timeout=timeout, expect_status=expect_status)


def write_files(m, files):
    for name, data in files.items():
        os.makedirs(os.path.dirname(m.p(name)), exist_ok=True)
        with open(m.p(name), "wb") as f:
            f.write(data)


def test_info_names_the_daemon_and_what_is_pending(make_mount):
    m = make_mount(options=["writeback_delay=600s"])
    write_files(m, {"a.txt": b"a", "sub/b.txt": b"bb"})
    i = info(m)
    assert i["pid"] == m.proc.pid
    assert i["cache"]["dir"] == os.path.join(m.cache_dir, m.sandbox_id)
    # a directory made here, not yet in the sandbox, ends in "/"
    assert sorted(i["cache"]["pending"]) == [m.spath("a.txt"), m.spath("sub") + "/",
                                             m.spath("sub", "b.txt")]
    with open(osb(m, "ctl"), "w") as f:
        f.write("sync\n")
    assert info(m)["cache"]["pending"] == []


def test_osbfs_u_leaves_every_byte_in_the_sandbox(make_mount, server):
    m = make_mount(options=["writeback_delay=600s"])
    files = {"small.txt": b"hello\n", "dir/deep/x.bin": os.urandom(3 << 20),
             "empty": b""}
    files.update({"many/f%03d" % i: b"%d\n" % i for i in range(50)})
    write_files(m, files)
    assert server.stat(m.sandbox_id, m.spath("small.txt")) is None
    r = osbfs_u(m)
    assert r.returncode == 0, r.stderr
    assert not is_mounted(m.path)
    assert reap(m) == 0
    for name, data in files.items():
        assert server.read_file(m.sandbox_id, m.spath(name)) == data, name


def test_osbfs_u_shows_progress_when_uploads_take_a_while(make_mount, server):
    m = make_mount(options=["writeback_delay=600s"])
    write_files(m, {"slow.txt": b"slow"})
    server.set_faults(path="/files/upload", kinds=["delay"], delay_ms=3000, rate=1.0)
    try:
        r = osbfs_u(m)
    finally:
        server.clear_faults()
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert "uploading to sandbox %s: 1 file(s), 4 bytes to go" % m.sandbox_id in lines[0]
    assert lines[-1].endswith("sandbox %s has every file written" % m.sandbox_id)
    assert server.read_file(m.sandbox_id, m.spath("slow.txt")) == b"slow"
    assert reap(m) == 0


def test_osbfs_u_says_since_when_a_silent_server_has_not_answered(make_mount, server):
    # its upload hangs 12 s without a sign of life; stderr is a pipe: a
    # line only when what it says changes, not the same line again
    m = make_mount(options=["writeback_delay=600s"])
    write_files(m, {"slow.txt": b"slow"})
    server.set_faults(path="/files/upload", kinds=["delay"], delay_ms=12000, rate=1.0)
    try:
        r = osbfs_u(m)
    finally:
        server.clear_faults()
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if "uploading to sandbox" in l]
    assert len(lines) == 2, r.stderr
    assert "1 file(s), 4 bytes to go" in lines[0] and "server" not in lines[0], lines
    assert re.search(r"; the server has not answered since \d\d:\d\d:\d\d \(\d+ s\)$",
                     lines[1]), lines
    assert server.read_file(m.sandbox_id, m.spath("slow.txt")) == b"slow"
    assert reap(m) == 0


def test_osbfs_u_with_the_server_down_names_the_pending_file(make_server, make_mount):
    srv = make_server()
    m = make_mount(srv=srv, options=["writeback_delay=600s", "request_timeout=3s"])
    sid = m.sandbox_id
    odd = "\x1b[2Jodd\nname.txt"  # a name may hold anything but '/'
    write_files(m, {"kept/pending.txt": b"not lost", "kept/" + odd: b"odd"})
    srv.stop()
    r = osbfs_u(m)
    assert r.returncode == 1, r.stderr
    assert m.spath("kept", "pending.txt") in r.stderr
    # named escaped: no escape sequence for the terminal, no forged line
    assert "  " + m.spath("kept", "\\x1b[2Jodd\\nname.txt") + "\n" in r.stderr, r.stderr
    assert "\x1b" not in r.stderr and "name.txt" not in r.stderr.replace("\\nname.txt", "")
    assert os.path.join(m.cache_dir, sid) in r.stderr
    assert not is_mounted(m.path)
    reap(m, expect_status=1)
    # the next mount with the server back uploads it
    srv.restart()
    m2 = make_mount(sandbox_id=sid, srv=srv, create=False, cache_dir=m.cache_dir)
    r = osbfs_u(m2)
    assert r.returncode == 0, r.stderr
    assert srv.read_file(sid, m2.spath("kept", "pending.txt")) == b"not lost"
    assert srv.run(sid, "cat " + shlex.quote(m2.spath("kept", odd)))[1] == "odd\n"


def test_osbfs_u_of_something_else_fails(tmp_path):
    d = tmp_path / "plain"
    d.mkdir()
    r = subprocess.run([str(OSBFS), "-u", str(d)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "not mounted" in r.stderr


def test_help_shows_osbfs_u():
    r = subprocess.run([str(OSBFS), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and " -u [-o control_dir=NAME] MOUNTPOINT" in r.stdout
    assert "fusermount3 -u" in r.stdout


def test_remount_waits_for_the_daemon_still_uploading(make_mount, server):
    m = make_mount(options=["writeback_delay=600s"])
    sid = m.sandbox_id
    write_files(m, {"late.txt": b"uploaded after the unmount"})
    # the upload takes a while: the daemon is still at it after the unmount
    server.set_faults(path="/files/upload", kinds=["delay"], delay_ms=3000, rate=1.0)
    m2 = None
    try:
        assert fusermount_u(m.path) == 0
        first = m.proc.pid
        m2 = make_mount(sandbox_id=sid, create=False, cache_dir=m.cache_dir,
                        mountpoint=m.path, workdir=m.workdir + "-2")
        assert "waiting for osbfs (pid %d)" % first in m2.log()
        assert m.proc.wait(30) == 0
        with open(m2.p("late.txt"), "rb") as f:
            assert f.read() == b"uploaded after the unmount"
        assert server.read_file(sid, m.spath("late.txt")) == b"uploaded after the unmount"
    finally:
        server.clear_faults()
        if m2:
            m2.stop()
    assert reap(m) == 0


def test_a_mount_past_the_last_free_slot_is_refused(make_mount, server):
    """Every slot of the cache dir held by a live mount: refused, naming
    one of them.  The first is a real mount; the other fifteen are held
    the way a mount that is starting holds them."""
    m = make_mount()
    base = os.path.join(m.cache_dir, m.sandbox_id)
    holders = []
    try:
        for i in range(1, 16):
            d = os.path.join(base, "mounts", str(i))
            os.makedirs(d, exist_ok=True)
            f = open(os.path.join(d, "lock"), "w")
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            f.write("osbfs-holder 1\npid %d\nstate starting\nend\n" % os.getpid())
            f.flush()
            holders.append(f)
        m2 = make_mount(sandbox_id=m.sandbox_id, create=False, cache_dir=m.cache_dir,
                        start=False)
        m2.start(expect_fail=True)
    finally:
        for f in holders:
            f.close()
    assert m2.exit_code not in (None, 0)
    line = [l for l in m2.log().splitlines() if "in use" in l]
    assert line, m2.log()
    assert "16 mounts" in line[0]
    assert "pid %d" % m.proc.pid in line[0] and os.path.realpath(m.path) in line[0]

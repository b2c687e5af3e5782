"""What must never happen through a mount, whatever the user or the
sandbox does: a crash of the daemon, data lost or sent twice, a retry
storm, a fault that reaches the user when a retry or a check could settle
it. Each test checks the sandbox side through the file API, and the daemon
is checked at teardown (exit status, sanitizer reports)."""

import errno
import json
import os
import subprocess
import tempfile
import time

import pytest

from mounthelp import ctl
from osbtest import wait_until


@pytest.fixture
def mount(make_mount):
    return make_mount(options=["attr_timeout=0", "dir_timeout=0", "negative_timeout=0"])


def names(m, *parts):
    """The names in a directory of the mount (the control dir aside)."""
    return sorted(n for n in os.listdir(m.p(*parts)) if n != ".osb")


def alive(m):
    return m.proc is not None and m.proc.poll() is None


# ---- files that are open but unlinked ----

def test_temporary_file_keeps_working_after_unlink(mount):
    with tempfile.TemporaryFile(dir=mount.path) as f:
        f.write(b"scratch data " * 1000)
        f.flush()
        assert os.fstat(f.fileno()).st_size == 13000
        assert os.fstat(f.fileno()).st_nlink == 0
        f.seek(0)
        assert f.read() == b"scratch data " * 1000
        f.truncate(5)
        assert os.fstat(f.fileno()).st_size == 5
        f.seek(0)
        assert f.read() == b"scrat"
    assert alive(mount)
    assert names(mount) == []


def test_unlinked_sandbox_file_is_still_read_whole(server, mount):
    data = os.urandom(3 << 20)
    server.write_file(mount.sandbox_id, mount.spath("big.bin"), data)
    fd = os.open(mount.p("big.bin"), os.O_RDONLY)
    try:
        assert os.read(fd, 4096) == data[:4096]
        os.unlink(mount.p("big.bin"))
        assert server.stat(mount.sandbox_id, mount.spath("big.bin")) is None
        st = os.fstat(fd)
        assert st.st_size == len(data) and st.st_nlink == 0
        os.lseek(fd, 0, os.SEEK_SET)
        got = b""
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            got += b
        assert got == data
    finally:
        os.close(fd)
    assert alive(mount)


def test_getattr_access_lookup_of_gone_names_do_not_crash(server, mount):
    os.mkdir(mount.p("d"))
    fd = os.open(mount.p("d", "f"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x")
    os.unlink(mount.p("d", "f"))
    os.rmdir(mount.p("d"))
    os.fchmod(fd, 0o600)
    os.fsync(fd)  # nothing to upload: it is gone
    os.close(fd)
    for fn in (os.stat, os.lstat, lambda p: os.access(p, os.R_OK)):
        try:
            fn(mount.p("d", "f"))
        except OSError as e:
            assert e.errno == errno.ENOENT
    assert alive(mount)
    assert server.stat(mount.sandbox_id, mount.spath("d")) is None


# ---- a directory replaced by a rename ----

def test_rename_over_a_directory_with_unsaved_files_is_enotempty(server, mount):
    os.mkdir(mount.p("A"))
    os.mkdir(mount.p("B"))
    with open(mount.p("B", "f"), "w") as f:
        f.write("data")
    with pytest.raises(OSError) as e:
        os.rename(mount.p("A"), mount.p("B"))
    assert e.value.errno == errno.ENOTEMPTY
    assert open(mount.p("B", "f")).read() == "data"
    ctl(mount, "sync")
    assert server.read_file(mount.sandbox_id, mount.spath("B", "f")) == b"data"
    assert names(mount) == ["A", "B"]


def test_rename_over_an_empty_directory_replaces_it(server, mount):
    os.mkdir(mount.p("A"))
    with open(mount.p("A", "f"), "w") as f:
        f.write("moved")
    os.mkdir(mount.p("B"))
    os.rename(mount.p("A"), mount.p("B"))
    assert names(mount) == ["B"]
    ctl(mount, "sync")
    assert server.read_file(mount.sandbox_id, mount.spath("B", "f")) == b"moved"
    assert server.stat(mount.sandbox_id, mount.spath("A")) is None


# ---- failing uploads ----

def requests_of(server, sid):
    return sum(server.stats()["sandboxes"].get(sid, {}).values())


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_upload_that_fails_at_once_is_retried_with_backoff(server, mount):
    os.mkdir(mount.p("d"))
    fd = os.open(mount.p("d", "f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"kept")
        # the parent turns into a file in the sandbox: every upload fails
        server.run(mount.sandbox_id, "rm -rf /workspace/d && echo x > /workspace/d")
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno == errno.EIO
        before, cpu0 = requests_of(server, mount.sandbox_id), cpu_seconds(mount.proc.pid)
        time.sleep(3)
        sent = requests_of(server, mount.sandbox_id) - before
        assert sent <= 12, sent
        assert cpu_seconds(mount.proc.pid) - cpu0 < 1.0
    finally:
        os.close(fd)
    with pytest.raises(OSError) as e:
        ctl(mount, "sync")
    assert e.value.errno == errno.EIO
    info = open(mount.p(".osb", "info")).read()
    assert "/workspace/d/f (Not a directory)" in info
    # nothing was dropped: it stays in the cache for the next mount
    mount.stop(expect_status=1)
    assert "1 file(s) and 1 directory(ies) not yet in the sandbox" in mount.log()


# ---- faults: every operation retries or settles what it can ----

FAULTS = dict(rate=0.1, kinds=["reset", "reset_after", "500", "502", "503"], scope="execd")


def test_renames_and_symlinks_settle_lost_answers(server, mount):
    sid = mount.sandbox_id
    for i in range(20):
        with open(mount.p("f%d" % i), "w") as f:
            f.write("v%d" % i)
        with open(mount.p("over%d" % i), "w") as f:
            f.write("old")
    ctl(mount, "sync")
    server.set_faults(**FAULTS)
    try:
        for i in range(20):
            os.rename(mount.p("f%d" % i), mount.p("g%d" % i))             # /files/mv
            os.rename(mount.p("g%d" % i), mount.p("over%d" % i))          # over a file: mv -T
            os.symlink("over%d" % i, mount.p("l%d" % i))                   # ln -s
            os.rename(mount.p("l%d" % i), mount.p("m%d" % i))             # a symlink moves itself
    finally:
        server.clear_faults()
    for i in range(20):
        assert server.read_file(sid, mount.spath("over%d" % i)) == b"v%d" % i
        assert server.stat(sid, mount.spath("f%d" % i)) is None
        assert server.stat(sid, mount.spath("g%d" % i)) is None
        code, out, _ = server.run(sid, "readlink /workspace/m%d" % i)
        assert out.strip() == "over%d" % i, out
    assert alive(mount)


def test_a_rename_whose_source_the_sandbox_lost_fails_and_moves_nothing(server, make_mount):
    """The mount still knows the source, the sandbox no longer has it and
    has a file of someone else's at the destination: the rename fails with
    ENOENT; that file is not taken for the move's doing."""
    m = make_mount(options=["attr_timeout=1h", "dir_timeout=1h", "negative_timeout=1h"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("a"), b"ours\n")
    assert names(m) == ["a"]
    server.run(sid, "rm %s && echo theirs > %s" % (m.spath("a"), m.spath("b")))
    with pytest.raises(FileNotFoundError):
        os.rename(m.p("a"), m.p("b"))
    assert server.read_file(sid, m.spath("b")) == b"theirs\n"
    assert server.stat(sid, m.spath("a")) is None


def test_renaming_a_dangling_symlink_works(server, mount):
    server.run(mount.sandbox_id, "ln -s /nowhere/at/all /workspace/dangling")
    os.rename(mount.p("dangling"), mount.p("moved"))
    _, out, _ = server.run(mount.sandbox_id, "readlink /workspace/moved; ls /workspace")
    assert out.split() == ["/nowhere/at/all", "moved"], out


def test_tar_x_under_faults_keeps_every_mtime(server, mount, tmp_path):
    src = tmp_path / "src"
    for d in range(5):
        (src / ("d%d" % d)).mkdir(parents=True)
        for i in range(20):
            p = src / ("d%d" % d) / ("f%d.txt" % i)
            p.write_text("file %d %d\n" % (d, i))
            os.utime(p, (1_600_000_000 + i, 1_600_000_000 + 100 * d + i))
        os.utime(src / ("d%d" % d), (1_500_000_000, 1_500_000_000 + d))
    tarball = tmp_path / "t.tar"
    subprocess.run(["tar", "cf", str(tarball), "-C", str(src), "."], check=True)
    # times go through commands: the first ones fail
    server.set_faults(next=3, kinds=["500"], scope="execd", path="/command$")
    try:
        r = subprocess.run(["tar", "xf", str(tarball), "-C", mount.path],
                           stderr=subprocess.PIPE, text=True)
        assert r.returncode == 0, r.stderr
        ctl(mount, "sync")
    finally:
        server.clear_faults()
    out = server.run(mount.sandbox_id,
                     "cd /workspace && find d0 d1 d2 d3 d4 -printf '%p %T@\\n' | sort")[1]
    got = dict(line.rsplit(" ", 1) for line in out.splitlines())
    for d in range(5):
        assert float(got["d%d" % d]) == 1_500_000_000 + d, (d, got["d%d" % d])
        for i in range(20):
            assert float(got["d%d/f%d.txt" % (d, i)]) == 1_600_000_000 + 100 * d + i


# ---- osbfs's directory in the sandbox, replaced by the sandbox ----
#
# Renames over a file and symlinks claim their operation in
# /tmp/.osbfs/ops first (at most once). A plain file or a link the
# sandbox put there in its place is removed and the directory made again
# (a link is never followed); a /tmp/.osbfs that is not a directory fails
# the operation at once, naming it.

def rename_over_and_symlink(server, m):
    sid = m.sandbox_id
    server.write_file(sid, m.spath("a"), b"new")
    server.write_file(sid, m.spath("b"), b"old")
    assert sorted(os.listdir(m.p())) == ["a", "b"]
    os.rename(m.p("a"), m.p("b"))
    os.symlink("b", m.p("l"))
    assert server.read_file(sid, m.spath("b")) == b"new"
    _, out, _ = server.run(sid, "readlink %s" % m.spath("l"))
    assert out.strip() == "b"


@pytest.mark.parametrize("kind", ["file", "link"])
def test_an_ops_dir_the_sandbox_replaced_is_made_again(server, mount, kind):
    sid = mount.sandbox_id
    put = ("printf x >/tmp/.osbfs/ops" if kind == "file" else
           "mkdir -p /root/victim && ln -s /root/victim /tmp/.osbfs/ops")
    code, _, err = server.run(sid, "mkdir -p /tmp/.osbfs && rm -rf /tmp/.osbfs/ops && " + put)
    assert code == 0, err
    rename_over_and_symlink(server, mount)
    code, out, err = server.run(sid, "test -d /tmp/.osbfs/ops && test ! -L /tmp/.osbfs/ops && "
                                     "ls -A /root/victim 2>/dev/null | wc -l")
    assert code == 0 and out.strip() == "0", (out, err)


def test_an_osbfs_dir_that_is_a_link_fails_at_once_naming_it(server, mount):
    sid = mount.sandbox_id
    code, _, err = server.run(sid, "rm -rf /tmp/.osbfs && mkdir -p /root/victim && "
                                   "ln -s /root/victim /tmp/.osbfs")
    assert code == 0, err
    server.write_file(sid, mount.spath("a"), b"new")
    server.write_file(sid, mount.spath("b"), b"old")
    assert sorted(os.listdir(mount.p())) == ["a", "b"]
    for fn in (lambda: os.rename(mount.p("a"), mount.p("b")), lambda: os.symlink("b", mount.p("l"))):
        with pytest.raises(OSError) as e:
            fn()
        assert e.value.errno == errno.EIO
    assert "/tmp/.osbfs is a symbolic link" in mount.log()
    assert server.read_file(sid, mount.spath("b")) == b"old"
    assert server.read_file(sid, mount.spath("a")) == b"new"
    code, out, _ = server.run(sid, "ls -A /root/victim | wc -l; rm -f /tmp/.osbfs")
    assert out.split()[0] == "0", out
    # put right, it works again
    rename_over_and_symlink(server, mount)

# ---- a full cache disk ----

@pytest.fixture
def small_disk(tmp_path):
    """A 6 MiB tmpfs for the cache dir (unmounted at teardown, after the
    mounts that use it: request it before make_mount)."""
    d = tmp_path / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(d)], check=True)
    yield str(d)
    subprocess.run(["umount", "-l", str(d)])


def test_a_full_cache_disk_makes_room_from_clean_data(server, small_disk, make_mount):
    m = make_mount(cache_dir=small_disk)
    a, b = os.urandom(3 << 20), os.urandom(3 << 20)
    with open(m.p("a.bin"), "wb") as f:
        f.write(a)
        f.flush()
        os.fsync(f.fileno())        # in the sandbox: its local copy is clean
    with open(m.p("b.bin"), "wb") as f:
        f.write(b)                  # needs the room a.bin's copy takes
        f.flush()
        os.fsync(f.fileno())
    assert server.read_file(m.sandbox_id, m.spath("b.bin")) == b
    with open(m.p("a.bin"), "rb") as f:
        assert f.read() == a        # fetched again


def test_a_rename_on_a_full_disk_is_journaled(server, small_disk, make_mount):
    m = make_mount(cache_dir=small_disk, options=["writeback_delay=1h"])
    with open(m.p("f"), "wb") as f:
        f.write(b"precious")
    os.mkdir(m.p("d"))
    for i in range(40):
        with open(m.p("d", "f%d" % i), "wb") as f:
            f.write(b"file %d" % i)
    # fill the disk with unsaved data
    with pytest.raises(OSError) as e:
        with open(m.p("filler"), "wb") as f:
            while True:
                f.write(b"\0" * (256 << 10))
                f.flush()
    assert e.value.errno == errno.ENOSPC
    os.rename(m.p("f"), m.p("g"))
    os.rename(m.p("d"), m.p("e"))   # 40 records to rewrite
    m.kill9()
    m2 = make_mount(sandbox_id=m.sandbox_id, cache_dir=small_disk)
    ctl(m2, "sync")
    assert server.read_file(m.sandbox_id, m.spath("g")) == b"precious"
    assert server.stat(m.sandbox_id, m.spath("f")) is None
    for i in range(40):
        assert server.read_file(m.sandbox_id, m.spath("e", "f%d" % i)) == b"file %d" % i
    assert server.stat(m.sandbox_id, m.spath("d")) is None


# ---- the server away, the sandbox paused behind our back ----

def errno_of(fn, *args):
    try:
        fn(*args)
    except OSError as e:
        return e.errno
    return 0


def test_server_away_fails_fast_serves_the_cache_and_recovers(make_server, make_mount):
    srv = make_server()
    m = make_mount(srv=srv, options=["attr_timeout=0", "dir_timeout=0", "request_timeout=2s"])
    srv.write_file(m.sandbox_id, m.spath("cached.txt"), b"read before")
    assert open(m.p("cached.txt"), "rb").read() == b"read before"
    assert "cached.txt" in os.listdir(m.path)
    srv.kill()
    # the first request rides out a restart, then the mount knows
    assert errno_of(os.stat, m.p("nothing-here")) == errno.EIO
    t0 = time.monotonic()
    for i in range(20):
        assert errno_of(os.stat, m.p("unknown%d" % i)) == errno.EIO
    assert time.monotonic() - t0 < 10   # at once, not 20 times the retries
    assert json.load(open(m.p(".osb", "info")))["server"] == "away"
    # what is cached is still there to read
    assert open(m.p("cached.txt"), "rb").read() == b"read before"
    assert "cached.txt" in os.listdir(m.path)
    srv.restart()
    wait_until(lambda: errno_of(os.stat, m.p("nothing-here")) == errno.ENOENT, 30,
               "ENOENT again once the server is back")
    with open(m.p("after.txt"), "w") as f:
        f.write("back")
    ctl(m, "sync")
    assert srv.read_file(m.sandbox_id, m.spath("after.txt")) == b"back"
    assert "cannot be reached" in m.log() and "answers again" in m.log()


def test_a_sandbox_paused_by_someone_else_is_resumed_quickly(server, make_mount):
    m = make_mount(options=["attr_timeout=0", "dir_timeout=0"])
    server.write_file(m.sandbox_id, m.spath("f"), b"here")
    st, _, b = server.request("POST", "/v1/sandboxes/%s/pause" % m.sandbox_id)
    assert st in (200, 202, 204), (st, b)
    t0 = time.monotonic()
    assert open(m.p("f"), "rb").read() == b"here"
    took = time.monotonic() - t0
    assert took < 20, took   # the request timeout is 30 s, tried twice
    st, _, g = server.request("GET", "/v1/sandboxes/" + m.sandbox_id)
    assert g["status"]["state"] == "Running"


# ---- smaller things a local disk does ----

def test_a_directory_changes_when_names_come_and_go(make_mount):
    m = make_mount()   # default caching
    os.mkdir(m.p("d"))
    os.mkdir(m.p("d", "sub"))

    def mtime():
        st = os.stat(m.p("d"))
        return st.st_mtime_ns, st.st_ctime_ns

    for change in (lambda: open(m.p("d", "f"), "w").close(),
                   lambda: os.rename(m.p("d", "f"), m.p("d", "g")),
                   lambda: os.unlink(m.p("d", "g")),
                   lambda: os.rmdir(m.p("d", "sub")),
                   lambda: os.symlink("x", m.p("d", "l"))):
        before = mtime()
        time.sleep(0.02)
        change()
        after = mtime()
        assert after[0] > before[0] and after[1] > before[1]


def test_directories_report_one_link(mount):
    os.makedirs(mount.p("a", "b", "c"))
    assert os.stat(mount.p("a")).st_nlink == 1
    assert os.stat(mount.p("a", "b", "c")).st_nlink == 1
    # find does not trust a count of 1 to skip subdirectories
    out = subprocess.run(["find", mount.p("a"), "-type", "d"], capture_output=True,
                         text=True, check=True).stdout.split()
    assert len(out) == 3

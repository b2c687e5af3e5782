"""Directories made here go to the sandbox with the write-back, like the
files in them: many in one request, with the modes they ended up with
(tar makes a directory 0700 and gives it its mode at the end). Until
then the mount knows them without asking; anything that needs them in
the sandbox (sync, fsync of the directory, a job, a symlink in them, a
rename) sends them first, and a crash does not lose them."""

import os
import subprocess
import time

from jobhelp import osb, start, wait, write
from osbtest import execd_requests, route_count, wait_until


def sync(m):
    write(osb(m, "ctl"), "sync")


def test_a_tree_of_new_directories_is_made_in_one_request(server, make_mount):
    m = make_mount(options=["writeback_delay=1h", "attr_timeout=30s", "dir_timeout=30s"])
    sid = m.sandbox_id
    os.mkdir(m.p("top"))
    server.reset_stats()
    for i in range(20):
        os.makedirs(m.p("top", "d%02d" % i, "sub"), mode=0o700)
        with open(m.p("top", "d%02d" % i, "sub", "f"), "w") as f:
            f.write("%d" % i)
    for i in range(20):
        os.chmod(m.p("top", "d%02d" % i), 0o750)
    assert execd_requests(server, sid) == 0
    assert os.stat(m.p("top", "d03")).st_mode & 0o7777 == 0o750
    assert sorted(os.listdir(m.p("top")))[:2] == ["d00", "d01"]
    sync(m)
    assert route_count(server, sid, "POST /directories") == 1
    assert route_count(server, sid, "POST /files/permissions") == 0
    assert route_count(server, sid, "POST /files/upload") == 1
    for i in range(20):
        assert server.stat(sid, m.spath("top", "d%02d" % i))["mode"] == 750
        assert server.stat(sid, m.spath("top", "d%02d" % i, "sub"))["mode"] == 700
        assert server.read_file(sid, m.spath("top", "d%02d" % i, "sub", "f")) == b"%d" % i


def test_modes_of_directories_in_the_sandbox_are_sent_together(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    server.run(sid, "mkdir -p %s/a %s/b %s/c" % ((m.spath(),) * 3))
    for n in "abc":
        os.stat(m.p(n))
    server.reset_stats()
    for n in "abc":
        os.chmod(m.p(n), 0o711)
    assert route_count(server, sid, "POST /files/permissions") == 0
    assert route_count(server, sid, "POST /directories") == 0
    sync(m)
    assert route_count(server, sid, "POST /directories") == 1
    for n in "abc":
        assert server.stat(sid, m.spath(n))["mode"] == 711


def test_a_new_directory_removed_again_leaves_nothing(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.makedirs(m.p("gone", "deeper"))
    os.rmdir(m.p("gone", "deeper"))
    os.rmdir(m.p("gone"))
    assert not os.path.exists(m.p("gone"))
    sync(m)
    assert server.stat(sid, m.spath("gone")) is None
    assert "gone" not in open(osb(m, "info")).read()


def test_a_new_directory_removed_while_its_batch_is_on_the_way_stays_removed(server, make_mount):
    """The rmdir comes while the write-back's request that makes the
    directory is on its way: it waits for it, and the directory is gone
    from the sandbox too (it was made again after the removal)."""
    m = make_mount(options=["writeback_delay=100ms"])
    sid = m.sandbox_id
    server.reset_stats()
    server.set_faults(next=1, kinds=["delay"], delay_ms=1500, method="POST", path="/directories$")
    try:
        os.mkdir(m.p("d"))
        wait_until(lambda: route_count(server, sid, "POST /directories") == 1, 30,
                   "the batch that makes the directory")
        os.rmdir(m.p("d"))
    finally:
        server.clear_faults()
    sync(m)
    assert "d" not in os.listdir(m.p())
    assert server.stat(sid, m.spath("d")) is None


def test_a_new_directory_renamed_arrives_under_its_new_name(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.makedirs(m.p("old", "inner"))
    with open(m.p("old", "inner", "f.txt"), "w") as f:
        f.write("moved")
    os.rename(m.p("old"), m.p("new"))
    assert open(m.p("new", "inner", "f.txt")).read() == "moved"
    sync(m)
    assert server.stat(sid, m.spath("old")) is None
    assert server.read_file(sid, m.spath("new", "inner", "f.txt")) == b"moved"


def test_fsync_of_a_directory_puts_its_new_subdirectories_in_the_sandbox(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.mkdir(m.p("p"), 0o755)
    os.mkdir(m.p("p", "q"), 0o705)
    assert server.stat(sid, m.spath("p", "q")) is None
    fd = os.open(m.p("p"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    assert server.stat(sid, m.spath("p"))["type"] == "directory"
    assert server.stat(sid, m.spath("p", "q"))["mode"] == 705


def test_symlinks_and_special_modes_in_new_directories(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.mkdir(m.p("links"))
    os.symlink("../target", m.p("links", "l"))
    assert os.readlink(m.p("links", "l")) == "../target"
    os.mkdir(m.p("sticky"))
    os.chmod(m.p("sticky"), 0o1777)
    os.mkdir(m.p("none"))
    os.chmod(m.p("none"), 0)
    sync(m)
    _, out, _ = server.run(sid, "readlink %s; stat -c %%a %s %s" % (
        m.spath("links", "l"), m.spath("sticky"), m.spath("none")))
    assert out.split() == ["../target", "1777", "0"]


def test_a_job_sees_directories_made_just_before(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    os.makedirs(m.p("work", "out"), mode=0o750)
    jid = start(m, "stat -c %a work/out")
    assert wait(m, jid) == "exited 0"
    assert open(osb(m, "jobs", jid, "stdout")).read().strip() == "750"


def test_new_directories_survive_a_crash(server, make_mount, tmp_path):
    cache = str(tmp_path / "cache")
    m = make_mount(options=["writeback_delay=1h"], cache_dir=cache)
    sid = m.sandbox_id
    os.makedirs(m.p("empty", "nested"), mode=0o701)
    os.chmod(m.p("empty"), 0o710)
    m.kill9()
    assert server.stat(sid, m.spath("empty")) is None
    m2 = make_mount(sandbox_id=sid, create=False, cache_dir=cache)
    assert os.stat(m2.p("empty", "nested")).st_mode & 0o777 == 0o701
    sync(m2)
    assert server.stat(sid, m2.spath("empty"))["mode"] == 710
    assert server.stat(sid, m2.spath("empty", "nested"))["mode"] == 701
    m2.stop()


def test_untar_of_a_tree_makes_its_directories_with_their_modes(server, make_mount, tmp_path):
    src = tmp_path / "src"
    for d in ("a", "a/b", "a/b/c", "x"):
        (src / d).mkdir(parents=True)
        (src / d / "f").write_text(d)
    os.chmod(src / "a" / "b", 0o751)
    os.chmod(src / "x", 0o700)
    tarball = tmp_path / "t.tar"
    subprocess.run(["tar", "cf", str(tarball), "-C", str(src), "."], check=True)
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.mkdir(m.p("t"))
    server.reset_stats()
    subprocess.run(["tar", "xf", str(tarball), "-C", m.p("t")], check=True)
    sync(m)
    assert route_count(server, sid, "POST /directories") <= 2
    assert route_count(server, sid, "POST /files/permissions") == 0
    assert server.stat(sid, m.spath("t", "a", "b"))["mode"] == 751
    assert server.stat(sid, m.spath("t", "x"))["mode"] == 700
    assert server.read_file(sid, m.spath("t", "a", "b", "c", "f")) == b"a/b/c"


def test_a_file_sent_before_its_new_directory_stays_listed(server, make_mount):
    """fsync sends the file alone (the upload makes its directory with
    execd's defaults); the directory, still to be sent with its mode, is
    listed without asking the sandbox, and shows the file."""
    m = make_mount(options=["writeback_delay=1h", "attr_timeout=0.2s", "dir_timeout=0.2s",
                            "negative_timeout=0.2s"])
    sid = m.sandbox_id
    os.mkdir(m.p("d"), 0o701)
    fd = os.open(m.p("d", "f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"sent")
        os.fsync(fd)
    finally:
        os.close(fd)
    assert server.read_file(sid, m.spath("d", "f")) == b"sent"
    for _ in range(3):
        time.sleep(0.3)
        assert os.listdir(m.p("d")) == ["f"]
        assert open(m.p("d", "f"), "rb").read() == b"sent"
    sync(m)
    assert server.stat(sid, m.spath("d"))["mode"] == 701

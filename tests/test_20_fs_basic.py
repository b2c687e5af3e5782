"""Basic file operations through a mount, each checked on the sandbox side
through the file API (server.read_file / server.stat), not only through the
mount."""

import errno
import os
import stat

import pytest

from osbtest import wait_until


@pytest.fixture
def mount(make_mount):
    """These tests change files on both sides: no caching of names and
    attributes, so a change made through the file API shows at once (the
    caches have their own tests)."""
    return make_mount(options=["attr_timeout=0", "dir_timeout=0", "negative_timeout=0"])


def sync(m):
    """Every dirty file uploaded, with its times: `sync` through the
    control file when the mount has one; else fsync of each file (which
    waits for the bytes: the times follow within seconds)."""
    ctl = m.p(".osb", "ctl")
    if os.path.exists(ctl):
        with open(ctl, "w") as f:
            f.write("sync\n")
        return
    os.sync()
    for root, _, files in os.walk(m.path):
        if "/.osb" in root:
            continue
        for f in files:
            p = os.path.join(root, f)
            if os.path.islink(p):
                continue
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def test_write_then_read_back_and_in_sandbox(server, mount):
    with open(mount.p("hello.txt"), "w") as f:
        f.write("hello world\n")
    with open(mount.p("hello.txt")) as f:
        assert f.read() == "hello world\n"
    sync(mount)
    assert server.read_file(mount.sandbox_id, mount.spath("hello.txt")) == b"hello world\n"


def test_file_made_in_sandbox_is_read(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("from-sandbox.bin"), b"\x00\x01abc" * 1000)
    with open(mount.p("from-sandbox.bin"), "rb") as f:
        assert f.read() == b"\x00\x01abc" * 1000


def test_fsync_puts_data_in_sandbox_at_once(server, mount):
    fd = os.open(mount.p("f.txt"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"synced")
    os.fsync(fd)
    assert server.read_file(mount.sandbox_id, mount.spath("f.txt")) == b"synced"
    os.write(fd, b" more")
    os.fsync(fd)
    assert server.read_file(mount.sandbox_id, mount.spath("f.txt")) == b"synced more"
    os.close(fd)


def test_append_and_overwrite_in_place(server, mount):
    p = mount.p("a.txt")
    with open(p, "w") as f:
        f.write("0123456789")
    with open(p, "a") as f:
        f.write("abc")
    with open(p, "r+") as f:
        f.seek(2)
        f.write("XY")
    with open(p) as f:
        assert f.read() == "01XY456789abc"
    sync(mount)
    assert server.read_file(mount.sandbox_id, mount.spath("a.txt")) == b"01XY456789abc"


def test_truncate_and_ftruncate(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("t.txt"), b"abcdefghij")
    os.truncate(mount.p("t.txt"), 4)
    assert open(mount.p("t.txt"), "rb").read() == b"abcd"
    with open(mount.p("t.txt"), "r+b") as f:
        f.truncate(8)
    assert os.stat(mount.p("t.txt")).st_size == 8
    sync(mount)
    assert server.read_file(mount.sandbox_id, mount.spath("t.txt")) == b"abcd\0\0\0\0"


def test_open_trunc_of_existing_file(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("o.txt"), b"old content here")
    with open(mount.p("o.txt"), "w") as f:
        f.write("new")
    sync(mount)
    assert server.read_file(mount.sandbox_id, mount.spath("o.txt")) == b"new"


def test_mkdir_and_nested_files(server, mount):
    os.makedirs(mount.p("d1", "d2"))
    with open(mount.p("d1", "d2", "x"), "w") as f:
        f.write("x")
    sync(mount)
    st = server.stat(mount.sandbox_id, mount.spath("d1", "d2"))
    assert st["type"] == "directory"
    assert server.read_file(mount.sandbox_id, mount.spath("d1", "d2", "x")) == b"x"
    assert sorted(os.listdir(mount.p("d1"))) == ["d2"]


def test_mkdir_existing_is_eexist(mount):
    os.mkdir(mount.p("dd"))
    with pytest.raises(OSError) as e:
        os.mkdir(mount.p("dd"))
    assert e.value.errno == errno.EEXIST


def test_rmdir_non_empty_is_enotempty(server, mount):
    os.mkdir(mount.p("full"))
    server.write_file(mount.sandbox_id, mount.spath("full", "inside"), b"1")
    with pytest.raises(OSError) as e:
        os.rmdir(mount.p("full"))
    assert e.value.errno == errno.ENOTEMPTY
    assert server.read_file(mount.sandbox_id, mount.spath("full", "inside")) == b"1"


def test_rmdir_with_unsaved_file_is_enotempty(mount):
    os.mkdir(mount.p("pending"))
    with open(mount.p("pending", "f"), "w") as f:
        f.write("not uploaded yet")
    with pytest.raises(OSError) as e:
        os.rmdir(mount.p("pending"))
    assert e.value.errno == errno.ENOTEMPTY


def test_rmdir_empty_removes_in_sandbox(server, mount):
    os.mkdir(mount.p("empty"))
    os.rmdir(mount.p("empty"))
    assert server.stat(mount.sandbox_id, mount.spath("empty")) is None
    assert not os.path.exists(mount.p("empty"))


def test_rmdir_of_a_file_is_enotdir(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("plain"), b"1")
    with pytest.raises(OSError) as e:
        os.rmdir(mount.p("plain"))
    assert e.value.errno == errno.ENOTDIR


def test_unlink_file_and_directory(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("gone"), b"1")
    os.unlink(mount.p("gone"))
    assert server.stat(mount.sandbox_id, mount.spath("gone")) is None
    os.mkdir(mount.p("adir"))
    with pytest.raises(OSError) as e:
        os.unlink(mount.p("adir"))
    assert e.value.errno == errno.EISDIR


def test_unlink_missing_is_enoent(mount):
    with pytest.raises(OSError) as e:
        os.unlink(mount.p("never-was"))
    assert e.value.errno == errno.ENOENT


def test_unsaved_file_deleted_is_never_uploaded(server, mount):
    with open(mount.p("tmpfile"), "w") as f:
        f.write("scratch")
    os.unlink(mount.p("tmpfile"))
    sync(mount)
    assert server.stat(mount.sandbox_id, mount.spath("tmpfile")) is None


def test_rename_file(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("r1"), b"data")
    os.rename(mount.p("r1"), mount.p("r2"))
    assert server.stat(mount.sandbox_id, mount.spath("r1")) is None
    assert server.read_file(mount.sandbox_id, mount.spath("r2")) == b"data"
    assert open(mount.p("r2"), "rb").read() == b"data"


def test_rename_over_existing_file(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("src"), b"new")
    server.write_file(mount.sandbox_id, mount.spath("dst"), b"old")
    os.rename(mount.p("src"), mount.p("dst"))
    assert server.read_file(mount.sandbox_id, mount.spath("dst")) == b"new"
    assert server.stat(mount.sandbox_id, mount.spath("src")) is None
    assert open(mount.p("dst"), "rb").read() == b"new"


def test_rename_unsaved_file_over_existing(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("target"), b"old")
    with open(mount.p("target.tmp"), "w") as f:
        f.write("replacement")
    os.rename(mount.p("target.tmp"), mount.p("target"))
    sync(mount)
    assert server.read_file(mount.sandbox_id, mount.spath("target")) == b"replacement"
    assert server.stat(mount.sandbox_id, mount.spath("target.tmp")) is None
    names = os.listdir(mount.p())
    assert not any(".conflict-" in n for n in names), names


def test_rename_directory_with_unsaved_files(server, mount):
    os.makedirs(mount.p("olddir", "sub"))
    with open(mount.p("olddir", "sub", "f"), "w") as f:
        f.write("inside")
    os.rename(mount.p("olddir"), mount.p("newdir"))
    sync(mount)
    assert server.read_file(mount.sandbox_id, mount.spath("newdir", "sub", "f")) == b"inside"
    assert server.stat(mount.sandbox_id, mount.spath("olddir")) is None


def test_rename_over_empty_directory(server, mount):
    os.mkdir(mount.p("da"))
    server.write_file(mount.sandbox_id, mount.spath("da", "x"), b"x")
    os.mkdir(mount.p("db"))
    os.rename(mount.p("da"), mount.p("db"))
    assert server.read_file(mount.sandbox_id, mount.spath("db", "x")) == b"x"
    assert server.stat(mount.sandbox_id, mount.spath("da")) is None


def test_rename_over_non_empty_directory_is_enotempty(server, mount):
    os.mkdir(mount.p("ea"))
    os.mkdir(mount.p("eb"))
    server.write_file(mount.sandbox_id, mount.spath("eb", "keep"), b"k")
    with pytest.raises(OSError) as e:
        os.rename(mount.p("ea"), mount.p("eb"))
    assert e.value.errno == errno.ENOTEMPTY
    assert server.read_file(mount.sandbox_id, mount.spath("eb", "keep")) == b"k"


def test_rename_file_over_directory_is_eisdir(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("fa"), b"1")
    os.mkdir(mount.p("fd"))
    with pytest.raises(OSError) as e:
        os.rename(mount.p("fa"), mount.p("fd"))
    assert e.value.errno == errno.EISDIR


def test_chmod_applies_in_sandbox(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("m.sh"), b"#!/bin/sh\necho hi\n", mode=644)
    os.chmod(mount.p("m.sh"), 0o755)
    assert server.stat(mount.sandbox_id, mount.spath("m.sh"))["mode"] == 755
    assert stat.S_IMODE(os.stat(mount.p("m.sh")).st_mode) == 0o755
    code, out, _ = server.run(mount.sandbox_id, mount.spath("m.sh"))
    assert (code, out) == (0, "hi\n")


def test_chmod_000_and_setuid_bits(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("z"), b"1")
    os.chmod(mount.p("z"), 0o000)
    _, out, _ = server.run(mount.sandbox_id, "stat -c %a " + mount.spath("z"))
    assert out.strip() == "0"
    os.chmod(mount.p("z"), 0o4755)
    _, out, _ = server.run(mount.sandbox_id, "stat -c %a " + mount.spath("z"))
    assert out.strip() == "4755"


def test_chmod_of_unsaved_file_is_uploaded_with_it(server, mount):
    with open(mount.p("new.sh"), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(mount.p("new.sh"), 0o700)
    sync(mount)
    assert server.stat(mount.sandbox_id, mount.spath("new.sh"))["mode"] == 700


def test_chmod_keeps_sandbox_owner(server, mount):
    sid = mount.sandbox_id
    server.write_file(sid, mount.spath("owned"), b"1")
    server.run(sid, "chown nobody:nogroup " + mount.spath("owned"))
    os.chmod(mount.p("owned"), 0o600)
    st = server.stat(sid, mount.spath("owned"))
    assert (st["owner"], st["mode"]) == ("nobody", 600)


def test_utimens_sets_times_in_sandbox(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("times"), b"1")
    os.utime(mount.p("times"), ns=(1_600_000_000_123_456_789, 1_500_000_000_987_654_321))
    _, out, _ = server.run(mount.sandbox_id, "stat -c '%.9Y' " + mount.spath("times"))
    assert out.strip() == "1500000000.987654321"
    assert os.stat(mount.p("times")).st_mtime_ns == 1_500_000_000_987_654_321


def test_mtime_survives_upload(server, mount):
    with open(mount.p("mt"), "w") as f:
        f.write("x")
    before = os.stat(mount.p("mt")).st_mtime_ns
    sync(mount)
    _, out, _ = server.run(mount.sandbox_id, "stat -c '%.9Y' " + mount.spath("mt"))
    secs, frac = out.strip().split(".")
    assert int(secs) * 10**9 + int(frac) == before
    assert os.stat(mount.p("mt")).st_mtime_ns == before


def test_symlink_and_readlink(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("target.txt"), b"via link")
    os.symlink("target.txt", mount.p("link"))
    assert os.readlink(mount.p("link")) == "target.txt"
    assert open(mount.p("link"), "rb").read() == b"via link"
    assert server.stat(mount.sandbox_id, mount.spath("link"))["type"] == "symlink"
    _, out, _ = server.run(mount.sandbox_id, "readlink " + mount.spath("link"))
    assert out.strip() == "target.txt"


def test_symlink_made_in_sandbox_and_dangling(server, mount):
    server.run(mount.sandbox_id, "ln -s /nowhere/at/all %s" % mount.spath("dangle"))
    # outside DIR: shown as a dead end in the mount (test_29_fs_symlinks.py)
    assert os.readlink(mount.p("dangle")) == ".osb/outside/nowhere/at/all"
    os.unlink(mount.p("dangle"))
    assert server.stat(mount.sandbox_id, mount.spath("dangle")) is None


def test_symlink_to_directory_unlinks_link_only(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("realdir", "f"), b"f")
    os.symlink("realdir", mount.p("dirlink"))
    assert os.listdir(mount.p("dirlink")) == ["f"]
    os.unlink(mount.p("dirlink"))
    assert server.read_file(mount.sandbox_id, mount.spath("realdir", "f")) == b"f"


def test_hard_link_shares_the_inode(server, mount):
    """More in test_57_fs_hardlinks.py."""
    server.write_file(mount.sandbox_id, mount.spath("hl"), b"1")
    os.link(mount.p("hl"), mount.p("hl2"))
    assert os.stat(mount.p("hl")).st_ino == os.stat(mount.p("hl2")).st_ino
    code, out, _ = server.run(mount.sandbox_id, "stat -c %%i %s %s" % (
        mount.spath("hl"), mount.spath("hl2")))
    assert code == 0 and len(set(out.split())) == 1, out


def test_statfs_reports_sandbox_space(mount):
    st = os.statvfs(mount.p())
    assert st.f_bsize > 0 and st.f_blocks > 0
    assert st.f_namemax == 255


def test_stat_of_missing_is_enoent(mount):
    with pytest.raises(FileNotFoundError):
        os.stat(mount.p("nope", "deeper"))


def test_open_excl_of_existing_is_eexist(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("ex"), b"1")
    with pytest.raises(FileExistsError):
        os.open(mount.p("ex"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)


def test_open_directory_for_write_is_eisdir(mount):
    os.mkdir(mount.p("wd"))
    with pytest.raises(IsADirectoryError):
        open(mount.p("wd"), "w")


def test_file_as_directory_is_enotdir(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("notdir"), b"1")
    with pytest.raises(NotADirectoryError):
        os.stat(mount.p("notdir", "child"))


def test_listing_shows_attributes(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("l", "a"), b"12345")
    os.mkdir(mount.p("l", "b"))
    entries = {e.name: e for e in os.scandir(mount.p("l"))}
    assert set(entries) == {"a", "b"}
    assert entries["a"].stat().st_size == 5 and entries["a"].is_file()
    assert entries["b"].is_dir()


def test_inode_numbers_stable(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("ino"), b"1")
    a = os.stat(mount.p("ino")).st_ino
    mount_ctl = mount.p(".osb", "ctl")
    if os.path.exists(mount_ctl):
        with open(mount_ctl, "w") as f:
            f.write("invalidate\n")
    b = os.stat(mount.p("ino")).st_ino
    assert a == b


def test_mount_of_another_directory(server, make_mount, make_sandbox):
    sid = make_sandbox()
    server.write_file(sid, "/home/proj/readme", b"home")
    m = make_mount(sandbox_id=sid, sdir="/home/proj", create=False)
    assert open(m.p("readme"), "rb").read() == b"home"
    with open(m.p("more"), "w") as f:
        f.write("more")
    m.stop()
    assert server.read_file(sid, "/home/proj/more") == b"more"


def test_missing_directory_is_made(server, make_mount, make_sandbox):
    sid = make_sandbox()
    m = make_mount(sandbox_id=sid, sdir="/root/new/dir", create=False)
    assert os.listdir(m.p()) == [".osb"] or os.listdir(m.p()) == []
    assert server.stat(sid, "/root/new/dir")["type"] == "directory"


def test_dotdot_stays_inside_mount(server, mount):
    # the kernel resolves ".." itself: the mount root's parent is local
    assert os.path.realpath(os.path.join(mount.p(), "..")) == os.path.dirname(mount.p())
    os.symlink("../../etc/passwd", mount.p("up"))
    # the link is stored as given; the mount shows where it leads (out of
    # DIR: a dead end inside the mount), so the host never resolves it
    _, out, _ = server.run(mount.sandbox_id, "readlink " + mount.spath("up"))
    assert out.strip() == "../../etc/passwd"
    assert os.readlink(mount.p("up")) == ".osb/outside/etc/passwd"


def test_unmount_uploads_pending_files(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    with open(m.p("late"), "w") as f:
        f.write("uploaded at unmount")
    assert server.stat(sid, m.spath("late")) is None
    assert m.stop() == 0
    assert server.read_file(sid, m.spath("late")) == b"uploaded at unmount"


def test_upload_happens_after_close_and_delay(server, make_mount):
    m = make_mount(options=["writeback_delay=200ms"])
    with open(m.p("soon"), "w") as f:
        f.write("soon")
    wait_until(lambda: server.stat(m.sandbox_id, m.spath("soon")), 10, "the upload of soon")
    assert server.read_file(m.sandbox_id, m.spath("soon")) == b"soon"

"""What must never happen through a mount, whatever the user or the
sandbox does: a crash of the daemon, data lost or sent twice, a retry
storm, a fault that reaches the user when a retry or a check could settle
it. Each test checks the sandbox side through the file API, and the daemon
is checked at teardown (exit status, sanitizer reports)."""

import errno
import os
import subprocess
import tempfile
import threading
import time

import pytest

from mounthelp import fsync_path, make_mount  # noqa: F401  (fixture)


@pytest.fixture
def mount(make_mount):
    return make_mount(options=["attr_timeout=0", "dir_timeout=0", "negative_timeout=0"])


def ctl(m, verb):
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write(verb + "\n")


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

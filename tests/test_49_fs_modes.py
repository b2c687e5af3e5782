"""Modes the file API cannot carry, and files made by mknod(2).

setuid, setgid and sticky: execd's listings and stats never report them,
so the mount keeps what it set itself and learns the sandbox's own with
one command per listing that brings entries it does not know (checked
through the mount, against `stat` run in the sandbox, and as another
user under allow_other). mknod(2) of a regular file makes one as
create(2) does; fifos, sockets and devices are refused with EPERM."""

import errno
import io
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile

import pytest

from jobhelp import expect_errno, osb, start, wait, write
from osbtest import route_count


def sync(m):
    write(osb(m, "ctl"), "sync")


def invalidate(m):
    """Every cache of the mount dropped, the kernel's too: what shows next
    is asked of the sandbox again (instead of waiting out the timeouts)."""
    write(osb(m, "ctl"), "invalidate")


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def sandbox_mode(server, m, *parts):
    """The mode as the sandbox's own stat says, all twelve bits."""
    rc, out, err = server.run(m.sandbox_id, "stat -c %%a %s" % m.spath(*parts))
    assert rc == 0, err
    return int(out.strip(), 8)


# ---- mknod(2) ----

def test_mknod_of_a_regular_file_makes_an_empty_file(server, mount):
    os.mknod(mount.p("made"), 0o640 | stat.S_IFREG)
    st = os.stat(mount.p("made"))
    assert stat.S_ISREG(st.st_mode) and st.st_size == 0
    assert stat.S_IMODE(st.st_mode) == 0o640
    sync(mount)
    assert server.read_file(mount.sandbox_id, mount.spath("made")) == b""
    assert sandbox_mode(server, mount, "made") == 0o640
    # an existing name: EEXIST, as on a local disk
    expect_errno(errno.EEXIST, os.mknod, mount.p("made"), 0o644 | stat.S_IFREG)


def test_mkfifo_and_devices_are_refused_with_eperm(server, mount):
    expect_errno(errno.EPERM, os.mkfifo, mount.p("fifo"))
    expect_errno(errno.EPERM, os.mknod, mount.p("dev"), 0o600 | stat.S_IFCHR,
                 os.makedev(1, 3))
    assert not os.path.lexists(mount.p("fifo"))
    assert server.stat(mount.sandbox_id, mount.spath("fifo")) is None
    assert "mknod fifo: cannot make a fifo" in mount.log()


def test_tar_with_xattrs_extracts_every_file(server, mount, tmp_path):
    """GNU tar --xattrs makes each member that carries extended attributes
    with mknodat before it opens it (its setxattr may fail: a warning, not
    an error)."""
    files = {"a.txt": b"alpha\n", "sub/b.bin": bytes(range(256)), "sub/empty": b""}
    tar = tmp_path / "t.tar"
    with tarfile.open(str(tar), "w", format=tarfile.PAX_FORMAT) as t:
        d = tarfile.TarInfo("sub")
        d.type, d.mode = tarfile.DIRTYPE, 0o755
        t.addfile(d)
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            ti.pax_headers = {"SCHILY.xattr.user.origin": "test"}
            t.addfile(ti, io.BytesIO(data))
    os.mkdir(mount.p("x"))
    r = subprocess.run(["tar", "--xattrs", "-xf", str(tar)], cwd=mount.p("x"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    sync(mount)
    for name, data in files.items():
        with open(mount.p("x", name), "rb") as f:
            assert f.read() == data
        assert server.read_file(mount.sandbox_id, mount.spath("x", name)) == data

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
import stat
import subprocess
import tarfile

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


# ---- setuid, setgid, sticky ----

def test_a_sticky_directory_keeps_its_bit_past_a_listing(server, mount):
    os.mkdir(mount.p("st"))
    os.chmod(mount.p("st"), 0o1777)
    os.mkdir(mount.p("st", "sub"))
    sync(mount)
    assert sandbox_mode(server, mount, "st") == 0o1777
    # asked of the sandbox again: its listings and stats never say
    invalidate(mount)
    assert mode_of(mount.p("st")) == 0o1777
    assert os.listdir(mount.p("st")) == ["sub"]
    assert mode_of(mount.p("st")) == 0o1777


def test_setuid_and_setgid_on_files_and_directories(server, mount):
    for name in ("u", "g"):
        with open(mount.p(name), "w") as f:
            f.write("#!/bin/sh\n")
    os.chmod(mount.p("u"), 0o4755)
    os.chmod(mount.p("g"), 0o2755)
    os.mkdir(mount.p("d"))
    os.chmod(mount.p("d"), 0o2775)
    sync(mount)
    want = {"u": 0o4755, "g": 0o2755, "d": 0o2775}
    assert {n: sandbox_mode(server, mount, n) for n in want} == want
    invalidate(mount)
    assert {n: mode_of(mount.p(n)) for n in want} == want
    # a file already in the sandbox, given the bit, and one written after
    server.write_file(mount.sandbox_id, mount.spath("old"), b"x", mode=755)
    os.chmod(mount.p("old"), 0o4711)
    with open(mount.p("u"), "a") as f:
        f.write("exit 0\n")
    sync(mount)
    invalidate(mount)
    assert mode_of(mount.p("old")) == 0o4711
    assert mode_of(mount.p("u")) == 0o4755
    assert sandbox_mode(server, mount, "old") == 0o4711
    assert sandbox_mode(server, mount, "u") == 0o4755


def test_special_bits_set_by_a_job_show_through_the_mount(server, mount):
    os.mkdir(mount.p("w"))
    with open(mount.p("w", "tool"), "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(mount.p("w", "tool"), 0o755)
    assert sorted(os.listdir(mount.p("w"))) == ["tool"]
    assert mode_of(mount.p("w", "tool")) == 0o755
    jid = start(mount, "cd w && chmod u+s tool && mkdir shared && chmod 1777 shared "
                       "&& mkdir grp && chmod 2750 grp")
    assert wait(mount, jid) == "exited 0"
    assert mode_of(mount.p("w", "tool")) == 0o4755
    assert mode_of(mount.p("w", "shared")) == 0o1777
    assert mode_of(mount.p("w", "grp")) == 0o2750
    # and taken away again
    jid = start(mount, "chmod u-s w/tool && chmod -t w/shared")
    assert wait(mount, jid) == "exited 0"
    assert mode_of(mount.p("w", "tool")) == 0o755
    assert mode_of(mount.p("w", "shared")) == 0o777


def test_special_bits_survive_a_remount(server, make_mount):
    m = make_mount()
    os.mkdir(m.p("tmp"))
    os.chmod(m.p("tmp"), 0o1777)
    with open(m.p("su"), "w") as f:
        f.write("x")
    os.chmod(m.p("su"), 0o4750)
    sid = m.sandbox_id
    m.stop()
    again = make_mount(sandbox_id=sid)
    # a lookup of one name, then a listing of them all
    assert mode_of(again.p("tmp")) == 0o1777
    assert sorted(os.listdir(again.p())) == ["su", "tmp"]
    assert mode_of(again.p("su")) == 0o4750
    assert sandbox_mode(server, again, "tmp") == 0o1777


def test_a_listing_learns_the_sandboxs_special_bits_with_one_command(server, make_mount):
    """A listing of entries the mount does not know yet costs one command
    more, which learns the special bits of the whole subtree; a listing of
    the same entries again (nothing changed) costs none."""
    # feed=no: its own command would count below
    m = make_mount(options=["attr_timeout=30s", "dir_timeout=30s", "feed=no"])
    sid = m.sandbox_id
    rc, _, err = server.run(sid, "cd %s && mkdir -p a/b c && touch a/f a/b/g c/h "
                                 "&& chmod 4755 a/b/g && chmod 1777 c" % m.spath())
    assert rc == 0, err
    server.reset_stats()
    assert sorted(os.listdir(m.p())) == ["a", "c"]
    modes = {p: mode_of(m.p(p)) for p in ("a", "a/f", "a/b", "a/b/g", "c", "c/h")}
    assert modes["a/b/g"] == 0o4755 and modes["c"] == 0o1777 and modes["a/f"] == 0o644
    assert route_count(server, sid, "GET /directories/list") == 1
    assert route_count(server, sid, "POST /command") == 1
    invalidate(m)
    server.reset_stats()
    assert mode_of(m.p("a", "b", "g")) == 0o4755
    assert mode_of(m.p("c")) == 0o1777
    assert route_count(server, sid, "POST /command") == 0


def test_a_lone_lookup_asks_for_the_special_bits_only_when_the_mode_is_looked_at(server, make_mount):
    """A name looked up alone (its directory never listed) is stat'ed by
    the file API, which cannot say the special bits: reaching it costs
    what it did, and a stat of it asks one command more."""
    m = make_mount()
    sid = m.sandbox_id
    rc, _, err = server.run(sid, "mkdir -p %s/d && touch %s/d/tool && chmod 4711 %s/d/tool"
                            % ((m.spath(),) * 3))
    assert rc == 0, err
    server.reset_stats()
    assert os.access(m.p("d", "tool"), os.F_OK)
    assert route_count(server, sid, "GET /files/info") == 2
    assert route_count(server, sid, "POST /command") == 0
    assert not os.access(m.p("d", "none"), os.F_OK)
    assert route_count(server, sid, "POST /command") == 0
    assert mode_of(m.p("d", "tool")) == 0o4711
    assert route_count(server, sid, "POST /command") == 1


AS_NOBODY = """import errno, os, sys
op, a = sys.argv[1], sys.argv[2]
try:
    if op == "rmdir":
        os.rmdir(a)
    elif op == "unlink":
        os.unlink(a)
    elif op == "rename":
        os.rename(a, sys.argv[3])
    elif op == "create":
        os.close(os.open(a, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])
"""


def as_nobody(*args):
    """A file operation as user nobody: "ok" or the errno's name."""
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            "/usr/bin/python3", "-c", AS_NOBODY] + list(args)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_sticky_directory_keeps_other_users_from_removing_entries(server, make_mount, shared_dir):
    """Under allow_other the kernel checks the sticky bit: nobody may write
    into the 1777 directory, but not remove or rename what it does not
    own (root's, who mounted it)."""
    m = make_mount(options=["allow_other"], workdir=shared_dir)
    os.mkdir(m.p("st"))
    os.chmod(m.p("st"), 0o1777)
    os.mkdir(m.p("st", "sub"))
    with open(m.p("st", "f"), "w") as f:
        f.write("root's\n")
    sync(m)
    invalidate(m)
    assert as_nobody("create", m.p("st", "mine")) == "ok"
    assert as_nobody("rmdir", m.p("st", "sub")) == "EPERM"
    assert as_nobody("unlink", m.p("st", "f")) == "EPERM"
    assert as_nobody("rename", m.p("st", "f"), m.p("st", "g")) == "EPERM"
    sync(m)
    assert sorted(os.listdir(m.p("st"))) == ["f", "mine", "sub"]
    assert server.stat(m.sandbox_id, m.spath("st", "sub"))["type"] == "directory"
    assert server.read_file(m.sandbox_id, m.spath("st", "f")) == b"root's\n"

"""Extended attributes: user.* kept by the mount, the rest refused.

The sandbox's API has none, so the mount keeps the user.* attributes set
through it in a record of its own in the cache slot (it survives a kill
and a remount), moved by a rename, dropped by an unlink or when the
sandbox no longer lists the name; reading them costs no request.
security.*, trusted.* and system.* are ENOTSUP, as on a filesystem
without them. Checked with the syscalls (errnos exactly), cp -a and GNU
tar --xattrs."""

import ctypes
import errno
import os
import shutil
import subprocess

from jobhelp import expect_errno, osb, write
from osbtest import execd_requests

libc = ctypes.CDLL(None, use_errno=True)
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.getxattr.restype = ctypes.c_ssize_t
libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.listxattr.restype = ctypes.c_ssize_t


def raw_getxattr(path, name, size):
    """getxattr(2) with a buffer of @size bytes: (result, errno)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    r = libc.getxattr(path.encode(), name.encode(), buf if size else None, size)
    return r, (ctypes.get_errno() if r < 0 else 0)


def raw_listxattr(path, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    r = libc.listxattr(path.encode(), buf if size else None, size)
    return r, (ctypes.get_errno() if r < 0 else 0)


def sync(m):
    write(osb(m, "ctl"), "sync")


def invalidate(m):
    write(osb(m, "ctl"), "invalidate")


def xattrs_of(path):
    return {n: os.getxattr(path, n, follow_symlinks=False)
            for n in os.listxattr(path, follow_symlinks=False)}


def test_user_xattrs_on_files_and_dirs_errnos_as_linux(mount):
    f, d = mount.p("f"), mount.p("d")
    with open(f, "w") as fh:
        fh.write("x")
    os.mkdir(d)
    for p in (f, d):
        assert os.listxattr(p) == []
        expect_errno(errno.ENODATA, os.getxattr, p, "user.a")
        os.setxattr(p, "user.a", b"one")
        os.setxattr(p, "user.bin", bytes(range(256)) + b"\0tail")
        assert xattrs_of(p) == {"user.a": b"one", "user.bin": bytes(range(256)) + b"\0tail"}
        expect_errno(errno.EEXIST, os.setxattr, p, "user.a", b"x", os.XATTR_CREATE)
        expect_errno(errno.ENODATA, os.setxattr, p, "user.new", b"x", os.XATTR_REPLACE)
        os.setxattr(p, "user.a", b"two", os.XATTR_REPLACE)
        os.setxattr(p, "user.c", b"", os.XATTR_CREATE)
        assert os.getxattr(p, "user.a") == b"two" and os.getxattr(p, "user.c") == b""
        os.removexattr(p, "user.c")
        expect_errno(errno.ENODATA, os.removexattr, p, "user.c")
        assert sorted(os.listxattr(p)) == ["user.a", "user.bin"]
    # the size asked first, and a buffer too small
    assert raw_getxattr(f, "user.a", 0) == (3, 0)
    assert raw_getxattr(f, "user.a", 2) == (-1, errno.ERANGE)
    assert raw_getxattr(f, "user.a", 3)[0] == 3
    assert raw_listxattr(f, 0) == (len("user.a\0user.bin\0"), 0)
    assert raw_listxattr(f, 4) == (-1, errno.ERANGE)
    # the biggest value, and one byte more; the longest name, and one more
    os.setxattr(f, "user.big", b"v" * 65536)
    assert os.getxattr(f, "user.big") == b"v" * 65536
    expect_errno(errno.E2BIG, os.setxattr, f, "user.big", b"v" * 65537)
    long_name = "user." + "n" * 250
    os.setxattr(f, long_name, b"1")
    expect_errno(errno.ERANGE, os.setxattr, f, long_name + "n", b"1")
    os.removexattr(f, long_name)
    # the other namespaces, the control tree, a symlink (EPERM, as Linux)
    for name in ("security.x", "trusted.x"):
        want = errno.EPERM if name.startswith("trusted") and os.getuid() else errno.ENOTSUP
        expect_errno(want, os.setxattr, f, name, b"1")
    expect_errno(errno.ENOTSUP, os.getxattr, f, "security.selinux")
    expect_errno(errno.ENOTSUP, os.getxattr, f, "system.posix_acl_access")
    expect_errno(errno.ENOTSUP, os.setxattr, osb(mount, "ctl"), "user.a", b"1")
    expect_errno(errno.ENOTSUP, os.listxattr, osb(mount, "info"))
    os.symlink("f", mount.p("ln"))
    expect_errno(errno.EPERM, lambda: os.setxattr(mount.p("ln"), "user.a", b"1",
                                                  follow_symlinks=False))
    assert os.listxattr(mount.p("ln"), follow_symlinks=False) == []
    assert os.getxattr(mount.p("ln"), "user.a") == b"two"  # followed


def test_the_record_has_a_cap_said_in_the_log(make_mount):
    m = make_mount(options=["xattr_max_size=100K"])
    with open(m.p("f"), "w"):
        pass
    os.setxattr(m.p("f"), "user.a", b"a" * 60000)
    expect_errno(errno.ENOSPC, os.setxattr, m.p("f"), "user.b", b"b" * 60000)
    assert "the mount's record is full (xattr_max_size=102400 bytes)" in m.log()
    os.removexattr(m.p("f"), "user.a")
    os.setxattr(m.p("f"), "user.b", b"b" * 60000)


def make_tree(root):
    os.makedirs(os.path.join(root, "sub"))
    files = {"a.txt": b"alpha\n", "sub/b.bin": bytes(range(256)), "sub/empty": b""}
    for name, data in files.items():
        p = os.path.join(root, name)
        with open(p, "wb") as f:
            f.write(data)
        os.setxattr(p, "user.origin", name.encode())
    os.setxattr(os.path.join(root, "sub"), "user.kind", b"dir")
    os.setxattr(os.path.join(root, "a.txt"), "user.mime_type", b"text/plain")
    return files


def tree_xattrs(root):
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = xattrs_of(p)
    return out


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    assert r.returncode == 0 and r.stderr == "", (cmd, r.returncode, r.stderr)


def test_cp_a_and_tar_xattrs_round_trip(server, mount, tmp_path):
    src = str(tmp_path / "src")
    files = make_tree(src)
    want = tree_xattrs(src)
    run(["cp", "-a", src, mount.p("c")])
    assert tree_xattrs(mount.p("c")) == want
    run(["cp", "-a", mount.p("c"), str(tmp_path / "back")])
    assert tree_xattrs(str(tmp_path / "back")) == want
    # tar from the mount, and into it
    tar = str(tmp_path / "t.tar")
    run(["tar", "--xattrs", "--xattrs-include=user.*", "-cf", tar, "."], cwd=mount.p("c"))
    os.mkdir(mount.p("t"))
    run(["tar", "--xattrs", "--xattrs-include=user.*", "-xf", tar], cwd=mount.p("t"))
    got = tree_xattrs(mount.p("t"))
    assert got == {k: v for k, v in want.items()}
    sync(mount)
    for name, data in files.items():
        assert server.read_file(mount.sandbox_id, mount.spath("t", name)) == data


def test_kept_across_a_kill_and_remount_moved_by_rename_dropped_by_unlink(
        server, make_mount, tmp_path):
    cache = str(tmp_path / "cache")
    m = make_mount(cache_dir=cache)
    sid = m.sandbox_id
    os.makedirs(m.p("d", "e"))
    for name in ("f", "g", "gone", "d/e/h"):
        with open(m.p(name), "w") as fh:
            fh.write(name)
        os.setxattr(m.p(name), "user.name", name.encode())
    os.setxattr(m.p("d"), "user.name", b"d")
    os.rename(m.p("f"), m.p("f2"))
    os.rename(m.p("d"), m.p("d2"))
    os.rename(m.p("g"), m.p("f2"))  # over f2: g's attributes only
    os.unlink(m.p("gone"))
    with open(m.p("gone"), "w"):
        pass
    assert os.listxattr(m.p("gone")) == []
    sync(m)
    m.kill9()
    m2 = make_mount(sandbox_id=sid, create=False, cache_dir=cache)
    assert tree_xattrs(m2.p()) == {
        "f2": {"user.name": b"g"}, "gone": {}, "d2": {"user.name": b"d"},
        "d2/e": {}, "d2/e/h": {"user.name": b"d/e/h"}}
    # removed and made again in the sandbox by someone else: the mount
    # sees the name go from a listing, and what it kept goes with it
    server.run(sid, "rm -r %s %s" % (m2.spath("f2"), m2.spath("d2")))
    invalidate(m2)
    assert sorted(os.listdir(m2.p())) == ["gone"]
    server.write_file(sid, m2.spath("f2"), b"new")
    invalidate(m2)
    assert os.listxattr(m2.p("f2")) == []
    os.mkdir(m2.p("d2"))
    assert os.listxattr(m2.p("d2")) == []
    m2.stop()
    shutil.rmtree(cache)


def test_plain_files_cost_no_request(server, mount):
    names = ["p%d" % i for i in range(20)]
    for n in names:
        with open(mount.p(n), "w") as fh:
            fh.write(n)
    os.setxattr(mount.p(names[0]), "user.a", b"1")
    sync(mount)
    fds = [os.open(mount.p(n), os.O_RDONLY) for n in names]
    try:
        server.reset_stats()
        for fd in fds:
            assert os.listxattr(fd) in ([], ["user.a"])
            expect_errno(errno.ENODATA, os.getxattr, fd, "user.b")
            expect_errno(errno.ENOTSUP, os.getxattr, fd, "system.posix_acl_access")
        assert execd_requests(server, mount.sandbox_id) == 0
    finally:
        for fd in fds:
            os.close(fd)

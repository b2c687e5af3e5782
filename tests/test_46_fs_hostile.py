"""A hostile server: answers of malformed or cut JSON, bodies and headers that
never end, listings with "..", absolute paths, "/" in names and repeated
names, sizes that lie.  Whatever it sends, osbfs neither crashes nor hangs
past its timeouts, shows no name that could lead outside the mount and no
bytes the sandbox does not hold, never writes outside its cache dir, and
works again once the server behaves.

Each operation a user's tools do (list, stat, read a small file, read a big
one whole and from its middle, write and fsync, mkdir, rename, remove, start
a job and read its output) runs against a tree the mount has never seen,
with the next answers of the sandbox's execd hostile; then the same
operation again with a behaving server must give the true result."""

import errno
import hashlib
import os
import subprocess
import time

import pytest

from jobhelp import info, osb, read, start, wait, write
from mounthelp import write_fsync
from osbtest import wait_until

# a watchdog, not a speed target: every operation here ends long before
# (request_timeout=2s, a timeout is retried once, an operation makes a few
# calls)
OP_LIMIT_S = 60
ALLOWED = (errno.EIO, errno.ETIMEDOUT, errno.EPROTO, errno.ENOENT, errno.EAGAIN,
           errno.ECONNRESET, errno.EBADMSG, errno.ENAMETOOLONG, errno.EFBIG)
BIG = 6 << 20


def content(name, size):
    seed = hashlib.sha256(name.encode()).hexdigest().encode()
    return (seed * (size // 64 + 1))[:size]


def make_tree(srv, sid, root):
    """A tree made on the sandbox's side, unknown to the mount: 8 dirs of 12
    small files, two big files."""
    script = ["set -e", "mkdir -p '%s'" % root]
    for d in range(8):
        script.append("mkdir -p '%s/d%d'" % (root, d))
    srv.run(sid, "\n".join(script))
    files = {}
    for d in range(8):
        for i in range(12):
            n = "d%d/f%d.txt" % (d, i)
            files[n] = content(n, 100 + 37 * i)
            srv.write_file(sid, root + "/" + n, files[n])
    for n in ("big.bin", "big2.bin"):
        files[n] = content(n, BIG)
        srv.write_file(sid, root + "/" + n, files[n])
    return files


def forget(m):
    write(osb(m, "ctl"), "invalidate\n")


def attempt(fn):
    """(result, errno or 0, seconds) of fn()."""
    t0 = time.monotonic()
    try:
        r = fn()
        e = 0
    except OSError as ex:
        r, e = None, ex.errno
    except (subprocess.TimeoutExpired, TimeoutError):
        r, e = None, -1
    return r, e, time.monotonic() - t0


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def pread(path, off, n):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, n, off)
    finally:
        os.close(fd)


def names_ok(names, where):
    for n in names:
        assert n and n not in (".", "..") and "/" not in n and "\0" not in n, (where, n)
        assert len(n.encode()) <= 255, (where, n)


def grep_r(*dirs):
    """grep -r's exit code (1: no file holds a "."), or the error it
    reported as an OSError."""
    p = subprocess.run(["grep", "-rl", "\\."] + list(dirs), capture_output=True,
                       timeout=OP_LIMIT_S, text=True)
    if p.returncode == 2:
        for e in ALLOWED:
            if os.strerror(e) in p.stderr:
                raise OSError(e, p.stderr.strip())
    return p.returncode


def job_output(m, cmd):
    """(status, stdout) of a job, once it has ended."""
    jid = start(m, cmd)
    return wait(m, jid, OP_LIMIT_S), read(osb(m, "jobs", jid, "stdout"))


def operations(m, files):
    """(name, route the fault is aimed at (None: any), fn, the true result);
    each works on a part of the tree no earlier one touched, and can be
    done again (the second time with a behaving server)."""
    big = files["big.bin"]
    mid = BIG // 2 + 12345
    d0 = sorted(n.split("/")[1] for n in files if n.startswith("d0/"))
    new = b"new\n" * 1000

    def rename():
        os.rename(m.p("t", "d6", "f1.txt"), m.p("t", "d6", "moved.txt"))
        os.rename(m.p("t", "d6", "moved.txt"), m.p("t", "d6", "f1.txt"))
        return read_all(m.p("t", "d6", "f1.txt"))

    def mkdir():
        os.makedirs(m.p("t", "d5", "sub"), exist_ok=True)
        return os.path.isdir(m.p("t", "d5", "sub"))

    def unlink():
        write_fsync(m.p("t", "d7", "gone.txt"), b"x")
        os.unlink(m.p("t", "d7", "gone.txt"))
        return os.path.exists(m.p("t", "d7", "gone.txt"))

    return [
        ("list", "/directories/list", lambda: sorted(os.listdir(m.p("t", "d0"))), d0),
        ("stat", None, lambda: os.stat(m.p("t", "d1", "f3.txt")).st_size,
         len(files["d1/f3.txt"])),
        ("info", "/files/info", lambda: os.stat(m.p("t", "d1", "f4.txt")).st_size,
         len(files["d1/f4.txt"])),
        ("read small", None, lambda: read_all(m.p("t", "d2", "f5.txt")), files["d2/f5.txt"]),
        ("read big", "/files/download", lambda: read_all(m.p("t", "big.bin")), big),
        ("read middle", "/files/download", lambda: pread(m.p("t", "big2.bin"), mid, 200000),
         files["big2.bin"][mid:mid + 200000]),
        ("grep -r", None, lambda: grep_r(m.p("t", "d3"), m.p("t", "d4")), 1),
        ("write", "/files/upload",
         lambda: write_fsync(m.p("t", "d5", "new.txt")) or read_all(m.p("t", "d5", "new.txt")),
         new),
        ("mkdir", None, mkdir, True),
        ("rename", None, rename, files["d6/f1.txt"]),
        ("unlink", None, unlink, False),
        ("job", "/command", lambda: job_output(m, "cat t/d7/f4.txt; echo done"),
         ("exited 0", files["d7/f4.txt"].decode() + "done\n")),
    ]


def wait_reachable(m):
    """A server that hung makes the mount "away" until its watchdog (once a
    second) hears from it again."""
    wait_until(lambda: info(m)["server"] == "reachable", 30, "the mount to hear the server")


def host_files(m):
    """Every file of the mount's work dir but its cache dir and the mount:
    what osbfs could write on the host outside its cache."""
    out = set()
    for top, dirs, names in os.walk(m.workdir):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in (m.cache_dir, m.path)]
        out.update(os.path.join(top, n) for n in names)
    return out


def shown_ok(kind, name, r, truth):
    """Under "lie" the server's claims (extra names, sizes) are what the
    mount shows, as long as no name leads out and no byte is invented;
    under the other kinds a result must be the truth."""
    if name == "job" and r != truth:
        # a start whose answer was lost or garbled is settled by
        # checking: the job ran, or its status says why it did not
        return r[0].startswith("error: ") and truth[1].startswith(r[1])
    if kind != "lie":
        return r == truth
    if name == "list":
        names_ok(r, name)
        return set(truth) <= set(r)
    if name in ("stat", "info"):
        return r in (truth, 2 * truth + 1)
    return r == truth


@pytest.mark.parametrize("kind", ["garbage", "endless", "huge_header", "lie"])
def test_a_hostile_server_cannot_crash_hang_or_fool_the_mount(make_server, make_mount, kind):
    srv = make_server()
    m = make_mount(srv=srv, options=["request_timeout=2s", "attr_timeout=0", "dir_timeout=0"])
    sid = m.sandbox_id
    files = make_tree(srv, sid, m.spath("t"))
    host = host_files(m)
    report = []
    before = 0
    for name, route, fn, truth in operations(m, files):
        forget(m)
        srv.set_faults(next=2, kinds=[kind], scope="execd", path=route)
        try:
            r, e, took = attempt(fn)
            total = srv.admin("GET", "/_admin/faults")[1]["injected"]
        finally:
            srv.clear_faults()
        injected, before = total - before, total
        report.append("%-12s %d %s answers: %s, %.1f s" % (
            name, injected, kind, os.strerror(e) if e > 0 else "ok", took))
        assert m.proc.poll() is None, "osbfs exited under %s at %s:\n%s" % (kind, name, m.log())
        assert injected >= 1, "%s: no %s answer was sent" % (name, kind)
        assert e != -1 and took < OP_LIMIT_S, (name, took)
        assert e == 0 or e in ALLOWED, (name, os.strerror(e))
        if e == 0:
            assert shown_ok(kind, name, r, truth), \
                "%s under %s answers showed what the sandbox does not hold: %r\n%s" % (
                    name, kind, r if not isinstance(r, bytes) else r[:80], m.log()[-3000:])
        # the same again, the server behaving: the true result, nothing
        # of the hostile answers kept
        wait_reachable(m)
        forget(m)
        r, e, took = attempt(fn)
        assert e == 0 and r == truth, (name, e and os.strerror(e), m.log()[-3000:])
    print("\n".join(report))
    assert host_files(m) == host, "osbfs wrote outside its cache dir"
    assert "Out of memory" not in m.log()

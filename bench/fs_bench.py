#!/usr/bin/env python3
"""bench/fs_bench.py - osbfs against a local directory, same work, same run.

Starts the bundled local server, mounts a new sandbox with osbfs, and times
each workload on the mount and on a local directory of the same disk:

  untar     tar x of N small files (default 3000) in 60 directories,
            followed by `.osb/ctl sync` (or fsync of every file) so the
            time includes getting them into the sandbox
  ls -lR    a full listing with attributes of that tree (cold, then warm)
  cp -a     the tree copied back out
  write     a 1 GiB file written sequentially, then fsync'ed (uploaded)
  read      that file read back through a fresh mount (cold cache), then again

Prints seconds for each side and the ratio mount/local, plus osbfs's peak
RSS. Not run by CI: `python3 bench/fs_bench.py [--files N] [--gib G]`.
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from mounthelp import Mount  # noqa: E402
from osbtest import LocalServer  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def sh(*args, cwd=None):
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def make_tree(root, n):
    for i in range(n):
        d = os.path.join(root, "d%02d" % (i % 60))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%05d" % i), "wb") as f:
            f.write(hashlib.sha256(b"%d" % i).digest() * (1 + i % 256))


def fsync_tree(root):
    for r, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".osb"]
        for n in files:
            fd = os.open(os.path.join(r, n), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)


def sync_mount(m, sub):
    ctl = m.p(".osb", "ctl")
    if os.path.exists(ctl):
        with open(ctl, "w") as f:
            f.write("sync\n")
    else:
        fsync_tree(m.p(sub))


def write_big(path, size):
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def read_all(path):
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def drop_local_page_cache():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def peak_rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return -1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--gib", type=float, default=1.0)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="osbfs-bench-")
    srv = LocalServer(os.path.join(work, "server"), api_key="bench")
    srv.start()
    mounts = []
    rows = []
    try:
        sid = srv.create_sandbox(timeout=None)
        m = Mount(srv, sandbox_id=sid, workdir=os.path.join(work, "m1"))
        os.makedirs(m.workdir)
        mounts.append(m.start())
        local = os.path.join(work, "local")
        os.makedirs(local)
        src = os.path.join(work, "src")
        make_tree(src, args.files)
        tarball = os.path.join(work, "t.tar")
        sh("tar", "cf", tarball, "-C", src, ".")

        def untar_local():
            os.makedirs(os.path.join(local, "t"))
            sh("tar", "xf", tarball, "-C", os.path.join(local, "t"))
            fsync_tree(os.path.join(local, "t"))

        def untar_mount():
            os.makedirs(m.p("t"))
            sh("tar", "xf", tarball, "-C", m.p("t"))
            sync_mount(m, "t")

        rows.append(("untar %d files + sync" % args.files, timed(untar_mount), timed(untar_local)))
        with open(m.p(".osb", "ctl"), "w") if os.path.exists(m.p(".osb", "ctl")) else open(os.devnull, "w") as f:
            f.write("invalidate\n")
        rows.append(("ls -lR (cold)", timed(lambda: sh("ls", "-lR", m.p("t"))),
                     timed(lambda: sh("ls", "-lR", os.path.join(local, "t")))))
        rows.append(("ls -lR (warm)", timed(lambda: sh("ls", "-lR", m.p("t"))),
                     timed(lambda: sh("ls", "-lR", os.path.join(local, "t")))))
        rows.append(("cp -a tree out", timed(lambda: sh("cp", "-a", m.p("t"), os.path.join(work, "out1"))),
                     timed(lambda: sh("cp", "-a", os.path.join(local, "t"), os.path.join(work, "out2")))))

        size = int(args.gib * (1 << 30))
        rows.append(("write %.1f GiB + fsync" % args.gib, timed(lambda: write_big(m.p("big"), size)),
                     timed(lambda: write_big(os.path.join(local, "big"), size))))
        rss_write = peak_rss_mib(m.proc.pid)
        m.stop()
        mounts.remove(m)
        m2 = Mount(srv, sandbox_id=sid, workdir=os.path.join(work, "m2"))
        os.makedirs(m2.workdir)
        mounts.append(m2.start())
        # cold: no page cache on either side; "again" right after each
        # side's own cold read, before the caches are dropped again
        cold = drop_local_page_cache()
        local_cold = timed(lambda: read_all(os.path.join(local, "big")))
        local_again = timed(lambda: read_all(os.path.join(local, "big")))
        drop_local_page_cache()
        mount_cold = timed(lambda: read_all(m2.p("big")))
        mount_again = timed(lambda: read_all(m2.p("big")))
        rows.append(("read %.1f GiB (cold)" % args.gib, mount_cold, local_cold))
        rows.append(("read %.1f GiB (again)" % args.gib, mount_again, local_again))
        rss_read = peak_rss_mib(m2.proc.pid)

        print("\n%-28s %10s %10s %8s" % ("workload", "osbfs s", "local s", "ratio"))
        for name, a, b in rows:
            print("%-28s %10.2f %10.2f %8.1f" % (name, a, b, a / b if b else float("inf")))
        print("\nosbfs peak RSS: %.1f MiB writing, %.1f MiB reading" % (rss_write, rss_read))
        if not cold:
            print("(local page cache not dropped: run as root for a cold local read)")
    finally:
        for mm in mounts:
            try:
                mm.stop(check=False)
            except Exception:
                mm.kill9()
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

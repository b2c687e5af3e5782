#!/usr/bin/env python3
"""bench/snap_bench.py - a checkpoint and a restore of the bench tree.

Starts the bundled local server, mounts a new sandbox with osbfs, puts the
benchmark's source tree in it (tests/srctree.py: 5,000 files, 35 MiB by
default) and syncs, then, for each rep, times through the mount:

  snapshot  mkdir .osb/snapshots/NAME, then its wait until Ready
  restore   echo 'restore NAME' > .osb/ctl, after a job deleted the tree
            (the write returns once the mount shows the snapshot's files)

and checks the tree is whole after the restore (a count of its files).
Prints each time and the requests a restore sent. Not run by CI:
`python3 bench/snap_bench.py [--files N] [--reps R]`.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from mounthelp import Mount  # noqa: E402
from osbtest import LocalServer  # noqa: E402
from srctree import BIG_SIZES, NDIRS, NFILES, make_tree  # noqa: E402

from fs_bench import timed  # noqa: E402


def ctl(m, line):
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write(line + "\n")


def job(m, cmd):
    fd = os.open(m.p(".osb", "run"), os.O_RDWR)
    os.write(fd, cmd.encode())
    jid = os.read(fd, 200).decode().strip()
    os.close(fd)
    with open(m.p(".osb", "jobs", jid, "wait")) as f:
        assert f.read().strip() == "exited 0", cmd


def count_files(root):
    return sum(len(files) for _, _, files in os.walk(root))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=NFILES)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="osbfs-snapbench-")
    srv = LocalServer(os.path.join(work, "server"), api_key="bench")
    srv.start()
    m = None
    try:
        sid = srv.create_sandbox(timeout=None)
        m = Mount(srv, sandbox_id=sid, workdir=os.path.join(work, "m"))
        os.makedirs(m.workdir)
        m.start()
        src = os.path.join(work, "src")
        ndirs = max(1, NDIRS * args.files // NFILES)
        total, _ = make_tree(src, args.files, ndirs, BIG_SIZES, 11)
        shutil.copytree(src, m.p("tree"), symlinks=True)
        ctl(m, "sync")
        want = count_files(m.p("tree"))
        snaps, restores, calls = [], [], []
        for rep in range(args.reps):
            name = "bench-%d" % rep

            def snapshot():
                os.mkdir(m.p(".osb", "snapshots", name))
                with open(m.p(".osb", "snapshots", name, "wait")) as f:
                    assert f.read() == "Ready\n"

            snaps.append(timed(snapshot))
            job(m, "rm -rf tree")
            srv.reset_stats()
            restores.append(timed(lambda: ctl(m, "restore " + name)))
            calls.append(sum(v for k, v in srv.stats()["total"].items() if "/_admin" not in k))
            got = count_files(m.p("tree"))
            assert got == want, (got, want)
        print("tree: %d files, %.1f MiB" % (want, total / (1 << 20)))
        print("snapshot (mkdir + wait): %s s, median %.2f"
              % (" ".join("%.2f" % t for t in snaps), statistics.median(snaps)))
        print("restore:                 %s s, median %.2f; requests %s"
              % (" ".join("%.2f" % t for t in restores), statistics.median(restores),
                 " ".join(str(c) for c in calls)))
    finally:
        if m:
            m.stop(check=False)
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

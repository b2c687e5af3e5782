#!/usr/bin/env python3
"""Round trip of a job through the control tree against `osb exec`.

    python3 bench/ctl_roundtrip.py [--runs 200] [--warmup 5]
    OSBFS_BUILD_DIR=build-asan python3 bench/ctl_roundtrip.py --runs 50

In one run, against one local server (tests/server, started here on a
free port with its data in a fresh temporary directory) and one sandbox:

  run+wait   through a mounted osbfs (build/fs/osbfs): open .osb/run for
             reading and writing, write "true", read the job id back (the
             read starts the job), then read .osb/jobs/ID/wait until it
             returns the status line. Clock: from the open of run to the
             end of the wait read.
  osb exec   build/client/osb exec -- true, as a new process each time,
             with OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY and
             OPEN_SANDBOX_ID set. Clock: from spawn to exit.

The two alternate (which goes first flips every round) after --warmup
rounds of each that are not counted. Prints the median, p99 (nearest
rank) and mean of each in milliseconds, and the ratio run+wait / osb exec
(below 1: the mount is faster). Everything it started is stopped and
every file it wrote removed, whatever happens. Standard library only.
"""

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from osbtest import BUILD, LocalServer  # noqa: E402

OSBFS = BUILD / "fs" / "osbfs"
OSB = BUILD / "client" / "osb"


def mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(len(l.split()) > 4 and l.split()[4] == path for l in f)


class OsbfsMount:
    """osbfs -f on a sandbox, until stop()."""

    def __init__(self, server, sid, work):
        self.path = os.path.join(work, "mnt")
        self.log = os.path.join(work, "osbfs.log")
        os.makedirs(self.path)
        env = dict(os.environ, OPEN_SANDBOX_API_KEY=server.api_key)
        opts = "domain=%s:%d,cache_dir=%s" % (server.host, server.port, os.path.join(work, "cache"))
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen([str(OSBFS), "-f", "-o", opts, sid, self.path],
                                     stdout=self.logf, stderr=self.logf,
                                     stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while not mounted(self.path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit("osbfs did not mount; its log:\n" + open(self.log).read())
            time.sleep(0.05)

    def stop(self):
        if mounted(self.path):
            subprocess.run(["fusermount3", "-u", self.path], stderr=subprocess.DEVNULL)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            subprocess.run(["fusermount3", "-u", "-z", self.path], stderr=subprocess.DEVNULL)
        self.logf.close()


def run_and_wait(ctl):
    t0 = time.perf_counter()
    fd = os.open(os.path.join(ctl, "run"), os.O_RDWR)
    try:
        os.write(fd, b"true")
        jid = os.read(fd, 200).decode().strip()
    finally:
        os.close(fd)
    fd = os.open(os.path.join(ctl, "jobs", jid, "wait"), os.O_RDONLY)
    try:
        line = os.read(fd, 200)
    finally:
        os.close(fd)
    secs = time.perf_counter() - t0
    if line != b"exited 0\n":
        raise SystemExit("job %s: %r" % (jid, line))
    return secs


def osb_exec(env):
    t0 = time.perf_counter()
    r = subprocess.run([str(OSB), "exec", "--", "true"], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit("osb exec failed (%d): %s" % (r.returncode, r.stderr.decode()[-2000:]))
    return secs


def p99(xs):
    s = sorted(xs)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="counted rounds of each (default 200)")
    ap.add_argument("--warmup", type=int, default=5, help="uncounted rounds first (default 5)")
    a = ap.parse_args()
    for exe in (OSBFS, OSB):
        if not os.access(exe, os.X_OK):
            raise SystemExit("%s is missing: build first (ninja -C %s)" % (exe, BUILD))

    work = tempfile.mkdtemp(prefix="osbfs-bench-")
    server = mnt = None
    try:
        server = LocalServer(os.path.join(work, "data"), api_key="bench-key")
        server.start()
        sid = server.create_sandbox(timeout=None)
        mnt = OsbfsMount(server, sid, work)
        ctl = os.path.join(mnt.path, ".osb")
        env = dict(os.environ, OPEN_SANDBOX_DOMAIN="%s:%d" % (server.host, server.port),
                   OPEN_SANDBOX_API_KEY=server.api_key, OPEN_SANDBOX_ID=sid)
        times = {"run+wait": [], "osb exec": []}
        for i in range(a.warmup + a.runs):
            order = [("run+wait", lambda: run_and_wait(ctl)), ("osb exec", lambda: osb_exec(env))]
            if i % 2:
                order.reverse()
            for name, fn in order:
                secs = fn()
                if i >= a.warmup:
                    times[name].append(secs)
        print("%d rounds each (after %d warm-up), local server, build %s" % (a.runs, a.warmup, BUILD))
        print("%-10s %10s %10s %10s" % ("", "median ms", "p99 ms", "mean ms"))
        for name, xs in times.items():
            print("%-10s %10.1f %10.1f %10.1f" % (name, statistics.median(xs) * 1e3, p99(xs) * 1e3,
                                                  statistics.mean(xs) * 1e3))
        rw, ex = times["run+wait"], times["osb exec"]
        print("ratio run+wait / osb exec: median %.2f, p99 %.2f"
              % (statistics.median(rw) / statistics.median(ex), p99(rw) / p99(ex)))
    finally:
        if mnt:
            mnt.stop()
        if server:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Throughput of `osb put` / `osb get` against curl, on the same server in
the same run, and osb's peak RSS.  See bench/README.md.

Starts its own local server (tests/server, through tests/osbtest.py),
creates a sandbox, writes a file of --size MiB, then --reps times each, in
alternation: osb put and curl's multipart upload to the same execd
endpoint, osb get and curl's download, both into a file and into
/dev/null.  Prints the median MB/s (10^6 bytes per second) of each, the
ratio osb/curl, and each tool's largest peak RSS.  Checksums are checked
outside the timed runs.  Everything it started is stopped and every file
it wrote removed, whatever happens.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from osbtest import LocalServer  # noqa: E402
from osbhelp import OSB, Osb, make_file, sanitized_build, sha256_file, spawn  # noqa: E402

W = "/workspace"


class Bench:
    def __init__(self, server, sid, work, size):
        self.server = server
        self.sid = sid
        self.work = work
        self.size = size
        self.osb = Osb(server, sid)
        self.url, self.headers = server.endpoint(sid)
        self.env = self.osb.env()
        self.times = {}   # (name, tool) -> [seconds]
        self.rss = {}     # tool -> max KiB

    def timed(self, name, tool, argv, stdout=None):
        rc, out, err, rss, secs, killed = spawn(argv, self.env, stdout=stdout, timeout=1800, measure_rss=True)
        if killed or rc != 0:
            raise SystemExit("%s failed (exit %s%s):\n%s" % (" ".join(argv), rc, ", killed" if killed else "",
                                                             err[-3000:]))
        self.times.setdefault((name, tool), []).append(secs)
        self.rss[tool] = max(self.rss.get(tool, 0), rss)
        return secs

    def curl(self, *args):
        argv = ["curl", "-sS", "-f", "--http1.1", "-H", "Expect:"]
        for k, v in self.headers.items():
            argv += ["-H", "%s: %s" % (k, v)]
        return argv + list(args)

    def osb_put(self, src, dst):
        self.timed("put", "osb", [str(OSB), "put", src, dst])

    def curl_put(self, src, dst):
        meta = os.path.join(self.work, "metadata.json")
        with open(meta, "w") as f:
            json.dump({"path": dst, "mode": 644}, f)
        # execd sees only parts with a filename: @file gives one
        self.timed("put", "curl", self.curl("-o", "/dev/null", "-F", "metadata=@%s;type=application/json" % meta,
                                            "-F", "file=@%s;type=application/octet-stream" % src,
                                            self.url + "/files/upload"))

    def osb_get(self, src, dst, name):
        self.timed(name, "osb", [str(OSB), "get", src, dst])

    def osb_get_null(self, src, name):
        with open(os.devnull, "wb") as null:
            self.timed(name, "osb", [str(OSB), "get", src, "-"], stdout=null)

    def curl_get(self, src, dst, name):
        q = urllib.parse.urlencode({"path": src}, quote_via=urllib.parse.quote)
        self.timed(name, "curl", self.curl("-o", dst, self.url + "/files/download?" + q))


def run(args):
    work = tempfile.mkdtemp(prefix="osb-bench-", dir=args.tmpdir)
    server = None
    try:
        server = LocalServer(os.path.join(work, "server"), api_key="bench-key").start()
        sid = server.create_sandbox(timeout=None)
        src = os.path.join(work, "src.bin")
        print("writing %d MiB of test data..." % args.size, flush=True)
        want = make_file(src, args.size)
        b = Bench(server, sid, work, args.size << 20)
        dl = os.path.join(work, "download.bin")
        for rep in range(args.reps):
            print("round %d of %d" % (rep + 1, args.reps), flush=True)
            # each tool writes its own sandbox file: equal work server-side
            for tool in ("osb", "curl") if rep % 2 == 0 else ("curl", "osb"):
                dst = "%s/%s.bin" % (W, tool)
                getattr(b, tool + "_put")(src, dst)
            for tool in ("osb", "curl") if rep % 2 == 0 else ("curl", "osb"):
                if tool == "osb":
                    b.osb_get(W + "/osb.bin", dl, "get (file)")
                    b.osb_get_null(W + "/osb.bin", "get (/dev/null)")
                else:
                    b.curl_get(W + "/curl.bin", dl, "get (file)")
                    b.curl_get(W + "/curl.bin", os.devnull, "get (/dev/null)")
                os.unlink(dl)
        # correctness, outside the clock
        for tool in ("osb", "curl"):
            code, out, err = server.run(sid, "sha256sum %s/%s.bin" % (W, tool), timeout=600)
            if code != 0 or out.split()[0] != want:
                raise SystemExit("%s put: sandbox sha256 %s != %s" % (tool, out.split()[:1], want))
        b.osb_get(W + "/osb.bin", dl, "check")
        if sha256_file(dl) != want:
            raise SystemExit("osb get: sha256 mismatch")
        report(b, args)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(b, args):
    mb = b.size / 1e6
    print()
    print("%d MiB, median of %d runs, local server %s, osb %s%s" % (
        args.size, args.reps, b.server.url, OSB, " (sanitizer build)" if sanitized_build() else ""))
    print("%-18s %12s %12s %10s" % ("", "osb MB/s", "curl MB/s", "osb/curl"))
    for name in ("put", "get (file)", "get (/dev/null)"):
        osb_t = statistics.median(b.times[(name, "osb")])
        curl_t = statistics.median(b.times[(name, "curl")])
        print("%-18s %12.0f %12.0f %10.2f" % (name, mb / osb_t, mb / curl_t, curl_t / osb_t))
    print("peak RSS: osb %.1f MiB, curl %.1f MiB" % (b.rss["osb"] / 1024, b.rss["curl"] / 1024))
    print("(osb get FILE writes a temporary file, fsyncs and renames it; curl -o does not fsync)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=1024, help="file size in MiB (default 1024)")
    p.add_argument("--reps", type=int, default=3, help="runs of each transfer; the median is shown (default 3)")
    p.add_argument("--tmpdir", default=None, help="where the data and the server live (default $TMPDIR)")
    args = p.parse_args()
    if args.size < 1 or args.reps < 1:
        p.error("--size and --reps must be positive")
    if not os.access(str(OSB), os.X_OK):
        p.error("%s is not built (ninja -C build)" % OSB)
    if shutil.which("curl") is None:
        p.error("curl is not installed")
    run(args)


if __name__ == "__main__":
    main()

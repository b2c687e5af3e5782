"""The soak: a seeded mixed workload on a real mount while the server
injects faults, then the sandbox's tree compared with a local reference
tree that got the same operations (soakload.py has the workload).

Faults during the run: connection resets before and after the request is
served (5%), 5xx answers (2%), delays (3%), on every API; one kill and
restart of the server; one kill -9 of osbfs and a new mount on the same
cache dir (its journal replays).  After the run: faults off, `sync`
through .osb/ctl, every upload settled, then the sandbox's files as the
server stores them (contents, modes, symlink targets) must equal the
reference, and each job's line must be in joblog exactly once.

OSBFS_SOAK_SECONDS  how long the workload runs (default 60)
OSBFS_SOAK_SEED     the seed (default: a new one, printed); the same seed
                    replays the same operations (faults hit at other
                    moments, as threads run as they please)
OSBFS_SOAK_WATCHDOG seconds one operation may take before the test calls
                    it a hang (default 300)
"""

import hashlib
import json
import os
import random
import stat
import sys
import threading
import time

import pytest

import jobhelp
from osbtest import wait_until

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soakload import Soak  # noqa: E402

SECONDS = float(os.environ.get("OSBFS_SOAK_SECONDS", "60"))
WATCHDOG = float(os.environ.get("OSBFS_SOAK_WATCHDOG", "300"))
OPTIONS = ["writeback_delay=200ms", "request_timeout=10s"]

# one rule, its kinds picked uniformly: 10% of requests fail, of which a
# half are resets (before and after the work), a fifth 5xx, the rest delays
FAULTS = dict(rate=0.10, scope="all", delay_ms=300,
              kinds=["reset"] * 5 + ["reset_after"] * 5 + ["500", "502", "503", "504"] + ["delay"] * 6)


def snapshot(root, skip=()):
    """{relative path: (kind, mode, sha256 or link target)} of a tree
    (without the control tree)."""
    out = {}
    for r, ds, fs in os.walk(root):
        rel_r = os.path.relpath(r, root)
        if rel_r == ".":
            ds[:] = [d for d in ds if d != ".osb"]
        for n in ds + fs:
            p = os.path.join(r, n)
            rel = os.path.normpath(os.path.join(rel_r, n))
            if rel in skip:
                continue
            st = os.lstat(p)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", None, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", oct(mode), None)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", oct(mode), hashlib.sha256(f.read()).hexdigest()[:16])
    return out


def compare(sandbox_root, ref):
    got = snapshot(sandbox_root, skip={"joblog"})
    want = snapshot(ref)
    diffs = []
    for rel in sorted(set(got) | set(want)):
        if got.get(rel) != want.get(rel):
            diffs.append("%s: the sandbox has %s, the reference %s" % (rel, got.get(rel), want.get(rel)))
    return diffs, len(want)


class Watchdog(threading.Thread):
    """Fails the soak when one operation takes longer than @limit: the
    daemon is killed (which ends the blocked call) and the operation
    named."""

    def __init__(self, soak, mount_of, limit):
        super().__init__(daemon=True)
        self.soak, self.mount_of, self.limit = soak, mount_of, limit
        self.hung = None
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(1):
            cur = self.soak.current
            if cur and time.monotonic() - cur[1] > self.limit:
                self.hung = "%s took over %ss; the last operations:\n  %s" % (
                    cur[0], self.limit, "\n  ".join(self.soak.history))
                m = self.mount_of()
                if m.proc is not None:
                    try:
                        m.proc.kill()
                    except OSError:
                        pass
                return


def read_faults(srv):
    st, b = srv.admin("GET", "/_admin/faults")
    return b["injected"] if st == 200 else 0


def sync_all(soak, m):
    """sync through .osb/ctl until it succeeds, then wait for nothing
    pending (temp copies removed, every upload done)."""
    soak.current = ("final sync", time.monotonic())

    def sync():
        try:
            jobhelp.write(jobhelp.osb(m, "ctl"), "sync\n")
            return True
        except OSError as e:
            print("soak: sync: %s (again)" % e)
            return False
    wait_until(sync, WATCHDOG, "sync to succeed", step=1)

    def settled():
        c = jobhelp.info(m)["cache"]
        return (not c["pending"] and c["dirty_files"] == 0 and c["dirty_dirs"] == 0
                and c["uploading"] == 0) or None
    wait_until(settled, WATCHDOG, "the uploads to settle", step=0.5)
    soak.current = None


@pytest.mark.slow
def test_soak(make_server, make_mount, make_sandbox, tmp_path):
    seed = int(os.environ.get("OSBFS_SOAK_SEED") or random.SystemRandom().randrange(1 << 32))
    print("\nsoak: seed %d (replay with OSBFS_SOAK_SEED=%d), %ss" % (seed, seed, SECONDS))
    srv = make_server(extra_args=["--fault-seed", str(seed)])
    sid = make_sandbox(srv)
    cache = str(tmp_path / "cache")
    mounts = [make_mount(sandbox_id=sid, srv=srv, options=OPTIONS, cache_dir=cache)]
    ref = str(tmp_path / "ref")
    os.mkdir(ref)
    faults_before_restart = [0]
    paused = [0]

    # paused while the truth is read after a failure (the server may be
    # down then: its restart sets them again)
    def faults_on():
        paused[0] -= 1
        if paused[0] == 0:
            try:
                srv.set_faults(**FAULTS)
            except OSError:
                pass

    def faults_off():
        if paused[0] == 0:
            try:
                srv.clear_faults()
            except OSError:
                pass
        paused[0] += 1

    oplog = open(str(tmp_path / "operations.log"), "w", buffering=1)
    soak = Soak(mounts[0], ref, random.Random(seed), lambda s: print("soak: " + s),
                faults_on, faults_off, oplog)
    watchdog = Watchdog(soak, lambda: mounts[-1], WATCHDOG)
    watchdog.start()
    try:
        for d in ("w", "jobs-out"):
            os.mkdir(mounts[0].p(d), 0o755)
            os.mkdir(os.path.join(ref, d), 0o755)
        paused[0] = 1
        faults_on()
        t0 = time.monotonic()
        restart_at, kill_at = t0 + SECONDS * 0.35, t0 + SECONDS * 0.65
        restarted = killed = False
        # both events happen, however slow the operations before them
        while (time.monotonic() - t0 < SECONDS or not restarted or not killed) \
                and watchdog.hung is None:
            soak.step()
            now = time.monotonic()
            if not restarted and now >= restart_at:
                restarted = True
                # jobs run in the server's process tree: none may be running
                soak.drain_jobs()
                faults_before_restart[0] += read_faults(srv)
                print("soak: the server killed (step %d)" % sum(soak.ops.values()))
                soak.note("-- the server killed")
                srv.kill()

                restart_error = []

                def back():
                    time.sleep(3)
                    t1 = time.monotonic()
                    try:
                        srv.restart()
                        if paused[0] == 0:
                            srv.set_faults(**FAULTS)
                    except Exception as e:  # noqa: BLE001 (told below)
                        restart_error.append(e)
                    print("soak: the server restarted (in %.1fs)" % (time.monotonic() - t1))
                t = threading.Thread(target=back)
                t.start()
                try:
                    for _ in range(20):
                        soak.step()   # a few operations while it is down
                finally:
                    t.join()   # never a server started after the teardown
                assert not restart_error and srv.alive(), \
                    "the server did not restart: %s\n%s" % (restart_error, srv.stderr_text()[-3000:])
                soak.note("-- the server restarted")
            if not killed and now >= kill_at:
                killed = True
                print("soak: kill -9 of osbfs (step %d, %d dirty files)"
                      % (sum(soak.ops.values()), jobhelp.info(soak.m)["cache"]["dirty_files"]))
                soak.note("-- kill -9 of osbfs")
                soak.m.kill9()
                soak.close_held()
                m2 = make_mount(sandbox_id=sid, srv=srv, options=OPTIONS, cache_dir=cache)
                mounts.append(m2)
                soak.m = m2
        assert watchdog.hung is None, "hang: " + watchdog.hung
        elapsed = time.monotonic() - t0

        # the end: no faults, every job waited for, everything uploaded
        srv.clear_faults()
        paused[0] = 1 << 20
        soak.close_held()
        soak.drain_jobs()
        soak.settle_unknown_jobs()
        sync_all(soak, soak.m)
        assert watchdog.hung is None, "hang: " + watchdog.hung
    finally:
        watchdog.stop.set()
        soak.close_held()
        oplog.close()

    sandbox_root = os.path.join(srv.data_dir, "sandboxes", sid, "rootfs", "workspace")
    diffs, nref = compare(sandbox_root, ref)
    # ... and the mount shows the same
    mdiffs, _ = compare(soak.m.p(), ref)

    # every job ran exactly once
    with open(os.path.join(sandbox_root, "joblog")) as f:
        lines = f.read().splitlines()
    job_problems = []
    counts = {}
    for line in lines:
        tok = line.split()[-1]
        counts[tok] = counts.get(tok, 0) + 1
    for tok, n in counts.items():
        if n != 1 or soak.job_tokens.get(tok) not in ("done",):
            job_problems.append("job token %s: %d line(s), %s" % (tok, n, soak.job_tokens.get(tok)))
    for tok, state in soak.job_tokens.items():
        if state == "done" and tok not in counts:
            job_problems.append("job token %s: done but no line in joblog" % tok)

    faults = faults_before_restart[0] + read_faults(srv)
    report = {
        "seed": seed, "seconds": round(elapsed, 1),
        "operations": sum(soak.ops.values()), "by_kind": dict(sorted(soak.ops.items())),
        "failed_under_faults": {"%s %s" % k: v for k, v in sorted(soak.failed.items())},
        "faults_injected": faults,
        "jobs": len(soak.job_tokens), "paths_compared": nref,
        "differences": len(diffs) + len(mdiffs) + len(soak.differences) + len(job_problems),
    }
    print("soak: " + json.dumps(report, indent=1))
    for d in soak.differences + diffs + ["mount: " + d for d in mdiffs] + job_problems:
        print("soak: DIFFERENCE " + d)
    if report["differences"]:
        print("soak: every operation: %s; the daemons' logs: %s"
              % (oplog.name, " ".join(m.log_path for m in mounts)))
    assert not diffs, "the sandbox differs from the reference (seed %d):\n%s" % (seed, "\n".join(diffs[:50]))
    assert not mdiffs, "the mount differs from the reference (seed %d):\n%s" % (seed, "\n".join(mdiffs[:50]))
    assert not soak.differences, "differences during the run (seed %d):\n%s" % (
        seed, "\n".join(soak.differences[:50]))
    assert not job_problems, "jobs (seed %d):\n%s" % (seed, "\n".join(job_problems))
    assert faults > 0

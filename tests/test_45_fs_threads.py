"""Many threads at once on one mount: 16 threads read and write the same
and different files (saves by rename, appends, truncates, removals,
listings) while jobs start and end, for OSBFS_STRESS_SECONDS (20 by
default; scripts/tsan runs it for a minute under ThreadSanitizer, where
any data race fails the run).  A watchdog fails the test when one
operation takes over 60 s.  Afterwards the sandbox holds, byte for byte,
what each thread wrote last."""

import os
import random
import threading
import time

from jobhelp import job_file, osb, start
from mounthelp import read_file, write_file

THREADS = 16
SECONDS = float(os.environ.get("OSBFS_STRESS_SECONDS", "20"))
OP_LIMIT_S = 60
BLOCK = 4096


class Watchdog:
    """Each thread says what it is doing and since when; check() names
    one that has been at it for over OP_LIMIT_S."""

    def __init__(self):
        self.lock = threading.Lock()
        self.doing = {}

    def begin(self, tid, what):
        with self.lock:
            self.doing[tid] = (what, time.monotonic())

    def end(self, tid):
        with self.lock:
            self.doing.pop(tid, None)

    def check(self):
        now = time.monotonic()
        with self.lock:
            for tid, (what, since) in self.doing.items():
                if now - since > OP_LIMIT_S:
                    return "thread %d: %s for %.0f s" % (tid, what, now - since)
        return None


def worker(m, tid, stop, dog, final, errors):
    rnd = random.Random(1000 + tid)
    mine = m.p("t%02d" % tid)
    os.makedirs(mine, exist_ok=True)
    shared = m.p("shared.bin")
    n = 0
    try:
        while not stop.is_set():
            n += 1
            op = rnd.randrange(9)
            data = (b"%02d:%06d " % (tid, n)) * rnd.randrange(1, 4000)
            if op == 0:
                dog.begin(tid, "save by rename")
                write_file(os.path.join(mine, ".f.tmp"), data)
                os.rename(os.path.join(mine, ".f.tmp"), os.path.join(mine, "f"))
                final[os.path.join("t%02d" % tid, "f")] = data
            elif op == 1:
                dog.begin(tid, "append")
                with open(os.path.join(mine, "log"), "ab") as f:
                    f.write(data[:100])
                final.setdefault(os.path.join("t%02d" % tid, "log"), b"")
                final[os.path.join("t%02d" % tid, "log")] += data[:100]
            elif op == 2:
                dog.begin(tid, "its block of the shared file")
                block = (b"%02d" % tid) * (BLOCK // 2)
                block = block[:BLOCK - 8] + b"%08d" % n
                fd = os.open(shared, os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    os.pwrite(fd, block, tid * BLOCK)
                finally:
                    os.close(fd)
                final[("shared", tid)] = block
            elif op == 3:
                dog.begin(tid, "read another's file")
                other = m.p("t%02d" % rnd.randrange(THREADS), "f")
                try:
                    got = read_file(other)
                    assert len(got) % 10 == 0, (other, len(got))
                except FileNotFoundError:
                    pass
            elif op == 4:
                dog.begin(tid, "truncate and rewrite")
                p = os.path.join(mine, "t")
                with open(p, "ab") as f:
                    f.write(data)
                os.truncate(p, 10)
                final[os.path.join("t%02d" % tid, "t")] = (data + data)[:10] \
                    if os.path.join("t%02d" % tid, "t") not in final else \
                    final[os.path.join("t%02d" % tid, "t")][:10]
            elif op == 5:
                dog.begin(tid, "make and remove")
                p = os.path.join(mine, "gone")
                write_file(p, data)
                os.unlink(p)
            elif op == 6:
                dog.begin(tid, "list")
                os.listdir(m.path)
                os.listdir(mine)
            elif op == 7:
                dog.begin(tid, "stat")
                for name in os.listdir(mine):
                    try:
                        os.stat(os.path.join(mine, name))
                    except FileNotFoundError:
                        pass
            elif op == 8 and tid < 2:
                dog.begin(tid, "a job")
                jid = start(m, "echo %d > %s/job%d.txt" % (n, m.spath("t%02d" % tid), tid))
                # a blocking read: the watchdog sees one that never ends
                assert job_file(m, jid, "wait").strip() == "exited 0", jid
                final[os.path.join("t%02d" % tid, "job%d.txt" % tid)] = b"%d\n" % n
            dog.end(tid)
    except Exception as e:  # noqa: BLE001
        errors.append("thread %d, op %d: %r" % (tid, n, e))
        dog.end(tid)


def test_sixteen_threads_and_jobs_on_one_mount(make_mount, server):
    m = make_mount(options=["attr_timeout=0", "dir_timeout=0", "writeback_delay=200ms"])
    stop = threading.Event()
    dog = Watchdog()
    finals = [dict() for _ in range(THREADS)]
    errors = []
    ts = [threading.Thread(target=worker, args=(m, i, stop, dog, finals[i], errors), daemon=True)
          for i in range(THREADS)]
    for t in ts:
        t.start()
    end = time.monotonic() + SECONDS
    hung = None
    while time.monotonic() < end and not errors and not hung:
        time.sleep(0.5)
        hung = dog.check()
    stop.set()
    deadline = time.monotonic() + OP_LIMIT_S + 10
    while any(t.is_alive() for t in ts) and not hung:
        time.sleep(0.5)
        hung = dog.check() or (time.monotonic() > deadline and "threads did not stop")
    assert not hung, hung
    assert not errors, errors

    with open(osb(m, "ctl"), "w") as f:
        f.write("sync\n")
    sid = m.sandbox_id
    shared = server.read_file(sid, m.spath("shared.bin"))
    checked = 0
    for tid, final in enumerate(finals):
        for key, data in final.items():
            if isinstance(key, tuple):
                assert shared[tid * BLOCK:(tid + 1) * BLOCK] == data, "shared block %d" % tid
            else:
                assert server.read_file(sid, m.spath(key)) == data, key
            checked += 1
    assert checked >= THREADS

"""Big files through a mount: a 1 GiB file written and read back with
checksums on both sides, ranged reads of a big sandbox file without
fetching all of it, a sequential reader's next window fetched before it
asks, and the daemon's memory staying bounded."""

import errno
import hashlib
import os
import subprocess
import time

from mounthelp import cache_used
from osbtest import route_count, wait_until

GIB = 1 << 30
CHUNK = 1 << 20


def peak_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def sanitized():
    return "asan" in os.environ.get("OSBFS_BUILD_DIR", "")


def pattern(i):
    """1 MiB block number i: cheap to make, different every block."""
    return hashlib.sha256(b"%d" % i).digest() * (CHUNK // 32)


def test_one_gib_write_and_read(server, make_mount):
    m = make_mount()
    path = m.p("big.bin")
    want = hashlib.sha256()
    t0 = time.time()
    with open(path, "wb") as f:
        for i in range(GIB // CHUNK):
            block = pattern(i)
            want.update(block)
            f.write(block)
    wrote = time.time() - t0
    fd = os.open(path, os.O_RDONLY)
    t0 = time.time()
    os.fsync(fd)
    os.close(fd)
    uploaded = time.time() - t0
    code, out, err = server.run(m.sandbox_id, "sha256sum " + m.spath("big.bin"), timeout=300)
    assert code == 0, err
    assert out.split()[0] == want.hexdigest()

    # read back through a fresh mount (a cold cache)
    rss_write = peak_rss_kib(m.proc.pid)
    assert m.stop() == 0
    m2 = make_mount(sandbox_id=m.sandbox_id, create=False)
    got = hashlib.sha256()
    t0 = time.time()
    with open(m2.p("big.bin"), "rb") as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                break
            got.update(b)
    read = time.time() - t0
    assert got.hexdigest() == want.hexdigest()
    rss_read = peak_rss_kib(m2.proc.pid)
    print("\n1 GiB: write %.1f s (%.0f MB/s), fsync upload %.1f s (%.0f MB/s), cold read %.1f s (%.0f MB/s)"
          % (wrote, GIB / wrote / 1e6, uploaded, GIB / uploaded / 1e6, read, GIB / read / 1e6))
    print("osbfs peak RSS: %.1f MiB while writing, %.1f MiB while reading" % (rss_write / 1024, rss_read / 1024))
    if not sanitized():
        assert rss_write < 64 * 1024 and rss_read < 64 * 1024


def test_ranged_reads_fetch_only_what_is_read(server, make_mount):
    m = make_mount()
    sid = m.sandbox_id
    code, _, err = server.run(sid, "head -c 268435456 /dev/urandom > %s" % m.spath("r.bin"), timeout=120)
    assert code == 0, err
    server.reset_stats()
    with open(m.p("r.bin"), "rb") as f:
        f.seek(200 << 20)
        mid = f.read(4096)
        f.seek((256 << 20) - 10)
        tail = f.read(100)
    assert len(mid) == 4096 and len(tail) == 10
    code, out, _ = server.run(sid, "dd if=%s bs=4096 skip=%d count=1 status=none | sha256sum"
                              % (m.spath("r.bin"), (200 << 20) // 4096))
    assert out.split()[0] == hashlib.sha256(mid).hexdigest()
    stats = server.stats()["sandboxes"][sid]
    # a few windows, not 256 MiB
    assert stats.get("GET /files/download", 0) <= 4


def test_a_sequential_reader_has_its_next_window_before_it_asks(server, make_mount):
    # feed=no: the change feed would report the file's removal below at
    # once, and the reader would fail there (ESTALE) before reading on
    m = make_mount(options=["attr_timeout=30s", "feed=no"])
    sid = m.sandbox_id
    code, _, err = server.run(sid, "head -c 67108864 /dev/urandom > %s" % m.spath("s.bin"), timeout=120)
    assert code == 0, err
    want = server.read_file(sid, m.spath("s.bin"))
    server.reset_stats()
    got, failed = [], None
    with open(m.p("s.bin"), "rb", buffering=0) as f:
        for _ in range(8):
            got.append(f.read(128 << 10))
        # the first read fetched the window it was in (2 MiB); reading on
        # in it, the reader had the next one asked for
        wait_until(lambda: route_count(server, sid, "GET /files/download") >= 2, 20,
                   "the next window to be asked for")
        # asked is not arrived: on a busy machine the rm below could come
        # first
        wait_until(lambda: cache_used(m, data_only=True) >= 6 << 20, 20,
                   "the next window to arrive")
        # from now on nothing comes: what it reads is what came ahead
        code, _, err = server.run(sid, "rm %s" % m.spath("s.bin"))
        assert code == 0, err
        try:
            while True:
                b = f.read(128 << 10)
                if not b:
                    break
                got.append(b)
        except OSError as e:
            failed = e
    data = b"".join(got)
    assert failed is not None and failed.errno == errno.ESTALE, failed
    assert data == want[:len(data)]
    # the first window, and the next one, twice its size
    assert len(data) >= 6 << 20, len(data)
    # and no more than a window or two ahead of the reader
    assert len(data) < 32 << 20, len(data)


def test_sparse_write_far_into_a_file(server, make_mount):
    m = make_mount()
    with open(m.p("sparse"), "wb") as f:
        f.seek(100 << 20)
        f.write(b"end")
    fd = os.open(m.p("sparse"), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    st = server.stat(m.sandbox_id, m.spath("sparse"))
    assert st["size"] == (100 << 20) + 3
    code, out, _ = server.run(m.sandbox_id, "tail -c 3 %s" % m.spath("sparse"))
    assert out == "end\n" or out == "end"


def test_listing_20000_files_keeps_the_daemon_small(server, make_mount):
    # a user lists a big directory now and then, a fresh listing each time
    # (the listing cache is dropped in between, as dir_timeout would)
    m = make_mount()
    n = 20000
    code, _, err = server.run(m.sandbox_id, "mkdir -p %s && cd %s && seq %d | xargs touch"
                              % (m.spath("big"), m.spath("big"), n), timeout=300)
    assert code == 0, err
    for _ in range(8):
        with open(m.p(".osb", "ctl"), "w") as f:
            f.write("invalidate\n")
        r = subprocess.run(["ls", "-l", m.p("big")], stdout=subprocess.PIPE, check=True)
        assert r.stdout.count(b"\n") == n + 1  # the "total" line
    for i in range(1, n + 1, 997):
        assert os.stat(m.p("big", str(i))).st_size == 0
    peak = peak_rss_kib(m.proc.pid)
    print("\nosbfs peak RSS after listing %d files 8 times: %.1f MiB" % (n, peak / 1024))
    if not sanitized():
        assert peak < 64 * 1024

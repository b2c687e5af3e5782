"""The caches: what is answered without a request (counted by the server),
what our own changes invalidate, close-to-open revalidation, and the
bounded on-disk cache."""

import os
import time

from mounthelp import make_mount  # noqa: F401  (fixture)


def count(server, sid, key):
    return server.stats().get("sandboxes", {}).get(sid, {}).get(key, 0)


def test_listing_answers_every_childs_getattr(server, make_mount):
    m = make_mount(options=["attr_timeout=30s", "dir_timeout=30s"])
    sid = m.sandbox_id
    for i in range(50):
        server.write_file(sid, m.spath("many", "f%02d" % i), b"x" * i)
    server.reset_stats()
    entries = sorted(os.listdir(m.p("many")))
    sizes = [os.stat(m.p("many", n)).st_size for n in entries]
    assert sizes == list(range(50))
    assert count(server, sid, "GET /directories/list") == 1
    assert count(server, sid, "GET /files/info") <= 1  # the directory itself


def test_repeated_stat_is_cached(server, make_mount):
    m = make_mount(options=["attr_timeout=30s"])
    server.write_file(m.sandbox_id, m.spath("c"), b"123")
    os.stat(m.p("c"))
    server.reset_stats()
    for _ in range(20):
        assert os.stat(m.p("c")).st_size == 3
    assert count(server, m.sandbox_id, "GET /files/info") == 0


def test_missing_names_are_remembered(server, make_mount):
    m = make_mount(options=["negative_timeout=30s", "dir_timeout=0"])
    server.reset_stats()
    for _ in range(10):
        assert not os.path.exists(m.p("no-such-header.h"))
    assert count(server, m.sandbox_id, "GET /files/info") == 1


def test_own_create_shows_at_once_despite_caches(server, make_mount):
    m = make_mount(options=["attr_timeout=30s", "dir_timeout=30s", "negative_timeout=30s"])
    assert not os.path.exists(m.p("later"))
    os.listdir(m.p())
    with open(m.p("later"), "w") as f:
        f.write("now")
    assert "later" in os.listdir(m.p())
    assert open(m.p("later")).read() == "now"
    os.unlink(m.p("later"))
    assert "later" not in os.listdir(m.p())
    os.mkdir(m.p("dnew"))
    os.rename(m.p("dnew"), m.p("dnew2"))
    assert "dnew2" in os.listdir(m.p()) and "dnew" not in os.listdir(m.p())


def test_read_data_is_cached_on_disk(server, make_mount):
    m = make_mount(options=["attr_timeout=30s"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("data.bin"), os.urandom(3 << 20))
    first = open(m.p("data.bin"), "rb").read()
    server.reset_stats()
    second = open(m.p("data.bin"), "rb").read()
    assert first == second
    assert count(server, sid, "GET /files/download") == 0


def test_close_to_open_sees_sandbox_change(server, make_mount):
    m = make_mount(options=["attr_timeout=0", "dir_timeout=0"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("cto"), b"version one")
    assert open(m.p("cto"), "rb").read() == b"version one"
    server.write_file(sid, m.spath("cto"), b"version two, longer")
    assert open(m.p("cto"), "rb").read() == b"version two, longer"


def test_unchanged_file_is_not_downloaded_again_after_revalidation(server, make_mount):
    m = make_mount(options=["attr_timeout=0"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("same"), b"s" * 100000)
    open(m.p("same"), "rb").read()
    server.reset_stats()
    open(m.p("same"), "rb").read()
    assert count(server, sid, "GET /files/download") == 0
    assert count(server, sid, "GET /files/info") >= 1


def test_cache_size_cap_evicts_clean_data(server, make_mount):
    m = make_mount(options=["cache_max_size=4M", "attr_timeout=30s"])
    sid = m.sandbox_id
    for i in range(6):
        server.write_file(sid, m.spath("e%d" % i), bytes([i]) * (2 << 20))
    for i in range(6):
        assert open(m.p("e%d" % i), "rb").read() == bytes([i]) * (2 << 20)
    # written files are never evicted before they are uploaded
    with open(m.p("dirty"), "wb") as f:
        f.write(b"d" * (6 << 20))
    deadline = time.time() + 20
    used = None
    while time.time() < deadline:
        used = sum(os.stat(os.path.join(r, n)).st_blocks * 512
                   for r, _, fs in os.walk(m.cache_dir) for n in fs)
        if used <= 12 << 20:
            break
        time.sleep(0.2)
    assert used <= 12 << 20, used
    fd = os.open(m.p("dirty"), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    assert server.read_file(sid, m.spath("dirty")) == b"d" * (6 << 20)
    assert open(m.p("e0"), "rb").read() == bytes([0]) * (2 << 20)


def test_conflict_keeps_both_versions(server, make_mount):
    m = make_mount(options=["writeback_delay=1h", "attr_timeout=0"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("shared.txt"), b"base")
    with open(m.p("shared.txt"), "a") as f:
        f.write(" + ours")
    server.write_file(sid, m.spath("shared.txt"), b"theirs, written meanwhile")
    fd = os.open(m.p("shared.txt"), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    assert server.read_file(sid, m.spath("shared.txt")) == b"base + ours"
    code, out, _ = server.run(sid, "ls %s" % m.spath())
    aside = [n for n in out.split() if n.startswith("shared.txt.conflict-")]
    assert len(aside) == 1, out
    assert server.read_file(sid, m.spath(aside[0])) == b"theirs, written meanwhile"

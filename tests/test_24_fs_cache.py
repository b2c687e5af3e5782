"""The caches: what is answered without a request (counted by the server),
what our own changes invalidate, close-to-open revalidation, and the
bounded on-disk cache."""

import contextlib
import errno
import hashlib
import json
import os
import shlex
import subprocess
import threading
import time

import pytest

from jobhelp import info
from mounthelp import assert_conflict_kept, cache_used
from osbtest import execd_routes, wait_until


def count(server, sid, key):
    return server.stats().get("sandboxes", {}).get(sid, {}).get(key, 0)


def test_listing_answers_every_childs_getattr(server, make_mount):
    # feed=no: counts the listing's requests alone
    m = make_mount(options=["attr_timeout=30s", "dir_timeout=30s", "feed=no"])
    sid = m.sandbox_id
    for i in range(50):
        server.write_file(sid, m.spath("many", "f%02d" % i), b"x" * i)
    server.reset_stats()
    entries = sorted(os.listdir(m.p("many")))
    sizes = [os.stat(m.p("many", n)).st_size for n in entries]
    assert sizes == list(range(50))
    assert count(server, sid, "GET /directories/list") == 1
    assert count(server, sid, "GET /files/info") <= 1  # the directory itself


def test_parallel_listings_of_a_directory_share_one_request(server, make_mount):
    # feed=no: its report of the 3000 new names, whenever it comes, drops
    # the caches, and the listing would be asked again
    m = make_mount(options=["attr_timeout=30s", "dir_timeout=30s", "feed=no"])
    sid = m.sandbox_id
    server.run(sid, "mkdir -p /workspace/big && cd /workspace/big && seq 3000 | xargs touch")
    server.reset_stats()
    got = []
    ts = [threading.Thread(target=lambda: got.append(len(os.listdir(m.p("big")))))
          for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == [3000] * 8
    assert count(server, sid, "GET /directories/list") == 1


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
    # written files are never evicted before they are uploaded (each one
    # within the cap: a bigger one could not be written, test below)
    with open(m.p("dirty"), "wb") as f:
        f.write(b"d" * (3 << 20))

    wait_until(lambda: cache_used(m) <= 12 << 20, 20, "the cache to shrink to 12 MiB", step=0.2)
    fd = os.open(m.p("dirty"), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    assert server.read_file(sid, m.spath("dirty")) == b"d" * (3 << 20)
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
    assert_conflict_kept(server, m, "shared.txt", b"base + ours", b"theirs, written meanwhile")


def sandbox_names(server, sid, d):
    """The names in the sandbox's directory @d, as bytes."""
    code, out, err = server.run(sid, "cd '%s' && for f in *; do printf %%s \"$f\" | od -An -v -tx1 "
                                     "| tr -d ' \\n'; echo; done" % d)
    assert code == 0, err
    return sorted(bytes.fromhex(line) for line in out.split())


def make_conflicts(server, m, names):
    """Each of @names has local changes when the sandbox's copy changes;
    then `sync`, which must succeed. Returns the names their versions were
    kept under, by name."""
    sid = m.sandbox_id
    for n in names:
        server.write_file(sid, m.spath(n), b"base")
        with open(m.p(n), "a") as f:
            f.write(" + ours")
    for n in names:
        server.write_file(sid, m.spath(n), b"theirs, " + n.encode())
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")
    kept = [b for b in sandbox_names(server, sid, m.spath()) if b.decode() not in names]
    assert len(kept) == len(names), kept
    aside = {}
    for b in kept:
        assert len(b) <= 255 and b".conflict-" in b, b
        a = b.decode("utf-8")   # valid UTF-8: no character cut in two
        theirs = server.read_file(sid, m.spath(a))
        n = theirs[len(b"theirs, "):].decode()
        assert n in names and n not in aside, (a, theirs)
        aside[n] = a
    for n in names:
        assert server.read_file(sid, m.spath(n)) == b"base + ours"
    return aside


@pytest.mark.parametrize("name", ["c" * 250, "a" + "\u00e9" * 124, "\u20ac" * 83],
                         ids=["ascii-250", "two-byte-cut", "three-byte-cut"])
def test_a_conflict_on_a_long_name_settles(server, make_mount, name):
    m = make_mount(options=["writeback_delay=1h", "attr_timeout=0"])
    a = make_conflicts(server, m, [name])[name]
    # as much of the name as fits, cut between two characters
    head = a.split("~")[0]
    assert len(head) > 50 and name.startswith(head), a


def test_conflicts_on_long_names_that_begin_alike_keep_apart(server, make_mount):
    m = make_mount(options=["writeback_delay=1h", "attr_timeout=0"])
    names = ["x" * 249 + "1", "x" * 249 + "2"]
    aside = make_conflicts(server, m, names)
    assert aside[names[0]] != aside[names[1]]

# ---------------------------------------------------------------- a file that changes while it is read
#
# The cache holds ranges of a file, fetched as they are read. When the
# sandbox replaces the file meanwhile, a reader gets the old version or an
# error (ESTALE), never old bytes followed by new ones.

MIB = 1 << 20


def read_on(f, upto=None, chunk=128 << 10):
    """Reads @f to its end, or @upto bytes: (the bytes, the OSError that
    stopped it or None)."""
    got, n = [], 0
    try:
        while upto is None or n < upto:
            b = f.read(chunk if upto is None else min(chunk, upto - n))
            if not b:
                break
            got.append(b)
            n += len(b)
    except OSError as e:
        return b"".join(got), e
    return b"".join(got), None


@contextlib.contextmanager
def replaced_while_open(server, m, new):
    """Opens a 16 MiB file of b"A" through the mount, reads its first MiB,
    replaces it in the sandbox with @new: yields the open file. Downloads
    are answered 300 ms late, so what the read-ahead fetches after the
    first MiB is read after the change, however fast it runs (on a busy
    machine it could have fetched the whole file before the change). The
    new version is written beside it and renamed over it: an upload writes
    in place, and a change feed's look in the middle of it would rightly
    show a shorter file, where a reader stops without an error."""
    sid = m.sandbox_id
    server.write_file(sid, m.spath("big"), b"A" * (16 * MIB))
    server.set_faults(rate=1, kinds=["delay"], delay_ms=300, path="files/download")
    try:
        with open(m.p("big"), "rb", buffering=0) as f:
            assert f.read(MIB) == b"A" * MIB
            server.write_file(sid, m.spath("big.new"), new)
            code, _, err = server.run(sid, "mv -f %s %s" % (m.spath("big.new"), m.spath("big")))
            assert code == 0, err
            yield f
    finally:
        server.clear_faults()


def replaced_while_read(server, m, new):
    """replaced_while_open(), read on: (what the reading on gave, the
    OSError that stopped it or None)."""
    with replaced_while_open(server, m, new) as f:
        return read_on(f)


def test_the_change_feed_never_vouches_for_a_fetch(server, make_mount):
    # the feed holds attributes past attr_timeout, but reports a change a
    # round late (10 s here): the version check after a fetch asks once
    # attr_timeout has passed all the same
    m = make_mount(options=["attr_timeout=200ms", "feed", "feed_interval=10s"])
    wait_until(lambda: info(m)["change_feed"].startswith("live"), 20, "the feed to go live")
    got, err = replaced_while_read(server, m, b"B" * (16 * MIB))
    assert set(got) <= {ord("A")}, "read %s" % sorted(set(got))
    assert err is not None and err.errno == errno.ESTALE, err
    assert info(m)["change_feed"].startswith("live")


def test_same_size_replacement_while_read_fails_estale(server, make_mount):
    # a same-size change shows only in the mtime: asked at each fetch here
    m = make_mount(options=["attr_timeout=0"])
    got, err = replaced_while_read(server, m, b"B" * (16 * MIB))
    assert set(got) <= {ord("A")}, "read %s" % sorted(set(got))
    assert err is not None, "read on gave all %d bytes" % len(got)
    assert err.errno == errno.ESTALE
    assert "/workspace/big changed in the sandbox while being read" in m.log()


def test_other_size_replacement_while_read_fails_without_a_stat(server, make_mount):
    # the size every ranged answer states is enough: no request is added
    # (feed=no: a change feed's report could come first, and the read
    # would end at the new size)
    m = make_mount(options=["attr_timeout=30s", "feed=no"])
    with replaced_while_open(server, m, b"B" * (3 * MIB)) as f:
        server.reset_stats()
        # past what is cached, within the size the kernel knows (which
        # would have it ask for the attributes)
        f.seek(12 * MIB)
        with pytest.raises(OSError) as excinfo:
            f.read(4096)
        assert count(server, m.sandbox_id, "GET /files/info") == 0
    assert excinfo.value.errno == errno.ESTALE


def test_reader_fails_on_every_read_after_the_change(server, make_mount):
    m = make_mount(options=["attr_timeout=30s"])
    with replaced_while_open(server, m, b"B" * (5 * MIB)) as f:
        got, err = read_on(f)
        assert err is not None and set(got) <= {ord("A")}
        # also what it had read before: the kernel's pages went too
        f.seek(0)
        with pytest.raises(OSError) as excinfo:
            f.read(4096)
    assert excinfo.value.errno == errno.ESTALE


@pytest.mark.parametrize("told_by", ["stat", "feed"])
def test_a_reader_never_gets_the_old_version_cut_to_the_new_size(server, make_mount, told_by):
    # the kernel keeps one size for every handle: once it has the new
    # one, a handle on the old version would read its bytes up to there
    # and stop as at the end, with no error (a `cp` would copy a cut file)
    opts = ["attr_timeout=0", "feed=no"] if told_by == "stat" else ["attr_timeout=30s"]
    m = make_mount(options=opts)
    sid = m.sandbox_id
    server.write_file(sid, m.spath("f"), b"A" * (4 * MIB))
    if told_by == "feed":
        wait_until(lambda: info(m)["change_feed"].startswith("live"), 20, "the feed to go live")
    with open(m.p("f"), "rb", buffering=0) as f:
        assert read_on(f) == (b"A" * (4 * MIB), None)   # all of it cached
        server.write_file(sid, m.spath("f.new"), b"B" * MIB)
        code, _, err = server.run(sid, "mv -f %s %s" % (m.spath("f.new"), m.spath("f")))
        assert code == 0, err
        wait_until(lambda: os.stat(m.p("f")).st_size == MIB, 20, "the new size to show")
        f.seek(0)
        got, err = read_on(f)
    assert got == b"" and err is not None and err.errno == errno.ESTALE, (len(got), err)
    assert "/workspace/f changed in the sandbox while being read" in m.log()
    with open(m.p("f"), "rb") as f:
        assert f.read() == b"B" * MIB


def test_new_open_after_the_change_reads_the_new_version(server, make_mount):
    m = make_mount(options=["attr_timeout=30s"])
    new = bytes(range(256)) * (3 * MIB // 256) + b"end"
    got, err = replaced_while_read(server, m, new)
    assert set(got) <= {ord("A")}
    assert err is not None and err.errno == errno.ESTALE
    assert os.stat(m.p("big")).st_size == len(new)
    with open(m.p("big"), "rb") as f:
        assert f.read() == new


def test_new_open_elsewhere_fails_the_reader_of_the_old_version(server, make_mount):
    m = make_mount(options=["attr_timeout=0"])
    with replaced_while_open(server, m, b"B" * (4 * MIB)) as old:
        # another open sees the new version, and reads it whole
        with open(m.p("big"), "rb") as f:
            assert f.read() == b"B" * (4 * MIB)
        got, err = read_on(old)
    assert set(got) <= {ord("A")}
    assert err is not None and err.errno == errno.ESTALE


def test_concurrent_writer_never_gives_a_mixed_buffer(server, make_mount):
    # a writer in the sandbox rewrites the file over and over, each version
    # one byte value; each reader reads a little, waits for the next
    # version to be written, and reads on
    READS = 20
    m = make_mount(options=["attr_timeout=0"])
    sid = m.sandbox_id
    size = 8 * MIB
    server.write_file(sid, m.spath("hot"), b"\x00" * size)
    stop = threading.Event()
    written = threading.Condition()
    versions = [0]

    def writer():
        v = 1
        while not stop.is_set():
            server.write_file(sid, m.spath("hot"), bytes([v]) * size)
            v = v % 250 + 1
            with written:
                versions[0] += 1
                written.notify_all()

    def next_version():
        with written:
            seen = versions[0]
            assert written.wait_for(lambda: versions[0] > seen, 30), "the writer is stuck"

    t = threading.Thread(target=writer)
    t.start()
    mixed, whole, failed = [], 0, 0
    try:
        for _ in range(READS):
            with open(m.p("hot"), "rb", buffering=0) as f:
                got, err = read_on(f, upto=256 << 10)
                if err is None:
                    next_version()
                    rest, err = read_on(f)
                    got += rest
            if len(set(got)) > 1:
                mixed.append(sorted(set(got)))
            if err is None:
                whole += 1
            else:
                assert err.errno == errno.ESTALE, err
                failed += 1
    finally:
        stop.set()
        t.join()
    assert not mixed, "%d of %d reads mixed versions: %s" % (len(mixed), READS, mixed[:3])
    assert whole + failed == READS


def test_download_broken_and_resumed_after_a_change_fails(server, make_mount):
    m = make_mount(options=["attr_timeout=30s"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("big"), b"A" * (4 * MIB))
    server.write_file(sid, m.spath("next"), b"B" * (3 * MIB))
    os.stat(m.p("big"))
    server.reset_stats()
    # the first answer stops half-way; the file is replaced (atomically:
    # that answer's first half is surely the old version) before the rest
    # is asked for
    server.set_faults(next=1, kinds=["cut"], delay_ms=1500, path="/files/download")
    got = {}

    def reader():
        try:
            with open(m.p("big"), "rb") as f:
                got["data"] = f.read()
        except OSError as e:
            got["err"] = e

    t = threading.Thread(target=reader)
    try:
        t.start()
        wait_until(lambda: count(server, sid, "GET /files/download") >= 1, 20, "the download",
                   step=0.01)
        code, _, err = server.run(sid, "mv %s %s" % (m.spath("next"), m.spath("big")))
        assert code == 0, err
        t.join(60)
    finally:
        server.clear_faults()
    assert "data" not in got, "read %s" % sorted(set(got["data"]))
    assert got["err"].errno == errno.ESTALE
    assert count(server, sid, "GET /files/download") >= 2  # it did resume


# ---------------------------------------------------------------- a rewrite that keeps the size and the mtime
#
# A file rewritten in the sandbox and given its old mtime back (touch -r,
# cp -p, rsync, an unpacked archive) differs from the old version only in
# its ctime, which no unprivileged process can set back: the cache tells
# the versions apart by it.

BIG = 20 * 1000 * 1000


def read_head_then_rewrite(server, m):
    """Puts a file "big" of BIG bytes b"A" in the sandbox, reads its first
    MiB through the mount (a part of it is cached), and rewrites it in the
    sandbox to b"B", with its size and mtime kept."""
    server.write_file(m.sandbox_id, m.spath("big"), b"A" * BIG)
    with open(m.p("big"), "rb") as f:
        assert f.read(MIB) == b"A" * MIB
    server.rewrite_keeping_size_and_mtime(m.sandbox_id, m.spath("big"), "B")


def read_all_b(m):
    with open(m.p("big"), "rb") as f:
        got = f.read()
    assert len(got) == BIG and set(got) == {ord("B")}, sorted(set(got))


def test_rewrite_keeping_size_and_mtime_is_read_anew(server, make_mount):
    m = make_mount(options=["attr_timeout=0"])
    read_head_then_rewrite(server, m)
    read_all_b(m)


@pytest.mark.parametrize("attr_timeout", ["0", "1h"])
def test_append_after_a_rewrite_keeping_size_and_mtime_uploads_no_mix(server, make_mount,
                                                                     attr_timeout):
    # with attributes cached, the open takes the cached part for the
    # version it has; the sandbox is asked after the rest is fetched
    m = make_mount(options=["attr_timeout=" + attr_timeout, "writeback_delay=1h"])
    sid = m.sandbox_id
    read_head_then_rewrite(server, m)
    with open(m.p("big"), "ab") as f:
        f.write(b"x")
        f.flush()
        os.fsync(f.fileno())
    got = server.read_file(sid, m.spath("big"))
    assert got == b"B" * BIG + b"x", "the sandbox holds %s" % sorted(set(got))
    assert sorted(os.listdir(m.p())) == ["big"]


def test_new_open_never_mixes_bytes_cached_with_bytes_fetched(server, make_mount):
    # attributes cached for an hour: the open takes the cached part for
    # the version it has, and reads it; the first fetch asks the sandbox
    m = make_mount(options=["attr_timeout=1h", "dir_timeout=1h"])
    read_head_then_rewrite(server, m)
    with open(m.p("big"), "rb", buffering=0) as f:
        got, err = read_on(f)
    assert len(set(got)) == 1, "read %s" % sorted(set(got))
    assert err is None or err.errno == errno.ESTALE, err
    read_all_b(m)


def test_a_read_ahead_overtaken_by_a_rewrite_leaves_no_mix_for_the_next_open(server,
                                                                             make_mount):
    # the reader has gone; its read-ahead's download, slowed, is answered
    # after the sandbox rewrote the file, and checked against attributes
    # cached before: the cache holds bytes of two versions until asked
    m = make_mount(options=["attr_timeout=1h", "dir_timeout=1h"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("big"), b"A" * BIG)
    server.set_faults(rate=1, kinds=["delay"], delay_ms=500, path="files/download")
    try:
        with open(m.p("big"), "rb") as f:
            assert f.read(MIB) == b"A" * MIB
        server.rewrite_keeping_size_and_mtime(sid, m.spath("big"), "B")
    finally:
        server.clear_faults()
    time.sleep(1.5)  # the read-ahead's delayed download ends
    with open(m.p("big"), "rb", buffering=0) as f:
        got, err = read_on(f)
    assert err is None, err
    assert got == b"B" * BIG, "read %s" % sorted(set(got))


def test_a_file_read_in_several_downloads_is_asked_once_before_it_is_opened_again(
        server, make_mount):
    # counts the version checks alone: a change feed's rounds would count too
    m = make_mount(options=["attr_timeout=1h", "dir_timeout=1h", "feed=no"])
    sid = m.sandbox_id
    data = os.urandom(BIG)
    server.write_file(sid, m.spath("big"), data)
    with open(m.p("big"), "rb") as f:
        assert f.read() == data
    assert count(server, sid, "GET /files/download") > 1
    for asked in (1, 0):  # its version said, nothing is asked again
        server.reset_stats()
        with open(m.p("big"), "rb") as f:
            assert f.read() == data
        st = server.stats().get("sandboxes", {}).get(sid, {})
        assert sum(st.values()) == asked, st
        assert count(server, sid, "GET /files/download") == 0


def test_invalidate_shows_a_rewrite_keeping_size_and_mtime(server, make_mount):
    m = make_mount(options=["attr_timeout=1h", "dir_timeout=1h"])
    read_head_then_rewrite(server, m)
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("invalidate\n")
    read_all_b(m)


def test_invalidate_drops_cached_content_but_not_unsaved_data(server, make_mount):
    m = make_mount(options=["attr_timeout=1h", "writeback_delay=1h"])
    sid = m.sandbox_id
    clean = os.urandom(4 * MIB)
    server.write_file(sid, m.spath("clean"), clean)
    assert open(m.p("clean"), "rb").read() == clean
    unsaved = os.urandom(2 * MIB)
    with open(m.p("unsaved"), "wb") as f:
        f.write(unsaved)
    assert cache_used(m) >= 6 * MIB
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("invalidate\n")
    used = cache_used(m)  # the journal keeps 1 MiB allocated too
    assert 2 * MIB <= used < 4 * MIB, used
    server.reset_stats()
    assert open(m.p("clean"), "rb").read() == clean
    assert count(server, sid, "GET /files/download") >= 1
    fd = os.open(m.p("unsaved"), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    assert server.read_file(sid, m.spath("unsaved")) == unsaved


def test_conflict_on_a_rewrite_keeping_size_and_mtime(server, make_mount):
    m = make_mount(options=["writeback_delay=1h", "attr_timeout=0"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("shared.txt"), b"base version")
    with open(m.p("shared.txt"), "a") as f:
        f.write(" + ours")
    server.rewrite_keeping_size_and_mtime(sid, m.spath("shared.txt"), "T")
    fd = os.open(m.p("shared.txt"), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    assert server.read_file(sid, m.spath("shared.txt")) == b"base version + ours"
    code, out, _ = server.run(sid, "ls %s" % m.spath())
    aside = [n for n in out.split() if n.startswith("shared.txt.conflict-")]
    assert len(aside) == 1, out
    assert server.read_file(sid, m.spath(aside[0])) == b"T" * len(b"base version")


# ---------------------------------------------------------------- files bigger than cache_max_size
#
# The cap holds for open files too: a file opened for writing must be
# whole here (the upload API takes whole files), so one bigger than the
# cap is refused; a reader of one keeps only what the cap allows.

GIB = 1 << 30


def last_error(m):
    with open(m.p(".osb", "info")) as f:
        return json.load(f)["last_error"] or ""


def test_open_for_writing_a_file_bigger_than_the_cap_fails(server, make_mount):
    m = make_mount(options=["cache_max_size=64M"])
    sid = m.sandbox_id
    code, _, err = server.run(sid, "truncate -s 256M %s" % m.spath("sparse"))
    assert code == 0, err
    with pytest.raises(OSError) as excinfo:
        open(m.p("sparse"), "ab")
    assert excinfo.value.errno == errno.EFBIG
    msg = last_error(m)
    assert "/workspace/sparse" in msg and "268435456 bytes" in msg, msg
    assert "cache_max_size (67108864 bytes)" in msg, msg
    assert msg in m.log()
    assert cache_used(m, data_only=True) <= 64 * MIB
    assert server.stat(sid, m.spath("sparse"))["size"] == 256 * MIB
    # what is refused is the open for writing: a read goes on
    out = subprocess.run("cat %s | sha256sum" % shlex.quote(m.p("sparse")), shell=True,
                         capture_output=True, check=True).stdout.split()[0].decode()
    zeros = hashlib.sha256()
    block = bytes(MIB)
    for _ in range(256):
        zeros.update(block)
    assert out == zeros.hexdigest()
    assert cache_used(m, data_only=True) <= 64 * MIB


def test_writes_past_the_cap_fail(server, make_mount):
    m = make_mount(options=["cache_max_size=8M", "writeback_delay=1h"])
    fd = os.open(m.p("f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fd, b"x" * MIB, 7 * MIB) == MIB  # up to the cap
        with pytest.raises(OSError) as excinfo:
            os.pwrite(fd, b"y", 8 * MIB)
        assert excinfo.value.errno == errno.EFBIG
        with pytest.raises(OSError) as excinfo:
            os.ftruncate(fd, 64 * GIB)
        assert excinfo.value.errno == errno.EFBIG
        assert "a truncate of /workspace/f would make it 68719476736 bytes" in last_error(m)
    finally:
        os.close(fd)
    assert "a write to /workspace/f would make it 8388609 bytes" in m.log()
    assert os.stat(m.p("f")).st_size == 8 * MIB
    assert cache_used(m, data_only=True) <= 8 * MIB


def test_reading_a_file_bigger_than_the_cap_keeps_to_it(server, make_mount):
    m = make_mount(options=["cache_max_size=32M", "attr_timeout=1h"])
    sid = m.sandbox_id
    size = 160 * MIB
    code, _, err = server.run(sid, "head -c %d /dev/urandom > %s && sha256sum %s"
                              % (size, m.spath("data"), m.spath("data")))
    assert code == 0, err
    code, out, _ = server.run(sid, "sha256sum %s" % m.spath("data"))
    want = out.split()[0]
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], cache_used(m, data_only=True))
            stop.wait(0.02)

    t = threading.Thread(target=sample)
    t.start()
    try:
        h = hashlib.sha256()
        with open(m.p("data"), "rb") as f:
            while True:
                b = f.read(MIB)
                if not b:
                    break
                h.update(b)
            # still open: what it read is not all kept
            held = cache_used(m, data_only=True)
    finally:
        stop.set()
        t.join()
    assert h.hexdigest() == want
    # to the byte, but for the blocks the filesystem keeps a file's map
    # of extents in (the cache file is full of holes by then)
    slack = 64 << 10
    print("cache data: %d bytes while open, %d at most" % (held, peak[0]))
    assert held <= 32 * MIB + slack, held
    assert peak[0] <= 32 * MIB + slack, peak[0]


def ctl(m, word):
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write(word + "\n")


def times_ns(path):
    st = os.stat(path)
    return st.st_ctime_ns, st.st_mtime_ns


def times_hold_when_it_lands(m, name):
    """The ctime and mtime shown now are those shown once the upload
    landed, and once asked of the sandbox again."""
    shown = times_ns(m.p(name))
    ctl(m, "sync")
    assert times_ns(m.p(name)) == shown
    ctl(m, "invalidate")
    assert times_ns(m.p(name)) == shown
    return shown


@pytest.mark.parametrize("attr_timeout", ["0", "1h"])
def test_ctime_holds_when_a_new_files_upload_lands(server, make_mount, attr_timeout):
    m = make_mount(options=["attr_timeout=" + attr_timeout, "writeback_delay=1h"])
    with open(m.p("new"), "wb") as f:
        f.write(b"new bytes")
    ours, _ = times_hold_when_it_lands(m, "new")
    # a change made in the sandbox after is shown, and later than ours
    server.run(m.sandbox_id, "chmod 600 " + shlex.quote(m.spath("new")))
    ctl(m, "invalidate")
    theirs, _ = times_ns(m.p("new"))
    assert theirs != ours and theirs >= ours


def test_ctime_holds_when_new_files_land_packed(server, make_mount):
    # eight new small files go as one archive, whose unpacking does not
    # say the ctimes: the first answer after does
    m = make_mount(options=["attr_timeout=1h", "writeback_delay=1h"])
    names = ["p%d" % i for i in range(8)]
    for n in names:
        with open(m.p(n), "wb") as f:
            f.write(n.encode())
    shown = [times_ns(m.p(n)) for n in names]
    server.reset_stats()
    ctl(m, "sync")
    assert execd_routes(server, m.sandbox_id).get("POST /files/upload") == 1
    ctl(m, "invalidate")
    assert [times_ns(m.p(n)) for n in names] == shown


def test_ctime_holds_when_a_rewrite_lands(server, make_mount):
    m = make_mount(options=["attr_timeout=1h", "writeback_delay=1h"])
    server.write_file(m.sandbox_id, m.spath("old"), b"old bytes")
    before, _ = times_ns(m.p("old"))
    with open(m.p("old"), "wb") as f:
        f.write(b"rewritten")
    assert times_ns(m.p("old"))[0] >= before
    times_hold_when_it_lands(m, "old")


@pytest.mark.parametrize("new", [False, True])
def test_ctime_moves_at_a_chmod_not_later(server, make_mount, new):
    m = make_mount(options=["attr_timeout=1h", "writeback_delay=1h"])
    if new:
        with open(m.p("f"), "wb") as f:
            f.write(b"x")
    else:
        server.write_file(m.sandbox_id, m.spath("f"), b"x")
    before, _ = times_ns(m.p("f"))
    os.chmod(m.p("f"), 0o640)
    assert times_ns(m.p("f"))[0] >= before
    times_hold_when_it_lands(m, "f")
    assert os.stat(m.p("f")).st_mode & 0o777 == 0o640


@pytest.mark.parametrize("new", [False, True])
def test_a_directorys_ctime_moves_at_a_chmod_not_later(server, make_mount, new):
    # a directory's mode goes with the write-back: its ctime moved when
    # that landed, not at the chmod
    m = make_mount(options=["attr_timeout=1h", "writeback_delay=1h"])
    d = m.p("d")
    if new:
        os.mkdir(d)
    else:
        server.run(m.sandbox_id, "mkdir " + shlex.quote(m.spath("d")))
    before, _ = times_ns(d)
    os.chmod(d, 0o750)
    ours, _ = times_ns(d)
    assert ours > before
    ctl(m, "sync")
    assert times_ns(d)[0] == ours
    ctl(m, "invalidate")
    assert times_ns(d)[0] == ours
    assert os.stat(d).st_mode & 0o777 == 0o750
    # a change made in the sandbox after is shown, and later than ours
    server.run(m.sandbox_id, "chmod 700 " + shlex.quote(m.spath("d")))
    ctl(m, "invalidate")
    theirs, _ = times_ns(d)
    assert theirs > ours

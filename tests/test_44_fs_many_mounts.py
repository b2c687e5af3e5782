"""Several mounts of one sandbox on one machine, sharing a cache dir: each
works at once with a slot of its own (lock, journal, files), and what a
crashed one left unsaved is uploaded by the next mount, whichever slot
that one takes."""

import os
import threading

from jobhelp import info, osb
from mounthelp import is_mounted
from osbtest import wait_until


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def sync(m):
    with open(osb(m, "ctl"), "w") as f:
        f.write("sync\n")


def test_two_mounts_of_one_sandbox_and_cache_dir_work_at_once(make_mount, server, tmp_path):
    cache = str(tmp_path / "cache")
    m1 = make_mount(cache_dir=cache, options=["attr_timeout=0", "dir_timeout=0"])
    m2 = make_mount(sandbox_id=m1.sandbox_id, create=False, cache_dir=cache,
                    options=["attr_timeout=0", "dir_timeout=0"])
    sid = m1.sandbox_id
    base = os.path.join(cache, sid)
    # each its own slot: the first the sandbox's dir, the second below it
    assert info(m1)["cache"]["dir"] == base
    assert info(m2)["cache"]["dir"] == os.path.join(base, "mounts", "1")
    assert info(m1)["pid"] != info(m2)["pid"]

    write(m1.p("from1.txt"), b"written through the first mount")
    sync(m1)
    assert read(m2.p("from1.txt")) == b"written through the first mount"
    write(m2.p("sub/from2.txt"), b"and through the second")
    sync(m2)
    assert read(m1.p("sub/from2.txt")) == b"and through the second"
    assert server.read_file(sid, m1.spath("from1.txt")) == b"written through the first mount"
    assert server.read_file(sid, m1.spath("sub/from2.txt")) == b"and through the second"
    # each has its own journal
    assert os.path.exists(os.path.join(base, "journal"))
    assert os.path.exists(os.path.join(base, "mounts", "1", "journal"))

    # one unmounted, the other goes on; a third takes the free slot
    m1.stop()
    assert read(m2.p("from1.txt")) == b"written through the first mount"
    m3 = make_mount(sandbox_id=sid, create=False, cache_dir=cache)
    assert info(m3)["cache"]["dir"] == base
    assert read(m3.p("sub/from2.txt")) == b"and through the second"


def test_mounts_of_different_dirs_of_one_sandbox(make_mount, server, tmp_path):
    cache = str(tmp_path / "cache")
    m1 = make_mount(cache_dir=cache, options=["attr_timeout=0", "dir_timeout=0"])
    sid = m1.sandbox_id
    os.mkdir(m1.p("proj"))
    sync(m1)
    m2 = make_mount(sandbox_id=sid, create=False, cache_dir=cache, sdir="/workspace/proj",
                    options=["attr_timeout=0", "dir_timeout=0"])
    m3 = make_mount(sandbox_id=sid, create=False, cache_dir=cache, sdir="/tmp")
    write(m2.p("main.c"), b"int main(void) { return 0; }\n")
    write(m3.p("scratch.txt"), b"in /tmp")
    sync(m2)
    sync(m3)
    assert read(m1.p("proj/main.c")) == b"int main(void) { return 0; }\n"
    assert server.read_file(sid, "/tmp/scratch.txt") == b"in /tmp"
    dirs = {info(m)["cache"]["dir"] for m in (m1, m2, m3)}
    assert len(dirs) == 3


def test_crashed_mounts_unsaved_files_reach_the_sandbox_through_the_next(make_mount, server,
                                                                         tmp_path):
    cache = str(tmp_path / "cache")
    opts = ["writeback_delay=1h"]
    m1 = make_mount(cache_dir=cache, options=opts)
    sid = m1.sandbox_id
    m2 = make_mount(sandbox_id=sid, create=False, cache_dir=cache, options=opts)
    write(m1.p("one.txt"), b"unsaved in the first slot")
    write(m2.p("deep/two.txt"), b"unsaved in the second slot" * 1000)
    os.mkdir(m2.p("empty"))
    m1.kill9()
    m2.kill9()
    assert server.stat(sid, m1.spath("one.txt")) is None
    assert server.stat(sid, m1.spath("deep", "two.txt")) is None

    # one new mount takes the first slot, and the second's journal too
    m3 = make_mount(sandbox_id=sid, create=False, cache_dir=cache)
    assert info(m3)["cache"]["dir"] == os.path.join(cache, sid)
    # deep/, deep/two.txt and empty/ from the second
    assert "took up 3 unsaved changes" in m3.log(), m3.log()
    assert read(m3.p("one.txt")) == b"unsaved in the first slot"
    assert read(m3.p("deep/two.txt")) == b"unsaved in the second slot" * 1000
    sync(m3)
    assert server.read_file(sid, m3.spath("one.txt")) == b"unsaved in the first slot"
    assert server.read_file(sid, m3.spath("deep", "two.txt")) == b"unsaved in the second slot" * 1000
    assert server.stat(sid, m3.spath("empty"))["type"] == "directory"
    # the second slot holds nothing any more: nobody uploads it twice
    other = os.path.join(cache, sid, "mounts", "1")
    assert not os.path.exists(os.path.join(other, "journal"))
    assert os.listdir(os.path.join(other, "files")) == []
    m3.stop()
    m4 = make_mount(sandbox_id=sid, create=False, cache_dir=cache)
    assert "took up" not in m4.log() and "earlier run" not in m4.log(), m4.log()


def test_a_crashed_mounts_slot_is_taken_by_the_next_while_another_is_mounted(make_mount, server,
                                                                             tmp_path):
    cache = str(tmp_path / "cache")
    m1 = make_mount(cache_dir=cache)
    sid = m1.sandbox_id
    m2 = make_mount(sandbox_id=sid, create=False, cache_dir=cache, options=["writeback_delay=1h"])
    write(m2.p("left.txt"), b"left by a crashed mount")
    m2.kill9()
    m3 = make_mount(sandbox_id=sid, create=False, cache_dir=cache)
    assert info(m3)["cache"]["dir"] == os.path.join(cache, sid, "mounts", "1")
    assert read(m3.p("left.txt")) == b"left by a crashed mount"
    wait_until(lambda: server.stat(sid, m3.spath("left.txt")), 60, "the upload of left.txt")
    assert is_mounted(m1.path)


def test_two_mounts_racing_on_one_name_share_one_sandbox(make_mount, server, tmp_path):
    cache = str(tmp_path / "cache")
    name = "race-%d" % os.getpid()
    ms = [make_mount(options=["name=" + name], cache_dir=cache, start=False,
                     workdir=str(tmp_path / ("r%d" % i))) for i in range(2)]
    errors = []

    def start(m):
        try:
            m.start()
        except Exception as e:  # noqa: BLE001
            errors.append(str(e))

    ts = [threading.Thread(target=start, args=(m,)) for m in ms]
    for t in ts:
        t.start()
    for t in ts:
        t.join(180)
    assert not errors, errors
    assert ms[0].sandbox_id and ms[0].sandbox_id == ms[1].sandbox_id
    assert {info(m)["cache"]["dir"] for m in ms} == {
        os.path.join(cache, ms[0].sandbox_id),
        os.path.join(cache, ms[0].sandbox_id, "mounts", "1")}
    write(ms[0].p("hello.txt"), b"hi")
    sync(ms[0])
    assert server.read_file(ms[0].sandbox_id, ms[0].spath("hello.txt")) == b"hi"
    for m in ms:
        m.stop()

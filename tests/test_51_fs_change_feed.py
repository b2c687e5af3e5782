"""The change feed (feed=yes): a command in the sandbox reports what
changed, so what the mount knows holds past its timeouts until then.
A tree nobody changed is not asked again however long since the last
look; a change made in the sandbox beside the mount (a job, the code
interpreter, another client) still shows within a second or so."""

import json
import os
import time

from osbtest import execd_routes

FEED = ["feed", "attr_timeout=300ms", "dir_timeout=300ms", "negative_timeout=300ms"]


def info(m):
    with open(os.path.join(m.path, ".osb", "info")) as f:
        return json.load(f)


def wait_live(m, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = info(m)["change_feed"]
        if st.startswith("live"):
            return st
        time.sleep(0.1)
    raise AssertionError("the feed did not go live: " + st)


def wait_for(pred, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError("timed out")


def walk(top):
    out = []
    for r, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if x != ".osb"]
        for f in files:
            st = os.stat(os.path.join(r, f))
            out.append((os.path.relpath(os.path.join(r, f), top), st.st_size, st.st_mtime_ns))
    return sorted(out)


def test_an_unchanged_tree_is_not_asked_again(server, make_mount):
    m = make_mount(options=FEED)
    sid = m.sandbox_id
    wait_live(m)
    rc, _, err = server.run(sid, "mkdir -p %s && cd %s && for d in a b c; do mkdir -p $d/sub; "
                            "for i in 1 2 3 4; do echo $d$i > $d/f$i; echo s$i > $d/sub/g$i; done; done"
                            % (m.spath("t"), m.spath("t")))
    assert rc == 0, err
    time.sleep(1.0)  # its report came and went
    first = walk(os.path.join(m.path, "t"))
    assert len(first) == 24
    time.sleep(1.0)  # three times the timeouts: only the feed holds them
    server.reset_stats()
    for _ in range(3):
        assert walk(os.path.join(m.path, "t")) == first
        assert not os.path.exists(os.path.join(m.path, "t", "a", "missing"))
        time.sleep(0.4)
    assert {r: n for r, n in execd_routes(server, sid).items() if r != "POST /command"} == {}


def test_a_change_in_the_sandbox_shows(server, make_mount):
    m = make_mount(options=FEED)
    sid = m.sandbox_id
    server.write_file(sid, m.spath("d", "f.txt"), b"one\n")
    wait_live(m)
    p = os.path.join(m.path, "d", "f.txt")
    with open(p) as f:
        assert f.read() == "one\n"
    time.sleep(1.0)
    # changed beside the mount: new bytes, a new name, a name gone
    rc, _, err = server.run(sid, "cd %s && echo two > f.txt && echo new > n.txt" % m.spath("d"))
    assert rc == 0, err
    t0 = time.monotonic()
    wait_for(lambda: open(p).read() == "two\n", timeout=5)
    wait_for(lambda: os.path.exists(os.path.join(m.path, "d", "n.txt")), timeout=5)
    assert time.monotonic() - t0 < 3
    rc, _, err = server.run(sid, "rm %s" % m.spath("d", "n.txt"))
    assert rc == 0, err
    wait_for(lambda: not os.path.exists(os.path.join(m.path, "d", "n.txt")), timeout=5)
    assert sorted(os.listdir(os.path.join(m.path, "d"))) == ["f.txt"]

"""The change feed (feed=yes): a command in the sandbox reports what
changed, so what the mount knows holds past its timeouts until then.
A tree nobody changed is not asked again however long since the last
look; a change made in the sandbox beside the mount (a job, the code
interpreter, another client) still shows within a second or so."""

import json
import os
import threading
import time

import pytest

from mounthelp import assert_conflict_kept, write_fsync
from osbtest import execd_routes

FEED = ["feed", "attr_timeout=300ms", "dir_timeout=300ms", "negative_timeout=300ms"]


@pytest.fixture(params=["inotify", "poll"])
def feed(request):
    """The feed's options in each of its modes: inotify where the sandbox
    has inotifywait (the local server's sandboxes run on this host), and
    polling."""
    if request.param == "inotify":
        return FEED
    return FEED + ["feed_mode=poll"]


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


def mode_of(feed):
    return "poll" if "feed_mode=poll" in feed else "inotify"


def walk(top):
    out = []
    for r, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if x != ".osb"]
        for f in files:
            st = os.stat(os.path.join(r, f))
            out.append((os.path.relpath(os.path.join(r, f), top), st.st_size, st.st_mtime_ns))
    return sorted(out)


def test_an_unchanged_tree_is_not_asked_again(server, make_mount, feed):
    m = make_mount(options=feed)
    sid = m.sandbox_id
    wait_live(m)
    rc, _, err = server.run(sid, "mkdir -p %s && cd %s && for d in a b c; do mkdir -p $d/sub; "
                            "for i in 1 2 3 4; do echo $d$i > $d/f$i; echo s$i > $d/sub/g$i; done; done"
                            % (m.spath("t"), m.spath("t")))
    assert rc == 0, err
    settled(m)  # its reports came and went
    first = walk(os.path.join(m.path, "t"))
    assert len(first) == 24
    # A round that came late (a loaded machine) let the timeouts apply
    # meanwhile, and says so: such a try does not count.
    for _ in range(5):
        time.sleep(1.0)  # three times the timeouts: only the feed holds them
        before = feed_counts(m)
        server.reset_stats()
        for _ in range(3):
            assert walk(os.path.join(m.path, "t")) == first
            assert not os.path.exists(os.path.join(m.path, "t", "a", "missing"))
            time.sleep(0.4)
        asked = {r: n for r, n in execd_routes(server, sid).items() if r != "POST /command"}
        if before is not None and feed_counts(m) == before:
            break
    else:
        raise AssertionError("the feed fell behind or reported changes in every try: "
                             + info(m)["change_feed"])
    assert asked == {}


def test_a_change_in_the_sandbox_shows(server, make_mount, feed):
    m = make_mount(options=feed)
    sid = m.sandbox_id
    server.write_file(sid, m.spath("d", "f.txt"), b"one\n")
    wait_live(m)
    assert info(m)["change_feed_mode"] == mode_of(feed)
    p = os.path.join(m.path, "d", "f.txt")
    with open(p) as f:
        assert f.read() == "one\n"
    time.sleep(1.0)
    # changed beside the mount: new bytes, a new name, a name gone
    rc, _, err = server.run(sid, "cd %s && echo two > f.txt && echo new > n.txt" % m.spath("d"))
    assert rc == 0, err
    wait_for(lambda: open(p).read() == "two\n", timeout=5)
    wait_for(lambda: os.path.exists(os.path.join(m.path, "d", "n.txt")), timeout=5)
    rc, _, err = server.run(sid, "rm %s" % m.spath("d", "n.txt"))
    assert rc == 0, err
    wait_for(lambda: not os.path.exists(os.path.join(m.path, "d", "n.txt")), timeout=5)
    assert sorted(os.listdir(os.path.join(m.path, "d"))) == ["f.txt"]


def feed_procs(server, sid):
    """The feed commands running in the sandbox (their shells, not the
    subshells they fork), and their directories."""
    rc, out, _ = server.run(
        sid, "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null) || continue; "
        "case $c in *d=/tmp/[.]osbfs-feed-*) echo \"${p#/proc/} $(cut -d' ' -f4 $p/stat)\";; esac; done; "
        "echo dirs $(ls -d /tmp/.osbfs-feed-* 2>/dev/null | wc -l)")
    lines = out.split("\n")
    procs = dict(l.split() for l in lines if l and not l.startswith("dirs"))
    dirs = [int(l.split()[1]) for l in lines if l.startswith("dirs")][0]
    return [sum(1 for pid, ppid in procs.items() if ppid not in procs), dirs]


def inotifywaits(server, sid):
    """The feed's inotifywait processes in the sandbox."""
    rc, out, _ = server.run(
        sid, "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null) || continue; "
        "case $c in 'inotifywait '*/tmp/.osbfs-feed-*) echo ${p#/proc/};; esac; done")
    assert rc == 0
    return out.split()


def inotify_mount_with(server, make_mount, data):
    """A mount whose feed is live with inotify, with f.txt holding @data
    in the sandbox, read through the mount: (mount, sandbox id, its
    path)."""
    m = make_mount(options=FEED)
    sid = m.sandbox_id
    server.write_file(sid, m.spath("f.txt"), data)
    wait_live(m)
    assert info(m)["change_feed_mode"] == "inotify"
    p = os.path.join(m.path, "f.txt")
    with open(p, "rb") as f:
        assert f.read() == data
    return m, sid, p


def test_a_broken_feed_falls_back_to_the_timeouts_and_comes_back(server, make_mount, feed):
    m = make_mount(options=feed)
    sid = m.sandbox_id
    server.write_file(sid, m.spath("f.txt"), b"one\n")
    wait_live(m)
    p = os.path.join(m.path, "f.txt")
    assert open(p).read() == "one\n"
    # the feed's command dies; a change made then shows after the timeouts
    rc, _, err = server.run(sid, "pkill -f 'd=/tmp/[.]osbfs-feed-'; echo two > %s" % m.spath("f.txt"))
    assert rc == 0, err
    wait_for(lambda: info(m)["change_feed"].startswith("not live"), timeout=5)
    assert "the timeouts apply" in info(m)["change_feed"]
    wait_for(lambda: open(p).read() == "two\n", timeout=5)
    with open(m.log_path) as f:
        assert "change feed broke" in f.read()
    # and it is back by itself, one command in the sandbox
    wait_live(m)
    assert feed_procs(server, sid) == [1, 1]
    assert len(inotifywaits(server, sid)) == (mode_of(feed) == "inotify")
    m.stop()
    assert feed_procs(server, sid) == [0, 0]
    assert inotifywaits(server, sid) == []


def polling_with_tools(server, make_mount, options, tools):
    """A mount on a sandbox whose /usr/local/bin holds what the shell text
    @tools makes there (stand-ins for an image's own tools), with d/f.txt
    ("one") in its tree: started, its feed live and polling. (the mount,
    its sandbox id, the path of f.txt in it)"""
    m = make_mount(options=options, start=False)
    sid = m.sandbox_id
    rc, _, err = server.run(sid, "mkdir -p /usr/local/bin && cd /usr/local/bin && %s && "
                            "mkdir -p %s && echo one > %s" % (tools, m.spath("d"), m.spath("d", "f.txt")))
    assert rc == 0, err
    m.start()
    wait_live(m)
    assert info(m)["change_feed_mode"] == "poll"
    p = os.path.join(m.path, "d", "f.txt")
    assert open(p).read() == "one\n"
    return m, sid, p


def test_without_gnu_stat_and_find(server, make_mount, feed):
    """An image whose stat and find are POSIX only (busybox): the feed says
    paths without attributes, and still nothing is asked while the tree
    is as the mount knows it."""
    # inotify needs GNU stat for what it reports: it polls
    m, sid, p = polling_with_tools(
        server, make_mount, feed,
        "printf '#!/bin/sh\\ncase \"$1\" in --printf) exit 1;; esac\\nexec /usr/bin/stat \"$@\"\\n' > stat && "
        "printf '#!/bin/sh\\ncase \" $* \" in *\" -cnewer \"*) exit 1;; esac\\nexec /usr/bin/find \"$@\"\\n' > find && "
        "chmod 755 stat find && stat --printf x / ; test $? = 1")
    # made through the mount: known without asking again
    with open(os.path.join(m.path, "d", "g.txt"), "w") as f:
        f.write("mine\n")
    with open(os.path.join(m.path, ".osb", "ctl"), "w") as f:
        f.write("sync\n")
    # without attributes in its reports, what changed (here the mount's
    # own upload, reported a round or two later: later still on a busy
    # machine) is asked once more; then nothing while nothing changes
    asked = []
    for _ in range(6):
        time.sleep(1.0)
        server.reset_stats()
        for _ in range(3):
            assert sorted(os.listdir(os.path.join(m.path, "d"))) == ["f.txt", "g.txt"]
            assert os.stat(os.path.join(m.path, "d", "g.txt")).st_size == 5
            assert not os.path.exists(os.path.join(m.path, "d", "missing"))
            time.sleep(0.5)
        asked.append({r: n for r, n in execd_routes(server, sid).items() if r != "POST /command"})
        if not asked[-1]:
            break
    assert asked[-1] == {}, "asked while nothing changed, in each of %d rounds: %s" % (len(asked), asked)
    # changed beside the mount: shows
    rc, _, err = server.run(sid, "cd %s && echo two > f.txt && rm g.txt" % m.spath("d"))
    assert rc == 0, err
    wait_for(lambda: open(p).read() == "two\n", timeout=5)
    wait_for(lambda: sorted(os.listdir(os.path.join(m.path, "d"))) == ["f.txt"], timeout=5)


def test_names_with_newlines_and_many_changes_at_once(server, make_mount, feed):
    m = make_mount(options=feed)
    sid = m.sandbox_id
    wait_live(m)
    server.run(sid, "mkdir -p %s && echo a > %s" % (m.spath("d"), m.spath("d", "x")))
    time.sleep(1.0)
    d = os.path.join(m.path, "d")
    assert os.listdir(d) == ["x"]
    # a directory with a newline in its name: what is below it still shows
    rc, _, err = server.run(sid, "cd %s && mkdir -p 'n\nl/sub' && echo 1 > 'n\nl/sub/f'" % m.spath("d"))
    assert rc == 0, err
    wait_for(lambda: os.path.exists(os.path.join(d, "n\nl", "sub", "f")), timeout=5)
    assert open(os.path.join(d, "n\nl", "sub", "f")).read() == "1\n"
    time.sleep(1.0)
    rc, _, err = server.run(sid, "echo 2 > '%s'" % m.spath("d", "n\nl", "sub", "f"))
    assert rc == 0, err
    wait_for(lambda: open(os.path.join(d, "n\nl", "sub", "f")).read() == "2\n", timeout=5)
    # more changes in one look than the feed says one by one
    rc, _, err = server.run(sid, "cd %s && for i in $(seq 300); do echo $i > m$i; done && echo b > x" % m.spath("d"))
    assert rc == 0, err
    wait_for(lambda: len(os.listdir(d)) == 302, timeout=5)
    wait_for(lambda: open(os.path.join(d, "x")).read() == "b\n", timeout=5)
    assert open(os.path.join(d, "m300")).read() == "300\n"


def test_a_file_made_in_a_new_directory_at_once_shows(server, make_mount, feed):
    """inotifywait watches a new directory only once it saw it made: what
    was made in it before still shows, and what changes there after."""
    m = make_mount(options=feed)
    sid = m.sandbox_id
    server.write_file(sid, m.spath("d", "f.txt"), b"one\n")
    wait_live(m)
    d = os.path.join(m.path, "d")
    assert os.listdir(d) == ["f.txt"]
    time.sleep(1.0)
    rc, _, err = server.run(sid, "cd %s && mkdir -p new/sub && echo x > new/sub/f && echo y > new/g"
                            % m.spath("d"))
    assert rc == 0, err
    wait_for(lambda: os.path.exists(os.path.join(d, "new", "sub", "f")), timeout=5)
    assert open(os.path.join(d, "new", "sub", "f")).read() == "x\n"
    assert sorted(os.listdir(os.path.join(d, "new"))) == ["g", "sub"]
    time.sleep(1.0)
    rc, _, err = server.run(sid, "cd %s && echo z > new/sub/f && echo w > new/sub/h && mv new moved"
                            % m.spath("d"))
    assert rc == 0, err
    wait_for(lambda: sorted(os.listdir(d)) == ["f.txt", "moved"], timeout=5)
    assert open(os.path.join(d, "moved", "sub", "f")).read() == "z\n"
    time.sleep(1.0)
    # a watch follows its directory's rename
    rc, _, err = server.run(sid, "echo v > %s" % m.spath("d", "moved", "sub", "f"))
    assert rc == 0, err
    wait_for(lambda: open(os.path.join(d, "moved", "sub", "f")).read() == "v\n", timeout=5)


def test_inotify_a_name_made_before_its_new_directory_was_watched_shows(server, make_mount):
    """inotifywait watches a directory, and those already in it, only once
    it read that it was made; a name made deeper in it before then has no
    event. Stopped here, so that the mount lists the new directories, and a
    file comes into one, before their watches are set."""
    m = make_mount(options=FEED)
    sid = m.sandbox_id
    wait_live(m)
    assert info(m)["change_feed_mode"] == "inotify"
    time.sleep(1.0)
    [pid] = inotifywaits(server, sid)
    rc, _, err = server.run(sid, "kill -STOP %s && mkdir -p %s" % (pid, m.spath("n", "sub")))
    assert rc == 0, err
    try:
        # asked while the feed is live: held until it reports a change
        assert os.listdir(m.p("n", "sub")) == []
        server.write_file(sid, m.spath("n", "sub", "new"), b"fresh")
    finally:
        rc, _, err = server.run(sid, "kill -CONT %s" % pid)
    assert rc == 0, err
    wait_for(lambda: "new" in os.listdir(m.p("n", "sub")), timeout=5)
    with open(m.p("n", "sub", "new"), "rb") as f:
        assert f.read() == b"fresh"


def test_a_round_that_came_late_is_counted_and_said(server, make_mount):
    """A feed that falls behind (its watcher stopped here for longer than
    the grace, twice the round's pause plus 1.5 s) is not live meanwhile,
    so the timeouts apply; the round that comes late says so in
    .osb/info and in the log, which is what explains the requests asked
    meanwhile."""
    m, sid, p = inotify_mount_with(server, make_mount, b"one\n")
    assert feed_counts(m)[1] == 0
    rounds = info(m)["change_feed_rounds"]
    [pid] = inotifywaits(server, sid)
    rc, _, err = server.run(sid, "kill -STOP %s" % pid)
    assert rc == 0, err
    try:
        wait_for(lambda: info(m)["change_feed"] == "not live (no tick lately)", timeout=6)
        server.reset_stats()
        assert open(p).read() == "one\n"  # the timeouts apply: asked
        assert execd_routes(server, sid).get("GET /files/info", 0) == 1
    finally:
        rc, _, err = server.run(sid, "kill -CONT %s" % pid)
    assert rc == 0, err
    wait_for(lambda: info(m)["change_feed"].startswith("live"), timeout=5)
    assert feed_counts(m)[1] == 1
    assert info(m)["change_feed_rounds"] > rounds
    with open(m.log_path) as f:
        said = [ln for ln in f if "came late" in ln]
    assert len(said) == 1 and "1 round(s) came late" in said[0], said


def test_inotify_directories_made_while_its_watches_are_set_are_watched(server, make_sandbox, make_mount):
    """inotifywait sets a directory's watch after it read the directory and
    every one below it: a directory made meanwhile in one it already read
    gets no watch and no event. The feed walks again when the tree changed
    under the walk, so a change in a directory made while the feed started
    still shows."""
    sid = make_sandbox()
    m = make_mount(sandbox_id=sid, options=FEED, start=False)
    rc, _, err = server.run(sid, "mkdir -p %s && cd %s && seq 20000 | xargs mkdir"
                            % (m.spath("w"), m.spath("w")))
    assert rc == 0, err
    made = []

    def writer():
        # new directories beside the 20,000 until the first walk is over
        made.append(server.run(
            sid, "cd %s && i=0; until grep -qs '^Watches established' /tmp/.osbfs-feed-*/e.*; "
                 "do mkdir n$i; i=$((i+1)); [ $i -lt 5000 ] || exit 1; done"
                 % m.spath("w"), timeout=120))

    t = threading.Thread(target=writer)
    t.start()
    try:
        m.start()
        wait_live(m)
    finally:
        t.join()
    assert made[0][0] == 0, made[0][2]
    assert info(m)["change_feed_mode"] == "inotify"
    time.sleep(1.0)
    new = [n for n in os.listdir(m.p("w")) if n.startswith("n")]
    assert new
    for n in new:
        assert os.listdir(m.p("w", n)) == []
    rc, _, err = server.run(sid, "cd %s && for d in n*; do echo z > $d/f; done" % m.spath("w"))
    assert rc == 0, err
    # (as many as the walk took time: each looked at until it shows)
    pending = set(new)

    def shown():
        pending.difference_update([n for n in pending if os.listdir(m.p("w", n)) == ["f"]])
        return not pending

    wait_for(shown, timeout=30)


def save(server, m, path, data):
    """An editor's save in place (truncate, write, fsync): the requests
    the user waited for, without the times command that follows it."""
    server.reset_stats()
    write_fsync(path, data)
    return {r: n for r, n in execd_routes(server, m.sandbox_id).items() if r != "POST /command"}


def changes_reported(m):
    """The feed's count of changes reported ("live since T, N changes
    reported")."""
    return int(info(m)["change_feed"].split(", ")[1].split()[0])


def feed_counts(m):
    """The feed's changes reported and the times it lapsed ("live since
    T, N changes reported, lapsed L times"); None while it is not live."""
    st = info(m)["change_feed"]
    if not st.startswith("live"):
        return None
    parts = st.split(", ")
    return int(parts[1].split()[0]), int(parts[2].split()[1])


def settled(m, quiet=1.0, timeout=15, server=None):
    """Waits until the feed has reported nothing more for @quiet s and
    two rounds (a round on a loaded machine takes longer); with @server,
    first until the times command that follows a save's upload (a second
    later) was run."""
    if server:
        wait_for(lambda: execd_routes(server, m.sandbox_id).get("POST /command", 0) >= 1)
    end = time.monotonic() + timeout
    last, since, rounds = None, time.monotonic(), 0
    while time.monotonic() < end:
        st = info(m)
        if not st["change_feed"].startswith("live"):
            last = None  # fell behind (a loaded machine): not settled
        else:
            n = int(st["change_feed"].split(", ")[1].split()[0])
            if n != last:
                last, since, rounds = n, time.monotonic(), st["change_feed_rounds"]
            elif time.monotonic() - since >= quiet and st["change_feed_rounds"] >= rounds + 2:
                return n
        time.sleep(0.1)
    raise AssertionError("the feed kept reporting changes, or was not live: " + st["change_feed"])


def test_a_save_the_feed_vouches_for_is_one_request(server, make_mount, feed):
    """What the feed holds, a save need not ask: a new file in a directory
    the mount made, long after it was made, and a file changed again once
    the feed reported it as this mount left it, are each one upload."""
    m = make_mount(options=feed)
    sid = m.sandbox_id
    wait_live(m)
    assert os.listdir(m.path) == []  # the names the feed's reports are checked against
    os.mkdir(m.p("d"))
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")  # the directory in the sandbox
    settled(m)  # past the timeouts: only the feed holds what is known
    # a report that raced the directory's landing ends the listings it
    # names (asked again once): known again, and quiet since
    assert os.listdir(m.p("d")) == []
    settled(m)
    assert save(server, m, m.p("d", "new.txt"), b"new\n") == {"POST /files/upload": 1}
    settled(m, server=server)
    for i in range(3):
        assert save(server, m, m.p("d", "new.txt"), b"v%d\n" % i) == {"POST /files/upload": 1}
        settled(m, server=server)
    assert server.read_file(sid, m.spath("d", "new.txt")) == b"v2\n"


def test_a_change_the_feed_reported_is_kept_as_a_conflict(server, make_mount, feed):
    """A file changed beside the mount, once the feed said so, is asked
    before the mount's own change of it goes: both versions are kept, as
    without the feed."""
    # debug: the log says each report (the count of them may move for a
    # late one of the mount's own change)
    m = make_mount(options=feed + ["writeback_delay=1h", "debug"])
    sid = m.sandbox_id
    wait_live(m)
    p = m.p("shared.txt")
    save(server, m, p, b"base")
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")  # its times too: the sandbox's copy is the base
    settled(m)
    with open(p, "a") as f:
        f.write(" + ours")
    theirs = b"theirs, written meanwhile"
    rc, _, err = server.run(sid, "printf '%s' > %s" % (theirs.decode(), m.spath("shared.txt")))
    assert rc == 0, err
    # "feed: A<mode> <size> ... PATH": the report of their version
    wait_for(lambda: any(l.startswith("A") and l.split()[1] == str(len(theirs)) and
                         l.endswith(" " + m.spath("shared.txt"))
                         for l in (x.split("feed: ", 1)[1] for x in m.log().splitlines()
                                   if "debug: feed: " in x)))
    fd = os.open(p, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    assert_conflict_kept(server, m, "shared.txt", b"base + ours", theirs)


def test_with_attr_timeout_0_a_save_asks_though_the_feed_vouches(server, make_mount):
    """attr_timeout=0 asks for no attribute caching: a save of a changed
    file looks at the sandbox first even when the feed, live, reported the
    file as the mount left it. Their change, made while the feed cannot
    report it (its watcher stopped, the feed still live), is kept as a
    conflict, not overwritten."""
    m = make_mount(options=["feed", "attr_timeout=0", "writeback_delay=1h"])
    sid = m.sandbox_id
    wait_live(m)
    assert info(m)["change_feed_mode"] == "inotify"
    p = m.p("shared.txt")
    save(server, m, p, b"base")
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")
    settled(m)
    with open(p, "a") as f:
        f.write(" + ours")
    [pid] = inotifywaits(server, sid)
    theirs = b"theirs, unreported"
    rc, _, err = server.run(sid, "kill -STOP %s && printf '%s' > %s"
                            % (pid, theirs.decode(), m.spath("shared.txt")))
    assert rc == 0, err
    try:
        assert info(m)["change_feed"].startswith("live")
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    finally:
        rc, _, err = server.run(sid, "kill -CONT %s" % pid)
    assert rc == 0, err
    assert_conflict_kept(server, m, "shared.txt", b"base + ours", theirs)


def test_inotify_that_cannot_watch_falls_back_to_polling(server, make_mount):
    """inotifywait that fails to set its watches (here: the kernel's limit
    reached): the feed polls, in the same command."""
    m, sid, p = polling_with_tools(
        server, make_mount, FEED,
        "printf '#!/bin/sh\\necho \"Setting up watches.\" >&2\\n"
        "echo \"Failed to watch $3; upper limit on inotify watches reached!\" >&2\\n"
        "exit 1\\n' > inotifywait && chmod 755 inotifywait")
    time.sleep(1.0)
    rc, _, err = server.run(sid, "echo two > %s" % m.spath("d", "f.txt"))
    assert rc == 0, err
    wait_for(lambda: open(p).read() == "two\n", timeout=5)
    m.stop()
    assert feed_procs(server, sid) == [0, 0]


def test_inotify_a_change_shows_within_a_second(server, make_mount):
    m, sid, p = inotify_mount_with(server, make_mount, b"0\n")
    took = []
    for i in range(1, 4):
        time.sleep(1.0)  # past the timeouts: only a report shows it
        began = time.monotonic()
        rc, _, err = server.run(sid, "echo %d > %s" % (i, m.spath("f.txt")))
        assert rc == 0, err
        took.append(wait_for(lambda: open(p).read() == "%d\n" % i, timeout=5) - began)
    # a tick every 500ms; the change is read before the tick after it
    assert max(took) < 1.5, took


def lost_events_logged(m):
    with open(m.log_path) as f:
        return "lost events; every cache dropped" in f.read()


def test_inotify_a_dead_watch_drops_every_cache(server, make_mount):
    """inotifywait stops, a change is queued for it, it dies: the change is
    lost with it, so every cache goes, and the feed polls from then."""
    m, sid, p = inotify_mount_with(server, make_mount, b"one\n")
    time.sleep(1.0)
    [pid] = inotifywaits(server, sid)
    rc, _, err = server.run(sid, "kill -STOP %s && echo two > %s && kill -KILL %s"
                            % (pid, m.spath("f.txt"), pid))
    assert rc == 0, err
    wait_for(lambda: lost_events_logged(m), timeout=5)
    assert open(p).read() == "two\n"
    assert info(m)["change_feed"].startswith("live")
    assert info(m)["change_feed_mode"] == "poll"
    # and it still reports what changes
    rc, _, err = server.run(sid, "echo three > %s" % m.spath("f.txt"))
    assert rc == 0, err
    wait_for(lambda: open(p).read() == "three\n", timeout=5)
    assert inotifywaits(server, sid) == []


def test_inotify_an_overflowing_queue_drops_every_cache(server, make_mount):
    """More events than the kernel queues for inotifywait while it does not
    read (stopped here): the queue says it overflowed, every cache goes."""
    m = make_mount(options=FEED)
    sid = m.sandbox_id
    rc, out, err = server.run(sid, "cat /proc/sys/fs/inotify/max_queued_events")
    assert rc == 0, err
    queued = int(out)
    if queued > 100000:
        pytest.skip("the kernel queues %d inotify events" % queued)
    server.write_file(sid, m.spath("d", "f.txt"), b"one\n")
    wait_live(m)
    assert info(m)["change_feed_mode"] == "inotify"
    p = os.path.join(m.path, "d", "f.txt")
    assert open(p).read() == "one\n"
    time.sleep(1.0)
    [pid] = inotifywaits(server, sid)
    # three events a new file (made, its times set, closed)
    rc, _, err = server.run(sid, "kill -STOP %s && cd %s && echo two > f.txt && seq %d | xargs touch; kill -CONT %s"
                            % (pid, m.spath("d"), queued // 3 + 100, pid))
    assert rc == 0, err
    wait_for(lambda: lost_events_logged(m), timeout=10)
    assert open(p).read() == "two\n"
    assert len(os.listdir(os.path.dirname(p))) == queued // 3 + 101
    assert info(m)["change_feed_mode"] == "poll"
    m.stop()
    assert inotifywaits(server, sid) == []
    assert feed_procs(server, sid) == [0, 0]


def test_inotify_nothing_left_after_unmount(server, make_mount):
    m = make_mount(options=FEED)
    sid = m.sandbox_id
    wait_live(m)
    assert info(m)["change_feed_mode"] == "inotify"
    assert len(inotifywaits(server, sid)) == 1
    assert feed_procs(server, sid) == [1, 1]
    m.stop()
    assert inotifywaits(server, sid) == []
    assert feed_procs(server, sid) == [0, 0]

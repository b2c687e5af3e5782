"""Listings: one request lists a whole small subtree, a subtree too big
for that is still listed whole and right, and a stale attribute is asked
of the parent's listing, which answers for every sibling (requests
counted by the server)."""

import os
import threading
import time

from osbtest import execd_requests, route_count, wait_until


def walk(top):
    """Every path below top, relative, as os.walk sees it (no .osb)."""
    out = set()
    for r, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d != ".osb"]
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(r, n), top))
    return out


def make_tree(server, sid, root, dirs, files_per_dir):
    """dirs like ["a", "a/b"], each holding files f0..f(N-1); returns the
    relative paths made."""
    script = "set -e; mkdir -p %s; cd %s; " % (root, root)
    for d in dirs:
        script += "mkdir -p %s && (cd %s && seq 0 %d | sed 's/^/f/' | xargs touch); " % (
            d, d, files_per_dir - 1)
    rc, out, err = server.run(sid, script, timeout=300)
    assert rc == 0, err
    made = set()
    for d in dirs:
        parts = d.split("/")
        for i in range(1, len(parts) + 1):
            made.add("/".join(parts[:i]))
        made.update("%s/f%d" % (d, i) for i in range(files_per_dir))
    return made


def test_a_walk_of_a_small_tree_costs_one_listing(server, make_mount):
    # feed=no: its own command would count below
    m = make_mount(options=["attr_timeout=30s", "dir_timeout=30s", "feed=no"])
    sid = m.sandbox_id
    dirs = ["src", "src/core", "src/core/deep", "src/ui", "docs", "docs/img", "tests"]
    made = make_tree(server, sid, m.spath(), dirs, 20)
    server.reset_stats()
    assert walk(m.p()) == made
    assert route_count(server, sid, "GET /directories/list") == 1
    # and one command, for the special mode bits the listing cannot say
    # of entries the mount has not seen before (test_49_fs_modes.py)
    assert route_count(server, sid, "POST /command") == 1
    assert execd_requests(server, sid) == 2
    # and every stat after it is answered from it
    for p in made:
        os.lstat(m.p(p))
    assert execd_requests(server, sid) == 2


def test_a_tree_too_big_for_one_listing_is_listed_whole(server, make_mount):
    m = make_mount(options=["attr_timeout=60s", "dir_timeout=60s"])
    sid = m.sandbox_id
    # 21,000+ entries: more than one listing takes; the cut falls in "c"
    dirs = ["a", "a/x", "b", "b/y", "b/y/z", "c", "c/w"]
    made = make_tree(server, sid, m.spath("t"), dirs, 3000)
    server.reset_stats()
    assert walk(m.p("t")) == made
    listings = route_count(server, sid, "GET /directories/list")
    assert 2 <= listings <= 12, listings
    assert route_count(server, sid, "GET /files/info") <= 2
    # a second walk while the listings hold costs nothing
    server.reset_stats()
    assert walk(m.p("t")) == made
    assert execd_requests(server, sid) == 0
    assert sorted(os.listdir(m.p("t", "b", "y"))) == sorted(
        ["z"] + ["f%d" % i for i in range(3000)])


def test_a_change_deep_in_the_tree_shows_once_the_listing_expires(server, make_mount):
    m = make_mount(options=["attr_timeout=1s", "dir_timeout=1s"])
    sid = m.sandbox_id
    made = make_tree(server, sid, m.spath(), ["p", "p/q", "p/q/r"], 3)
    assert walk(m.p()) == made
    server.write_file(sid, m.spath("p", "q", "r", "new"), b"fresh")
    os.unlink(m.p("p", "q", "f0"))
    time.sleep(1.5)
    # the listing expired, or the change feed reported the change (a
    # round of its command, which a busy machine stretches); a report
    # lost would hold the old listing for good
    wait_until(lambda: "new" in os.listdir(m.p("p", "q", "r")), 5,
               "the file made in the sandbox to show")
    with open(m.p("p", "q", "r", "new"), "rb") as f:
        assert f.read() == b"fresh"
    assert walk(m.p()) == (made - {"p/q/f0"}) | {"p/q/r/new"}


def test_stale_attributes_come_from_one_listing_of_the_parent(server, make_mount):
    # what the timeouts do: the change feed would hold the attributes on
    m = make_mount(options=["attr_timeout=1s", "dir_timeout=1s", "feed=no"])
    sid = m.sandbox_id
    made = make_tree(server, sid, m.spath(), ["d"], 40)
    assert walk(m.p()) == made
    time.sleep(1.5)
    server.write_file(sid, m.spath("d", "f7"), b"grown")
    server.reset_stats()
    sizes = {n: os.lstat(m.p("d", n)).st_size for n in ("f%d" % i for i in range(40))}
    assert sizes["f7"] == 5 and sizes["f8"] == 0
    # the first stale stat lists (a subtree of) the tree once; the rest
    # are answered from it
    assert route_count(server, sid, "GET /files/info") == 0
    assert route_count(server, sid, "GET /directories/list") <= 2


def test_names_created_here_are_found_without_asking_while_listed(server, make_mount):
    m = make_mount(options=["attr_timeout=30s", "dir_timeout=30s", "negative_timeout=30s"])
    sid = m.sandbox_id
    os.mkdir(m.p("new"))
    server.reset_stats()
    for i in range(50):
        with open(m.p("new", "n%d" % i), "w") as f:
            f.write("x")
    assert route_count(server, sid, "GET /files/info") == 0
    assert route_count(server, sid, "GET /directories/list") == 0


def test_one_listing_checks_a_batch_in_many_directories(server, make_mount):
    """Before an upload, the sandbox's copies are checked for changes made
    meanwhile by others: for files in several directories, with one
    listing of the directory above them all; a conflict is still found
    and both versions kept."""
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    dirs = [("x",), ("y", "z"), ("w",)]
    for d in dirs:
        os.makedirs(m.p(*d))
        for i in range(3):
            with open(m.p(*d, "n%d" % i), "w") as f:
                f.write("ours %s" % "/".join(d))
    server.write_file(sid, m.spath("y", "z", "n1"), b"theirs")
    server.reset_stats()
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")
    assert route_count(server, sid, "GET /directories/list") == 1
    assert route_count(server, sid, "GET /files/info") == 0
    assert route_count(server, sid, "POST /files/upload") == 1
    for d in dirs:
        for i in range(3):
            assert server.read_file(sid, m.spath(*d, "n%d" % i)) == b"ours " + "/".join(d).encode()
    _, out, _ = server.run(sid, "ls %s" % m.spath("y", "z"))
    aside = [n for n in out.split() if n.startswith("n1.conflict-")]
    assert len(aside) == 1, out
    assert server.read_file(sid, m.spath("y", "z", aside[0])) == b"theirs"


def test_a_listing_older_than_an_upload_does_not_undo_it(server, make_mount):
    """A listing asked for before uploads landed, and answered after
    them, tells of the files as they were: it must not hide a new file
    nor bring back an old size (the reader would get ENOENT, ESTALE or
    short bytes)."""
    m = make_mount(options=["writeback_delay=1h", "attr_timeout=30s", "dir_timeout=30s"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("d", "old"), b"old")
    with open(m.p("d", "old"), "w") as f:
        f.write("rewritten here")
    with open(m.p("d", "new"), "w") as f:
        f.write("made here")
    server.set_faults(next=1, kinds=["late"], delay_ms=1500, path="/directories/list")
    try:
        listed = []
        t = threading.Thread(target=lambda: listed.append(sorted(os.listdir(m.p("d")))))
        t.start()
        time.sleep(0.5)  # the listing is made: its answer is on its way
        with open(m.p(".osb", "ctl"), "w") as f:
            f.write("sync\n")
        t.join(30)
        assert not t.is_alive()
    finally:
        server.clear_faults()
    assert server.read_file(sid, m.spath("d", "new")) == b"made here"
    assert listed == [["new", "old"]]
    assert os.stat(m.p("d", "old")).st_size == len("rewritten here")
    with open(m.p("d", "old")) as f:
        assert f.read() == "rewritten here"
    with open(m.p("d", "new")) as f:
        assert f.read() == "made here"
    assert sorted(os.listdir(m.p("d"))) == ["new", "old"]


def test_a_listing_again_is_the_sandboxs_latest_even_with_old_handles_open(server, make_mount):
    """The kernel keeps a directory's entries between opens only while
    they are what a new open would give: a handle opened before a change
    in the sandbox, read after it, does not leave its older entries for
    the next listing."""
    m = make_mount(options=["attr_timeout=1s", "dir_timeout=1s"])
    sid = m.sandbox_id
    make_tree(server, sid, m.spath(), ["d"], 3)
    assert sorted(os.listdir(m.p("d"))) == ["f0", "f1", "f2"]
    # listed again at once: the same entries (kept by the kernel)
    assert sorted(os.listdir(m.p("d"))) == ["f0", "f1", "f2"]
    old = os.open(m.p("d"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        server.write_file(sid, m.spath("d", "new"), b"x")
        time.sleep(1.5)
        new = os.open(m.p("d"), os.O_RDONLY | os.O_DIRECTORY)
        try:
            # the old handle reads what it was opened with
            assert sorted(os.listdir(old)) == ["f0", "f1", "f2"]
        finally:
            os.close(new)
    finally:
        os.close(old)
    assert sorted(os.listdir(m.p("d"))) == ["f0", "f1", "f2", "new"]
    os.unlink(m.p("d", "f1"))
    assert sorted(os.listdir(m.p("d"))) == ["f0", "f2", "new"]
    server.run(sid, "rm %s" % m.spath("d", "new"))
    time.sleep(1.5)
    assert sorted(os.listdir(m.p("d"))) == ["f0", "f2"]

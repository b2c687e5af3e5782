"""A walk that reads a directory's files (grep -r, tar c) gets the small
files below it in one archive the sandbox packs: a command, a download
and a removal instead of a download per file. What the walk reads is
checked against the sandbox byte for byte, including files changed after
their listing, files with local changes, odd names, and a pull that
fails."""

import hashlib
import os
import shlex
import subprocess

from osbtest import execd_routes

NAMES = ["plain.txt", "with space.txt", "-dash.txt", "quote'd.txt", "ünï.md", "dollar$1.c"]


def make_tree(server, sid, top, ndirs=4, nfiles=12, odd=True):
    """ndirs directories of nfiles small files (and, if @odd, the odd
    names in the first), made in the sandbox; {relative path: sha256}."""
    want = {}
    for d in range(ndirs):
        for i in range(nfiles):
            name = NAMES[i] if odd and d == 0 and i < len(NAMES) else "f%02d.txt" % i
            rel = "d%d/%s" % (d, name)
            data = hashlib.sha256(rel.encode()).hexdigest().encode() * (i + 1)
            if "$" in name:
                # the file API expands '$' in paths: made by a command
                code, _, err = server.run(sid, "printf %%s %s > %s" % (
                    shlex.quote(data.decode()), shlex.quote(top + "/" + rel)))
                assert code == 0, err
            else:
                server.write_file(sid, top + "/" + rel, data)
            want[rel] = hashlib.sha256(data).hexdigest()
    return want


def read_tree(root):
    """{relative path: sha256} of every file, read in walk order."""
    got = {}
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                got[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return got


# listings and attributes kept while a test looks, however slow the machine;
# no change feed, whose reports (late on a loaded machine) would tell the
# mount modes and changes the walk's own requests are counted to learn
CACHING = ["attr_timeout=1h", "dir_timeout=1h", "feed=no"]
# commands a cold walk of a tree below the mount's root costs besides its
# pulls: the special mode bits of the tree's listing, and of its top,
# looked up alone (test_49_fs_modes.py)
SPECIALS = 2


def test_a_walk_reads_the_tree_in_one_archive(server, make_mount):
    m = make_mount(options=CACHING)
    sid = m.sandbox_id
    want = make_tree(server, sid, m.spath("t"))
    server.reset_stats()
    assert read_tree(m.p("t")) == want
    got = execd_routes(server, sid)
    print("walk of 48 files:", got)
    # the first two reads go one by one, the second asks for the rest
    assert got.get("GET /files/download", 0) <= 3, got
    assert got.get("POST /command", 0) == 1 + SPECIALS, got
    assert sum(got.values()) <= 12, got
    # the archive is gone from the sandbox
    code, out, _ = server.run(sid, "ls /tmp/.osbfs | grep -c '^pull-' || true")
    assert out.strip() == "0", out
    # grep finds what is there, from the cache now
    server.reset_stats()
    needle = hashlib.sha256(b"d2/f03.txt").hexdigest()
    r = subprocess.run(["grep", "-rl", needle, m.p("t")], stdout=subprocess.PIPE)
    assert r.stdout.decode().split() == [m.p("t", "d2", "f03.txt")]
    assert execd_routes(server, sid).get("GET /files/download", 0) == 0


def test_a_lone_read_costs_one_download(server, make_mount):
    m = make_mount(options=CACHING)
    sid = m.sandbox_id
    make_tree(server, sid, m.spath("t"), ndirs=1)
    assert len(os.listdir(m.p("t", "d0"))) == 12
    server.reset_stats()
    with open(m.p("t", "d0", "f07.txt"), "rb") as f:
        f.read()
    assert execd_routes(server, sid) == {"GET /files/download": 1}


def test_files_changed_after_their_listing_are_read_as_they_are_now(server, make_mount):
    m = make_mount(options=CACHING)
    sid = m.sandbox_id
    want = make_tree(server, sid, m.spath("t"))
    # listed (sizes and mtimes known), then changed in the sandbox: one
    # with the same size, one with another size
    assert len(list(os.walk(m.p("t")))) == 5
    same = b"X" * os.stat(m.p("t", "d1", "f05.txt")).st_size
    server.write_file(sid, m.spath("t", "d1", "f05.txt"), same)
    server.run(sid, "touch -d @1500000000 %s" % m.spath("t", "d1", "f05.txt"))
    server.write_file(sid, m.spath("t", "d2", "f06.txt"), b"shorter\n")
    want["d1/f05.txt"] = hashlib.sha256(same).hexdigest()
    want["d2/f06.txt"] = hashlib.sha256(b"shorter\n").hexdigest()
    got = {}
    for rel in sorted(want):
        try:
            with open(m.p("t", rel), "rb") as f:
                got[rel] = hashlib.sha256(f.read()).hexdigest()
        except OSError as e:
            # a handle opened on the listed version may be told it
            # changed (ESTALE); a new open reads the new one
            assert e.errno == 116, e
            with open(m.p("t", rel), "rb") as f:
                got[rel] = hashlib.sha256(f.read()).hexdigest()
    assert got == want


def test_local_changes_are_not_overwritten_by_a_walk(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    want = make_tree(server, sid, m.spath("t"))
    assert len(list(os.walk(m.p("t")))) == 5
    with open(m.p("t", "d0", "f09.txt"), "wb") as f:
        f.write(b"mine, not uploaded yet\n")
    want["d0/f09.txt"] = hashlib.sha256(b"mine, not uploaded yet\n").hexdigest()
    assert read_tree(m.p("t")) == want


def test_odd_names_come_in_the_archive(server, make_mount):
    m = make_mount(options=CACHING)
    sid = m.sandbox_id
    want = make_tree(server, sid, m.spath("t"), ndirs=1)
    server.reset_stats()
    assert read_tree(m.p("t")) == want
    got = execd_routes(server, sid)
    assert got.get("GET /files/download", 0) <= 3, got


def test_a_failed_pull_leaves_the_reads_to_downloads(server, make_mount):
    """(No names with '$' here: reading them takes a command, which fails
    too.)"""
    m = make_mount()
    sid = m.sandbox_id
    want = make_tree(server, sid, m.spath("t"), odd=False)
    assert len(list(os.walk(m.p("t")))) == 5
    server.set_faults(next=1000, kinds=["500"], method="POST", path="/command")
    try:
        server.reset_stats()
        assert read_tree(m.p("t")) == want
        got = execd_routes(server, sid)
    finally:
        server.clear_faults()
    # tried once, then no more for a while: the reads went one by one
    assert got.get("POST /command") == 1, got
    assert got.get("GET /files/download") == 48, got


def test_a_walk_of_one_file_per_directory_is_seen_too(server, make_mount):
    """A tree of one file per directory (as Java packages often are): two
    cold reads in sibling directories show the walk."""
    m = make_mount(options=CACHING)
    sid = m.sandbox_id
    want = {}
    for d in range(20):
        rel = "p%02d/only.txt" % d
        data = rel.encode() * 10
        server.write_file(sid, m.spath("j", rel), data)
        want[rel] = hashlib.sha256(data).hexdigest()
    server.reset_stats()
    assert read_tree(m.p("j")) == want
    got = execd_routes(server, sid)
    assert got.get("POST /command", 0) == 1 + SPECIALS, got
    assert got.get("GET /files/download", 0) <= 3, got


def test_a_walk_bigger_than_one_archive_goes_on_in_the_background(server, make_mount):
    """2,400 files: the first archive takes at most 2,000, and a puller
    goes on with the rest while the walk reads the first ones; the walk
    waits for a file under way rather than fetching it alone."""
    m = make_mount(options=CACHING)
    sid = m.sandbox_id
    top = m.spath("big")
    code, _, err = server.run(
        sid, "mkdir -p %s && cd %s && for d in $(seq -w 0 39); do mkdir d$d; "
             "for f in $(seq -w 0 59); do echo \"file $d/$f\" > d$d/f$f.txt; done; done"
             % (top, top), timeout=120)
    assert code == 0, err
    code, out, err = server.run(sid, "cd %s && find . -type f -exec sha256sum {} + " % top,
                                timeout=120)
    assert code == 0, err
    want = {}
    for line in out.splitlines():
        digest, path = line.split(None, 1)
        want[os.path.relpath(path, ".")] = digest
    assert len(want) == 2400
    server.reset_stats()
    assert read_tree(m.p("big")) == want
    got = execd_routes(server, sid)
    print("walk of 2,400 files:", got)
    assert got.get("POST /command", 0) == 2 + SPECIALS, got
    assert got.get("GET /files/download", 0) <= 6, got

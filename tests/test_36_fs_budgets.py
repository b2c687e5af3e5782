"""Request budgets: what a workload may cost in requests to the sandbox,
counted by the local server, so they hold on a noisy machine. The tree
is the benchmark's (tests/srctree.py: 5,000 files in 277 directories).
A change that makes a workload ask the sandbox more often fails here.
The mounts cache for 5 s, longer than each counted workload takes even
on a slow machine, so that the counts do not depend on its speed.

Writes are counted with uploads waiting for the sync (writeback_delay
of an hour), so that how files fall into batches does not depend on the
machine's speed either."""

import os
import shutil
import subprocess
import time

import pytest

import srctree
from osbtest import execd_routes


def run(args, cwd):
    r = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The tree, and a tarball of it."""
    d = tmp_path_factory.mktemp("srctree")
    src = d / "src"
    src.mkdir()
    srctree.make_tree(str(src), srctree.NFILES, srctree.NDIRS, srctree.BIG_SIZES, 1)
    tar = d / "tree.tar"
    run(["tar", "cf", str(tar), "-C", str(src), "."], cwd=str(d))
    yield src, tar
    shutil.rmtree(str(d), ignore_errors=True)


def files_in(top):
    out = set()
    for r, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if x not in (".osb", ".git")]
        out.update(os.path.relpath(os.path.join(r, f), top) for f in files)
    return out


CACHING = ["attr_timeout=5s", "dir_timeout=5s", "negative_timeout=5s"]

GIT = ["git", "-c", "user.name=osbfs", "-c", "user.email=osbfs@example.com",
       "-c", "init.defaultBranch=main", "-c", "core.fsmonitor=false",
       # no gc left running in the background, holding the mount
       "-c", "gc.auto=0", "-c", "maintenance.auto=false"]


def commit(top):
    run(GIT + ["init", "-q"], cwd=top)
    run(GIT + ["add", "-A"], cwd=top)
    run(GIT + ["commit", "-q", "-m", "tree"], cwd=top)


def cold_mount_of_the_tree(server, make_mount, tar, options=CACHING):
    """A sandbox holding the tree in t/ (put there beside the mount, not
    through it), and a new mount of it with nothing cached."""
    m = make_mount(options=CACHING)
    sid = m.sandbox_id
    with open(str(tar), "rb") as f:
        server.write_file(sid, "/tmp/tree.tar", f.read())
    rc, _, err = server.run(sid, "mkdir -p %s && tar xf /tmp/tree.tar -C %s" % (
        m.spath("t"), m.spath("t")), timeout=300)
    assert rc == 0, err
    m.stop()
    shutil.rmtree(m.cache_dir, ignore_errors=True)
    return make_mount(sandbox_id=sid, options=options)


def test_find_cold_costs_at_most_10_requests(server, make_mount, tree):
    src, tar = tree
    m = cold_mount_of_the_tree(server, make_mount, tar)
    server.reset_stats()
    out = run(["find", "t"], cwd=m.path)
    assert len(out.splitlines()) == srctree.NFILES + srctree.NDIRS
    got = execd_routes(server, m.sandbox_id)
    print("find cold:", sum(got.values()), got)
    assert sum(got.values()) <= 10, got


def test_grep_r_cold_costs_at_most_40_requests(server, make_mount, tree):
    """The small files come in a few archives (a command, a download and
    a removal each), the big ones in ranges. (Listings kept for the whole
    walk, which a sanitizer build makes slow.)"""
    src, tar = tree
    m = cold_mount_of_the_tree(server, make_mount, tar,
                               options=["attr_timeout=1h", "dir_timeout=1h"])
    server.reset_stats()
    out = subprocess.run(["grep", "-rl", srctree.NEEDLE, "t"], cwd=m.path,
                         stdout=subprocess.PIPE, text=True).stdout
    got = execd_routes(server, m.sandbox_id)
    print("grep -r cold:", sum(got.values()), got)
    want = subprocess.run(["grep", "-rl", srctree.NEEDLE, "."], cwd=str(src),
                          stdout=subprocess.PIPE, text=True).stdout
    assert sorted(os.path.relpath(p, "t") for p in out.split()) == \
        sorted(os.path.relpath(p, ".") for p in want.split())
    assert sum(got.values()) <= 40, got


def test_first_git_status_after_the_commit_costs_at_most_10_requests(server, make_mount, tree):
    src, tar = tree
    m = make_mount(options=CACHING)
    sid = m.sandbox_id
    os.mkdir(m.p("t"))
    run(["tar", "xf", str(tar)], cwd=m.p("t"))
    commit(m.p("t"))
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")
    # past the attribute and listing timeouts
    time.sleep(6)
    server.reset_stats()
    assert run(GIT + ["status", "--porcelain"], cwd=m.p("t")) == ""
    got = execd_routes(server, sid)
    print("first git status:", sum(got.values()), got)
    assert sum(got.values()) <= 10, got
    assert files_in(m.p("t")) == files_in(str(src))


def untar_counted(server, make_mount, tree, git):
    """Untars the tree into a new directory of a mount (then commits it
    with git if @git) and syncs; the mount and the requests it took."""
    src, tar = tree
    m = make_mount(options=CACHING + ["writeback_delay=1h"])
    os.mkdir(m.p("t"))
    server.reset_stats()
    run(["tar", "xf", str(tar)], cwd=m.p("t"))
    if git:
        commit(m.p("t"))
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")
    return m, execd_routes(server, m.sandbox_id)


def test_untar_then_sync_costs_at_most_100_requests(server, make_mount, tree):
    """5,000 files and 277 directories: the directories go in one request
    per batch, the files in batches of up to 256 (with their times in one
    command per batch). Uploads wait for the sync here, so that the
    batches do not depend on the machine's speed."""
    m, got = untar_counted(server, make_mount, tree, git=False)
    sid = m.sandbox_id
    print("untar + sync:", sum(got.values()), got)
    assert sum(got.values()) <= 100, got
    assert got.get("POST /files/permissions", 0) == 0, got
    rc, out, _ = server.run(sid, "find %s -type f | wc -l; find %s -type d | wc -l" % (
        m.spath("t"), m.spath("t")))
    assert out.split() == [str(srctree.NFILES), str(srctree.NDIRS)]


def test_untar_git_commit_then_sync_costs_at_most_300_requests(server, make_mount, tree):
    m, got = untar_counted(server, make_mount, tree, git=True)
    sid = m.sandbox_id
    print("untar + git + sync:", sum(got.values()), got)
    assert sum(got.values()) <= 300, got
    rc, out, err = server.run(sid, "cd %s && git status --porcelain | wc -l && git log --oneline | wc -l"
                              % m.spath("t"))
    assert rc == 0 and out.split() == ["0", "1"], (out, err)


def test_200_editor_saves_cost_at_most_210_requests(server, make_mount):
    """An editor's save: write a temporary file, fsync it, rename it over
    the file. Each costs one request, the fsync's upload: the file goes
    under its new name with the next batch, with its mtime, and the copy
    left at the temporary name is replaced by the next save's upload; the
    last one is removed with the batch. The name is known free after the
    first save."""
    m = make_mount(options=CACHING)
    sid = m.sandbox_id
    server.write_file(sid, m.spath("e", "edited.txt"), b"v0\n")
    assert os.listdir(m.p("e")) == ["edited.txt"]
    server.reset_stats()
    for i in range(200):
        tmp = m.p("e", ".edited.txt.tmp")
        with open(tmp, "w") as f:
            f.write("v%d\n" % (i + 1))
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, m.p("e", "edited.txt"))
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")
    got = execd_routes(server, sid)
    print("200 saves:", sum(got.values()), got)
    assert sum(got.values()) <= 210, got
    assert server.read_file(sid, m.spath("e", "edited.txt")) == b"v200\n"
    assert server.stat(sid, m.spath("e", ".edited.txt.tmp")) is None


def test_a_slow_sync_sets_the_directories_times_in_one_command(server, make_mount):
    """Between batches the write-back sets the times of directories whose
    files are in at most once a second; a sync that takes longer than that
    (each upload answered after 1.2 s here) still sets them once, at its
    end: a slow network or machine costs no more commands."""
    m = make_mount(options=CACHING + ["writeback_delay=1h"])
    top = m.p("t")
    os.mkdir(top)
    stamp = 1600000000
    for d in range(3):
        dp = os.path.join(top, "d%d" % d)
        os.mkdir(dp)
        for i in range(300):
            with open(os.path.join(dp, "f%03d" % i), "w") as f:
                f.write("%d %d\n" % (d, i))
        os.utime(dp, (stamp + d, stamp + d))
    os.utime(top, (stamp, stamp))
    server.reset_stats()
    server.set_faults(rate=1.0, kinds=["delay"], delay_ms=1200, method="POST",
                      path="/files/upload")
    try:
        with open(m.p(".osb", "ctl"), "w") as f:
            f.write("sync\n")
    finally:
        server.clear_faults()
    got = execd_routes(server, m.sandbox_id)
    print("slow sync:", got)
    # one command per packed batch unpacks it; one sets the directories' times
    assert got.get("POST /files/upload", 0) >= 4, got
    assert got.get("POST /command", 0) <= got["POST /files/upload"] + 1, got
    for d in range(3):
        rc, out, _ = server.run(m.sandbox_id, "stat -c %%Y %s" % m.spath("t", "d%d" % d))
        assert out.split() == [str(stamp + d)]

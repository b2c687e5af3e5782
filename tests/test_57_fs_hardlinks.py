"""Hard links made through the mount: link(2) makes the link in the
sandbox by one command run at most once, after the file's pending upload;
locally both names are one inode (one node), so a write through one shows
through the other, and the count of names follows unlink and rename. git
and rsync -H work through it."""

import errno
import os
import subprocess

import pytest

from mounthelp import assert_conflict_kept, ctl
from mounthelp import read_file as read
from mounthelp import write_file as write
from osbtest import execd_routes, wait_until


@pytest.fixture
def mount(make_mount):
    return make_mount(options=["attr_timeout=0", "dir_timeout=0", "negative_timeout=0"])


def sandbox_links(server, m, *names):
    """(links, inode) of each name as the sandbox has it."""
    paths = " ".join(m.spath(n) for n in names)
    code, out, err = server.run(m.sandbox_id, "stat -c %h:%i " + paths)
    assert code == 0, err
    return [tuple(int(x) for x in line.split(":")) for line in out.split()]


@pytest.mark.parametrize("uploaded", [True, False])
def test_a_link_is_one_inode_here_and_in_the_sandbox(server, mount, uploaded):
    write(mount.p("a"), b"first")
    if uploaded:
        ctl(mount, "sync")
    os.link(mount.p("a"), mount.p("b"))
    sa, sb = os.stat(mount.p("a")), os.stat(mount.p("b"))
    assert sa.st_ino == sb.st_ino
    assert sa.st_nlink == sb.st_nlink == 2
    if not uploaded:
        # made there with the file's upload
        assert server.stat(mount.sandbox_id, mount.spath("b")) is None
        ctl(mount, "sync")
    (la, ia), (lb, ib) = sandbox_links(server, mount, "a", "b")
    assert la == lb == 2 and ia == ib
    assert server.read_file(mount.sandbox_id, mount.spath("b")) == b"first"
    # the listing agrees: the same inode under both names
    assert {e.name: e.inode() for e in os.scandir(mount.p())
            if e.name in ("a", "b")} == {"a": sa.st_ino, "b": sa.st_ino}


def test_a_write_through_one_name_shows_through_the_other(server, mount):
    write(mount.p("a"), b"one")
    os.link(mount.p("a"), mount.p("b"))
    write(mount.p("b"), b"two, longer")
    assert read(mount.p("a")) == b"two, longer"
    with open(mount.p("a"), "ab") as f:
        f.write(b"!")
    assert read(mount.p("b")) == b"two, longer!"
    ctl(mount, "sync")
    sid = mount.sandbox_id
    # one inode there too: the upload wrote it in place
    assert server.read_file(sid, mount.spath("a")) == b"two, longer!"
    assert server.read_file(sid, mount.spath("b")) == b"two, longer!"
    (la, ia), (lb, ib) = sandbox_links(server, mount, "a", "b")
    assert la == lb == 2 and ia == ib


@pytest.mark.parametrize("uploaded", [True, False])
def test_unlink_of_either_name_keeps_the_other(server, mount, uploaded):
    sid = mount.sandbox_id
    for first, second in (("a", "b"), ("b", "a")):
        write(mount.p(first), b"data " + first.encode())
        if uploaded:
            ctl(mount, "sync")
        os.link(mount.p(first), mount.p(second))
        ino = os.stat(mount.p(first)).st_ino
        os.unlink(mount.p(first))
        st = os.stat(mount.p(second))
        assert st.st_ino == ino and st.st_nlink == 1
        assert not os.path.exists(mount.p(first))
        # written after: goes to the name that is left
        write(mount.p(second), b"after")
        ctl(mount, "sync")
        assert server.stat(sid, mount.spath(first)) is None
        assert server.read_file(sid, mount.spath(second)) == b"after"
        assert sandbox_links(server, mount, second)[0][0] == 1
        os.unlink(mount.p(second))
        assert server.stat(sid, mount.spath(second)) is None


@pytest.mark.parametrize("uploaded", [True, False])
def test_rename_of_one_name_and_over_one(server, mount, uploaded):
    sid = mount.sandbox_id
    write(mount.p("a"), b"linked")
    if uploaded:
        ctl(mount, "sync")
    os.link(mount.p("a"), mount.p("b"))
    ino = os.stat(mount.p("a")).st_ino
    os.mkdir(mount.p("d"))
    os.rename(mount.p("b"), mount.p("d", "c"))
    st = os.stat(mount.p("d", "c"))
    assert st.st_ino == ino and st.st_nlink == 2
    ctl(mount, "sync")
    (la, ia), (lc, ic) = sandbox_links(server, mount, "a", "d/c")
    assert la == lc == 2 and ia == ic
    # a rename to another name of the same file does nothing
    os.rename(mount.p("a"), mount.p("d", "c"))
    assert os.path.exists(mount.p("a")) and os.path.exists(mount.p("d", "c"))
    # a new file (never uploaded) saved over one name: the other keeps
    # the old bytes, in the sandbox too
    write(mount.p("new"), b"replacement")
    os.rename(mount.p("new"), mount.p("a"))
    assert read(mount.p("a")) == b"replacement"
    assert read(mount.p("d", "c")) == b"linked"
    assert os.stat(mount.p("d", "c")).st_nlink == 1
    ctl(mount, "sync")
    assert server.read_file(sid, mount.spath("a")) == b"replacement"
    assert server.read_file(sid, mount.spath("d", "c")) == b"linked"
    assert sandbox_links(server, mount, "d/c")[0][0] == 1


def test_what_link_refuses(server, mount):
    write(mount.p("a"), b"x")
    write(mount.p("b"), b"y")
    os.mkdir(mount.p("d"))
    os.symlink("a", mount.p("s"))
    cases = [
        (("a", "b"), errno.EEXIST),
        (("missing", "c"), errno.ENOENT),
        (("d", "d2"), errno.EPERM),
        (("a", ".osb/x"), errno.EXDEV),
    ]
    for (src, dst), want in cases:
        with pytest.raises(OSError) as e:
            os.link(mount.p(src), mount.p(dst))
        assert e.value.errno == want, (src, dst, e.value)
    with pytest.raises(OSError) as e:
        os.link(mount.p("s"), mount.p("s2"), follow_symlinks=False)
    assert e.value.errno == errno.EPERM
    assert read(mount.p("b")) == b"y"


def test_a_lost_answer_of_the_link_command_runs_it_once(server, mount):
    sid = mount.sandbox_id
    for i in range(5):
        write(mount.p("f%d" % i), b"v%d" % i)
    ctl(mount, "sync")
    for i in range(5):
        # the command runs, its answer is lost: settled by its claim,
        # not sent again (a second ln would say "File exists")
        server.set_faults(next=1, kinds=["reset_after"], scope="execd",
                          path="/command$")
        try:
            os.link(mount.p("f%d" % i), mount.p("g%d" % i))
        finally:
            server.clear_faults()
        (lf, i_f), (lg, ig) = sandbox_links(server, mount, "f%d" % i, "g%d" % i)
        assert lf == lg == 2 and i_f == ig
        assert os.stat(mount.p("g%d" % i)).st_nlink == 2


def test_a_link_costs_one_command(server, make_mount):
    """With the default timeouts: the command, and nothing else once the
    directory is listed (ln -f's unlink first costs its own)."""
    m = make_mount()
    sid = m.sandbox_id
    write(m.p("a"), b"x")
    ctl(m, "sync")
    os.listdir(m.p())
    os.stat(m.p("a"))
    server.reset_stats()
    os.link(m.p("a"), m.p("b"))
    got = execd_routes(server, sid)
    print("link:", got)
    assert got == {"POST /command": 1}, got
    assert os.stat(m.p("b")).st_nlink == 2


def test_link_then_unlink_of_a_new_file_costs_what_a_rename_does(server, make_mount):
    """git's way to store an object: link the temporary file to its name,
    remove the temporary name. Before the upload that is a move here; the
    file goes once, under its name, with no command."""
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.listdir(m.p())
    server.reset_stats()
    for i in range(20):
        write(m.p("tmp%d" % i), b"object %d" % i)
        os.link(m.p("tmp%d" % i), m.p("obj%d" % i))
        os.unlink(m.p("tmp%d" % i))
    assert execd_routes(server, sid) == {}
    ctl(m, "sync")
    got = execd_routes(server, sid)
    print("20 links and unlinks, then sync:", got)
    assert got.get("POST /command", 0) <= 2, got
    assert sum(got.values()) <= 4, got
    for i in range(20):
        assert server.read_file(sid, m.spath("obj%d" % i)) == b"object %d" % i
        assert server.stat(sid, m.spath("tmp%d" % i)) is None


def test_new_files_linked_before_upload_go_with_one_command(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.mkdir(m.p("d"))
    for i in range(10):
        write(m.p("f%d" % i), b"v%d" % i)
        os.link(m.p("f%d" % i), m.p("d", "g%d" % i))
    server.reset_stats()
    ctl(m, "sync")
    got = execd_routes(server, sid)
    print("10 new files with a link each, sync:", got)
    for i in range(10):
        (lf, i_f), (lg, ig) = sandbox_links(server, m, "f%d" % i, "d/g%d" % i)
        assert lf == lg == 2 and i_f == ig
    assert sum(got.values()) <= 6, got


def run(args, cwd):
    r = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_rsync_H_keeps_hard_links(server, mount, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "f").write_bytes(b"shared bytes")
    os.link(src / "f", src / "sub" / "g")
    (src / "plain").write_bytes(b"alone")
    run(["rsync", "-aH", str(src) + "/", mount.p("dst") + "/"], cwd=str(tmp_path))
    sf, sg = os.stat(mount.p("dst", "f")), os.stat(mount.p("dst", "sub", "g"))
    assert sf.st_ino == sg.st_ino and sf.st_nlink == 2
    ctl(mount, "sync")
    (lf, i_f), (lg, ig) = sandbox_links(server, mount, "dst/f", "dst/sub/g")
    assert lf == lg == 2 and i_f == ig
    assert server.read_file(mount.sandbox_id, mount.spath("dst", "sub", "g")) == \
        b"shared bytes"
    # and back out of the mount
    back = tmp_path / "back"
    run(["rsync", "-aH", mount.p("dst") + "/", str(back) + "/"], cwd=str(tmp_path))
    assert os.stat(back / "f").st_ino == os.stat(back / "sub" / "g").st_ino


GIT = ["git", "-c", "user.name=osbfs", "-c", "user.email=osbfs@example.com",
       "-c", "init.defaultBranch=main", "-c", "core.fsmonitor=false",
       "-c", "gc.auto=0", "-c", "maintenance.auto=false"]


def test_git_init_commit_and_clone_in_the_mount(server, mount):
    top = mount.p("repo")
    os.mkdir(top)
    for i in range(5):
        write(os.path.join(top, "f%d" % i), b"content %d\n" % i)
    run(GIT + ["init", "-q"], cwd=top)
    run(GIT + ["add", "-A"], cwd=top)
    run(GIT + ["commit", "-q", "-m", "one"], cwd=top)
    write(os.path.join(top, "f0"), b"changed\n")
    run(GIT + ["commit", "-q", "-a", "-m", "two"], cwd=top)
    assert run(GIT + ["status", "--porcelain"], cwd=top) == ""
    run(GIT + ["fsck", "--no-progress"], cwd=top)
    # a local clone hard-links the objects (the mount's link path)
    run(GIT + ["clone", "-q", "repo", "copy"], cwd=mount.p())
    assert run(GIT + ["log", "--format=%s"], cwd=mount.p("copy")).split() == \
        ["two", "one"]
    run(GIT + ["fsck", "--no-progress"], cwd=mount.p("copy"))
    ctl(mount, "sync")
    code, out, err = server.run(
        mount.sandbox_id,
        "cd %s && git log --format=%%s && git fsck --no-progress"
        % mount.spath("copy"))
    assert code == 0, err
    assert out.split() == ["two", "one"]


def test_a_link_still_to_make_outlives_kill9(server, make_mount, tmp_path):
    """A link to a file not uploaded yet waits for the upload; its record
    is in the journal meanwhile (following its renames, gone with its
    name), so the next mount makes it after the upload, once."""
    cache = str(tmp_path / "cache")
    m = make_mount(options=["writeback_delay=1h"], cache_dir=cache)
    sid = m.sandbox_id
    write(m.p("a"), b"first")
    os.link(m.p("a"), m.p("b"))
    # the link moves, and so does the directory it is in
    write(m.p("c"), b"second")
    os.mkdir(m.p("d"))
    os.link(m.p("c"), m.p("d", "e"))
    os.rename(m.p("d", "e"), m.p("d", "f"))
    os.rename(m.p("d"), m.p("d2"))
    # no longer to make
    write(m.p("g"), b"third")
    os.link(m.p("g"), m.p("h"))
    os.unlink(m.p("h"))
    # git's way: a move
    write(m.p("tmp"), b"object")
    os.link(m.p("tmp"), m.p("obj"))
    os.unlink(m.p("tmp"))
    m.kill9()
    assert server.stat(sid, m.spath("a")) is None
    m2 = make_mount(sandbox_id=sid, create=False, cache_dir=cache)
    sa, sb = os.stat(m2.p("a")), os.stat(m2.p("b"))
    assert sa.st_ino == sb.st_ino and sa.st_nlink == 2
    # a directory holding a link still to make is not empty
    with pytest.raises(OSError) as e:
        os.rmdir(m2.p("d2"))
    assert e.value.errno == errno.ENOTEMPTY
    ctl(m2, "sync")
    for x, y, data in (("a", "b", b"first"), ("c", "d2/f", b"second")):
        (lx, ix), (ly, iy) = sandbox_links(server, m2, x, y)
        assert lx == ly == 2 and ix == iy, (x, y)
        assert server.read_file(sid, m2.spath(y)) == data
    assert server.stat(sid, m2.spath("d2", "e")) is None
    assert server.stat(sid, m2.spath("h")) is None
    assert sandbox_links(server, m2, "g")[0][0] == 1
    assert server.stat(sid, m2.spath("tmp")) is None
    assert server.read_file(sid, m2.spath("obj")) == b"object"
    m2.stop()
    # made: a third mount has nothing more to make
    m3 = make_mount(sandbox_id=sid, create=False, cache_dir=cache)
    assert sorted(n for n in os.listdir(m3.p()) if not n.startswith(".")) == \
        ["a", "b", "c", "d2", "g", "obj"]
    assert sandbox_links(server, m3, "a")[0][0] == 2


def test_a_conflict_on_a_linked_file_keeps_the_link(server, make_mount):
    """Their version is copied aside (a move would take the shared inode
    with it) and ours goes into the inode both names share."""
    m = make_mount(options=["writeback_delay=1h", "attr_timeout=0"])
    sid = m.sandbox_id
    write(m.p("a"), b"base")
    ctl(m, "sync")
    os.link(m.p("a"), m.p("b"))
    with open(m.p("a"), "ab") as f:
        f.write(b" + ours")
    # written in place in the sandbox: both names there have it
    code, _, err = server.run(sid, "printf 'theirs, meanwhile' > %s" % m.spath("a"))
    assert code == 0, err
    ctl(m, "sync")
    assert_conflict_kept(server, m, "a", b"base + ours", b"theirs, meanwhile")
    assert server.read_file(sid, m.spath("b")) == b"base + ours"
    (la, ia), (lb, ib) = sandbox_links(server, m, "a", "b")
    assert la == lb == 2 and ia == ib
    assert read(m.p("b")) == b"base + ours"


def test_links_the_sandbox_makes_show_as_one_inode(server, mount):
    """The command a listing runs for the special bits of new entries
    says the link count and inode of files with other names: a name the
    kernel never had becomes another name of its file, and a name that
    stops being one is a file of its own again. No request more."""
    sid = mount.sandbox_id
    os.mkdir(mount.p("d"))
    write(mount.p("a"), b"shared")
    ctl(mount, "sync")
    ino = os.stat(mount.p("a")).st_ino
    code, _, err = server.run(sid, "ln %s %s && ln %s %s" % (
        mount.spath("a"), mount.spath("b"), mount.spath("a"), mount.spath("d", "c")))
    assert code == 0, err
    listed = wait_until(
        lambda: {e.name: e.inode() for e in os.scandir(mount.p())
                 if e.name == "b"}, 10, "b listed")
    assert listed["b"] == ino
    for name in ("b", "d/c"):
        st = os.stat(mount.p(name))
        assert st.st_ino == ino and st.st_nlink == 3, name
    assert os.stat(mount.p("a")).st_nlink == 3
    assert read(mount.p("d", "c")) == b"shared"
    # a write through one name: the same inode there
    write(mount.p("b"), b"through b")
    ctl(mount, "sync")
    assert server.read_file(sid, mount.spath("a")) == b"through b"
    assert sandbox_links(server, mount, "a")[0][0] == 3
    # replaced in the sandbox by another file: its own inode again
    code, _, err = server.run(sid, "rm %s && printf other > %s" % (
        mount.spath("b"), mount.spath("b")))
    assert code == 0, err
    # (as soon as the change feed says so, at the next listing)
    wait_until(lambda: os.listdir(mount.p()) and
               os.stat(mount.p("b")).st_ino != ino, 10,
               "b to be a file of its own")
    st = os.stat(mount.p("b"))
    assert st.st_nlink == 1
    assert read(mount.p("b")) == b"other"
    assert os.stat(mount.p("a")).st_nlink == 2
    assert read(mount.p("a")) == b"through b"

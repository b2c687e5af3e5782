"""Owners: a file another local user makes under allow_other is theirs,
here and in the sandbox; root's chown shows back and holds there; who may
change an owner follows POSIX; a default mount asks nothing more for it.

The local server's sandbox shares this machine's user database, so user
nobody is 65534 on both sides, named "nobody" (group "nogroup") by execd."""

import errno
import os
import stat
import subprocess
import time

from jobhelp import osb, write
from osbtest import route_count, wait_until

NOBODY = 65534

AS_USER = """import errno, os, sys
op, a = sys.argv[1], sys.argv[2]
try:
    if op == "create":
        with open(a, "x") as f:
            f.write("made by %d\\n" % os.getuid())
    elif op == "mkdir":
        os.mkdir(a)
    elif op == "symlink":
        os.symlink("target", a)
    elif op == "chown":
        os.chown(a, int(sys.argv[3]), int(sys.argv[4]), follow_symlinks=False)
    elif op == "chmod":
        os.chmod(a, int(sys.argv[3], 8))
    elif op == "append":
        with open(a, "a") as f:
            f.write("more\\n")
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])
"""


def as_nobody(*args):
    """A file operation as user nobody: "ok" or the errno's name."""
    argv = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
            "/usr/bin/python3", "-c", AS_USER] + [str(a) for a in args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def sync(m):
    write(osb(m, "ctl"), "sync")


def invalidate(m):
    write(osb(m, "ctl"), "invalidate")


def ids(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def sandbox_ids(server, m, *parts, follow=False):
    """uid:gid as the sandbox's own stat says."""
    rc, out, err = server.run(m.sandbox_id, "stat %s-c %%u:%%g %s"
                              % ("-L " if follow else "", m.spath(*parts)))
    assert rc == 0, err
    u, g = out.strip().split(":")
    return int(u), int(g)


def shared_mount(make_mount, shared_dir):
    m = make_mount(options=["allow_other"], workdir=shared_dir)
    os.chmod(m.p(), 0o777)
    return m


def test_what_nobody_makes_is_nobodys_here_and_in_the_sandbox(server, make_mount, shared_dir):
    m = shared_mount(make_mount, shared_dir)
    assert as_nobody("create", m.p("f")) == "ok"
    assert as_nobody("mkdir", m.p("d")) == "ok"
    assert as_nobody("create", m.p("d", "g")) == "ok"
    assert as_nobody("symlink", m.p("l")) == "ok"
    for name in ("f", "d", "d/g", "l"):
        assert ids(m.p(name)) == (NOBODY, NOBODY), name
    sync(m)
    for name in ("f", "d", "d/g"):
        assert sandbox_ids(server, m, name) == (NOBODY, NOBODY), name
    rc, out, _ = server.run(m.sandbox_id, "stat -c %%u:%%g %s" % m.spath("l"))
    assert out.strip() == "%d:%d" % (NOBODY, NOBODY)
    # asked again: the sandbox names the owner, the mount shows its number
    invalidate(m)
    assert server.stat(m.sandbox_id, m.spath("f"))["owner"] == "nobody"
    for name in ("f", "d", "d/g", "l"):
        assert ids(m.p(name)) == (NOBODY, NOBODY), name
    # theirs: they may append to it and chmod it, root's files stay root's
    assert as_nobody("append", m.p("f")) == "ok"
    assert as_nobody("chmod", m.p("f"), "600") == "ok"
    with open(m.p("rootfile"), "w") as f:
        f.write("root's\n")
    os.chmod(m.p("rootfile"), 0o644)
    assert ids(m.p("rootfile")) == (0, 0)
    assert as_nobody("append", m.p("rootfile")) == "EACCES"
    assert as_nobody("chmod", m.p("rootfile"), "666") == "EPERM"
    sync(m)
    assert server.read_file(m.sandbox_id, m.spath("f")) == b"made by 65534\nmore\n"
    assert sandbox_ids(server, m, "f") == (NOBODY, NOBODY)
    assert sandbox_ids(server, m, "rootfile") == (0, 0)


def test_the_sandboxs_names_are_learned_with_one_command(server, make_mount, shared_dir):
    """Names other than root are looked up in the sandbox's tables: read
    once, for all files, never one request each."""
    m = shared_mount(make_mount, shared_dir)
    sid = m.sandbox_id
    rc, _, err = server.run(sid, "mkdir -p {0}/n && for i in 1 2 3 4 5 6 7 8; do "
                            "touch {0}/n/$i; done && chown -R nobody:nogroup {0}/n"
                            .format(m.spath()))
    assert rc == 0, err
    server.reset_stats()
    names = sorted(os.listdir(m.p("n")))
    assert len(names) == 8
    for n in names:
        assert ids(m.p("n", n)) == (NOBODY, NOBODY)
    before = route_count(server, sid, "POST /command")
    invalidate(m)
    for n in names:
        assert ids(m.p("n", n)) == (NOBODY, NOBODY)
    assert route_count(server, sid, "POST /command") - before <= 1  # the special bits' scan at most
    assert m.log().count("users and groups learned") == 1


def test_root_chown_shows_back_and_holds_in_the_sandbox(server, make_mount):
    """pjdfstest's case: root's mount (no allow_other), root chowns."""
    m = make_mount()
    sid = m.sandbox_id
    with open(m.p("up"), "w") as f:
        f.write("uploaded\n")
    sync(m)
    os.chown(m.p("up"), NOBODY, NOBODY)
    assert ids(m.p("up")) == (NOBODY, NOBODY)
    assert sandbox_ids(server, m, "up") == (NOBODY, NOBODY)
    # one not uploaded yet goes with its upload
    with open(m.p("new"), "w") as f:
        f.write("new\n")
    os.chown(m.p("new"), 1234, 4321)
    assert ids(m.p("new")) == (1234, 4321)
    os.mkdir(m.p("dir"))
    os.chown(m.p("dir"), NOBODY, 0)
    os.symlink("up", m.p("ln"))
    os.chown(m.p("ln"), 1234, 1234, follow_symlinks=False)
    sync(m)
    # a number the sandbox has no name for holds too
    assert sandbox_ids(server, m, "new") == (1234, 4321)
    assert sandbox_ids(server, m, "dir") == (NOBODY, 0)
    assert sandbox_ids(server, m, "ln") == (1234, 1234)
    assert sandbox_ids(server, m, "ln", follow=True) == (NOBODY, NOBODY)
    # a chmod keeps the owner (the file API chowns with every chmod)
    os.chmod(m.p("new"), 0o600)
    assert sandbox_ids(server, m, "new") == (1234, 4321)
    invalidate(m)
    expect = {"up": (NOBODY, NOBODY), "new": (1234, 4321), "dir": (NOBODY, 0),
              "ln": (1234, 1234)}
    for name, want in expect.items():
        assert ids(m.p(name)) == want, name
    m.stop()
    again = make_mount(sandbox_id=sid)
    for name, want in expect.items():
        assert ids(again.p(name)) == want, name
    # and back to root
    os.chown(again.p("up"), 0, 0)
    assert ids(again.p("up")) == (0, 0)
    assert sandbox_ids(server, again, "up") == (0, 0)


def test_only_root_gives_a_file_away(server, make_mount, shared_dir):
    m = shared_mount(make_mount, shared_dir)
    with open(m.p("rootfile"), "w") as f:
        f.write("x")
    assert as_nobody("create", m.p("mine")) == "ok"
    # a non-owner may not chown; the owner may not give it away
    assert as_nobody("chown", m.p("rootfile"), NOBODY, NOBODY) == "EPERM"
    assert as_nobody("chown", m.p("mine"), 0, NOBODY) == "EPERM"
    assert as_nobody("chown", m.p("mine"), NOBODY, 0) == "EPERM"  # not its group
    assert as_nobody("chown", m.p("mine"), -1, NOBODY) == "ok"  # its own group
    assert ids(m.p("rootfile")) == (0, 0)
    assert ids(m.p("mine")) == (NOBODY, NOBODY)
    sync(m)
    assert sandbox_ids(server, m, "rootfile") == (0, 0)
    assert sandbox_ids(server, m, "mine") == (NOBODY, NOBODY)


def test_chown_clears_setuid_as_posix_says(server, make_mount, shared_dir):
    m = shared_mount(make_mount, shared_dir)
    # root gives a setuid file away: Linux clears setuid, even for root
    with open(m.p("su"), "w") as f:
        f.write("x")
    sync(m)
    os.chmod(m.p("su"), 0o4755)
    os.chown(m.p("su"), NOBODY, NOBODY)
    assert stat.S_IMODE(os.stat(m.p("su")).st_mode) == 0o755
    # its owner changes its group: setuid and setgid (with group x) go
    assert as_nobody("create", m.p("sg")) == "ok"
    sync(m)
    assert as_nobody("chmod", m.p("sg"), "6755") == "ok"
    assert stat.S_IMODE(os.stat(m.p("sg")).st_mode) == 0o6755
    assert as_nobody("chown", m.p("sg"), -1, NOBODY) == "ok"
    assert stat.S_IMODE(os.stat(m.p("sg")).st_mode) == 0o755
    sync(m)
    invalidate(m)
    for name in ("su", "sg"):
        assert stat.S_IMODE(os.stat(m.p(name)).st_mode) == 0o755, name
        rc, out, _ = server.run(m.sandbox_id, "stat -c %%a %s" % m.spath(name))
        assert out.strip() == "755", name
        assert sandbox_ids(server, m, name) == (NOBODY, NOBODY)


def test_a_default_mount_asks_nothing_more_for_owners(server, make_mount):
    """Files the sandbox's root owns need no table: a stat and a listing
    cost what they did, and the tables are never read."""
    m = make_mount()
    sid = m.sandbox_id
    rc, _, err = server.run(sid, "mkdir -p {0}/t && touch {0}/t/a {0}/t/b".format(m.spath()))
    assert rc == 0, err
    server.reset_stats()
    assert sorted(os.listdir(m.p("t"))) == ["a", "b"]
    assert ids(m.p("t", "a")) == (os.getuid(), os.getgid())
    os.stat(m.p("t", "b"))
    # what they cost before owners were shown; the two commands are the
    # special bits' (a lone lookup, then the listing's scan: test_49)
    assert route_count(server, sid, "POST /command") == 2
    assert route_count(server, sid, "GET /files/info") == 1
    assert route_count(server, sid, "GET /directories/list") == 1
    assert "owners:" not in m.log()
    # chown to the owner it has is no request at all
    server.reset_stats()
    os.chown(m.p("t", "a"), os.getuid(), os.getgid())
    assert route_count(server, sid, "POST /command") == 0


def test_a_setgid_directory_gives_its_group(server, make_mount):
    m = make_mount()
    os.mkdir(m.p("g"))
    os.chown(m.p("g"), 0, NOBODY)
    os.chmod(m.p("g"), 0o2775)
    with open(m.p("g", "f"), "w") as f:
        f.write("x")
    os.mkdir(m.p("g", "sub"))
    assert ids(m.p("g", "f")) == (0, NOBODY)
    assert ids(m.p("g", "sub")) == (0, NOBODY)
    sync(m)
    assert sandbox_ids(server, m, "g", "f") == (0, NOBODY)
    assert sandbox_ids(server, m, "g", "sub") == (0, NOBODY)


def test_an_owner_changed_in_the_sandbox_shows(server, make_mount):
    """A job's chown shows once the mount hears of it (the change feed, or
    the attribute timeout): names and bare numbers alike."""
    m = make_mount()
    with open(m.p("f"), "w") as f:
        f.write("x")
    os.mkdir(m.p("d"))
    sync(m)
    assert ids(m.p("f")) == (0, 0)
    rc, _, err = server.run(m.sandbox_id, "chown 1234:4321 %s && chown nobody:nogroup %s"
                            % (m.spath("f"), m.spath("d")))
    assert rc == 0, err
    wait_until(lambda: ids(m.p("f")) == (1234, 4321), 10, "the new owner of f")
    wait_until(lambda: ids(m.p("d")) == (NOBODY, NOBODY), 10, "the new owner of d")


def test_a_chown_moves_the_ctime(server, make_mount):
    m = make_mount()
    with open(m.p("f"), "w") as f:
        f.write("x")
    os.mkdir(m.p("d"))
    sync(m)
    for name in ("f", "d"):
        before = os.stat(m.p(name)).st_ctime_ns
        time.sleep(1.1)
        os.chown(m.p(name), NOBODY, NOBODY - 1)
        assert os.stat(m.p(name)).st_ctime_ns > before, name
    # one made here and not uploaded yet
    with open(m.p("new"), "w") as f:
        f.write("x")
    before = os.stat(m.p("new")).st_ctime_ns
    time.sleep(1.1)
    os.chown(m.p("new"), NOBODY, NOBODY)
    assert os.stat(m.p("new")).st_ctime_ns > before

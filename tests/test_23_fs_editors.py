"""Real tools on a mount: vim with swap and backup files, sed -i, the
atomic-save pattern, git, tar, cp -a and rsync. Each result is checked on
the sandbox side too."""

import errno
import hashlib
import os
import random
import subprocess
import threading
import time

import pytest

from jobhelp import job_file, osb, read, start
from osbtest import execd_routes, wait_until


def run(args, cwd=None, env=None, check=True):
    r = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode:
        raise AssertionError("%s failed (%d):\n%s%s" % (args, r.returncode, r.stdout, r.stderr))
    return r


def sync_all(m):
    """`.osb/ctl sync` when the control tree is there; else fsync each file."""
    ctl = m.p(".osb", "ctl")
    if os.path.exists(ctl):
        with open(ctl, "w") as f:
            f.write("sync\n")
        return
    for root, dirs, files in os.walk(m.path):
        dirs[:] = [d for d in dirs if d != ".osb"]
        for n in files:
            p = os.path.join(root, n)
            if not os.path.islink(p):
                fd = os.open(p, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)


def tree_digest(server, sid, directory):
    """{relative path: sha256} of the files under a sandbox directory."""
    code, out, err = server.run(sid, "cd %s && find . -type f -print0 | sort -z | xargs -0 -r sha256sum" % directory)
    assert code == 0, err
    res = {}
    for line in out.splitlines():
        digest, path = line.split("  ", 1)
        res[path[2:]] = digest
    return res


def local_digest(directory):
    res = {}
    for root, _, files in os.walk(directory):
        for n in files:
            p = os.path.join(root, n)
            if os.path.islink(p):
                continue
            with open(p, "rb") as f:
                res[os.path.relpath(p, directory)] = hashlib.sha256(f.read()).hexdigest()
    return res


def test_vim_edit_with_swap_and_backup(server, mount):
    p = mount.p("notes.txt")
    with open(p, "w") as f:
        f.write("alpha\nbeta\ngamma\n")
    env = dict(os.environ, HOME=mount.workdir)
    # swapfile, backup and writebackup on, swap and backup beside the file
    run(["vim", "-u", "NONE", "-i", "NONE", "-N", "-es",
         "-c", "set swapfile directory=. backup writebackup backupdir=. backupcopy=auto",
         "-c", "%s/beta/BETA/", "-c", "2t$", "-c", "wq", p], cwd=mount.p(), env=env)
    assert open(p).read() == "alpha\nBETA\ngamma\nBETA\n"
    sync_all(mount)
    assert server.read_file(mount.sandbox_id, mount.spath("notes.txt")) == b"alpha\nBETA\ngamma\nBETA\n"
    leftovers = [n for n in os.listdir(mount.p()) if n.endswith((".swp", "~"))]
    assert leftovers == []


def test_vim_twice_no_changed_since_reading_warning(server, mount):
    p = mount.p("twice.txt")
    with open(p, "w") as f:
        f.write("1\n")
    env = dict(os.environ, HOME=mount.workdir)
    for word in ("two", "three"):
        # the second :w inside one session must not see the file as
        # changed by someone else after the first upload
        r = run(["vim", "-u", "NONE", "-i", "NONE", "-N", "-es", "-c", "set swapfile directory=.",
                 "-c", "$put ='%s'" % word, "-c", "w", "-c", "sleep 1500m",
                 "-c", "$put ='%s-again'" % word, "-c", "w", "-c", "q", p], cwd=mount.p(), env=env)
        assert "changed" not in r.stdout + r.stderr
    assert open(p).read() == "1\ntwo\ntwo-again\nthree\nthree-again\n"


def test_sed_in_place(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("cfg.ini"), b"debug=false\nport=80\n")
    run(["sed", "-i", "s/false/true/; s/80/8080/", mount.p("cfg.ini")])
    assert open(mount.p("cfg.ini")).read() == "debug=true\nport=8080\n"
    sync_all(mount)
    assert server.read_file(mount.sandbox_id, mount.spath("cfg.ini")) == b"debug=true\nport=8080\n"
    assert [n for n in os.listdir(mount.p()) if n.startswith("sed")] == []


def test_atomic_save_pattern(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("doc.json"), b'{"v": 1}')
    tmp = mount.p(".doc.json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b'{"v": 2}')
    os.fsync(fd)
    os.close(fd)
    os.rename(tmp, mount.p("doc.json"))
    dfd = os.open(mount.p(), os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)
    # durable right after the rename and the directory fsync
    assert server.read_file(mount.sandbox_id, mount.spath("doc.json")) == b'{"v": 2}'
    assert server.stat(mount.sandbox_id, mount.spath(".doc.json.tmp")) is None
    assert open(mount.p("doc.json"), "rb").read() == b'{"v": 2}'


def test_git_workflow(server, mount):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com", HOME=mount.workdir)
    repo = mount.p("repo")
    os.mkdir(repo)
    run(["git", "init", "-q", "-b", "main"], cwd=repo, env=env)
    for i in range(20):
        os.makedirs(os.path.join(repo, "src", "m%d" % (i % 4)), exist_ok=True)
        with open(os.path.join(repo, "src", "m%d" % (i % 4), "f%d.py" % i), "w") as f:
            f.write("print(%d)\n" % i)
    run(["git", "add", "-A"], cwd=repo, env=env)
    run(["git", "commit", "-q", "-m", "first"], cwd=repo, env=env)
    assert run(["git", "status", "--porcelain"], cwd=repo, env=env).stdout == ""
    with open(os.path.join(repo, "src", "m0", "f0.py"), "w") as f:
        f.write("print('changed')\n")
    assert run(["git", "status", "--porcelain"], cwd=repo, env=env).stdout == " M src/m0/f0.py\n"
    run(["git", "commit", "-q", "-am", "second"], cwd=repo, env=env)
    run(["git", "checkout", "-q", "HEAD~1"], cwd=repo, env=env)
    assert open(os.path.join(repo, "src", "m0", "f0.py")).read() == "print(0)\n"
    run(["git", "checkout", "-q", "main"], cwd=repo, env=env)
    assert run(["git", "status", "--porcelain"], cwd=repo, env=env).stdout == ""
    run(["git", "fsck", "--no-progress"], cwd=repo, env=env)
    sync_all(mount)
    # the repository is whole in the sandbox: git there agrees
    code, out, err = server.run(mount.sandbox_id, "cd %s && git log --format=%%s && git status --porcelain"
                                % mount.spath("repo"))
    assert code == 0, err
    assert out == "second\nfirst\n"


def make_tree(root, nfiles=2000, seed=7):
    rnd = random.Random(seed)
    for i in range(nfiles):
        d = os.path.join(root, "d%02d" % (i % 40), "s%d" % (i % 3))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%04d.dat" % i), "wb") as f:
            f.write(rnd.randbytes(rnd.randint(0, 8000)))
    os.symlink("d00/s0/f0000.dat", os.path.join(root, "link"))
    os.chmod(os.path.join(root, "d01"), 0o750)


def test_tar_x_then_cp_a_back(server, mount, tmp_path):
    src = tmp_path / "src"
    make_tree(str(src))
    tarball = tmp_path / "t.tar"
    run(["tar", "cf", str(tarball), "-C", str(src), "."])
    os.mkdir(mount.p("x"))
    t0 = time.time()
    run(["tar", "xf", str(tarball), "-C", mount.p("x")])
    took = time.time() - t0
    print("tar x of 2000 files: %.2f s" % took)
    back = tmp_path / "back"
    run(["cp", "-a", mount.p("x"), str(back)])
    assert local_digest(str(back)) == local_digest(str(src))
    assert os.readlink(back / "link") == "d00/s0/f0000.dat"
    assert (os.stat(back / "d01").st_mode & 0o777) == 0o750
    # tar keeps whole seconds
    assert int(os.stat(back / "d05" / "s2" / "f0005.dat").st_mtime) == \
        int(os.stat(src / "d05" / "s2" / "f0005.dat").st_mtime)
    sync_all(mount)
    assert tree_digest(server, mount.sandbox_id, mount.spath("x")) == local_digest(str(src))


def test_rsync_archive_round_trip(server, mount, tmp_path):
    src = tmp_path / "src"
    make_tree(str(src), nfiles=300, seed=3)
    run(["rsync", "-a", str(src) + "/", mount.p("r") + "/"])
    # a second run finds nothing to do: sizes and times match
    r = run(["rsync", "-ai", str(src) + "/", mount.p("r") + "/"])
    assert [l for l in r.stdout.splitlines() if not l.startswith(".d")] == []
    sync_all(mount)
    assert tree_digest(server, mount.sandbox_id, mount.spath("r")) == local_digest(str(src))


def test_compile_and_run_c_program(server, mount):
    with open(mount.p("hello.c"), "w") as f:
        f.write('#include <stdio.h>\nint main(void){puts("built");return 0;}\n')
    run(["cc", "-o", mount.p("hello"), mount.p("hello.c")])
    assert run([mount.p("hello")]).stdout == "built\n"
    sync_all(mount)
    code, out, _ = server.run(mount.sandbox_id, mount.spath("hello"))
    assert (code, out) == (0, "built\n")


def save(m, name, data, tmp_name=None):
    """An editor's save: a temporary file written, fsynced, renamed over."""
    tmp = m.p(tmp_name or "." + name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, m.p(name))


def test_a_save_costs_one_upload_and_the_copy_left_goes_later(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("s.txt"), b"old\n")
    assert open(m.p("s.txt"), "rb").read() == b"old\n"
    save(m, "s.txt", b"first\n")
    server.reset_stats()
    save(m, "s.txt", b"new\n")
    got = execd_routes(server, sid)
    # the fsync's upload only: the next save's upload replaced the copy
    # the first one left at the temporary name, and this one's copy goes
    # with a later batch; the temporary name is known free
    assert got == {"POST /files/upload": 1}, got
    assert open(m.p("s.txt"), "rb").read() == b"new\n"
    assert sorted(os.listdir(m.p())) == ["s.txt"]
    with pytest.raises(FileNotFoundError):
        os.stat(m.p(".s.txt.tmp"))
    # a second later, one removal
    wait_until(lambda: server.stat(sid, m.spath(".s.txt.tmp")) is None, 30,
               "the copy left at the temporary name removed")
    assert execd_routes(server, sid).get("DELETE /files") == 1
    local = os.stat(m.p("s.txt")).st_mtime_ns
    sync_all(m)
    assert server.read_file(sid, m.spath("s.txt")) == b"new\n"
    code, out, _ = server.run(sid, "stat -c %%Y %s" % m.spath("s.txt"))
    assert code == 0 and int(out) == local // 10**9
    assert os.stat(m.p("s.txt")).st_mtime_ns == local


def test_a_directory_fsync_after_a_save_removes_the_copy_left(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.mkdir(m.p("d"))
    server_path = m.spath("d", ".x.tmp")
    save(m, "d/x", b"x1\n", tmp_name="d/.x.tmp")
    dfd = os.open(m.p("d"), os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)
    assert server.stat(sid, server_path) is None
    assert server.read_file(sid, m.spath("d", "x")) == b"x1\n"


def test_a_file_made_again_at_a_copy_left_is_kept(server, make_mount):
    """The name a save left a copy at is written again and kept: its
    upload replaces the copy, which is then never removed."""
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    save(m, "a.txt", b"a\n")
    with open(m.p(".a.txt.tmp"), "wb") as f:
        f.write(b"kept\n")
    sync_all(m)
    assert server.read_file(sid, m.spath(".a.txt.tmp")) == b"kept\n"
    assert server.read_file(sid, m.spath("a.txt")) == b"a\n"
    assert [n for n in os.listdir(m.p()) if "conflict" in n] == []
    # made again, then removed before its upload: the copy goes too
    save(m, "b.txt", b"b\n")
    with open(m.p(".b.txt.tmp"), "wb") as f:
        f.write(b"short-lived\n")
    os.unlink(m.p(".b.txt.tmp"))
    sync_all(m)
    assert server.stat(sid, m.spath(".b.txt.tmp")) is None
    assert server.read_file(sid, m.spath("b.txt")) == b"b\n"


def test_names_made_where_a_copy_was_left(server, make_mount):
    """A directory, a symlink or a file moved in by the sandbox's mv at a
    name a save left a copy at: the copy goes first, nothing fails."""
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    for name in ("d", "l", "f"):
        save(m, name + ".txt", name.encode(), tmp_name=name + ".tmp")
    os.mkdir(m.p("d.tmp"))
    os.symlink("d.txt", m.p("l.tmp"))
    server.write_file(sid, m.spath("other"), b"other\n")
    os.rename(m.p("other"), m.p("f.tmp"))
    sync_all(m)
    code, out, _ = server.run(sid, "cd %s && stat -c '%%n %%F' d.tmp l.tmp f.tmp && cat f.tmp"
                              % m.spath())
    assert code == 0, out
    assert out.splitlines() == ["d.tmp directory", "l.tmp symbolic link", "f.tmp regular file",
                                "other"]


def test_a_directory_with_a_copy_left_moves_and_goes(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.makedirs(m.p("p", "q"))
    sync_all(m)
    save(m, "p/q/f", b"f\n", tmp_name="p/q/f.tmp")
    os.rename(m.p("p", "q"), m.p("p", "r"))
    sync_all(m)
    code, out, _ = server.run(sid, "cd %s && find . | sort" % m.spath("p"))
    assert out.split() == [".", "./r", "./r/f"], out
    save(m, "p/r/g", b"g\n", tmp_name="p/r/g.tmp")
    os.unlink(m.p("p", "r", "f"))
    os.unlink(m.p("p", "r", "g"))
    os.rmdir(m.p("p", "r"))
    sync_all(m)
    code, out, _ = server.run(sid, "cd %s && find . | sort" % m.spath("p"))
    assert out.split() == ["."], out


def test_a_job_after_a_save_sees_no_copy_left(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    server.write_file(m.sandbox_id, m.spath("j.txt"), b"\n")
    assert os.listdir(m.p()) == ["j.txt"]
    save(m, "j.txt", b"j\n")
    jid = start(m, "ls -a %s" % m.spath())
    read(osb(m, "jobs", jid, "wait"))
    out = job_file(m, jid, "stdout")
    assert ".j.txt.tmp" not in out.split(), out
    assert "j.txt" in out.split(), out


def test_many_saves_at_once_leave_at_most_64_copies(server, make_mount):
    """Past 64 copies waiting, a save's rename removes its copy at once;
    those waiting go a second later, or with the sync."""
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    names = ["m%02d.txt" % i for i in range(70)]
    for n in names:
        server.write_file(sid, m.spath(n), b"\n")
    assert len(os.listdir(m.p())) == 70
    for i, n in enumerate(names):
        save(m, n, b"%d\n" % i)
    code, out, _ = server.run(sid, "ls -a %s" % m.spath())
    left = [n for n in out.split() if n.endswith(".tmp")]
    assert len(left) <= 64, left
    assert sorted(os.listdir(m.p())) == names
    sync_all(m)
    code, out, _ = server.run(sid, "ls -a %s" % m.spath())
    assert sorted(out.split()) == sorted([".", ".."] + names), out
    assert server.read_file(sid, m.spath("m69.txt")) == b"69\n"


def test_fsync_returns_with_the_bytes_and_the_mtime_follows(server, make_mount):
    m = make_mount()
    sid = m.sandbox_id
    with open(m.p("f.txt"), "wb") as f:
        f.write(b"bytes\n")
        f.flush()
        os.utime(f.fileno(), (1000000000, 1000000000))
        os.fsync(f.fileno())
        assert server.read_file(sid, m.spath("f.txt")) == b"bytes\n"
    # the mtime goes a second later, with the close's batch or alone
    def mtime():
        code, out, _ = server.run(sid, "stat -c %%Y %s" % m.spath("f.txt"))
        return code == 0 and int(out) == 1000000000
    wait_until(mtime, 30, "the mtime set in the sandbox")
    assert os.stat(m.p("f.txt")).st_mtime == 1000000000


def test_a_save_survives_kill9_before_its_batch(server, make_mount, tmp_path):
    cache = str(tmp_path / "cache")
    m = make_mount(options=["writeback_delay=1h"], cache_dir=cache)
    sid = m.sandbox_id
    server.write_file(sid, m.spath("k.txt"), b"v1\n")
    assert open(m.p("k.txt"), "rb").read() == b"v1\n"
    save(m, "k.txt", b"v2\n")
    m.kill9()
    # the new bytes, and the copy left at the temporary name, are in the
    # journal: the next mount uploads the one and removes the other
    m2 = make_mount(sandbox_id=sid, create=False, cache_dir=cache)
    assert open(m2.p("k.txt"), "rb").read() == b"v2\n"
    assert sorted(n for n in os.listdir(m2.p()) if n != ".osb") == ["k.txt"]
    wait_until(lambda: server.read_file(sid, m2.spath("k.txt")) == b"v2\n", 60, "the save uploaded")
    wait_until(lambda: server.stat(sid, m2.spath(".k.txt.tmp")) is None, 60,
               "the copy left removed")


def test_a_big_file_renamed_after_its_fsync_is_moved_not_sent_again(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    data = os.urandom(2 << 20)
    server.reset_stats()
    save(m, "big.bin", data)
    got = execd_routes(server, sid)
    # moved in the sandbox (files/mv, or a command over a file)
    assert got.get("POST /files/upload") == 1, got
    assert got.get("POST /files/mv", 0) + got.get("POST /command", 0) >= 1, got
    assert server.read_file(sid, m.spath("big.bin")) == data
    assert server.stat(sid, m.spath(".big.bin.tmp")) is None


def test_a_save_whose_copy_cannot_be_removed_yet(server, make_mount):
    """The removal of the copy a save left fails: the save itself does
    not, the mount never shows the copy, a sync says EIO, and the removal
    is tried again until it works."""
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("r.txt"), b"kept\n")
    assert open(m.p("r.txt"), "rb").read() == b"kept\n"
    server.set_faults(next=1000, kinds=["500"], method="DELETE", path="/files")
    try:
        save(m, "r.txt", b"mine\n")
        assert open(m.p("r.txt"), "rb").read() == b"mine\n"
        with pytest.raises(OSError) as e:
            sync_all(m)
        assert e.value.errno == errno.EIO
        assert sorted(n for n in os.listdir(m.p()) if n != ".osb") == ["r.txt"]
        assert server.read_file(sid, m.spath("r.txt")) == b"mine\n"
    finally:
        server.clear_faults()
    sync_all(m)
    assert server.stat(sid, m.spath(".r.txt.tmp")) is None
    assert [n for n in os.listdir(m.p()) if "conflict" in n] == []


# ---- saves racing with listings ----

RACE_SECONDS = float(os.environ.get("OSBFS_RACE_SECONDS", "60"))
RACE_WRITERS = 4
RACE_LISTERS = 4


class RaceLog:
    """What the race's threads did, and what they got wrong, by kind."""

    def __init__(self):
        self.lock = threading.Lock()
        self.done = {}
        self.wrong = {}
        self.examples = {}

    def count(self, what, n=1):
        with self.lock:
            self.done[what] = self.done.get(what, 0) + n

    def bad(self, kind, detail):
        with self.lock:
            self.wrong[kind] = self.wrong.get(kind, 0) + 1
            ex = self.examples.setdefault(kind, [])
            if len(ex) < 5:
                ex.append(detail)


def race_content(w, name, n, size):
    """Unique bytes whose first line says who wrote them and their length."""
    body = os.urandom(size).hex().encode()
    head = b"%d %s %d %d\n" % (w, name.encode(), n, len(body))
    return head + body


def race_well_formed(data):
    """Whether @data is one whole race_content(), or empty."""
    if not data:
        return True  # made, not written yet
    head, _, body = data.partition(b"\n")
    parts = head.split()
    return len(parts) == 4 and parts[3].isdigit() and int(parts[3]) == len(body)


class RaceWrong(Exception):
    """A wrong result: its kind, and what it was."""

    def __init__(self, kind, detail):
        super().__init__(kind, detail)
        self.kind, self.detail = kind, detail


class RaceWriter:
    """An editor: saves its own files in the shared directory over and
    over, in the ways editors do, and checks every result at once."""

    def __init__(self, m, d, w, log, stop):
        self.m, self.d, self.w, self.log, self.stop = m, d, w, log, stop
        self.rnd = random.Random(7000 + w)
        self.names = ["w%df%d" % (w, k) for k in range(3)]
        self.state = {}  # name -> the bytes it must hold (absent: not there)
        self.n = 0

    def p(self, name):
        return os.path.join(self.d, name)

    def call(self, what, fn, *args):
        try:
            return fn(*args)
        except OSError as e:
            raise RaceWrong(what, "%s: %s" % (args[0] if args else "", e))

    def write(self, path, data, flags=os.O_CREAT | os.O_TRUNC | os.O_WRONLY):
        fd = self.call("create", os.open, path, flags, 0o644)
        try:
            self.call("write", os.write, fd, data)
            self.call("fsync", os.fsync, fd)
        finally:
            os.close(fd)

    def content(self, name):
        self.n += 1
        return race_content(self.w, name, self.n, self.rnd.randrange(0, 6000))

    def check(self, name):
        """The name reads back as just saved (stat and bytes), or is gone."""
        want = self.state.get(name)
        if want is None:
            self.check_gone(name)
            return
        try:
            st = os.stat(self.p(name))
            with open(self.p(name), "rb") as f:
                got = f.read()
        except OSError as e:
            raise RaceWrong("read back", "%s: %s" % (name, e))
        if got != want:
            raise RaceWrong("read back", "%s: %d bytes, not the %d just saved%s" % (
                name, len(got), len(want), " (an older save's)" if race_well_formed(got) else ""))
        if st.st_size != len(want):
            raise RaceWrong("stat size", "%s: %d, not %d" % (name, st.st_size, len(want)))

    def check_gone(self, name):
        try:
            os.stat(self.p(name))
        except FileNotFoundError:
            pass
        else:
            raise RaceWrong("removed name still there", name)
        if name in os.listdir(self.d):
            raise RaceWrong("removed name still listed", name)

    def save_tmp(self, name, tmp):
        """Atomic-write style: a temporary file, fsync, rename over."""
        data = self.content(name)
        self.write(self.p(tmp), data, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        self.state[tmp] = data
        self.call("rename", os.rename, self.p(tmp), self.p(name))
        self.state[name] = self.state.pop(tmp)
        self.log.count("saves")
        self.check(name)
        self.check_gone(tmp)

    def save_vim(self, name):
        """vim's backupcopy=no: the file renamed to NAME~, written anew,
        the backup removed."""
        data = self.content(name)
        bak = name + "~"
        if self.state.get(name) is not None:
            self.call("rename", os.rename, self.p(name), self.p(bak))
            self.state[bak] = self.state.pop(name)
        self.write(self.p(name), data, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        self.state[name] = data
        if bak in self.state:
            self.call("unlink", os.unlink, self.p(bak))
            del self.state[bak]
            self.check_gone(bak)
        self.log.count("saves")
        self.check(name)

    def remove(self, name):
        if self.state.get(name) is None:
            return
        self.call("unlink", os.unlink, self.p(name))
        del self.state[name]
        self.log.count("removals")
        self.check_gone(name)

    def dir_cycle(self):
        """A directory made, a file saved in it, both removed."""
        sub = "w%dd" % self.w
        self.call("mkdir", os.mkdir, self.p(sub))
        data = self.content(sub)
        self.write(self.p(os.path.join(sub, "x")), data)
        self.call("unlink", os.unlink, self.p(os.path.join(sub, "x")))
        self.call("rmdir", os.rmdir, self.p(sub))
        self.log.count("removals")
        self.check_gone(sub)

    def step(self):
        name = self.rnd.choice(self.names)
        op = self.rnd.randrange(10)
        if op < 4:
            self.save_tmp(name, "." + name + ".tmp")  # the same name each time
        elif op < 6:
            self.save_tmp(name, "%s.tmp%d" % (name, self.n))  # a new one each time
        elif op < 8:
            self.save_vim(name)
        elif op < 9:
            self.remove(name)
        else:
            self.dir_cycle()

    def recover(self):
        """After a wrong result: what the mount shows is the state now."""
        for name in list(self.state) + self.names:
            try:
                with open(self.p(name), "rb") as f:
                    data = f.read()
            except OSError:
                data = None
            if name in self.names:
                self.state[name] = data
            else:
                self.state.pop(name, None)
                try:
                    os.unlink(self.p(name))
                except OSError:
                    pass
        sub = "w%dd" % self.w
        for fn, path in ((os.unlink, os.path.join(sub, "x")), (os.rmdir, sub)):
            try:
                fn(self.p(path))
            except OSError:
                pass

    def run(self):
        while not self.stop.is_set():
            try:
                self.step()
            except RaceWrong as e:
                self.log.bad(e.kind, e.detail)
                self.recover()
            except Exception as e:  # noqa: BLE001
                self.log.bad("writer error", repr(e))
                self.recover()


def race_lister(top, d, i, log, stop):
    """Lists the shared directory (and its parent) in a loop, stats what
    it lists, reads some of it: only ENOENT, of a name removed meanwhile,
    may fail."""
    rnd = random.Random(8000 + i)
    while not stop.is_set():
        try:
            if i % 2:
                for e in os.scandir(d):
                    try:
                        e.stat(follow_symlinks=False)
                        if e.is_file() and rnd.random() < 0.2:
                            with open(e.path, "rb") as f:
                                data = f.read()
                            if not race_well_formed(data):
                                log.bad("read torn bytes", "%s: %d bytes" % (e.name, len(data)))
                    except FileNotFoundError:
                        pass
            else:
                for n in os.listdir(d):
                    try:
                        os.lstat(os.path.join(d, n))
                    except FileNotFoundError:
                        pass
                os.lstat(d)
                os.listdir(top)
                log.count("listings")
            log.count("listings")
        except OSError as e:
            log.bad("lister error", "%r" % e)


def race_sandbox_files(server, sid, spath):
    """{name: bytes, or "a directory"} of a sandbox directory, read in the
    server's data dir."""
    host = os.path.join(server.data_dir, "sandboxes", sid, "rootfs", spath.lstrip("/"))
    out = {}
    for n in os.listdir(host):
        p = os.path.join(host, n)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                out[n] = f.read()
        else:
            out[n] = "a directory"
    return out


def run_race(server, m, name, seconds, faults=None):
    d = m.p(name)
    os.mkdir(d)
    log = RaceLog()
    stop = threading.Event()
    writers = [RaceWriter(m, d, w, log, stop) for w in range(RACE_WRITERS)]
    ts = [threading.Thread(target=w.run, daemon=True) for w in writers]
    ts += [threading.Thread(target=race_lister, args=(m.p(), d, i, log, stop), daemon=True)
           for i in range(RACE_LISTERS)]
    if faults:
        server.set_faults(**faults)
    try:
        for t in ts:
            t.start()
        time.sleep(seconds)
    finally:
        stop.set()
        for t in ts:
            t.join(120)
        server.clear_faults()
    assert not any(t.is_alive() for t in ts), "a thread of the race hangs"
    sync_all(m)
    # the sandbox holds exactly the last save of every name, nothing else
    want = {}
    for w in writers:
        want.update({n: b for n, b in w.state.items() if b is not None})
    have = race_sandbox_files(server, m.sandbox_id, m.spath(name))
    def what(d, n):
        v = d.get(n)
        return "absent" if v is None else v if isinstance(v, str) else "%d bytes" % len(v)

    for n in sorted(set(want) | set(have)):
        if have.get(n) != want.get(n):
            log.bad("sandbox after sync", "%s: %s, not %s" % (n, what(have, n), what(want, n)))
    shown = sorted(os.listdir(d))
    if shown != sorted(want):
        log.bad("mount after sync", "lists %s, not %s" % (shown, sorted(want)))
    print("race %.0f s%s: %s; wrong: %s" % (seconds, " with faults %s" % faults if faults else "",
                                            log.done, log.wrong or 0))
    return log


def test_saves_racing_with_listings(server, make_mount):
    """Four editors save their files in one directory (a temporary file,
    fsync, rename over it; vim's backup rename; removals of files and of
    directories) while four listers list and stat it, for
    OSBFS_RACE_SECONDS (60): every rename returns what happened, every
    save reads back at once, a removed name is gone at once, and the
    sandbox ends with each name's last save. Half the time, the server
    answers some listings and stats late (answers made before a change
    that arrive after it)."""
    m = make_mount()
    logs = [run_race(server, m, "shared", RACE_SECONDS / 2)]
    logs.append(run_race(server, m, "late", RACE_SECONDS / 2,
                         faults=dict(rate=0.3, kinds=["late"], delay_ms=300,
                                     path="/directories/list|/files/info")))
    examples = ["%s: %s" % (k, e) for log in logs for k, ex in log.examples.items() for e in ex]
    assert not any(log.wrong for log in logs), "\n".join(examples)

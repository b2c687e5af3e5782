"""`osb ls|stat|get|put|rm|mkdir|mv|chmod|search|replace` on a sandbox of
the local server.  Results are checked on the sandbox's side with the
server's raw API (server.stat, read_file), not with osb itself."""

import hashlib
import os
import stat as pystat
import threading

import pytest

from osbhelp import W, sandbox_stats
from osbtest import wait_until

ODD_NAMES = ["a b.txt", "p%41#x?y&z+w.txt", "caf\u00e9 \u2603 \u65e5\u672c.txt", "semi;colon=eq'quote\".txt"]


def local(workdir, name, data):
    path = os.path.join(workdir, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---------------------------------------------------------------- ls

def test_ls_sorted_names_with_dotfiles(server, osb, sandbox):
    for n in ("b", "a", ".hidden", "C"):
        server.write_file(sandbox, "%s/d/%s" % (W, n), b"x")
    server.run(sandbox, "mkdir %s/d/sub" % W)
    assert osb.ok("ls", W + "/d").lines() == [".hidden", "C", "a", "b", "sub"]
    # a trailing slash changes nothing
    assert osb.ok("ls", W + "/d/").lines() == [".hidden", "C", "a", "b", "sub"]


def test_ls_root(osb):
    assert "workspace" in osb.ok("ls", "/").lines()


def test_ls_long(server, osb, sandbox):
    server.write_file(sandbox, W + "/d/f", b"12345", mode=640)
    server.run(sandbox, "mkdir -m 750 %s/d/sub && ln -s f %s/d/link" % (W, W))
    st = server.stat(sandbox, W + "/d/f")
    rows = [line.split() for line in osb.ok("ls", "-l", W + "/d").lines()]
    assert [(r[0], r[1], r[2], r[3], r[-1]) for r in rows] == [
        ("-rw-r-----", "root", "root", "5", "f"),
        ("lrwxrwxrwx", "root", "root", "1", "link"),
        ("drwxr-x---", "root", "root", str(server.stat(sandbox, W + "/d/sub")["size"]), "sub"),
    ]
    # date and time of the mtime, in UTC
    assert rows[0][4] + "T" + rows[0][5] == st["modified_at"][:16]


def test_ls_depth(server, osb, sandbox):
    for p in ("a/b/c/deep", "a/top", "z"):
        server.write_file(sandbox, "%s/t/%s" % (W, p), b"")
    assert osb.ok("ls", W + "/t").lines() == ["a", "z"]
    assert osb.ok("ls", "-d", "2", W + "/t").lines() == ["a", "a/b", "a/top", "z"]
    assert osb.ok("ls", "-R", W + "/t").lines() == ["a", "a/b", "a/b/c", "a/b/c/deep", "a/top", "z"]


def test_ls_ten_thousand_entries(server, osb, sandbox, capsys):
    code, _, err = server.run(sandbox, "mkdir %s/big && cd %s/big && seq -f 'f%%05g' 0 9999 | xargs touch" % (W, W))
    assert code == 0, err
    res = osb.ok("ls", W + "/big", measure_rss=True)
    assert res.lines() == ["f%05d" % i for i in range(10000)]
    rows = osb.ok("ls", "-l", W + "/big").lines()
    assert len(rows) == 10000 and all(r.startswith("-rw-r--r-- root") for r in rows)
    with capsys.disabled():
        print("\n  osb ls of 10,000 entries: %.2f s, %.1f MiB peak RSS" % (res.seconds, res.maxrss_kib / 1024))


def test_ls_a_file_is_not_a_directory(server, osb, sandbox):
    server.write_file(sandbox, W + "/f", b"x")
    res = osb.fails("ls", W + "/f")
    assert "HTTP 400" in res.err and "not a directory" in res.err, res.describe()


def test_ls_missing(osb):
    res = osb.fails("ls", W + "/nope")
    assert "HTTP 404 FILE_NOT_FOUND" in res.err and "[%s/nope]" % W in res.err, res.describe()


@pytest.mark.parametrize("args", [["-d", "0", "/"], ["-d", "x", "/"], [], ["/a", "/b"]])
def test_ls_bad_arguments(osb, args):
    res = osb.run("ls", *args)
    assert res.rc == 2 and res.out == "", res.describe()


# ---------------------------------------------------------------- stat

def stat_dict(res):
    return dict(line.split(": ", 1) for line in res.lines())


def test_stat_file(server, osb, sandbox):
    server.write_file(sandbox, W + "/s.txt", b"hello", mode=604)
    raw = server.stat(sandbox, W + "/s.txt")
    d = stat_dict(osb.ok("stat", W + "/s.txt"))
    assert d["path"] == W + "/s.txt" and d["type"] == "file" and d["size"] == "5"
    assert d["mode"] == "0604" and d["owner"] == "root" and d["group"] == "root"
    assert d["modified"] == raw["modified_at"][:19] + "Z"
    assert d["changed"] == raw["created_at"][:19] + "Z"


def test_stat_directory(server, osb, sandbox):
    server.run(sandbox, "mkdir -m 711 %s/dd" % W)
    d = stat_dict(osb.ok("stat", W + "/dd"))
    assert d["type"] == "directory" and d["mode"] == "0711"


def test_stat_symlink_is_not_followed(server, osb, sandbox):
    server.run(sandbox, "ln -s /etc/hostname-target-xyz %s/ln" % W)
    d = stat_dict(osb.ok("stat", W + "/ln"))
    assert d["type"] == "symlink" and d["size"] == str(len("/etc/hostname-target-xyz"))


def test_stat_missing(osb):
    res = osb.fails("stat", W + "/nope")
    assert "HTTP 404 FILE_NOT_FOUND" in res.err, res.describe()


# ---------------------------------------------------------------- put / get

def test_put_get_round_trip(server, osb, sandbox, workdir):
    data = bytes(range(256)) * 1000 + b"\r\n\x00end"
    src = local(workdir, "src.bin", data)
    osb.ok("put", src, W + "/deep/er/f.bin")
    assert server.read_file(sandbox, W + "/deep/er/f.bin") == data
    dst = os.path.join(workdir, "back.bin")
    osb.ok("get", W + "/deep/er/f.bin", dst)
    with open(dst, "rb") as f:
        assert f.read() == data
    # the download is a new file with the usual mode, and no temp is left
    assert pystat.S_IMODE(os.stat(dst).st_mode) == 0o666 & ~current_umask()
    assert sorted(os.listdir(workdir)) == ["back.bin", "src.bin"]


def current_umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_put_replaces_whole_file(server, osb, sandbox, workdir):
    server.write_file(sandbox, W + "/r", b"a much longer old content\n")
    osb.ok("put", local(workdir, "n", b"new\n"), W + "/r")
    assert server.read_file(sandbox, W + "/r") == b"new\n"


def test_put_empty_file(server, osb, sandbox, workdir):
    osb.ok("put", local(workdir, "e", b""), W + "/e")
    assert server.stat(sandbox, W + "/e")["size"] == 0


def test_get_overwrites_a_local_file(server, osb, sandbox, workdir):
    server.write_file(sandbox, W + "/g", b"remote\n")
    dst = local(workdir, "dst", b"old local content that is longer\n")
    osb.ok("get", W + "/g", dst)
    with open(dst, "rb") as f:
        assert f.read() == b"remote\n"


def test_get_to_stdout(server, osb, sandbox):
    data = os.urandom(300000)
    server.write_file(sandbox, W + "/o", data)
    assert osb.ok("get", W + "/o", "-").out_bytes == data


def test_put_from_a_pipe(server, osb, sandbox):
    data = os.urandom(200000) + b"tail"
    osb.ok("put", "-", W + "/from-pipe", stdin=data)
    assert server.read_file(sandbox, W + "/from-pipe") == data


def test_put_from_stdin_file_at_its_offset(server, osb, sandbox, workdir):
    src = local(workdir, "src", b"0123456789abcdef")
    with open(src, "rb") as f:
        f.seek(10)
        osb.ok("put", "-", W + "/from-file", stdin=f)
    assert server.read_file(sandbox, W + "/from-file") == b"abcdef"


def test_put_mode_option(server, osb, sandbox, workdir):
    osb.ok("put", "-m", "600", local(workdir, "m", b"x"), W + "/m")
    assert server.stat(sandbox, W + "/m")["mode"] == 600


def test_put_keeps_the_local_mode(server, osb, sandbox, workdir):
    src = local(workdir, "x.sh", b"#!/bin/sh\necho run\n")
    os.chmod(src, 0o750)
    osb.ok("put", src, W + "/x.sh")
    assert server.stat(sandbox, W + "/x.sh")["mode"] == 750
    assert server.run(sandbox, W + "/x.sh")[:2] == (0, "run\n")


def test_put_owner_and_group(server, osb, sandbox, workdir):
    osb.ok("put", "--owner", "nobody", "--group", "nogroup", local(workdir, "o", b"x"), W + "/o")
    st = server.stat(sandbox, W + "/o")
    assert (st["owner"], st["group"]) == ("nobody", "nogroup")


def test_put_missing_local_file(osb, workdir):
    missing = os.path.join(workdir, "nope")
    res = osb.fails("put", missing, W + "/x")
    assert res.err == "osb: %s: No such file or directory\n" % missing


def test_put_a_local_directory(osb, workdir):
    res = osb.fails("put", workdir, W + "/x")
    assert res.err == "osb: %s: not a regular file\n" % workdir


def test_get_missing_leaves_nothing(osb, workdir):
    dst = os.path.join(workdir, "never")
    res = osb.fails("get", W + "/nope", dst)
    assert "HTTP 404 FILE_NOT_FOUND" in res.err, res.describe()
    assert os.listdir(workdir) == []


def test_get_onto_a_local_directory(server, osb, sandbox, workdir):
    server.write_file(sandbox, W + "/g", b"x")
    os.mkdir(os.path.join(workdir, "d"))
    res = osb.fails("get", W + "/g", os.path.join(workdir, "d"))
    assert res.err == "osb: %s: Is a directory\n" % os.path.join(workdir, "d")
    # the temporary file is gone
    assert sorted(os.listdir(workdir)) == ["d"] and os.listdir(os.path.join(workdir, "d")) == []


def test_get_to_a_full_stdout(server, osb, sandbox):
    server.write_file(sandbox, W + "/g", b"x" * 100000)
    with open("/dev/full", "wb") as full:
        res = osb.run("get", W + "/g", "-", stdout=full)
    assert (res.rc, res.err) == (1, "osb: get: GET %s/files/download [%s/g]: No space left on device\n" % (
        server.execd_url(sandbox), W)), res.describe()


def test_get_fails_when_the_file_changes_before_a_resume(server, osb, sandbox, workdir):
    server.write_file(sandbox, W + "/r", b"A" * (4 << 20))
    server.write_file(sandbox, W + "/r.new", b"B" * (3 << 20))
    server.reset_stats()
    # the answer stops half-way; the file is replaced (atomically, so the
    # first half is surely the old version) before the rest is asked for
    server.set_faults(next=1, kinds=["cut"], delay_ms=1500, path="/files/download")
    dst = os.path.join(workdir, "r")
    done = {}
    t = threading.Thread(target=lambda: done.update(res=osb.run("get", W + "/r", dst)))
    try:
        t.start()
        wait_until(lambda: sandbox_stats(server, sandbox).get("GET /files/download"), 20,
                   "the download to start", step=0.01)
        code, _, err = server.run(sandbox, "mv %s/r.new %s/r" % (W, W))
        assert code == 0, err
        t.join(60)
    finally:
        server.clear_faults()
    res = done["res"]
    assert res.rc == 1, res.describe()
    assert "the file changed in the sandbox during the download" in res.err, res.describe()
    assert sandbox_stats(server, sandbox)["GET /files/download"] == 2  # it resumed
    assert os.listdir(workdir) == []


def test_put_onto_a_directory(server, osb, sandbox, workdir):
    server.run(sandbox, "mkdir %s/isdir" % W)
    res = osb.fails("put", local(workdir, "f", b"x"), W + "/isdir")
    assert "HTTP 500 RUNTIME_ERROR" in res.err and "is a directory" in res.err, res.describe()


# ---------------------------------------------------------------- ranges

RANGE_DATA = bytes((i * 7) % 251 for i in range(1000))


@pytest.mark.parametrize("offset, length", [
    (0, 10), (10, 90), (990, 10), (990, 100), (999, None), (500, None), (0, None), (0, 0),
    (1000, 5), (1000, None), (5000, 1), (5000, None),
])
def test_get_range(server, osb, sandbox, offset, length):
    server.write_file(sandbox, W + "/r.bin", RANGE_DATA)
    args = ["--offset", str(offset)] + (["--length", str(length)] if length is not None else [])
    got = osb.ok("get", *args, W + "/r.bin", "-").out_bytes
    want = RANGE_DATA[offset:] if length is None else RANGE_DATA[offset:offset + length]
    assert got == want


@pytest.mark.parametrize("args", [[], ["--offset", "0"], ["--offset", "3", "--length", "5"]])
def test_get_empty_file(server, osb, sandbox, args):
    server.write_file(sandbox, W + "/empty", b"")
    assert osb.ok("get", *args, W + "/empty", "-").out_bytes == b""


def test_get_range_into_a_file(server, osb, sandbox, workdir):
    server.write_file(sandbox, W + "/r.bin", RANGE_DATA)
    dst = os.path.join(workdir, "part")
    osb.ok("get", "--offset", "100", "--length", "50", W + "/r.bin", dst)
    with open(dst, "rb") as f:
        assert f.read() == RANGE_DATA[100:150]


@pytest.mark.parametrize("args", [["--offset", "-1"], ["--length", "-2"], ["--offset", "1k"]])
def test_get_bad_range_arguments(osb, args):
    res = osb.run("get", *args, W + "/x", "-")
    assert res.rc == 2 and res.out == "", res.describe()


# ---------------------------------------------------------------- rm / mkdir

def test_rm_files(server, osb, sandbox):
    for n in ("a", "b", "c"):
        server.write_file(sandbox, "%s/%s" % (W, n), b"x")
    osb.ok("rm", W + "/a", W + "/b")
    assert server.stat(sandbox, W + "/a") is None and server.stat(sandbox, W + "/b") is None
    assert server.stat(sandbox, W + "/c") is not None


def test_rm_missing_is_no_error(osb):
    osb.ok("rm", W + "/never-was")


def test_rm_directory_needs_r(server, osb, sandbox):
    server.write_file(sandbox, W + "/d/f", b"x")
    res = osb.fails("rm", W + "/d")
    assert "is a directory" in res.err, res.describe()
    assert server.stat(sandbox, W + "/d/f") is not None
    osb.ok("rm", "-r", W + "/d")
    assert server.stat(sandbox, W + "/d") is None


def test_rm_r_refuses_root(server, osb, sandbox):
    res = osb.fails("rm", "-r", "/")
    assert res.err == 'osb: rm: refusing to remove "/"\n'
    assert server.stat(sandbox, W) is not None


def test_mkdir_mode_and_parents(server, osb, sandbox):
    osb.ok("mkdir", "-m", "700", W + "/p/q/r")
    assert server.stat(sandbox, W + "/p/q/r")["mode"] == 700
    assert server.stat(sandbox, W + "/p/q")["type"] == "directory"
    # an existing directory is fine, and keeps its mode
    osb.ok("mkdir", W + "/p/q/r")
    assert server.stat(sandbox, W + "/p/q/r")["mode"] == 700


def test_mkdir_several(server, osb, sandbox):
    osb.ok("mkdir", "-p", W + "/m1", W + "/m2")
    assert server.stat(sandbox, W + "/m1")["type"] == server.stat(sandbox, W + "/m2")["type"] == "directory"


def test_mkdir_over_a_file(server, osb, sandbox):
    server.write_file(sandbox, W + "/f", b"x")
    res = osb.fails("mkdir", W + "/f/sub")
    assert "not a directory" in res.err, res.describe()


@pytest.mark.parametrize("mode", ["9", "0", "rwx", "77777"])
def test_mkdir_bad_mode(osb, mode):
    res = osb.run("mkdir", "-m", mode, W + "/x")
    assert res.rc == 2, res.describe()


# ---------------------------------------------------------------- mv

def test_mv(server, osb, sandbox):
    server.write_file(sandbox, W + "/src", b"moved\n")
    osb.ok("mv", W + "/src", W + "/new/parent/dst")
    assert server.stat(sandbox, W + "/src") is None
    assert server.read_file(sandbox, W + "/new/parent/dst") == b"moved\n"


def test_mv_onto_an_existing_file_fails(server, osb, sandbox):
    server.write_file(sandbox, W + "/a", b"A")
    server.write_file(sandbox, W + "/b", b"B")
    res = osb.fails("mv", W + "/a", W + "/b")
    assert "HTTP 500 RUNTIME_ERROR" in res.err and "destination path already exists" in res.err, res.describe()
    assert server.read_file(sandbox, W + "/a") == b"A" and server.read_file(sandbox, W + "/b") == b"B"


def test_mv_missing_source(osb):
    res = osb.fails("mv", W + "/nope", W + "/x")
    assert "HTTP 404" in res.err, res.describe()


# ---------------------------------------------------------------- chmod

def test_chmod_keeps_the_owner(server, osb, sandbox, workdir):
    osb.ok("put", "--owner", "nobody", "--group", "nogroup", local(workdir, "f", b"x"), W + "/f")
    osb.ok("chmod", "640", W + "/f")
    st = server.stat(sandbox, W + "/f")
    assert (st["mode"], st["owner"], st["group"]) == (640, "nobody", "nogroup")


def test_chmod_owner_and_group(server, osb, sandbox):
    server.write_file(sandbox, W + "/f", b"x", mode=644)
    osb.ok("chmod", "--owner", "daemon", "--group", "bin", "600", W + "/f")
    st = server.stat(sandbox, W + "/f")
    assert (st["mode"], st["owner"], st["group"]) == (600, "daemon", "bin")


def test_chmod_directory(server, osb, sandbox):
    server.run(sandbox, "mkdir %s/d" % W)
    osb.ok("chmod", "751", W + "/d")
    assert server.stat(sandbox, W + "/d")["mode"] == 751


def test_chmod_missing(osb):
    res = osb.fails("chmod", "600", W + "/nope")
    assert "HTTP 404" in res.err, res.describe()


@pytest.mark.parametrize("args", [["8", W + "/f"], ["u+x", W + "/f"], ["644"]])
def test_chmod_bad_arguments(osb, args):
    res = osb.run("chmod", *args)
    assert res.rc == 2, res.describe()


# ---------------------------------------------------------------- search / replace

def test_search(server, osb, sandbox):
    for p in ("a.txt", "b.py", "sub/c.txt", "sub/deeper/d.txt", "sub/e.md"):
        server.write_file(sandbox, "%s/s/%s" % (W, p), b"x")
    assert sorted(osb.ok("search", W + "/s", "*.txt").lines()) == [
        W + "/s/a.txt", W + "/s/sub/c.txt", W + "/s/sub/deeper/d.txt"]
    # no pattern: every file (directories are not listed)
    assert len(osb.ok("search", W + "/s").lines()) == 5
    assert osb.ok("search", W + "/s", "*.none").lines() == []


def test_search_missing_directory(osb):
    res = osb.fails("search", W + "/nope", "*")
    assert "HTTP 404" in res.err, res.describe()


def test_replace(server, osb, sandbox):
    server.write_file(sandbox, W + "/t", b"one two one three one\n", mode=640)
    assert osb.ok("replace", W + "/t", "one", "1").lines() == ["3"]
    assert server.read_file(sandbox, W + "/t") == b"1 two 1 three 1\n"
    assert server.stat(sandbox, W + "/t")["mode"] == 640
    assert osb.ok("replace", W + "/t", "absent", "x").lines() == ["0"]


def test_replace_with_empty_text_deletes_it(server, osb, sandbox):
    server.write_file(sandbox, W + "/t", b"a-b-c")
    osb.ok("replace", W + "/t", "-", "")
    assert server.read_file(sandbox, W + "/t") == b"abc"


def test_replace_empty_old_text(osb):
    res = osb.fails("replace", W + "/t", "", "x")
    assert res.err == "osb: replace: the text to replace is empty\n"


def test_replace_missing_file(osb):
    res = osb.fails("replace", W + "/nope", "a", "b")
    assert "HTTP 404" in res.err, res.describe()


# ---------------------------------------------------------------- names

@pytest.mark.parametrize("name", ODD_NAMES)
def test_odd_names_round_trip(server, osb, sandbox, workdir, name):
    path = "%s/dir %s/%s" % (W, name, name)
    data = name.encode() * 3
    osb.ok("put", local(workdir, "src", data), path)
    assert server.read_file(sandbox, path) == data
    assert osb.ok("ls", "%s/dir %s" % (W, name)).lines() == [name]
    assert stat_dict(osb.ok("stat", path))["path"] == path
    assert osb.ok("get", path, "-").out_bytes == data
    assert osb.ok("search", W, name).lines() == [path]
    assert osb.ok("replace", path, name, "Z").lines() == ["3"]
    osb.ok("chmod", "600", path)
    assert server.stat(sandbox, path)["mode"] == 600
    osb.ok("mv", path, path + " moved")
    assert server.stat(sandbox, path) is None and server.read_file(sandbox, path + " moved") == b"ZZZ"
    osb.ok("rm", path + " moved")
    assert server.stat(sandbox, path + " moved") is None
    osb.ok("mkdir", "%s/%s sub" % (W, name))
    assert server.stat(sandbox, "%s/%s sub" % (W, name))["type"] == "directory"
    osb.ok("rm", "-r", "%s/%s sub" % (W, name), "%s/dir %s" % (W, name))
    assert osb.ok("ls", W).lines() == []


DOLLAR = W + "/Outer$Inner.class"


@pytest.mark.parametrize("args", [
    ["put", "LOCAL", DOLLAR], ["get", DOLLAR, "-"], ["ls", W + "/$HOME"], ["stat", DOLLAR], ["rm", DOLLAR],
    ["rm", "-r", DOLLAR], ["mkdir", DOLLAR], ["mv", W + "/a", DOLLAR], ["mv", DOLLAR, W + "/a"],
    ["chmod", "600", DOLLAR], ["search", W + "/${X}", "*"], ["replace", DOLLAR, "a", "b"],
])
def test_dollar_path_is_refused(server, osb, sandbox, workdir, args):
    server.write_file(sandbox, W + "/a", b"a")
    args = [local(workdir, "l", b"x") if a == "LOCAL" else a for a in args]
    bad = [a for a in args if "$" in a][0]
    before = sandbox_stats(server, sandbox)
    res = osb.fails(*args)
    assert res.err == "osb: %s: path %s holds '$', which execd would expand\n" % (args[0], bad)
    # nothing reached execd's file API
    after = sandbox_stats(server, sandbox)
    assert {k: v for k, v in after.items() if "/files" in k or "/directories" in k} == \
        {k: v for k, v in before.items() if "/files" in k or "/directories" in k}


@pytest.mark.parametrize("args", [["stat", "relative/p"], ["get", "x", "-"], ["ls", "."]])
def test_relative_path_is_refused(osb, args):
    res = osb.fails(*args)
    assert res.err == 'osb: %s: not an absolute path: "%s"\n' % (args[0], args[1])


def test_checksum_of_a_put_matches_inside(server, osb, sandbox, workdir):
    data = os.urandom(3 << 20)
    osb.ok("put", local(workdir, "c", data), W + "/c")
    code, out, _ = server.run(sandbox, "sha256sum %s/c" % W)
    assert code == 0 and out.split()[0] == hashlib.sha256(data).hexdigest()

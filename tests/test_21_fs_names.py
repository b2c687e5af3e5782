"""Names that are hard for the file API: query-string characters, '$'
(execd expands it in every file path), newlines, 255 bytes, non-UTF-8.
Every name must round-trip: made through the mount, found under the same
name in the sandbox, listed back unchanged."""

import errno
import os

import pytest

from mounthelp import fsync_path

NAMES = [
    "with space",
    "per%cent",
    "hash#tag",
    "ques?tion",
    "amp&ersand",
    "plus+sign",
    "Outer$Inner.class",
    "$HOME",
    "${PATH}",
    "dollar$1$$",
    "new\nline",
    "tab\there",
    "quote'and\"double",
    "back\\slash",
    "unicode-é-ß-日本",
    "emoji-\U0001f600",
    "-leading-dash",
    "x" * 255,
]


@pytest.fixture
def mount(make_mount):
    return make_mount(options=["attr_timeout=0", "dir_timeout=0", "negative_timeout=0"])


def q(path):
    return "'" + path.replace("'", "'\\''") + "'"


def sandbox_bytes(server, sid, path):
    """A file's bytes in the sandbox, read by a command (hex), so that
    even a name execd would expand is read under its own name."""
    code, out, err = server.run(sid, "od -An -v -tx1 -- %s | tr -d ' \\n'" % q(path))
    assert code == 0, err
    return bytes.fromhex(out.strip())


def sandbox_names(server, sid, directory):
    """Names in a sandbox directory, byte-exact (hex through a command)."""
    code, out, err = server.run(
        sid, "cd %s && for f in * .[!.]*; do [ -e \"$f\" ] || [ -L \"$f\" ] || continue; "
             "printf '%%s' \"$f\" | od -An -v -tx1 | tr -d ' \\n'; echo; done" % directory)
    assert code == 0, err
    return {bytes.fromhex(line).decode() for line in out.split("\n") if line}


@pytest.mark.parametrize("name", NAMES, ids=lambda n: repr(n[:20]))
def test_name_round_trips(server, mount, name):
    p = mount.p(name)
    with open(p, "w") as f:
        f.write("content of " + name)
    fsync_path(p)
    assert name in os.listdir(mount.p())
    assert open(p).read() == "content of " + name
    assert name in sandbox_names(server, mount.sandbox_id, mount.spath())
    # read back through a fresh view of the sandbox
    assert sandbox_bytes(server, mount.sandbox_id, mount.spath(name)) == ("content of " + name).encode()


def test_dollar_names_made_in_sandbox_are_read(server, mount):
    sid = mount.sandbox_id
    code, _, err = server.run(sid, "printf inner > %s" % q(mount.spath("A$B.class")))
    assert code == 0, err
    assert open(mount.p("A$B.class")).read() == "inner"
    st = os.stat(mount.p("A$B.class"))
    assert st.st_size == 5


def test_dollar_in_directory_names(server, mount):
    d = mount.p("pkg$dir")
    os.mkdir(d)
    with open(os.path.join(d, "Inner$1.class"), "w") as f:
        f.write("x")
    fsync_path(os.path.join(d, "Inner$1.class"))
    assert os.listdir(d) == ["Inner$1.class"]
    os.rename(os.path.join(d, "Inner$1.class"), os.path.join(d, "Renamed$2.class"))
    os.chmod(os.path.join(d, "Renamed$2.class"), 0o600)
    assert sandbox_names(server, mount.sandbox_id, q(mount.spath("pkg$dir"))) == {"Renamed$2.class"}
    os.unlink(os.path.join(d, "Renamed$2.class"))
    os.rmdir(d)
    assert "pkg$dir" not in sandbox_names(server, mount.sandbox_id, mount.spath())


@pytest.mark.parametrize("parent", ["pkg$dir", "plain"])
def test_a_new_directory_not_yet_in_the_sandbox_is_removed(server, mount, parent):
    # the soak found it: rmdir of a directory made through the mount and
    # not yet sent failed with ENOENT when its path holds a '$' (the
    # shell route's `rmdir` finds nothing to remove)
    os.mkdir(mount.p(parent))
    fsync_path(mount.p(parent))
    os.mkdir(mount.p(parent, "new"))
    os.mkdir(mount.p("new$dir"))
    assert os.listdir(mount.p(parent, "new")) == []
    os.rmdir(mount.p(parent, "new"))
    os.rmdir(mount.p("new$dir"))
    assert os.listdir(mount.p(parent)) == []
    fsync_path(mount.p())
    assert sandbox_names(server, mount.sandbox_id, q(mount.spath(parent))) == set()
    assert "new$dir" not in sandbox_names(server, mount.sandbox_id, mount.spath())

def test_javac_like_output(server, mount):
    """A compiler writing Outer.class and Outer$Inner.class, then running."""
    files = {"Outer.class": b"\xca\xfe\xba\xbe outer", "Outer$Inner.class": b"\xca\xfe\xba\xbe inner",
             "Outer$1.class": b"\xca\xfe\xba\xbe anon"}
    os.mkdir(mount.p("classes"))
    for n, data in files.items():
        with open(mount.p("classes", n), "wb") as f:
            f.write(data)
        fsync_path(mount.p("classes", n))
    for n, data in files.items():
        assert sandbox_bytes(server, mount.sandbox_id, mount.spath("classes", n)) == data
        assert open(mount.p("classes", n), "rb").read() == data
    assert sorted(os.listdir(mount.p("classes"))) == sorted(files)


def test_name_too_long_is_enametoolong(mount):
    with pytest.raises(OSError) as e:
        open(mount.p("y" * 256), "w")
    assert e.value.errno == errno.ENAMETOOLONG


def test_non_utf8_name_is_eilseq(mount):
    for op in ("create", "mkdir", "symlink"):
        path = os.path.join(os.fsencode(mount.p()), b"bad\xff" + op.encode())
        with pytest.raises(OSError) as e:
            if op == "create":
                open(path, "w")
            elif op == "mkdir":
                os.mkdir(path)
            else:
                os.symlink(b"target", path)
        assert e.value.errno == errno.EILSEQ, op


def test_rename_to_non_utf8_is_eilseq(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("good"), b"1")
    with pytest.raises(OSError) as e:
        os.rename(mount.p("good"), os.path.join(os.fsencode(mount.p()), b"bad\xfe"))
    assert e.value.errno == errno.EILSEQ
    assert server.read_file(mount.sandbox_id, mount.spath("good")) == b"1"


# ---- names in the sandbox that are not UTF-8 ----
#
# execd sends U+FFFD in place of each byte of a name that is not valid
# UTF-8 (the local server does as it does): the name listed is not the
# sandbox's, and no request can reach the file. It is listed, and any
# access fails with EILSEQ, said once in the log; nothing is made in its
# place.

FFFD = "\ufffd"


def sandbox_names_hex(server, sid, d):
    code, out, err = server.run(sid, "cd '%s' && for f in *; do printf %%s \"$f\" | od -An -v -tx1 "
                                     "| tr -d ' \\n'; echo; done" % d)
    assert code == 0, err
    return sorted(bytes.fromhex(line) for line in out.split())


def test_a_name_that_is_not_utf8_in_the_sandbox_is_listed_and_eilseq(server, mount):
    sid = mount.sandbox_id
    code, _, err = server.run(sid, "cd %s && printf theirs >\"$(printf 'bad\\377name')\" && "
                                   "mkdir \"$(printf 'dir\\376')\" && printf ok >good" % mount.spath())
    assert code == 0, err
    bad, bad_dir = "bad" + FFFD + "name", "dir" + FFFD
    assert sorted(os.listdir(mount.p())) == sorted([bad, bad_dir, "good"])
    for n in (bad, bad_dir):
        for what, fn in (("stat", os.stat), ("lstat", os.lstat), ("listdir", os.listdir),
                         ("read", lambda p: open(p, "rb")), ("write", lambda p: open(p, "wb")),
                         ("unlink", os.unlink), ("rmdir", os.rmdir),
                         ("rename", lambda p: os.rename(p, mount.p("moved")))):
            with pytest.raises(OSError) as e:
                fn(mount.p(n))
            assert e.value.errno == errno.EILSEQ, (n, what, e.value)
    assert open(mount.p("good")).read() == "ok"
    # a new name holding U+FFFD would read back as one the sandbox could not send
    for fn in (lambda p: open(p, "w"), os.mkdir, lambda p: os.symlink("good", p),
               lambda p: os.rename(mount.p("good"), p)):
        with pytest.raises(OSError) as e:
            fn(mount.p("new" + FFFD))
        assert e.value.errno == errno.EILSEQ
    assert "new\\ufffd: a name holding U+FFFD" in mount.log()
    assert sandbox_names_hex(server, sid, mount.spath()) == sorted([b"bad\xffname", b"dir\xfe", b"good"])
    assert server.read_file(sid, mount.spath("good")) == b"ok"
    lines = [l for l in mount.log().splitlines() if "not valid UTF-8" in l]
    assert len(lines) == 2, lines
    assert any(mount.spath("bad\\ufffdname") in l and "EILSEQ" in l for l in lines), lines


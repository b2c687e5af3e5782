"""Symlinks made by an untrusted sandbox: the host's kernel resolves every
symlink of the mount on the host, so no target may lead out of the mount.
A target that stays inside DIR is shown as a relative path inside the
mount; one that leaves it is shown pointing into MNT/.osb/outside/, where
nothing exists (README.md, "Symlinks"). `-o symlinks=raw` shows targets as
stored. Also: names in a listing that the kernel cannot take are skipped.

Every link here is made in the sandbox by a command, as hostile code in
the sandbox would make it, or through the mount where that is the point.
"""

import errno
import os
import shlex
import subprocess
import tarfile
import uuid

import pytest


@pytest.fixture
def mount(make_mount):
    """No caching of names and attributes: links made in the sandbox show
    at once."""
    return make_mount(options=["attr_timeout=0", "dir_timeout=0", "negative_timeout=0"])


@pytest.fixture
def secret(tmp_path):
    """A host file no sandbox may reach: (absolute host path, its bytes)."""
    data = b"HOST-SECRET-" + uuid.uuid4().hex.encode() + b"\n"
    p = tmp_path / "host-secret"
    p.write_bytes(data)
    return str(p), data


def sh(server, sid, cmd):
    code, out, err = server.run(sid, cmd)
    assert code == 0, (cmd, out, err)
    return out


def ln(server, m, target, *link):
    """`ln -s TARGET` at the sandbox path of MNT/link..., made in the sandbox."""
    path = m.spath(*link)
    sh(server, m.sandbox_id, "mkdir -p %s && ln -s -- %s %s" % (
        shlex.quote(os.path.dirname(path)), shlex.quote(target), shlex.quote(path)))


def expect_enoent(fn, *args):
    with pytest.raises(OSError) as e:
        fn(*args)
    assert e.value.errno == errno.ENOENT, e.value


def read_bytes(p):
    with open(p, "rb") as f:
        return f.read()


def append(p, data, flags=os.O_WRONLY | os.O_APPEND):
    fd = os.open(p, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def up_to_host_root():
    return "../" * 40


# ---- links that would leave the mount ------------------------------------------------


def test_absolute_link_to_host_file_is_not_followed(server, mount, secret):
    path, data = secret
    ln(server, mount, path, "x")
    expect_enoent(read_bytes, mount.p("x"))


def test_append_through_absolute_link_leaves_host_file_alone(server, mount, secret):
    path, data = secret
    ln(server, mount, path, "x")
    expect_enoent(append, mount.p("x"), b"written from the mount\n")
    expect_enoent(append, mount.p("x"), b"written from the mount\n",
                  os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    assert read_bytes(path) == data


def test_dotdot_chain_to_host_file_is_not_followed(server, mount, secret):
    path, data = secret
    ln(server, mount, up_to_host_root() + path.lstrip("/"), "a", "b", "x")
    expect_enoent(read_bytes, mount.p("a", "b", "x"))
    expect_enoent(append, mount.p("a", "b", "x"), b"more\n",
                  os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    assert read_bytes(path) == data


def test_dot_link_then_dotdot_does_not_climb_out(server, mount):
    # MNT/d -> . makes "d/.." the mount point's parent for the host's
    # kernel; shown lexically normalised, "d/../f" is MNT/f
    beside = os.path.join(os.path.dirname(mount.p()), "beside-the-mount")
    with open(beside, "wb") as f:
        f.write(b"host file beside the mount point")
    ln(server, mount, ".", "d")
    ln(server, mount, "d/../beside-the-mount", "x")
    assert os.readlink(mount.p("x")) == "beside-the-mount"
    expect_enoent(read_bytes, mount.p("x"))
    # creating through it makes the file in the mount, not beside it
    append(mount.p("x"), b"more", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    assert read_bytes(mount.p("beside-the-mount")) == b"more"
    assert read_bytes(beside) == b"host file beside the mount point"


def test_dot_link_then_dotdot_chain_is_a_dead_end(server, mount, secret):
    path, data = secret
    ln(server, mount, ".", "d")
    ln(server, mount, "d/" + up_to_host_root() + path.lstrip("/"), "x")
    assert os.readlink(mount.p("x")) == ".osb/outside" + path
    expect_enoent(read_bytes, mount.p("x"))
    assert read_bytes(path) == data


def test_readlink_shows_outside_targets_as_dead_ends(server, mount):
    ln(server, mount, "/etc/passwd", "sub", "abs")
    ln(server, mount, "../../../etc/shadow", "rel")
    ln(server, mount, "/", "sub", "slash")
    assert os.readlink(mount.p("sub", "abs")) == "../.osb/outside/etc/passwd"
    assert os.readlink(mount.p("rel")) == ".osb/outside/etc/shadow"
    assert os.readlink(mount.p("sub", "slash")) == "../.osb/outside"
    expect_enoent(read_bytes, mount.p("sub", "abs"))
    expect_enoent(os.listdir, mount.p("sub", "slash"))


def test_link_into_control_tree_is_a_dead_end(server, mount):
    # the sandbox's own /workspace/.osb is hidden by the control tree: a
    # link to it must not reach the control files
    ln(server, mount, ".osb/ctl", "ctl-rel")
    ln(server, mount, "/workspace/.osb/run", "run-abs")
    assert os.readlink(mount.p("ctl-rel")) == ".osb/outside/workspace/.osb/ctl"
    assert os.readlink(mount.p("run-abs")) == ".osb/outside/workspace/.osb/run"
    expect_enoent(append, mount.p("ctl-rel"), b"sync\n", os.O_WRONLY | os.O_TRUNC)
    expect_enoent(append, mount.p("run-abs"), b"true\n", os.O_WRONLY | os.O_TRUNC)


# ---- links that stay inside ------------------------------------------------------------


def test_absolute_link_inside_dir_reads_sandbox_file(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("a", "f"), b"sandbox bytes")
    ln(server, mount, mount.spath("a", "f"), "l")
    ln(server, mount, mount.spath("a", "f"), "sub", "deeper", "l")
    assert os.readlink(mount.p("l")) == "a/f"
    assert os.readlink(mount.p("sub", "deeper", "l")) == "../../a/f"
    assert read_bytes(mount.p("l")) == b"sandbox bytes"
    assert read_bytes(mount.p("sub", "deeper", "l")) == b"sandbox bytes"


def test_absolute_link_to_dir_itself_and_below(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("a", "f"), b"f")
    ln(server, mount, mount.spath(), "sub", "top")
    ln(server, mount, mount.spath("a"), "sub", "a")
    assert os.readlink(mount.p("sub", "top")) == ".."
    assert os.readlink(mount.p("sub", "a")) == "../a"
    assert os.listdir(mount.p("sub", "a")) == ["f"]
    assert "a" in os.listdir(mount.p("sub", "top"))


def test_relative_link_is_shown_normalised(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("a", "f"), b"relative")
    ln(server, mount, "./../sub/../a/./f", "sub", "rel")
    ln(server, mount, "a//f/", "plain")
    assert os.readlink(mount.p("sub", "rel")) == "../a/f"
    assert os.readlink(mount.p("plain")) == "a/f"
    assert read_bytes(mount.p("sub", "rel")) == b"relative"
    assert read_bytes(mount.p("plain")) == b"relative"


def test_link_made_through_mount_is_stored_as_given(server, mount):
    os.mkdir(mount.p("sub"))
    os.symlink("/etc/hosts", mount.p("sub", "abs"))
    os.symlink("../x/./y", mount.p("sub", "rel"))
    sid = mount.sandbox_id
    assert sh(server, sid, "readlink %s" % mount.spath("sub", "abs")) == "/etc/hosts\n"
    assert sh(server, sid, "readlink %s" % mount.spath("sub", "rel")) == "../x/./y\n"
    assert os.readlink(mount.p("sub", "abs")) == "../.osb/outside/etc/hosts"
    assert os.readlink(mount.p("sub", "rel")) == "../x/y"


def test_link_size_is_the_length_readlink_shows(server, mount):
    ln(server, mount, "/etc/passwd", "sub", "x")
    shown = os.readlink(mount.p("sub", "x"))
    assert shown == "../.osb/outside/etc/passwd"
    assert os.lstat(mount.p("sub", "x")).st_size == len(shown)
    [e] = list(os.scandir(mount.p("sub")))
    assert e.stat(follow_symlinks=False).st_size == len(shown)


def test_link_size_with_default_caching(server, make_mount):
    m = make_mount()
    ln(server, m, "/etc/passwd", "x")
    os.lstat(m.p("x"))  # the kernel caches the stored length here
    shown = os.readlink(m.p("x"))
    assert shown == ".osb/outside/etc/passwd"
    assert os.lstat(m.p("x")).st_size == len(shown)


def test_raw_option_shows_stored_targets(server, make_mount, secret):
    m = make_mount(options=["symlinks=raw", "attr_timeout=0", "dir_timeout=0",
                            "negative_timeout=0"])
    path, data = secret
    ln(server, m, path, "x")
    ln(server, m, "./../sub/../a/./f", "sub", "rel")
    assert os.readlink(m.p("x")) == path
    assert os.readlink(m.p("sub", "rel")) == "./../sub/../a/./f"
    assert os.lstat(m.p("x")).st_size == len(path)
    # the trusted mode's meaning: the host resolves the target
    assert read_bytes(m.p("x")) == data


def test_bad_symlinks_option_fails_the_mount(server, make_mount):
    m = make_mount(options=["symlinks=maybe"], start=False)
    m.start(expect_fail=True)
    assert m.exit_code not in (None, 0)
    assert "symlinks must be safe or raw" in m.log()


# ---- copying a tree that holds such links -----------------------------------------------


def hostile_tree(server, m, secret_path):
    server.write_file(m.sandbox_id, m.spath("t", "plain"), b"plain file")
    ln(server, m, secret_path, "t", "abs")
    ln(server, m, up_to_host_root() + secret_path.lstrip("/"), "t", "sub", "up")
    ln(server, m, ".", "t", "d")
    ln(server, m, "d/" + up_to_host_root() + secret_path.lstrip("/"), "t", "trick")
    ln(server, m, "plain", "t", "fine")


def files_holding(root, data):
    """Regular files below root (not following links) that hold data,
    and links there that resolve to a file holding it."""
    found = []
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            try:
                if os.path.isfile(p) and data in read_bytes(p):
                    found.append(p)
            except OSError:
                pass
    return found


def copy_tree(server, m, secret, dest, *flags):
    """cp FLAGS of a hostile tree to dest: (exit code, stderr); whatever it
    copied holds nothing of the secret."""
    path, data = secret
    hostile_tree(server, m, path)
    r = subprocess.run(["cp"] + list(flags) + [m.p("t"), str(dest)], capture_output=True,
                       timeout=120)
    assert read_bytes(dest / "fine") == b"plain file"
    assert files_holding(str(dest), data) == []
    return r.returncode, r.stderr


def test_cp_a_copies_nothing_of_the_host(server, mount, secret, tmp_path):
    code, err = copy_tree(server, mount, secret, tmp_path / "copy", "-a")
    assert code == 0, err


def test_cp_dereferencing_copies_nothing_of_the_host(server, mount, secret, tmp_path):
    # fails on the dead ends (and on d -> .): what matters is what it copied
    copy_tree(server, mount, secret, tmp_path / "copy", "-rL")


def test_tar_copies_nothing_of_the_host(server, mount, secret, tmp_path):
    path, data = secret
    hostile_tree(server, mount, path)
    out = tmp_path / "t.tar"
    r = subprocess.run(["tar", "-cf", str(out), "-C", mount.p(), "t"], capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert data not in out.read_bytes()
    with tarfile.open(out) as tf:
        assert "t/fine" in tf.getnames()
    dest = tmp_path / "x"
    dest.mkdir()
    r = subprocess.run(["tar", "-xf", str(out), "-C", str(dest)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert files_holding(str(dest), data) == []


# ---- names in a listing that the kernel cannot take ------------------------------------


BAD_NAMES = {
    "empty": b"",
    "dot": b".",
    "dotdot": b"..",
    "too-long": b"n" * 256,
    "not-utf8": b"bad\xff\xfename",
}


def raw_listing(d):
    """Every name readdir gives, "." and ".." too, as bytes (ls -f: no
    sorting, no filtering)."""
    r = subprocess.run(["ls", "-f", "-a", "-1", "--quoting-style=literal", d],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return sorted(r.stdout.split(b"\n")[:-1])


@pytest.mark.parametrize("kind", sorted(BAD_NAMES))
def test_listing_skips_names_the_kernel_cannot_take(server, mount, kind):
    server.write_file(mount.sandbox_id, mount.spath("h", "real"), b"r")
    server.inject_listing(mount.sandbox_id, mount.spath("h"), [BAD_NAMES[kind]])
    assert raw_listing(mount.p("h")) == [b".", b"..", b"real"]
    assert read_bytes(mount.p("h", "real")) == b"r"


def test_listing_with_bad_names_is_logged_once(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("h", "real"), b"r")
    server.inject_listing(mount.sandbox_id, mount.spath("h"), list(BAD_NAMES.values()))
    assert sorted(os.listdir(mount.p("h"))) == ["real"]
    lines = [l for l in mount.log().splitlines() if "skipped" in l]
    assert len(lines) == 1, lines
    assert "/workspace/h" in lines[0] and " 5 " in lines[0], lines[0]


@pytest.mark.parametrize("target", ["missing", "there.txt"])
def test_a_save_over_a_link_replaces_the_link(server, mount, target):
    # the soak found it: a new file renamed over a symlink the sandbox
    # has (an editor's save over a link) failed with ENOENT
    sid = mount.sandbox_id
    server.write_file(sid, mount.spath("there.txt"), b"the target\n")
    os.symlink(target, mount.p("v.o"))
    with open(mount.p(".v.o.swp"), "wb") as f:
        f.write(b"saved\n")
    os.rename(mount.p(".v.o.swp"), mount.p("v.o"))
    assert not os.path.islink(mount.p("v.o"))
    assert open(mount.p("v.o"), "rb").read() == b"saved\n"
    with open(mount.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")
    assert server.stat(sid, mount.spath("v.o"))["size"] == 6
    code, out, _ = server.run(sid, "cd %s && [ ! -L v.o ] && cat v.o there.txt && ls -a" % mount.spath())
    lines = out.splitlines()
    assert code == 0 and lines[:2] == ["saved", "the target"], out
    assert sorted(lines[2:]) == [".", "..", "there.txt", "v.o"], out

"""Installing like sshfs: `meson install` puts osbfs, osb, the mount helper
mount.fuse.osbfs and the man pages in place; the helper drops the options
meant for mount(8), fstab and systemd; `mount -t fuse.osbfs` and fstab lines
mount (also name= mounts); the mount is listed as osbfs#ID:DIR, type
fuse.osbfs; `umount` and `osbfs -u` unmount it.

Mounts made through the helper run osbfs in the background, so these tests
track each daemon by the pid in its .osb/info and, whatever happens, unmount
every mount and stop every daemon they made.  Sanitizer reports of those
daemons go to files in the test's directory (their stderr is gone) and fail
the test."""

import contextlib
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess

import pytest

from mounthelp import OSBFS, SANITIZER_WORDS, fusermount_u, is_mounted
from osbtest import BUILD, ROOT, wait_until

HELPER = (BUILD / "fs" / "mount.fuse.osbfs").resolve()
OSBFS_ABS = OSBFS.resolve()
OSB = BUILD / "client" / "osb"
MAN_PAGES = [ROOT / "man" / "osbfs.1", ROOT / "man" / "osb.1",
             ROOT / "man" / "mount.fuse.osbfs.8"]
SBIN_HELPER = "/sbin/mount.fuse.osbfs"
DROPPED = "_netdev,nofail,x-systemd.automount,noauto,user,defaults"


def unescape(field):
    """/proc/mounts writes ' ', '\\t', '\\n', '\\\\' and '#' as \\ooo;
    findmnt -r writes \\xHH."""
    field = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), field)
    return re.sub(r"\\([0-3][0-7]{2})", lambda m: chr(int(m.group(1), 8)), field)


def proc_mounts_entry(path):
    """(source, type) of the mount at @path in /proc/mounts, or None."""
    path = os.path.realpath(path)
    with open("/proc/mounts") as f:
        for line in f:
            src, mnt, fstype = line.split()[:3]
            if unescape(mnt) == path:
                return unescape(src), fstype
    return None


def findmnt_osbfs():
    """{target: source} of the mounts `findmnt -t fuse.osbfs` lists."""
    r = subprocess.run(["findmnt", "-t", "fuse.osbfs", "-n", "-r", "-o", "TARGET,SOURCE"],
                       capture_output=True, text=True, timeout=30)
    out = {}
    for line in r.stdout.splitlines():
        target, source = line.split(" ", 1)
        out[unescape(target)] = unescape(source)
    return out


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie waits for a parent that is not us: it has exited
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


class Daemons:
    """The mounts a test makes through the helper (osbfs in the
    background): connection options for them, and the cleanup."""

    def __init__(self, server, workdir):
        self.server = server
        self.workdir = workdir
        self.keyfile = os.path.join(workdir, "key")
        with open(self.keyfile, "w") as f:
            f.write(server.api_key + "\n")
        os.chmod(self.keyfile, 0o600)
        self.mounts = {}   # path -> daemon pid (None until known)
        self.env = dict(os.environ)
        for k in ("OPEN_SANDBOX_API_KEY", "OPENSANDBOX_API_KEY",
                  "OPEN_SANDBOX_DOMAIN", "OPENSANDBOX_DOMAIN"):
            self.env.pop(k, None)
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            prev = self.env.get(k, "")
            self.env[k] = (prev + ":" if prev else "") + "log_path=" + \
                os.path.join(workdir, k.split("_")[0].lower())

    def connection(self):
        """What an fstab line must carry: the server and the key file."""
        return {"domain": "%s:%d" % (self.server.host, self.server.port),
                "api_key_file": self.keyfile}

    def local_options(self, n):
        """Mount number @n's own cache dir and log file (and TLS)."""
        opts = ["cache_dir=" + os.path.join(self.workdir, "cache%d" % n),
                "log_file=" + os.path.join(self.workdir, "log%d" % n)]
        if self.server.scheme == "https":
            opts += ["protocol=https", "insecure"]
        return opts

    def options(self, n, *extra):
        conn = ["%s=%s" % kv for kv in self.connection().items()]
        return ",".join(conn + self.local_options(n) + list(extra))

    def mountpoint(self, n):
        p = os.path.join(self.workdir, "mnt%d" % n)
        os.makedirs(p, exist_ok=True)
        return p

    def run(self, argv, path):
        """Runs @argv (a mount command) for the mount at @path; returns
        the completed process, and tracks the daemon if it mounted."""
        self.mounts[path] = None
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=self.env)
        if is_mounted(path):
            with open(os.path.join(path, ".osb", "info")) as f:
                self.mounts[path] = json.load(f)["pid"]
        return r

    def pid(self, path):
        return self.mounts[path]

    def wait_gone(self, path, timeout=60):
        """The daemon of @path has exited (it was unmounted)."""
        pid = self.mounts.get(path)
        if pid:
            wait_until(lambda: not pid_alive(pid), timeout, "osbfs (pid %d) to exit" % pid)

    def sanitizer_reports(self):
        text = ""
        for p in glob.glob(os.path.join(self.workdir, "asan*")) + \
                glob.glob(os.path.join(self.workdir, "ubsan*")):
            with open(p, errors="replace") as f:
                text += f.read()
        return text if any(w in text for w in SANITIZER_WORDS) else None

    def cleanup(self):
        for path, pid in self.mounts.items():
            if is_mounted(path):
                fusermount_u(path, lazy=True)
            if pid and pid_alive(pid):
                try:
                    wait_until(lambda: not pid_alive(pid), 30, "osbfs to exit")
                except AssertionError:
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def daemons(server, workdir):
    d = Daemons(server, workdir)
    try:
        yield d
    finally:
        d.cleanup()
    rep = d.sanitizer_reports()
    assert rep is None, "sanitizer report of a background osbfs:\n" + rep[-8000:]


@contextlib.contextmanager
def helper_in_sbin():
    """mount(8) runs /sbin/mount.fuse.<subtype>: a link there to the
    build's helper while the block runs, removed afterwards, always."""
    if os.geteuid() != 0:
        pytest.skip("mount(8) of a fuse.osbfs line needs root here (a link in /sbin)")
    if os.path.lexists(SBIN_HELPER):
        target = os.readlink(SBIN_HELPER) if os.path.islink(SBIN_HELPER) else ""
        if not target.startswith(str(ROOT)):
            pytest.skip("%s is installed; not replaced by a test" % SBIN_HELPER)
        os.unlink(SBIN_HELPER)  # left by an interrupted run of this test
    os.symlink(str(HELPER), SBIN_HELPER)
    try:
        yield
    finally:
        os.unlink(SBIN_HELPER)


def build_options():
    r = subprocess.run(["meson", "introspect", str(BUILD), "--buildoptions"],
                       capture_output=True, text=True, timeout=60, check=True)
    return {o["name"]: o["value"] for o in json.loads(r.stdout)}


# -- meson install ----------------------------------------------------------------


def test_meson_install_puts_exactly_these_files(tmp_path):
    dest = tmp_path / "dest"
    r = subprocess.run(["meson", "install", "-C", str(BUILD), "--no-rebuild",
                        "--destdir", str(dest)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    o = build_options()
    prefix = str(dest) + o["prefix"]
    bindir = os.path.join(prefix, o["bindir"])
    sbindir = os.path.join(prefix, o["sbindir"])
    mandir = os.path.join(prefix, o["mandir"])
    datadir = os.path.join(prefix, o["datadir"])
    want = {os.path.join(bindir, "osbfs"), os.path.join(bindir, "osb"),
            os.path.join(sbindir, "mount.fuse.osbfs"),
            os.path.join(mandir, "man1", "osbfs.1"), os.path.join(mandir, "man1", "osb.1"),
            os.path.join(mandir, "man8", "mount.fuse.osbfs.8"),
            os.path.join(datadir, "bash-completion", "completions", "osb"),
            os.path.join(datadir, "zsh", "site-functions", "_osb")}
    got = {os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs}
    assert got == want
    r = subprocess.run([os.path.join(bindir, "osbfs"), "--version"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("osbfs "), r
    r = subprocess.run([os.path.join(sbindir, "mount.fuse.osbfs"), "--version"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "mount.fuse.osbfs" in r.stdout, r
    r = subprocess.run([os.path.join(bindir, "osb"), "--version"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("osb "), r


@pytest.mark.parametrize("page", MAN_PAGES, ids=lambda p: p.name)
def test_man_page_renders_without_warnings(page):
    if not shutil.which("man"):
        pytest.skip("man (man-db) is not installed (scripts/deps installs it)")
    r = subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, MANWIDTH="80"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"):
        assert section in r.stdout


def rendered_sections(page):
    """{SECTION: [lines]} of @page as man(1) shows it, 80 columns wide."""
    r = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="", PAGER="cat"))
    assert r.returncode == 0, r.stderr
    out, name = {}, None
    for line in r.stdout.splitlines()[1:-1]:  # not the header and footer
        if line and not line[0].isspace():
            name = line.strip()
            out[name] = []
        elif name:
            out[name].append(line)
    return out


def items(lines):
    """(tag, body) of each tagged paragraph: a tag at 7 columns (its lines),
    the body at 14."""
    out, tag, body = [], None, None
    for line in lines + [""]:
        indent = len(line) - len(line.lstrip())
        if line.strip() and indent == 7 and body is None:
            tag = (tag + " " if tag else "") + line.strip()
        elif line.strip() and indent == 7:
            out.append((tag, body))
            tag, body = line.strip(), None
        elif line.strip() and tag is not None:
            body = (body + " " if body else "") + line.strip()
        elif not line.strip() and tag is not None:
            out.append((tag, body))
            tag, body = None, None
    return out


@pytest.mark.parametrize("page", MAN_PAGES, ids=lambda p: p.name)
def test_man_page_files_stay_in_files(page):
    """No entry of FILES has strayed into OPTIONS (a path as an option's
    tag, or a FILES entry's words in an option's text), and every entry
    of FILES and ENVIRONMENT says what it is."""
    if not shutil.which("man"):
        pytest.skip("man (man-db) is not installed (scripts/deps installs it)")
    sec = rendered_sections(page)
    files = items(sec.get("FILES", []))
    options = " ".join(" ".join(l.split()) for l in sec.get("OPTIONS", []))
    for tag, _ in items(sec.get("OPTIONS", [])):
        assert not tag.startswith(("/", "~")), "a file among the options: %s" % tag
    for tag, body in files:
        assert body, "%s has no text" % tag
        assert " ".join(body.split()[:5]) not in options, "FILES text among the options: %s" % body
    for tag, body in items(sec.get("ENVIRONMENT", [])):
        assert body, "%s has no text" % tag


def test_osb_man_page_says_osbfs_reads_the_settings_file_by_default():
    text = " ".join(" ".join(l.split()) for l in rendered_sections(MAN_PAGES[1])["FILES"])
    assert "osbfs(1) reads it too (the same file, unless its option config=FILE names another)" in text


def test_osbfs_man_page_has_every_option():
    r = subprocess.run([str(OSBFS), "--help"], capture_output=True, text=True, timeout=30)
    names = re.findall(r"^    ([a-z_]+)(?:=\.\.\.)? ", r.stdout, re.M)
    assert len(names) > 20, r.stdout
    page = (ROOT / "man" / "osbfs.1").read_text()
    missing = [n for n in names if n not in page]
    assert not missing, missing


# -- the helper -------------------------------------------------------------------


@pytest.mark.parametrize("source,passed", [
    ("abc", "abc"), ("abc:/srv", "abc:/srv"), (":/srv", ":/srv"),
    ("osbfs#abc:/srv", "abc:/srv"), ("osbfs", None), ("osbfs:/srv", ":/srv"),
    ("osbfs#osbfs", None), ("osbfs#:/srv", ":/srv"),
])
def test_helper_source_forms(source, passed, tmp_path):
    r = subprocess.run([str(HELPER), source, str(tmp_path), "-fv", "-o", "ro"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    want = "mount.fuse.osbfs: %s %s%s -o ro\n" % (
        OSBFS_ABS, passed + " " if passed else "", tmp_path)
    assert r.stderr == want


def test_helper_drops_what_mount_fuse_drops(tmp_path):
    opts = "rw,%s,x-foo=1,X-mount.mkdir,comment=x,users,nouser,auto,attr_timeout=2s,a\\,b" % DROPPED
    r = subprocess.run([str(HELPER), "abc", str(tmp_path), "-sfnv", "-t", "fuse.osbfs",
                        "-o", opts], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "mount.fuse.osbfs: %s abc %s -o rw,attr_timeout=2s,a\\,b\n" % (
        OSBFS_ABS, tmp_path)


def test_helper_setuid_is_not_passed(tmp_path):
    r = subprocess.run([str(HELPER), "abc", str(tmp_path), "-fv", "-o", "setuid=nobody,ro"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert r.stderr.endswith(" -o ro as nobody\n"), r.stderr


def test_helper_bad_usage():
    r = subprocess.run([str(HELPER), "abc"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "usage: mount.fuse.osbfs" in r.stderr


def test_helper_mounts_dropping_options(daemons, make_sandbox, server):
    """The helper run by hand (as mount(8) would): the dropped options do
    not reach osbfs (libfuse would refuse them), the rest do."""
    sid = make_sandbox()
    mnt = daemons.mountpoint(0)
    r = daemons.run([str(HELPER), sid, mnt, "-o",
                     daemons.options(0, DROPPED, "attr_timeout=3s")], mnt)
    assert r.returncode == 0, r.stderr
    assert proc_mounts_entry(mnt) == ("osbfs#%s:/workspace" % sid, "fuse.osbfs")
    with open(os.path.join(mnt, ".osb", "info")) as f:
        assert json.load(f)["sandbox_id"] == sid
    with open(os.path.join(mnt, "f.txt"), "w") as f:
        f.write("through the helper")
    r = subprocess.run([str(OSBFS), "-u", mnt], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not is_mounted(mnt)
    daemons.wait_gone(mnt)
    assert server.read_file(sid, "/workspace/f.txt") == b"through the helper"


def test_osbfs_lists_itself_as_osbfs_id_dir(make_mount, make_sandbox):
    """Also with a ',' (escaped for libfuse) and a ' ' in DIR."""
    sid = make_sandbox()
    m = make_mount(sandbox_id=sid, sdir="/workspace/a,b c")
    want = "osbfs#%s:/workspace/a,b c" % sid
    assert proc_mounts_entry(m.path) == (want, "fuse.osbfs")
    assert findmnt_osbfs().get(os.path.realpath(m.path)) == want


# -- mount(8) ---------------------------------------------------------------------


def test_mount_t_fuse_osbfs(daemons, make_sandbox):
    sid = make_sandbox()
    mnt = daemons.mountpoint(0)
    with helper_in_sbin():
        r = daemons.run(["mount", "-t", "fuse.osbfs", sid + ":/workspace", mnt,
                         "-o", daemons.options(0, "_netdev,nofail")], mnt)
    assert r.returncode == 0, r.stdout + r.stderr
    assert proc_mounts_entry(mnt) == ("osbfs#%s:/workspace" % sid, "fuse.osbfs")
    assert findmnt_osbfs().get(os.path.realpath(mnt)) == "osbfs#%s:/workspace" % sid
    assert os.listdir(mnt) is not None
    r = subprocess.run(["umount", mnt], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not is_mounted(mnt)
    daemons.wait_gone(mnt)


def readme_fstab():
    """The fstab lines of README's Installing section."""
    text = (ROOT / "README.md").read_text()
    block = text.split("# /etc/fstab\n", 1)[1].split("```", 1)[0]
    return [l.split() for l in block.splitlines() if l.strip()]


def test_fstab_lines_by_id_and_by_name(daemons, make_sandbox, cleanup_sandboxes, server, workdir):
    """README's two fstab lines as printed, but for this server, its key
    file and these mount points: one by sandbox id (as /proc/mounts shows
    a mount), one by name= (source "osbfs": no id)."""
    sid = make_sandbox()
    by_id, by_name = daemons.mountpoint(1), daemons.mountpoint(2)
    (src1, _, type1, opts1, _, _), (src2, _, type2, opts2, _, _) = readme_fstab()
    assert src1 == "osbfs#ID:/workspace" and src2 == "osbfs"
    assert "name=myproject" in opts2.split(",")
    subst = dict(daemons.connection(), name="fstab-%d" % os.getpid())

    def ours(opts, n):
        out = []
        for o in opts.split(","):
            key = o.split("=", 1)[0]
            out.append("%s=%s" % (key, subst[key]) if key in subst else o)
        return ",".join(out + daemons.local_options(n))
    fstab = os.path.join(workdir, "fstab")
    with open(fstab, "w") as f:
        f.write("# osbfs mounts\n")
        f.write("%s  %s  %s  %s  0  0\n" % (src1.replace("ID", sid), by_id, type1, ours(opts1, 1)))
        f.write("%s  %s  %s  %s  0  0\n" % (src2, by_name, type2, ours(opts2, 2)))
    with helper_in_sbin():
        r1 = daemons.run(["mount", "--fstab", fstab, by_id], by_id)
        r2 = daemons.run(["mount", "--fstab", fstab, by_name], by_name)
    assert r1.returncode == 0, r1.stdout + r1.stderr
    assert r2.returncode == 0, r2.stdout + r2.stderr
    with open(os.path.join(by_name, ".osb", "info")) as f:
        named = json.load(f)["sandbox_id"]
    cleanup_sandboxes.append(named)
    assert named != sid
    listed = findmnt_osbfs()
    assert listed.get(os.path.realpath(by_id)) == "osbfs#%s:/workspace" % sid
    assert listed.get(os.path.realpath(by_name)) == "osbfs#%s:/workspace" % named
    assert proc_mounts_entry(by_name) == ("osbfs#%s:/workspace" % named, "fuse.osbfs")
    st, _, b = server.request("GET", "/v1/sandboxes/" + named)
    assert st == 200 and b["metadata"].get("name") == subst["name"], b
    # one unmounted by umount(8), the other by osbfs -u
    r = subprocess.run(["umount", by_id], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(OSBFS), "-u", by_name], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not is_mounted(by_id) and not is_mounted(by_name)
    daemons.wait_gone(by_id)
    daemons.wait_gone(by_name)


# -- setup as README prints it ----------------------------------------------------


def readme_block(after):
    """The first ```sh block of README.md after the line @after."""
    text = (ROOT / "README.md").read_text()
    rest = text[text.index(after):]
    return rest.split("```sh\n", 1)[1].split("```", 1)[0]


def source_copy(dest):
    """The repository's files (as they are in the work tree) under @dest."""
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                       timeout=60, check=True)
    for rel in r.stdout.decode().split("\0"):
        if rel and os.path.isfile(ROOT / rel):
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(ROOT / rel, os.path.join(dest, rel))


def test_readme_installing_block_after_try(tmp_path):
    """The Installing block, run where ./scripts/try has made build/ (with
    meson's default prefix and a debug build): it must still install
    the mount helper where mount(8) looks, a release build.  Run as
    printed in a copy of the tree, the install into a DESTDIR (the only
    change: `--destdir`, and no sudo for root)."""
    src = tmp_path / "src"
    source_copy(src)
    # what ./scripts/build, run by ./scripts/try, configures
    subprocess.run(["meson", "setup", "build", "-Dwerror=true"], cwd=src, check=True,
                   capture_output=True, timeout=300)
    lines = [l for l in readme_block("## Installing").splitlines() if l.strip()]
    assert len(lines) == 2 and lines[1].startswith("sudo meson install "), lines
    r = subprocess.run(["sh", "-ec", lines[0]], cwd=src, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    install = lines[1][len("sudo "):] if os.geteuid() == 0 else lines[1]
    dest = tmp_path / "dest"
    r = subprocess.run(["sh", "-ec", install + " --destdir " + shlex.quote(str(dest))], cwd=src,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for f in ("usr/bin/osbfs", "usr/bin/osb", "usr/sbin/mount.fuse.osbfs",
              "usr/share/man/man1/osbfs.1", "usr/share/man/man1/osb.1",
              "usr/share/man/man8/mount.fuse.osbfs.8"):
        assert (dest / f).is_file(), f
    built = re.search(r"ninja -C (\S+)", lines[0]).group(1)
    r = subprocess.run(["meson", "introspect", built, "--buildoptions"], cwd=src,
                       capture_output=True, text=True, timeout=60, check=True)
    opts = {o["name"]: o["value"] for o in json.loads(r.stdout)}
    assert (opts["prefix"], opts["buildtype"]) == ("/usr", "release")


def fake_bin(tmp_path, node_version=None):
    """A PATH for scripts/deps: the few tools it runs, an apt-get that
    refuses (nothing is installed by a test), and a node of
    @node_version (None: no node, no npm)."""
    b = tmp_path / "bin"
    b.mkdir()
    for tool in ("sh", "dpkg-query", "grep", "id", "dirname", "cat", "sed", "sort", "npm", "tsc"):
        path = shutil.which(tool)
        if path and (tool not in ("npm", "tsc") or node_version):
            os.symlink(path, b / tool)
    (b / "apt-get").write_text("#!/bin/sh\necho 'apt-get run by scripts/deps' >&2\nexit 1\n")
    if node_version:
        (b / "node").write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo v%s; exit 0; }\n"
                                "exec %s \"$@\"\n" % (node_version, shutil.which("node")))
    for f in b.iterdir():
        if not f.is_symlink():
            f.chmod(0o755)
    return {"PATH": str(b), "HOME": str(tmp_path)}


def test_deps_asks_for_node_only_for_the_tests(tmp_path):
    env = fake_bin(tmp_path)
    r = subprocess.run([str(ROOT / "scripts" / "deps")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert (r.returncode, r.stderr) == (0, ""), r.stdout + r.stderr
    r = subprocess.run([str(ROOT / "scripts" / "deps"), "--test"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Node.js 20.18.1 or later and npm (no node, no npm here)" in r.stderr, r.stderr
    assert "Debian 12's\n  own nodejs package is 18.19" in r.stderr, r.stderr


def test_deps_says_debian_12s_node_is_too_old_for_the_sdk(tmp_path):
    if not shutil.which("node"):
        pytest.skip("no node here")
    env = fake_bin(tmp_path, node_version="18.19.0")
    r = subprocess.run([str(ROOT / "scripts" / "deps"), "--test"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and "(node v18.19.0 here)" in r.stderr, r.stdout + r.stderr


def test_try_keep_ends_with_what_a_second_terminal_needs(tmp_path):
    """./scripts/try --keep as printed; then its closing lines, pasted
    into a shell that has nothing of try's environment, reach the
    sandbox through osb and the mount, and its stop line stops both."""
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (fake_bin(tmp_path, node_version=None)["PATH"], env["PATH"])
    before = set(glob.glob("/tmp/osbfs-try.*"))
    p = subprocess.Popen([str(ROOT / "scripts" / "try"), "--keep"], cwd=str(tmp_path), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out[-4000:]
        assert re.search(r"^\$ osb exec [0-9a-f-]+ -- cat /workspace/hello.py", out.replace("\033[1m", ""),
                         re.M), out[-4000:]
        paste = out.split("In another terminal:\n", 1)[1].split("To stop them:\n", 1)
        lines = [l for l in paste[0].splitlines() if l.strip()]
        stop = paste[1].strip()
        names = [l.split("=", 1)[0][len("export "):] for l in lines if l.startswith("export ")]
        assert names == ["OPEN_SANDBOX_DOMAIN", "OPEN_SANDBOX_API_KEY", "SANDBOX_ID", "MNT", "PATH"], lines
        bare = {"HOME": str(tmp_path), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        r = subprocess.run(["bash", "-ec", "\n".join(lines)], env=bare, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        # osb exec's listing of /workspace, then ls of the mount: the same files
        assert r.stdout.count("hello.py") == 2 and r.stdout.count("made-in-sandbox.txt") == 2, r.stdout
        r = subprocess.run(["bash", "-ec", stop], env=bare, capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stdout + r.stderr
        mnt = [l.split("=", 1)[1] for l in lines if l.startswith("export MNT=")][0]
        assert not is_mounted(mnt) and not os.path.exists(os.path.dirname(mnt))
        wait_until(lambda: p_group_gone(p.pid), 30, "the local server to stop")
    finally:
        for work in set(glob.glob("/tmp/osbfs-try.*")) - before:
            if is_mounted(os.path.join(work, "mnt")):
                fusermount_u(os.path.join(work, "mnt"), lazy=True)
        if p.poll() is None:
            p.kill()
            p.wait()
        if not p_group_gone(p.pid):
            os.killpg(p.pid, signal.SIGKILL)
        for work in set(glob.glob("/tmp/osbfs-try.*")) - before:
            shutil.rmtree(work, ignore_errors=True)


def p_group_gone(pgid):
    """No process is left in the process group @pgid (try and the server
    it started; the osbfs daemon leaves it)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False

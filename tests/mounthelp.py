"""Mounting osbfs for the tests: the Mount handle (the `mount` and
`make_mount` fixtures built on it are in conftest.py).

A Mount runs `build/fs/osbfs -f` on a sandbox of a LocalServer, waits for
the mount with a deadline, and on stop unmounts, waits for the daemon to
exit, and fails if it exited with another status than expected (0 unless
the test says otherwise) or its stderr holds a sanitizer report. On a
failure the exact command line to reproduce is in the error.
"""

import os
import shlex
import signal
import subprocess
import tempfile
import time

from osbtest import BUILD, wait_until

OSBFS = BUILD / "fs" / "osbfs"

SANITIZER_WORDS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "ERROR: ThreadSanitizer",
    "WARNING: ThreadSanitizer",
    "SUMMARY: UndefinedBehaviorSanitizer",
)


def ctl(m, verb):
    """Writes @verb to the mount's .osb/ctl."""
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write(verb + "\n")


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 4 and parts[4] == path:
                return True
    return False


def fsync_path(path):
    """fsync(2) of a file: osbfs returns only once the sandbox has it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_fsync(path, data=b"new\n" * 1000):
    """A save in place: the file truncated, @data written, fsync(2)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def assert_conflict_kept(server, m, name, ours, theirs):
    """After a conflict on @name in the mount's top directory: the
    sandbox holds @ours under the name and @theirs under one
    NAME.conflict-... beside it."""
    sid = m.sandbox_id
    assert server.read_file(sid, m.spath(name)) == ours
    code, out, _ = server.run(sid, "ls %s" % m.spath())
    aside = [n for n in out.split() if n.startswith(name + ".conflict-")]
    assert len(aside) == 1, out
    assert server.read_file(sid, m.spath(aside[0])) == theirs


def cache_used(m, data_only=False):
    """Bytes mount @m's cache dir holds on disk; only the files' data
    (the cap's object: not the journal, which keeps 1 MiB allocated) if
    @data_only."""
    return sum(os.lstat(os.path.join(r, n)).st_blocks * 512
               for r, _, fs in os.walk(m.cache_dir) for n in fs
               if not data_only or os.path.basename(r) == "files")


def fusermount_u(path, lazy=False):
    args = ["fusermount3", "-u"] + (["-z"] if lazy else []) + [path]
    return subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode


class Mount:
    """One osbfs daemon in the foreground."""

    def __init__(self, server, sandbox_id=None, sdir=None, options=(), cache_dir=None,
                 workdir=None, env=None, mountpoint=None, api_key=None):
        self.server = server
        self.sandbox_id = sandbox_id
        self.sdir = sdir
        self.options = list(options)
        self.workdir = workdir or tempfile.mkdtemp(prefix="osbfs-test-")
        self.path = mountpoint or os.path.join(self.workdir, "mnt")
        self.cache_dir = cache_dir or os.path.join(self.workdir, "cache")
        self.log_path = os.path.join(self.workdir, "osbfs-%d.log" % int(time.time() * 1000))
        self.env = dict(os.environ)
        self.env.pop("OPEN_SANDBOX_API_KEY", None)
        self.env.pop("OPENSANDBOX_API_KEY", None)
        key = api_key if api_key is not None else server.api_key
        if key:
            self.env["OPEN_SANDBOX_API_KEY"] = key
        self.env.update(env or {})
        self.proc = None
        self.exit_code = None

    def argv(self):
        opts = ["domain=%s:%d" % (self.server.host, self.server.port),
                "cache_dir=%s" % self.cache_dir]
        if self.server.url.startswith("https"):
            opts.append("protocol=https")
        opts += self.options
        src = (self.sandbox_id or "") + (":" + self.sdir if self.sdir else "")
        argv = [str(OSBFS), "-f", "-o", ",".join(opts)]
        if src:
            argv.append(src)
        argv.append(self.path)
        return argv

    def repro(self):
        return "OPEN_SANDBOX_API_KEY=... " + " ".join(shlex.quote(a) for a in self.argv())

    def start(self, timeout=60, expect_fail=False):
        os.makedirs(self.path, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=self._log, stderr=self._log,
                                     stdin=subprocess.DEVNULL, env=self.env)
        try:
            wait_until(lambda: is_mounted(self.path) or self.proc.poll() is not None, timeout,
                       "osbfs to mount %s or exit" % self.path)
        except AssertionError:
            self.kill9()
            raise RuntimeError("osbfs did not mount within %ss:\n%s\nrepro: %s"
                               % (timeout, self.log(), self.repro()))
        if is_mounted(self.path):
            if not self.sandbox_id:
                self.sandbox_id = self._sandbox_from_log()
            return self
        self.exit_code = self.proc.returncode
        self._reaped()
        if expect_fail:
            self._check_sanitizer()
            return self
        raise RuntimeError("osbfs exited with %d before mounting:\n%s\nrepro: %s"
                           % (self.exit_code, self.log(), self.repro()))

    def _sandbox_from_log(self):
        for line in self.log().splitlines():
            if "mounted sandbox " in line:
                return line.split("mounted sandbox ", 1)[1].split(":", 1)[0].strip()
        return None

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def sanitizer_report(self):
        text = self.log()
        for w in SANITIZER_WORDS:
            if w in text:
                return text
        return None

    def _reaped(self):
        """The daemon has exited and been waited for: let go of it."""
        self.proc = None
        self._log.close()
        if is_mounted(self.path):
            fusermount_u(self.path, lazy=True)

    def _check_sanitizer(self):
        rep = self.sanitizer_report()
        if rep:
            raise AssertionError("sanitizer report in osbfs output:\n%s\nrepro: %s"
                                 % (rep[-8000:], self.repro()))

    def stop(self, timeout=120, check=True, expect_status=0):
        """Unmounts (unless it is already), waits for the daemon by its pid
        and returns its exit status.  With @check, fails if the daemon does
        not exit within @timeout, exits with another status than
        @expect_status, or left a sanitizer report.  The default is a clean
        exit: a test that expects another status says so here, one that
        kills the daemon uses kill9()."""
        if self.proc is None:
            return self.exit_code
        if is_mounted(self.path):
            fusermount_u(self.path)
        try:
            self.exit_code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.exit_code = self.proc.wait(10)
            self._reaped()
            if check:
                raise RuntimeError("osbfs did not exit within %ss after unmount:\n%s\nrepro: %s"
                                   % (timeout, self.log(), self.repro()))
            return self.exit_code
        self._reaped()
        if check:
            self._check_sanitizer()
            if self.exit_code != expect_status:
                raise AssertionError("osbfs exited with status %s at unmount, not %s:\n%s\nrepro: %s"
                                     % (self.exit_code, expect_status, self.log()[-8000:],
                                        self.repro()))
        return self.exit_code

    def kill9(self):
        """kill -9 the daemon (no flush), then clear the dead mount."""
        if self.proc is not None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.exit_code = self.proc.wait(10)
            self._reaped()
        elif is_mounted(self.path):
            fusermount_u(self.path, lazy=True)

    def p(self, *parts):
        return os.path.join(self.path, *parts)

    def spath(self, *parts):
        """The sandbox path of a file in the mount."""
        base = self.sdir or "/workspace"
        return os.path.join(base, *parts)


"""Helpers for the `osb` suites (tests/test_1*.py); no tests here.

Osb runs build/client/osb against a LocalServer the way a user would: the
domain and key come from the environment under the official SDKs' names,
the sandbox from OPEN_SANDBOX_ID.  Every run is killed (by process group)
if it outlives its timeout, and fails the check if its stderr holds a
sanitizer report.  A failed check quotes the command line that reproduces
it (without the key).

Peak RSS.  os.wait4's ru_maxrss for a child that Python forked is useless:
Linux carries the pre-exec address space's high-water mark (the whole
Python interpreter's, shared with a vfork child) into the exec'd program's
figure.  So a measured run goes through a small helper that makes itself
a child subreaper, starts osb from /bin/sh (a small address space) in the
background, and os.wait4s it once sh has exited and osb has been
reparented to it: ru_maxrss is then osb's own peak (within sh's ~1.5 MiB).

The fixtures built on these (osb, osbc, workdir, ...) are in conftest.py;
this module needs no pytest: bench/transfer.py imports it too.
"""

import hashlib
import json
import os
import queue
import shutil
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref

from osbtest import BUILD, http_request

OSB = BUILD / "client" / "osb"
TEST_THREADS = BUILD / "client" / "test_threads"
# where a sandbox may write (the rest of its tree is read-only)
W = "/workspace"

SANITIZER_WORDS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "SUMMARY: UndefinedBehaviorSanitizer",
    "WARNING: ThreadSanitizer",
)

# argv[1]: the fd to report on ("PID\n", then "EXIT MAXRSS_KIB\n"); argv[2:]:
# the command.  The command keeps this helper's stdin, stdout and stderr.
RSS_HELPER = r"""
import ctypes, os, subprocess, sys
report = int(sys.argv[1])
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("rss helper: prctl(PR_SET_CHILD_SUBREAPER): %s" % os.strerror(ctypes.get_errno()))
r, w = os.pipe()
# an asynchronous list gets /dev/null as stdin unless told otherwise
sh = subprocess.Popen(["/bin/sh", "-c", 'exec 3<&0; "$@" <&3 3<&- & echo $! >&%d' % w, "sh"] + sys.argv[2:],
                      pass_fds=(w,))
os.close(w)
with os.fdopen(r) as f:
    pid = int(f.read())
sh.wait()
os.write(report, b"%d\n" % pid)
_, status, ru = os.wait4(pid, 0)
os.write(report, b"%d %d\n" % (os.waitstatus_to_exitcode(status), ru.ru_maxrss))
"""


class CheckFailed(AssertionError):
    pass


def sanitized_build():
    """True when BUILD was configured with -Db_sanitize=...: memory
    figures are then the sanitizer's, not ours."""
    try:
        with open(BUILD / "meson-info" / "intro-buildoptions.json") as f:
            opts = json.load(f)
    except (OSError, ValueError):
        return "asan" in str(BUILD)
    return any(o.get("name") == "b_sanitize" and o.get("value") not in ("none", "", None) for o in opts)


def check_sanitizer(what, stderr):
    for w in SANITIZER_WORDS:
        if w in stderr:
            raise CheckFailed("sanitizer report from %s:\n%s" % (what, stderr[-8000:]))


class Result:
    def __init__(self, argv, env_shown, rc, out, err, maxrss_kib, seconds):
        self.argv = argv
        self.env_shown = env_shown
        self.rc = rc
        self.out_bytes = out
        self.err = err
        self.maxrss_kib = maxrss_kib  # None unless measured
        self.seconds = seconds

    @property
    def out(self):
        return self.out_bytes.decode("utf-8", "replace")

    def lines(self):
        return self.out.splitlines()

    def repro(self):
        env = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in self.env_shown.items())
        return env + " " + " ".join(shlex.quote(str(a)) for a in self.argv)

    def describe(self):
        return "%s\n  exit %s after %.2fs\n  stdout: %r\n  stderr: %r" % (
            self.repro(), self.rc, self.seconds, self.out[-2000:], self.err[-4000:])


def _wait_and_kill_late(proc, timeout):
    """Waits for @proc; kills its process group if it outlives @timeout.
    The group is signalled only while @proc is unreaped, so its id cannot
    have been reused. Returns True if it had to be killed."""
    lock = threading.Lock()
    state = {"done": False, "killed": False}

    def on_timeout():
        with lock:
            if not state["done"]:
                state["killed"] = True
                os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, on_timeout)
    timer.start()
    try:
        while True:
            try:
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
                break
            except InterruptedError:
                continue
        with lock:
            state["done"] = True
    finally:
        timer.cancel()
    proc.wait()
    return state["killed"]


def spawn(argv, env, stdin=None, stdout=None, timeout=120, measure_rss=False):
    """Runs @argv. stdin: bytes, an open file, or None (/dev/null); stdout:
    an open file, or None to capture. Returns (rc, stdout bytes, stderr
    text, peak RSS in KiB or None, seconds, killed)."""
    feed = stdin if isinstance(stdin, (bytes, bytearray)) else None
    report_r = report_w = None
    run_argv = list(argv)
    pass_fds = ()
    if measure_rss:
        report_r, report_w = os.pipe()
        run_argv = [sys.executable, "-c", RSS_HELPER, str(report_w)] + run_argv
        pass_fds = (report_w,)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(run_argv, env=env, pass_fds=pass_fds, start_new_session=True,
                                stdin=subprocess.PIPE if feed is not None else (stdin or subprocess.DEVNULL),
                                stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE)
    finally:
        if report_w is not None:
            os.close(report_w)
    out, err, report = [], [], []
    threads = [threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)]
    if stdout is None:
        threads.append(threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True))
    if report_r is not None:
        def read_report():
            with os.fdopen(report_r, "rb") as f:
                report.append(f.read())
        threads.append(threading.Thread(target=read_report, daemon=True))
    if feed is not None:
        def writer():
            try:
                proc.stdin.write(feed)
            except BrokenPipeError:
                pass
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
        threads.append(threading.Thread(target=writer, daemon=True))
    for t in threads:
        t.start()
    killed = _wait_and_kill_late(proc, timeout)
    seconds = time.monotonic() - t0
    for t in threads:
        t.join(30)
    for f in (proc.stdout, proc.stderr):
        if f:
            f.close()
    rc, maxrss = proc.returncode, None
    errtext = (err[0] if err else b"").decode("utf-8", "replace")
    if measure_rss and not killed:
        lines = (report[0] if report else b"").split(b"\n")
        if len(lines) < 2 or len(lines[1].split()) != 2:
            raise CheckFailed("rss helper failed (exit %s): %s" % (rc, errtext[-2000:]))
        rc, maxrss = (int(x) for x in lines[1].split())
    return rc, out[0] if out else b"", errtext, maxrss, seconds, killed


class Osb:
    """`osb` bound to a server, a key and optionally a sandbox."""

    def __init__(self, server, sandbox=None, api_key=None, env=None, binary=OSB):
        self.server = server
        self.sandbox = sandbox
        self.api_key = server.api_key if api_key is None else api_key
        self.extra_env = dict(env or {})
        self.binary = binary
        # osb keeps sandbox endpoints in its cache directory: one of its
        # own per Osb, so that what one test leaves there meets no other
        self.cache_home = tempfile.mkdtemp(prefix="osb-cache-")
        weakref.finalize(self, shutil.rmtree, self.cache_home, True)

    def env(self, extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPEN_SANDBOX_", "OPENSANDBOX_"))}
        env["OPEN_SANDBOX_DOMAIN"] = self.server.url
        env["XDG_CACHE_HOME"] = self.cache_home
        if self.api_key:
            env["OPEN_SANDBOX_API_KEY"] = self.api_key
        if self.sandbox:
            env["OPEN_SANDBOX_ID"] = self.sandbox
        env.update(self.extra_env)
        env.update(extra or {})
        return env

    @staticmethod
    def shown(env):
        # what a reproducer needs; the key is never shown
        return {k: env[k] for k in ("OPEN_SANDBOX_DOMAIN", "OPEN_SANDBOX_ID") if k in env}

    def run(self, *args, stdin=None, stdout=None, timeout=120, env=None, measure_rss=False):
        """Runs osb ARGS (see spawn()); a Result."""
        argv = [str(self.binary)] + [str(a) for a in args]
        e = self.env(env)
        rc, out, err, rss, secs, killed = spawn(argv, e, stdin, stdout, timeout, measure_rss)
        res = Result(argv, self.shown(e), rc, out, err, rss, secs)
        check_sanitizer(res.repro(), res.err)
        if killed:
            raise CheckFailed("osb outlived its %ss timeout:\n%s" % (timeout, res.describe()))
        return res

    def ok(self, *args, **kw):
        """Runs osb; it must succeed and print nothing on stderr."""
        res = self.run(*args, **kw)
        if res.rc != 0 or res.err != "":
            raise CheckFailed(res.describe())
        return res

    def fails(self, *args, rc=1, **kw):
        """Runs osb; it must exit with @rc and say why in one line."""
        res = self.run(*args, **kw)
        assert res.rc == rc, res.describe()
        assert res.out == "", res.describe()
        assert res.err.startswith("osb: ") and res.err.endswith("\n") and res.err.count("\n") == 1, \
            res.describe()
        return res

    def start(self, *args, env=None):
        """osb ARGS in the background, for streaming checks."""
        return Running(self, [str(self.binary)] + [str(a) for a in args], self.env(env))


class Running:
    """A background osb: lines of its stdout as they come, then its end.
    close() stops it (by process group) if it still runs."""

    def __init__(self, osb, argv, env):
        self.argv = argv
        self.env_shown = osb.shown(env)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = queue.Queue()
        self.err = []
        self._t_out = threading.Thread(target=self._read_out, daemon=True)
        self._t_err = threading.Thread(target=lambda: self.err.append(self.proc.stderr.read()), daemon=True)
        self._t_out.start()
        self._t_err.start()

    def _read_out(self):
        for line in self.proc.stdout:
            self.lines.put(line.decode("utf-8", "replace"))
        self.lines.put(None)

    def readline(self, timeout=30):
        """The next line of stdout (None at its end); fails after @timeout."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise CheckFailed("no output line from %s within %ss" % (self.argv, timeout))

    def finish(self, timeout=60):
        """Waits for the end; a Result with the rest of stdout."""
        killed = _wait_and_kill_late(self.proc, timeout)
        self._t_out.join(30)
        self._t_err.join(30)
        rest = []
        while not self.lines.empty():
            line = self.lines.get_nowait()
            if line is not None:
                rest.append(line)
        res = Result(self.argv, self.env_shown, self.proc.returncode, "".join(rest).encode(),
                     (self.err[0] if self.err else b"").decode("utf-8", "replace"), None,
                     time.monotonic() - self.t0)
        check_sanitizer(res.repro(), res.err)
        if killed:
            raise CheckFailed("osb outlived its %ss timeout:\n%s" % (timeout, res.describe()))
        return res

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass


def make_file(path, mib):
    """@mib MiB of incompressible bytes (each MiB numbered); their sha256."""
    h = hashlib.sha256()
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(mib):
            b = i.to_bytes(8, "little") + block[8:]
            h.update(b)
            f.write(b)
    return h.hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def sandbox_stats(server, sid):
    """Requests the server counted for sandbox @sid, by route."""
    return server.stats()["sandboxes"].get(sid, {})


def egress_policy(server, sid):
    """GET /policy of a sandbox's egress sidecar, raw: (status, body)."""
    url, hdrs = server.endpoint(sid, 18080)
    st, _, b = http_request(url, "GET", "/policy", headers=hdrs)
    return st, b


def sandbox_record(server, sid):
    """What the server stored of a create request (its data dir)."""
    with open(os.path.join(server.data_dir, "sandboxes", sid, "record.json")) as f:
        return json.load(f)


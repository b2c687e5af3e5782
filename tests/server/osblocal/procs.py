"""Running processes inside a sandbox with bubblewrap.

Every child is forked from one long-lived spawner thread: bwrap's
--die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that forked it
exits, so forking from a short-lived request thread would kill a background
command as soon as its request ended.  Children are session leaders
(setsid), so a process group signal reaches bwrap and everything inside;
with --unshare-pid, the sandbox's processes die when bwrap dies.

The bwrap view mirrors sandboxfs: the sandbox rootfs read-only at "/", the
host's system directories read-only on top, the writable directories bound
read-write, fresh /dev, /proc and /run.  Processes run as root with Docker's
default capabilities minus MKNOD (no CAP_SYS_ADMIN: nothing can be
remounted read-write).
"""

import os
import queue
import signal
import subprocess
import threading
import time

BWRAP = "/usr/bin/bwrap"
CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_NET_RAW",
        "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
        "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE")


class Spawner:
    def __init__(self):
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._run, name="spawner", daemon=True)
        self.t.start()

    def _run(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            args, kw, box, ev = item
            try:
                box.append(subprocess.Popen(*args, **kw))
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                box.append(e)
            ev.set()

    def popen(self, *args, **kw):
        box, ev = [], threading.Event()
        self.q.put((args, kw, box, ev))
        ev.wait()
        r = box[0]
        if isinstance(r, BaseException):
            raise r
        return r


SPAWNER = None


def spawner():
    global SPAWNER
    if SPAWNER is None:
        SPAWNER = Spawner()
    return SPAWNER


def bwrap_argv(fs, cwd, argv, uid=None, gid=None, groups_from=None):
    a = [BWRAP, "--die-with-parent", "--unshare-pid", "--unshare-ipc",
         "--ro-bind", fs.rootfs, "/"]
    for d in fs.ro_host:
        a += ["--ro-bind", "/" + d, "/" + d]
    for key, (host, w) in sorted(fs.mounts.items(), key=lambda kv: len(kv[0])):
        if w:
            a += ["--bind", host, "/" + "/".join(key)]
    a += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
    a += ["--cap-drop", "ALL"]
    for c in CAPS:
        a += ["--cap-add", c]
    a += ["--chdir", cwd]
    a += ["--"]
    if uid is not None:
        pre = ["/usr/bin/setpriv", "--reuid=%d" % uid, "--regid=%d" % gid]
        pre.append("--init-groups" if groups_from else "--clear-groups")
        a += pre
    return a + list(argv)


def run_in_sandbox(fs, cwd, argv, env, stdout, stderr, stdin=subprocess.DEVNULL,
                   uid=None, gid=None, groups_from=None, pass_fds=()):
    return spawner().popen(bwrap_argv(fs, cwd, argv, uid, gid, groups_from),
                           stdin=stdin, stdout=stdout, stderr=stderr, env=env,
                           start_new_session=True, close_fds=True, pass_fds=pass_fds,
                           cwd="/")


def descendants(pid):
    """pid and every descendant (via /proc/*/stat parent links)."""
    children = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return [pid]
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % n, "rb") as f:
                data = f.read()
            ppid = int(data[data.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(n))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


def signal_tree(pid, sig):
    """Signal the process group led by pid and every descendant."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for p in descendants(pid):
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(proc):
    if proc.poll() is not None:
        return
    signal_tree(proc.pid, signal.SIGKILL)


def terminate_group(proc, grace=3.0):
    """SIGTERM the process group, wait up to grace seconds, then SIGKILL."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return
        time.sleep(0.05)
    signal_tree(proc.pid, signal.SIGKILL)


def exit_info(rc):
    """(exit_code, error text) as Go's exec.ExitError reports them."""
    if rc is None:
        return None, None
    if rc < 0:
        sig = -rc
        name = {9: "killed", 15: "terminated", 2: "interrupt", 1: "hangup", 6: "aborted",
                11: "segmentation fault", 13: "broken pipe", 3: "quit"}.get(sig, "signal %d" % sig)
        return -1, "signal: %s" % name
    if rc == 0:
        return 0, None
    return rc, "exit status %d" % rc

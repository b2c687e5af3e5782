"""Running processes inside a sandbox with bubblewrap.

Each sandbox has one long-lived bubblewrap, its holder, started with the
sandbox's first command: inside it runs forkserver.py (with the host's
python3, which the view below contains), and starts every command inside
the holder's pid, ipc and mount namespaces, as execd forks inside its
container; this costs a posix_spawn rather than a new bubblewrap.  The
server hands it the argv, env, cwd and uid/gid over a Unix socket, with the
command's stdin/stdout/stderr and pass_fds as SCM_RIGHTS; the child is a
session leader (setsid) and its pid, as the host sees it, comes back as a
pidfd, so process groups are signalled from here as before.
A HeldProc stands for the child where a Popen did: pid, poll, wait and
returncode (negative for a signal death, which the server reports as execd
does: -1 and "signal: ...").  A command's orphans live on, as they do in a
container, until the sandbox is killed or deleted; the fork server is a
child subreaper, so they stay in its tree, where pause and resume
(signal_held) find them; stop_holder kills the holder, and with it everything
in its pid namespace.  If the holder cannot be started (or a request is too
big for one message, or cannot start there), the command gets its own
bubblewrap as before.

Every bubblewrap (holder or per command) is forked from one long-lived
spawner thread: bwrap's --die-with-parent (PR_SET_PDEATHSIG) fires when the
*thread* that forked it exits, so forking from a short-lived request thread
would kill a background command as soon as its request ended; the holder
dies with the server.  Bubblewraps are session leaders (setsid), so a
process group signal reaches bwrap and everything inside; with
--unshare-pid, the processes inside die when bwrap dies.

The bwrap view mirrors sandboxfs: the sandbox rootfs read-only at "/", the
sandbox's overlays of /usr, /etc and /var read-write (mounted by the server
before the holder starts; bwrap only binds them), /opt and /srv the host's,
read-only, the writable directories bound read-write, fresh /dev, /proc and
/run.  Processes run as root with Docker's default capabilities minus MKNOD
(no CAP_SYS_ADMIN: nothing can be remounted read-write); that is enough for
apt-get, whose downloads run as user _apt (CAP_SETUID, CAP_SETGID), so apt
needs no configuration of its own.
"""

import json
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from .sandboxfs import HOST_SUBMOUNTS

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
    if fs.overlays:
        for m in HOST_SUBMOUNTS:
            if m.split("/")[1] in fs.sys_top and not m.startswith("/var/tmp/") and m != "/var/tmp":
                a += ["--ro-bind-try", m, m]
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


class HeldProc:
    """A command forked by a holder, with the Popen calls the server uses."""

    def __init__(self, sock, pid):
        self.pid, self.returncode, self._done = pid, None, threading.Event()
        threading.Thread(target=self._wait, args=(sock,), daemon=True).start()

    def _wait(self, sock):
        try:
            msg = sock.recv(64)
        except OSError:
            msg = b""
        sock.close()
        # no status: the holder died, taking the command with it
        self.returncode = os.waitstatus_to_exitcode(int(msg[1:])) if msg[:1] == b"X" else -signal.SIGKILL
        self._done.set()

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("held command", timeout)
        return self.returncode


def _recv_pid(sock):
    """(first byte, sender's pid) of the next message on sock."""
    msg, anc, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(12))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            return msg[:1], struct.unpack("iII", data[:12])[0]
    return msg[:1], None


def _recv_pidfd(sock):
    """(first byte, pid of the pidfd sent with it as this process sees it)
    of the next message on sock."""
    msg, fds, _, _ = socket.recv_fds(sock, 64, 1)
    pid = None
    for fd in fds:
        with open("/proc/self/fdinfo/%d" % fd) as f:
            for line in f:
                if line.startswith("Pid:"):
                    pid = int(line.split()[1])
        os.close(fd)
    return msg[:1], pid


class Holder:
    def __init__(self, fs):
        ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ctl.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        with open(os.path.join(os.path.dirname(__file__), "forkserver.py")) as f:
            src = f.read()
        try:
            self.proc = spawner().popen(
                bwrap_argv(fs, "/", ["/usr/bin/python3", "-I", "-S", "-c", src, str(theirs.fileno())]),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"},
                start_new_session=True, close_fds=True, pass_fds=(theirs.fileno(),), cwd="/")
        finally:
            theirs.close()
        self.ctl = ctl
        ctl.settimeout(20)
        try:
            kind, self.server_pid = _recv_pid(ctl)
        except OSError:
            kind = None
        ctl.settimeout(None)
        if kind != b"R" or not self.server_pid:
            self.stop()
            raise OSError("the fork server did not start")

    def spawn(self, cwd, argv, env, fds, uid, gid, groups_from, pass_fds):
        """A HeldProc, or None when the holder cannot take this command."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        req = json.dumps({"argv": list(argv), "env": env, "cwd": cwd, "uid": uid, "gid": gid,
                          "groups": bool(groups_from), "fds": list(pass_fds)}).encode()
        try:
            with theirs:
                socket.send_fds(self.ctl, [req], [theirs.fileno()] + list(fds) + list(pass_fds))
            kind, pid = _recv_pidfd(ours)
        except OSError:
            kind = None
        if kind != b"P" or not pid:
            ours.close()
            return None
        return HeldProc(ours, pid)

    def stop(self):
        kill_tree(self.proc)
        self.ctl.close()
        self.proc.wait()


HOLDERS = {}  # id(fs) -> Holder, or None when it could not be started
HOLDERS_LOCK = threading.Lock()


def _holder(fs):
    with HOLDERS_LOCK:
        if id(fs) not in HOLDERS:
            try:
                HOLDERS[id(fs)] = Holder(fs)
            except OSError as e:
                sys.stderr.write("bwrap holder for %s: %s; one bubblewrap per command\n" % (fs.rootfs, e))
                HOLDERS[id(fs)] = None
        return HOLDERS[id(fs)]


def stop_holder(fs):
    """Kill the sandbox's holder and everything in it; the next command
    starts a new one."""
    with HOLDERS_LOCK:
        h = HOLDERS.pop(id(fs), None)
    if h is not None:
        h.stop()


def signal_held(fs, sig):
    """Signal every process the sandbox's holder has forked."""
    h = HOLDERS.get(id(fs))
    if h is not None:
        for p in descendants(h.server_pid)[1:]:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _fd(f):
    if f is subprocess.DEVNULL:
        return None
    return f if isinstance(f, int) else f.fileno()


def run_in_sandbox(fs, cwd, argv, env, stdout, stderr, stdin=subprocess.DEVNULL,
                   uid=None, gid=None, groups_from=None, pass_fds=()):
    h = _holder(fs)
    if h is not None:
        fds = [_fd(stdin), _fd(stdout), _fd(stderr)]
        null = os.open(os.devnull, os.O_RDWR) if None in fds else None
        try:
            p = h.spawn(cwd, argv, env, [null if fd is None else fd for fd in fds],
                        uid, gid, groups_from, pass_fds)
        finally:
            if null is not None:
                os.close(null)
        if p is not None:
            return p
        if h.proc.poll() is not None:
            stop_holder(fs)  # it died: the next command starts a new one
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

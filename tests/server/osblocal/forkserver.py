"""The fork server that runs inside a sandbox's long-lived bubblewrap (see
procs.py).  Standard library only; run as `python3 -I -S -c SOURCE FD`.

FD is a SOCK_SEQPACKET socket to the local server.  Each message on it is
one command: a JSON object {"argv", "env", "cwd", "uid", "gid", "groups",
"fds"} and, as SCM_RIGHTS, a reply socket followed by the command's stdin,
stdout, stderr and pass_fds (placed at the numbers in "fds").  Commands
start with posix_spawn (a vfork: forking this process would cost several
times more) as session leaders, through setpriv when a uid is given, as
bubblewrap ran them.  The reply socket gets b"P" with a pidfd of the child
(the server reads the pid it sees from the pidfd's fdinfo) and, once the
child has been reaped, b"X<wait status>"; b"E<text>" if it could not start
(the server then runs it with its own bubblewrap, which reports the error
as before).  The server is a child subreaper, so orphans stay in its tree.
An empty read on FD (the server went away) ends the fork server.
"""

import fcntl
import json
import os
import select
import signal
import socket
import sys


def spawn(req, fds):
    """Start one command; its pid (in this namespace), or OSError."""
    targets = [0, 1, 2] + list(req["fds"])
    top = max(targets) + 1
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top) for fd in fds]
    argv = req["argv"]
    if req["uid"] is not None:
        argv = ["/usr/bin/setpriv", "--reuid=%d" % req["uid"], "--regid=%d" % req["gid"],
                "--init-groups" if req["groups"] else "--clear-groups"] + argv
    try:
        os.chdir(req["cwd"])
        return os.posix_spawn(argv[0], argv, req["env"], setsid=True,
                              file_actions=[(os.POSIX_SPAWN_DUP2, a, b) for a, b in zip(high, targets)],
                              setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD,
                                         signal.SIGHUP, signal.SIGINT, signal.SIGQUIT))
    finally:
        os.chdir("/")
        for fd in high:
            os.close(fd)


def main():
    ctl = socket.socket(fileno=int(sys.argv[1]))
    ctl.set_inheritable(False)
    try:  # orphans come back to this process, so they stay in its tree
        import ctypes
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - only the pause of orphans needs it
        pass
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    ctl.send(b"R")
    kids = {}
    while True:
        ready = select.select([ctl, wake_r], [], [])[0]
        if wake_r in ready:
            os.read(wake_r, 4096)
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                reply = kids.pop(pid, None)
                if reply is not None:
                    try:
                        reply.send(b"X%d" % status)
                    except OSError:
                        pass
                    reply.close()
        if ctl in ready:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 256)
            if not msg:
                return
            for fd in fds:
                os.set_inheritable(fd, False)
            reply = socket.socket(fileno=fds[0])
            try:
                pid = spawn(json.loads(msg), fds[1:])
                pidfd = os.pidfd_open(pid)
                try:
                    socket.send_fds(reply, [b"P"], [pidfd])
                finally:
                    os.close(pidfd)
                kids[pid] = reply
            except OSError as e:
                reply.send(b"E" + str(e).encode())
                reply.close()
            for fd in fds[1:]:
                os.close(fd)


main()

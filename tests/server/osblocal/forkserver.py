"""The fork server that runs inside a sandbox's long-lived bubblewrap (see
procs.py).  Standard library only; run as `python3 -I -S -c SOURCE FD`.

FD is a SOCK_SEQPACKET socket to the local server.  Each message on it is
one command: a JSON object {"argv", "env", "cwd", "uid", "gid", "groups",
"fds"} and, as SCM_RIGHTS, a reply socket followed by the command's stdin,
stdout, stderr and pass_fds (placed at the numbers in "fds").  The child
sends b"P" on the reply socket before it execs (the server reads the
child's pid from the message's SCM_CREDENTIALS, which the kernel gives in
the server's pid namespace); when it has been reaped, this server sends
b"X<wait status>".  b"E<text>" means it could not fork.  An empty read on
FD (the server went away) ends the fork server.
"""

import fcntl
import json
import os
import pwd
import select
import signal
import socket
import sys


def child(req, reply, fds):
    try:
        os.setsid()
        reply.send(b"P")
        targets = [0, 1, 2] + list(req["fds"])
        top = max(targets) + 1
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, top) for fd in fds]
        for src, dst in zip(high, targets):
            os.dup2(src, dst)
        keep = sorted(set(targets))
        lo = 3
        for fd in keep + [1 << 20]:
            if fd > lo:
                os.closerange(lo, fd)
            lo = max(lo, fd + 1)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        try:
            os.chdir(req["cwd"])
        except OSError as e:
            os.write(2, ("bwrap: Can't chdir to %s: %s\n" % (req["cwd"], e.strerror)).encode())
            os._exit(1)
        if req["uid"] is not None:
            uid, gid = req["uid"], req["gid"]
            name = None
            if req["groups"]:
                try:
                    name = pwd.getpwuid(uid).pw_name
                except KeyError:
                    pass
            if name:
                os.initgroups(name, gid)
            else:
                os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        argv = req["argv"]
        try:
            os.execvpe(argv[0], argv, req["env"])
        except OSError as e:
            os.write(2, ("bwrap: execvp %s: %s\n" % (argv[0], e.strerror)).encode())
    finally:
        os._exit(1)


def main():
    ctl = socket.socket(fileno=int(sys.argv[1]))
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
            req, reply = json.loads(msg), socket.socket(fileno=fds[0])
            try:
                pid = os.fork()
            except OSError as e:
                reply.send(b"E" + str(e).encode())
                pid = None
            if pid == 0:
                child(req, reply, fds[1:])
            for fd in fds[1:]:
                os.close(fd)
            if pid is None:
                reply.close()
            else:
                kids[pid] = reply


main()

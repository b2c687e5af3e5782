"""Helpers for the control-tree and jobs tests (test_30 ... test_34):
control files read and written with plain system calls, jobs started and
waited for, and a deadline that interrupts a blocking read.  This module
defines no tests.  Standard library only.
"""

import contextlib
import json
import os
import signal
import threading
import time

import pytest


def osb(m, *parts):
    """The path of a file of mount @m's control tree."""
    return m.p(".osb", *parts)


def read(path):
    with open(path, "rb") as f:
        return f.read().decode()


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data, flags=os.O_WRONLY | os.O_TRUNC):
    """open + one write(2) + close(2), as `echo data > path` does; an
    error of either call raises OSError (the write's first)."""
    if isinstance(data, str):
        data = data.encode()
    fd = os.open(path, flags)
    try:
        os.write(fd, data)
    except OSError:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    os.close(fd)


def expect_errno(code, fn, *args):
    """Calls fn(*args) and checks that it fails with errno @code."""
    with pytest.raises(OSError) as e:
        fn(*args)
    assert e.value.errno == code, (e.value, os.strerror(code))
    return e.value


def info(m):
    return json.loads(read(osb(m, "info")))


def last_error(m):
    return info(m)["last_error"] or ""


def last_log_line(m):
    """The last line of .osb/log that is not the change feed's: the feed
    says when it goes live or falls back at a time of its own, after the
    line a test looks for."""
    return [l for l in read(osb(m, "log")).splitlines() if "change feed" not in l][-1]


def start(m, cmd):
    """Starts a job with `run` (open for reading and writing, write the
    command, read the id back); returns the id."""
    fd = os.open(osb(m, "run"), os.O_RDWR)
    try:
        os.write(fd, cmd.encode() if isinstance(cmd, str) else cmd)
        jid = os.read(fd, 200).decode().strip()
    finally:
        os.close(fd)
    assert jid, "run gave no job id"
    return jid


def start_named(m, name, cmd):
    os.mkdir(osb(m, "jobs", name))
    write(osb(m, "jobs", name, "cmd"), cmd)
    return name


def job_file(m, jid, name):
    return read(osb(m, "jobs", jid, name))


def status(m, jid):
    return job_file(m, jid, "status").strip()


@contextlib.contextmanager
def deadline(seconds):
    """Raises TimeoutError in the main thread after @seconds (a blocking
    read on the mount is interrupted: the daemon answers EINTR)."""
    def fire(signum, frame):
        raise TimeoutError("still blocked after %ss" % seconds)
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def wait(m, jid, timeout=120):
    """Reads jobs/ID/wait (blocks until the job ends); the status line."""
    with deadline(timeout):
        return job_file(m, jid, "wait").strip()


def start_losing_answers(server, m, kinds, faults=lambda kind: 1):
    """Starts `echo KIND >> ran.log` once for each fault kind in @kinds,
    its POST /command met by that fault (@faults(kind) of them in a row):
    each job exits 0, and ran.log then holds one line per start so far,
    so every command ran once."""
    for i, kind in enumerate(kinds):
        server.set_faults(next=faults(kind), kinds=[kind], method="POST", path="/command$")
        try:
            jid = start(m, "echo %s >> ran.log" % kind)
        finally:
            server.clear_faults()
        assert wait(m, jid) == "exited 0", kind
        with open(m.p("ran.log")) as f:
            assert f.read().splitlines() == kinds[:i + 1], kind


def wait_all(m, jids, timeout=180):
    """Reads the wait files of many jobs at once, one thread each;
    {id: status line}."""
    out = {}

    def one(jid):
        out[jid] = job_file(m, jid, "wait").strip()

    threads = [threading.Thread(target=one, args=(j,), daemon=True) for j in jids]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.1, end - time.monotonic()))
    missing = [j for j in jids if j not in out]
    assert not missing, "wait did not return for %d job(s): %s" % (len(missing), missing[:5])
    return out


def kill_quietly(m, jid):
    """Stops a job in a test's cleanup, whatever its state."""
    with contextlib.suppress(OSError):
        write(osb(m, "jobs", jid, "ctl"), "signal KILL")

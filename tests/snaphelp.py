"""Helpers of the snapshot tests (test_54, test_55): a tree of files of
every kind written through a mount, and what a tree holds, to compare a
copy with.  This module defines no tests.  Standard library only."""

import os
import stat
import uuid

# a fixed past mtime, to the nanosecond
MTIME_NS = 1_500_000_000_123_456_789


def uniq(word):
    """A name of its own: snapshots' names are seen across the session's
    server, and a name two tests gave would be ambiguous."""
    return "%s-%s" % (word, uuid.uuid4().hex[:8])


def fill(m):
    """Files of every kind, with their modes and a set mtime."""
    data = os.urandom(70000)
    with open(m.p("data.bin"), "wb") as f:
        f.write(data)
    os.chmod(m.p("data.bin"), 0o640)
    os.makedirs(m.p("bin"))
    with open(m.p("bin", "run.sh"), "w") as f:
        f.write("#!/bin/sh\necho forked\n")
    os.chmod(m.p("bin", "run.sh"), 0o755)
    os.makedirs(m.p("private", "deep"))
    with open(m.p("private", "deep", "notes.txt"), "w") as f:
        f.write("deep\n")
    os.chmod(m.p("private"), 0o700)
    os.symlink("data.bin", m.p("link"))
    os.symlink("private/deep", m.p("deeplink"))
    os.utime(m.p("data.bin"), ns=(MTIME_NS, MTIME_NS))


def tree(root):
    """What the tree holds: each name's type, mode, and bytes or link
    target; and the mtime of files and links."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                what = ("link", os.readlink(p), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                what = ("dir", stat.S_IMODE(st.st_mode))
            else:
                with open(p, "rb") as f:
                    what = ("file", stat.S_IMODE(st.st_mode), f.read(), st.st_mtime_ns)
            out[rel] = what
    return out

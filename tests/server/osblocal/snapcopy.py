"""Copying a tree into or out of a snapshot, sharing the files that did
not change since the last one.

copy_tree(src, dst, base, known) copies directory @src as a new directory
@dst the way `cp -a` does: modes, owners, times, symlinks, special bits,
device nodes (the overlays' whiteouts), xattrs (ACLs, the overlays' opaque
marks), hard links within the tree, holes.  It returns, for every regular
file, (path in the tree, source inode, source ctime, copy's inode, copy's
ctime): what a later copy needs to know that a file did not change.

Sharing.  A snapshot's files are never written once it is Ready (a
restore reads them, a capture reads or links them, a delete unlinks
them), so two snapshots may share one inode.  A sandbox's files are
written in place, so a sandbox never shares an inode with a snapshot.
@known maps a path of @src to (inode, ctime, inode in @base) recorded when
that file was last copied to or from the snapshot tree @base: when the
file at that path still has that inode and ctime, it was not written,
truncated, chmod'ed, chown'ed, renamed, linked or given an xattr since (each
of those sets the ctime, which no process can set back: the sandbox has no
CAP_SYS_TIME), so it still holds what @base's file holds, and @dst gets a
hard link to @base's file, checked to be the recorded inode, instead of a
copy.  Only a snapshot tree is ever given as @base.

With nothing to share, the copy is `cp -a` (its C is two to three times
as fast as a walk here on a busy machine), then a walk pairs its files
with the source's.  @src is read without following a symlink anywhere;
the caller keeps it from changing meanwhile (the sandbox is frozen, or not
started yet).
"""

import errno
import os
import stat as st
import subprocess
import time

_CHUNK = 1 << 30


def _xattrs(src, dst, follow=True):
    try:
        names = os.listxattr(src, follow_symlinks=follow)
    except OSError:
        return
    for n in names:
        try:
            os.setxattr(dst, n, os.getxattr(src, n, follow_symlinks=follow), follow_symlinks=follow)
        except OSError:
            pass  # e.g. trusted.* when not root, as cp -a skips it


def _chown(dst, s, follow=True):
    try:
        os.chown(dst, s.st_uid, s.st_gid, follow_symlinks=follow)
    except PermissionError:
        pass  # not root: the copy is the server's, as with cp -a


def _data(sfd, dfd, s):
    """The bytes of @sfd into @dfd, holes kept."""
    sparse = s.st_blocks * 512 < s.st_size
    if not sparse:
        segs = [(0, s.st_size)]
    else:
        segs, pos = [], 0
        while pos < s.st_size:
            try:
                start = os.lseek(sfd, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno != errno.ENXIO:
                    raise
                break
            end = os.lseek(sfd, start, os.SEEK_HOLE)
            segs.append((start, end))
            pos = end
    for start, end in segs:
        off = start
        while off < end:
            try:
                n = os.copy_file_range(sfd, dfd, min(_CHUNK, end - off), off, off)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                n = os.pwrite(dfd, os.pread(sfd, min(1 << 20, end - off), off), off)
            if n == 0:
                break
            off += n
    if sparse:  # a hole at the end
        os.ftruncate(dfd, s.st_size)


def _copy_file(sp, dp, s):
    """A new regular file @dp holding @sp's bytes, owner, mode, xattrs and
    times; its fstat."""
    sfd = os.open(sp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        dfd = os.open(dp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _data(sfd, dfd, s)
            _chown(dfd, s)
            _xattrs(sfd, dfd)
            os.chmod(dfd, st.S_IMODE(s.st_mode))
            os.utime(dfd, ns=(s.st_atime_ns, s.st_mtime_ns))
            return os.fstat(dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _shared(sp, dp, s, base, rel, known):
    """Links @dp to @base's copy of @rel when @sp did not change since it
    was recorded; the link's lstat, or None (then copy)."""
    k = known.get(rel) if base else None
    if not k or k[0] != s.st_ino or k[1] != s.st_ctime_ns:
        return None
    bp = os.path.join(base, rel)
    try:
        bs = os.lstat(bp)
        if bs.st_ino != k[2] or not st.S_ISREG(bs.st_mode):
            return None
        os.link(bp, dp, follow_symlinks=False)
        return bs
    except OSError:
        return None


class _Walk:
    def __init__(self, base, known):
        self.base, self.known = base, known
        # (dev, ino) of a source file with links -> its copy, and the rows
        # of its paths in out (regular files)
        self.links = {}
        self.out = []

    def entry(self, sp, dp, rel, s):
        mode = s.st_mode
        if st.S_ISDIR(mode):
            self.tree(sp, dp, rel, s)
            return
        key = (s.st_dev, s.st_ino)
        if s.st_nlink > 1 and key in self.links:
            first, rows = self.links[key]
            os.link(first, dp, follow_symlinks=False)
            if rows:  # the link set the copy's ctime
                ds = os.lstat(dp)
                rows.append(len(self.out))
                self.out.append((rel, s.st_ino, s.st_ctime_ns, ds.st_ino, ds.st_ctime_ns))
                for i in rows:
                    self.out[i] = self.out[i][:4] + (ds.st_ctime_ns,)
            return
        if s.st_nlink > 1:
            self.links[key] = (dp, [len(self.out)] if st.S_ISREG(mode) else None)
        if st.S_ISREG(mode):
            ds = _shared(sp, dp, s, self.base, rel, self.known) or _copy_file(sp, dp, s)
            self.out.append((rel, s.st_ino, s.st_ctime_ns, ds.st_ino, ds.st_ctime_ns))
        elif st.S_ISLNK(mode):
            os.symlink(os.readlink(sp), dp)
            _chown(dp, s, follow=False)
            _xattrs(sp, dp, follow=False)
            os.utime(dp, ns=(s.st_atime_ns, s.st_mtime_ns), follow_symlinks=False)
        else:
            os.mknod(dp, mode, s.st_rdev)
            _chown(dp, s)
            _xattrs(sp, dp)
            os.chmod(dp, st.S_IMODE(mode))
            os.utime(dp, ns=(s.st_atime_ns, s.st_mtime_ns))

    def tree(self, sp, dp, rel, s, into=False):
        if not (into and os.path.isdir(dp)):
            os.mkdir(dp, 0o700)
        with os.scandir(sp) as it:
            ents = list(it)
        for e in ents:
            self.entry(e.path, os.path.join(dp, e.name), os.path.join(rel, e.name) if rel else e.name,
                       e.stat(follow_symlinks=False))
        _chown(dp, s)
        _xattrs(sp, dp)
        os.chmod(dp, st.S_IMODE(s.st_mode))
        os.utime(dp, ns=(s.st_atime_ns, s.st_mtime_ns))


def _cp(src, dst):
    """cp -a of directory @src as @dst (into it when it exists): faster
    than the walk here when nothing is shared (one process, no Python per
    file).  Raises OSError with cp's message."""
    p = subprocess.run(["cp", "-a", "--reflink=auto", "-T", "--", src, dst],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        raise OSError("cp: %s" % (p.stderr.strip() or "exit %d" % p.returncode))


def _pairs(src, dst):
    """The rows copy_tree returns, for a copy cp made: each regular file of
    @dst beside the one of @src it was copied from (same size and mtime)."""
    out = []
    for d, _, files in os.walk(dst):
        rel_d = os.path.relpath(d, dst)
        for n in files:
            rel = n if rel_d == "." else os.path.join(rel_d, n)
            try:
                ds = os.lstat(os.path.join(d, n))
                ss = os.lstat(os.path.join(src, rel))
            except OSError:
                continue
            if st.S_ISREG(ds.st_mode) and st.S_ISREG(ss.st_mode) and ds.st_size == ss.st_size \
                    and ds.st_mtime_ns == ss.st_mtime_ns:
                out.append((rel, ss.st_ino, ss.st_ctime_ns, ds.st_ino, ds.st_ctime_ns))
    return out


def copy_tree(src, dst, base=None, known=None, into=False):
    """Copies directory @src as the new directory @dst, or into @dst when
    @into and it exists (module docstring); the list of (path, source
    inode, source ctime, copy's inode, copy's ctime) of its regular files.
    Raises OSError."""
    if not base or not known:
        _cp(src, dst)
        return _pairs(src, dst)
    w = _Walk(base, known)
    w.tree(src, dst, "", os.lstat(src), into)
    return w.out


CLOCK_REALTIME_COARSE = 5  # Linux: the clock file times are taken from


def after(ctimes):
    """Returns once the clock file times come from has passed every ctime
    in @ctimes (at most a tick): a change made from then on gets a later
    ctime, so a recorded ctime tells a file that changed since.  Called
    before the sandbox can write again."""
    last = max(ctimes, default=0)
    while time.clock_gettime_ns(CLOCK_REALTIME_COARSE) <= last:
        time.sleep(0.001)

"""A sandbox's filesystem as execd inside the container would see it.

Layout of one sandbox on the host (BASE = DATA/sandboxes/<id>):

  BASE/rootfs/              the sandbox's "/" (read-only to the sandbox)
      workspace home root tmp mnt      writable directories (bound read-write)
      usr etc var                      mount points for the sandbox's overlays
      opt srv                          mount points for the host's /opt and
                                       /srv, read-only
      proc dev run sys                 empty placeholders (bwrap mounts its own)
      bin -> usr/bin ...               the host's top-level symlinks, copied
  BASE/vartmp/              the sandbox's /var/tmp (read-write, empty at first)
  BASE/sys/<d>/upper        the sandbox's changes to its /usr, /etc, /var
  BASE/sys/<d>/work         overlayfs's work directory
  BASE/sys/<d>/merged       the overlay: the host's /<d> read-only underneath,
                            upper on top; bound read-write at /<d>

The sandbox's /usr, /etc and /var are writable, as in a container, so
apt-get, npm -g and pip install work: each is an overlayfs mount made by
the server (mount_sys) when the sandbox is created, and again from the kept
upper directory when the server starts, so installed software survives a
restart; delete unmounts it and removes BASE (moved to DATA/trash at once,
deleted in a thread); server shutdown unmounts every overlay.  The server
runs in a mount namespace of its own (private_mount_namespace, a slave of
the host's), so the host never sees these mounts and a killed server leaves
none behind.  When overlays cannot be mounted (not root, no overlayfs) one
line on stderr says so and /usr, /etc, /var are the host's, read-only, as
/opt and /srv always are.  The host's mount points inside /usr, /etc, /var
(a container's bind-mounted /etc/resolv.conf) are hidden by an overlay:
bubblewrap binds them back read-only; the file API shows the file beneath.

The same mount table drives bubblewrap (procs.py) and the file API, so
/workspace/x.py and /usr/local/bin/x are the same files for both.

SECURITY.  Every path a client sends is resolved here in the SANDBOX's
namespace, one component at a time, with directory file descriptors opened
O_NOFOLLOW: ".." and symlinks (relative or absolute) are followed as the
sandbox kernel would follow them, never by the host kernel, so a symlink
"/workspace/evil -> /root/x" means the sandbox's /root/x.  The final
operation is done relative to the parent directory's descriptor (the *at()
calls), with O_NOFOLLOW where execd would not follow.  Writes to anything
outside the writable directories fail with EROFS before any system call, as
in a container whose root is read-only; writes under /usr, /etc, /var go
through the overlay, which puts them in the upper directory and never
changes the host's directory underneath; the sandbox's /proc and /dev are
empty here.  A sandbox process racing a rename of a directory into a symlink
cannot make the server leave the sandbox tree: every step re-opens with
O_NOFOLLOW.
"""

import ctypes
import errno
import grp
import os
import pwd
import shutil
import stat as st
import sys
import threading

WRITABLE_TOP = ("workspace", "home", "root", "tmp", "mnt")
SYS_TOP = ("usr", "etc", "var")   # the sandbox's own overlay over the host's
RO_HOST_TOP = ("opt", "srv")      # always the host's, read-only
PLACEHOLDERS = ("proc", "dev", "run", "sys")
MAXLINKS = 40

O_PATH = getattr(os, "O_PATH", 0o10000000)
DIRFLAGS = O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def fserr(code, path=None):
    e = OSError(code, os.strerror(code))
    e.spath = path
    return e


class Loc:
    """A resolved location: directory fd + final name, in one mount.

    For "/" and mount roots, dirfd is the parent of the mount's host
    directory and name its basename (trusted paths created by us)."""

    __slots__ = ("dirfd", "name", "spath", "parent_writable", "writable", "mountroot")

    def __init__(self, dirfd, name, spath, parent_writable, writable, mountroot=False):
        self.dirfd = dirfd
        self.name = name
        self.spath = spath
        self.parent_writable = parent_writable
        self.writable = writable
        self.mountroot = mountroot

    def close(self):
        if self.dirfd is not None:
            try:
                os.close(self.dirfd)
            except OSError:
                pass
            self.dirfd = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def lstat(self):
        return os.stat(self.name, dir_fd=self.dirfd, follow_symlinks=False)

    def exists(self):
        try:
            self.lstat()
            return True
        except FileNotFoundError:
            return False


def _host_dir(p):
    return os.path.isdir(p) and not os.path.islink(p)


# -- mounts ---------------------------------------------------------------------

CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_SLAVE = 1 << 19
MNT_DETACH = 2

_libc = None
_overlays = {"enabled": None}  # None: not decided yet
_overlays_lock = threading.Lock()


def _sys(name, *args):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(_libc, name)
    if fn(*args) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def private_mount_namespace():
    """Move the server into a mount namespace of its own (a slave of the
    host's: the host's later mounts still show, the server's never reach the
    host), so every overlay it mounts disappears with it, however it ends.
    Called once at startup, while the process has a single thread.  When
    this fails, overlays are not used."""
    try:
        _sys("unshare", CLONE_NEWNS)
        _sys("mount", None, b"/", None, ctypes.c_ulong(MS_REC | MS_SLAVE), None)
    except OSError as e:
        overlays_failed("private mount namespace: %s" % e)
        return False
    with _overlays_lock:
        if _overlays["enabled"] is None:
            _overlays["enabled"] = True
    HOST_SUBMOUNTS[:] = _submounts(SYS_TOP)
    return True


HOST_SUBMOUNTS = []  # the host's mount points inside SYS_TOP, read at startup


def _submounts(tops):
    """Mount points strictly inside /<top> (e.g. a container's bind-mounted
    /etc/resolv.conf): an overlay shows only the directory underneath, so
    bubblewrap binds these on top of it, read-only."""
    out = []
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            for line in f:
                p = line.split()[4].decode("utf-8", "surrogateescape")
                p = p.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
                if any(p.startswith("/%s/" % t) for t in tops) and p not in out:
                    out.append(p)
    except (OSError, IndexError):
        pass
    return out


def overlays_enabled():
    return _overlays["enabled"] is True


def overlays_failed(why):
    """From now on sandboxes see the host's system directories read-only;
    one line on stderr says why."""
    with _overlays_lock:
        if _overlays["enabled"] is False:
            return
        _overlays["enabled"] = False
    sys.stderr.write("%s; sandboxes get the host's /usr, /etc and /var read-only\n" % why)
    sys.stderr.flush()


def mount_overlay(lower, upper, work, merged):
    for p in (lower, upper, work):
        if any(c in p for c in ",:\\"):
            raise OSError(errno.EINVAL, "overlay path %r holds , : or \\" % p)
    opts = "lowerdir=%s,upperdir=%s,workdir=%s" % (lower, upper, work)
    _sys("mount", b"overlay", os.fsencode(merged), b"overlay", ctypes.c_ulong(0), os.fsencode(opts))


def umount(path):
    try:
        _sys("umount2", os.fsencode(path), MNT_DETACH)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOENT):
            sys.stderr.write("umount %s: %s\n" % (path, e))


_trash_lock = threading.Lock()
_trash_state = {}  # trash dir -> "busy" while a thread empties it, "again" if more came meanwhile


def empty_trash(trash):
    """Delete what is in the directory trash (DATA/trash, where a deleted
    sandbox's data is moved at once) in a thread of its own: removing the
    directories an overlay used takes some 100 ms, more than a sandbox's
    creation."""
    with _trash_lock:
        if trash in _trash_state:
            _trash_state[trash] = "again"
            return
        _trash_state[trash] = "busy"

    def run():
        while True:
            try:
                names = os.listdir(trash)
            except OSError:
                names = []
            for name in names:
                shutil.rmtree(os.path.join(trash, name), ignore_errors=True)
            with _trash_lock:
                if _trash_state[trash] == "busy":
                    del _trash_state[trash]
                    return
                _trash_state[trash] = "busy"

    threading.Thread(target=run, name="trash", daemon=True).start()


def host_symlinks():
    out = []
    for name in sorted(os.listdir("/")):
        p = "/" + name
        if os.path.islink(p):
            out.append((name, os.readlink(p)))
    return out


class SandboxFS:
    def __init__(self, base):
        self.base = base
        self.rootfs = os.path.join(base, "rootfs")
        self.vartmp = os.path.join(base, "vartmp")
        # mount key (tuple of components) -> (host dir, writable)
        self.sys = os.path.join(base, "sys")
        self.mounts = {(): (self.rootfs, False)}
        for d in WRITABLE_TOP:
            self.mounts[(d,)] = (os.path.join(self.rootfs, d), True)
        self.sys_top = [d for d in SYS_TOP if _host_dir("/" + d)]
        self.ro_host = [d for d in SYS_TOP + RO_HOST_TOP if _host_dir("/" + d)]
        for d in self.ro_host:
            self.mounts[(d,)] = ("/" + d, False)
        if "var" in self.ro_host and os.path.isdir("/var/tmp"):
            self.mounts[("var", "tmp")] = (self.vartmp, True)
        self.overlays = []  # merged directories mounted by mount_sys()

    # -- setup ------------------------------------------------------------------

    def create(self):
        os.makedirs(self.rootfs, exist_ok=True)
        os.makedirs(self.vartmp, exist_ok=True)
        os.chmod(self.vartmp, 0o1777)
        for d in WRITABLE_TOP + tuple(self.sys_top) + tuple(self.ro_host) + PLACEHOLDERS:
            p = os.path.join(self.rootfs, d)
            os.makedirs(p, exist_ok=True)
        os.chmod(os.path.join(self.rootfs, "tmp"), 0o1777)
        os.chmod(os.path.join(self.rootfs, "root"), 0o700)
        for name, target in host_symlinks():
            p = os.path.join(self.rootfs, name)
            if not os.path.lexists(p):
                os.symlink(target, p)

    def mount_sys(self):
        """Mount the sandbox's overlays over the host's /usr, /etc and /var
        (kept in BASE/sys/<dir>/{upper,work}, seen at BASE/sys/<dir>/merged)
        and make them writable in the mount table; an upper directory kept
        from before (a server restart) is mounted again as it is.  When
        overlays cannot be mounted the directories stay the host's,
        read-only.  Idempotent."""
        if self.overlays or not self.sys_top or not overlays_enabled():
            return
        done = []
        try:
            for d in self.sys_top:
                top = os.path.join(self.sys, d)
                upper, work, merged = (os.path.join(top, n) for n in ("upper", "work", "merged"))
                for p in (upper, work, merged):
                    os.makedirs(p, mode=0o755, exist_ok=True)
                # the merged root takes the upper root's owner and mode
                hs = os.stat("/" + d)
                os.chown(upper, hs.st_uid, hs.st_gid)
                os.chmod(upper, st.S_IMODE(hs.st_mode))
                mount_overlay("/" + d, upper, work, merged)
                done.append(merged)
        except OSError as e:
            for m in done:
                umount(m)
            overlays_failed("overlay for %s: %s" % (self.base, e))
            return
        self.overlays = done
        for d in self.sys_top:
            self.mounts[(d,)] = (os.path.join(self.sys, d, "merged"), True)
        self.ro_host = [d for d in self.ro_host if d not in self.sys_top]

    def umount_sys(self):
        """Unmount the overlays (their upper directories stay)."""
        for m in self.overlays:
            umount(m)
        self.overlays = []

    def remove(self):
        """Unmount the overlays and delete everything the sandbox kept; if an
        overlay is still mounted, nothing is deleted (a walk through it
        would only fill its upper directory with whiteouts)."""
        self.umount_sys()
        for d in self.sys_top:
            m = os.path.join(self.sys, d, "merged")
            if os.path.ismount(m):
                sys.stderr.write("not removing %s: %s is still mounted\n" % (self.base, m))
                return
        trash = os.path.join(os.path.dirname(os.path.dirname(self.base)), "trash")
        try:
            os.makedirs(trash, exist_ok=True)
            os.rename(self.base, os.path.join(trash, os.path.basename(self.base)))
        except OSError:
            shutil.rmtree(self.base, ignore_errors=True)
            return
        empty_trash(trash)

    def host_dir(self, key):
        return self.mounts[key][0]

    def tmp_host(self):
        return os.path.join(self.rootfs, "tmp")

    # -- resolution -------------------------------------------------------------

    def _mount_of(self, comps):
        for i in range(len(comps), -1, -1):
            m = self.mounts.get(tuple(comps[:i]))
            if m is not None:
                return m
        return self.mounts[()]

    def _open_mount(self, key):
        return os.open(self.mounts[key][0], DIRFLAGS)

    def _mountroot_loc(self, key, spath):
        host, w = self.mounts[key]
        parent = os.path.dirname(host.rstrip("/")) or "/"
        fd = os.open(parent, DIRFLAGS)
        pw = self._mount_of(list(key[:-1]))[1] if key else False
        return Loc(fd, os.path.basename(host.rstrip("/")), spath, pw, w, True)

    def resolve(self, spath, follow=True):
        """Resolve an absolute sandbox path.  follow: follow a symlink in the
        final component.  A missing final component is fine (for creation);
        a missing or non-directory intermediate raises ENOENT / ENOTDIR."""
        if not spath.startswith("/"):
            spath = "/" + spath
        if "\0" in spath:
            raise fserr(errno.EINVAL)
        trailing = spath.endswith("/") and spath.strip("/") != ""
        todo = [c for c in spath.split("/")]
        todo.reverse()  # a stack: pop() gives the next component
        cur = []
        fds = [self._open_mount(())]
        links = 0
        try:
            while True:
                while todo and todo[-1] in ("", "."):
                    todo.pop()
                if not todo:
                    break
                c = todo.pop()
                if c == "..":
                    if cur:
                        cur.pop()
                        os.close(fds.pop())
                    continue
                while todo and todo[-1] in ("", "."):
                    todo.pop()
                last = not todo
                if len(c.encode("utf-8", "surrogateescape")) > 255:
                    raise fserr(errno.ENAMETOOLONG)
                cand = cur + [c]
                key = tuple(cand)
                if key in self.mounts:
                    if last:
                        sp = "/" + "/".join(cand)
                        return self._mountroot_loc(key, sp)
                    fds.append(self._open_mount(key))
                    cur = cand
                    continue
                dfd = fds[-1]
                try:
                    s = os.stat(c, dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        w = self._mount_of(cur)[1]
                        return Loc(os.dup(dfd), c, "/" + "/".join(cand), w, w)
                    raise fserr(errno.ENOENT)
                except NotADirectoryError:
                    raise fserr(errno.ENOTDIR)
                if st.S_ISLNK(s.st_mode) and (not last or follow or trailing):
                    links += 1
                    if links > MAXLINKS:
                        raise fserr(errno.ELOOP)
                    target = os.readlink(c, dir_fd=dfd)
                    if target.startswith("/"):
                        while len(fds) > 1:
                            os.close(fds.pop())
                        cur = []
                    parts = target.split("/")
                    parts.reverse()
                    todo.extend(parts)
                    continue
                if last:
                    if trailing and not st.S_ISDIR(s.st_mode):
                        raise fserr(errno.ENOTDIR)
                    w = self._mount_of(cur)[1]
                    return Loc(os.dup(dfd), c, "/" + "/".join(cand), w, w)
                if not st.S_ISDIR(s.st_mode):
                    raise fserr(errno.ENOTDIR)
                try:
                    nfd = os.open(c, DIRFLAGS | os.O_NOFOLLOW, dir_fd=dfd)
                except OSError as e:
                    raise fserr(e.errno)
                fds.append(nfd)
                cur = cand
            # resolved to a directory that is the current top of the stack
            key = tuple(cur)
            if key in self.mounts:
                return self._mountroot_loc(key, "/" + "/".join(cur))
            # re-derive parent fd + name for a plain directory
            name = cur[-1]
            w = self._mount_of(cur[:-1])[1]
            return Loc(os.dup(fds[-2]), name, "/" + "/".join(cur), w, w)
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass

    # -- operations (raise OSError; spath-level messages are built by callers) --

    def lstat(self, spath):
        with self.resolve(spath, follow=False) as loc:
            return loc.lstat()

    def stat(self, spath):
        with self.resolve(spath, follow=True) as loc:
            return loc.lstat()

    def child_lstat(self, dirfd, parent_spath, name):
        sp = (parent_spath.rstrip("/") + "/" + name) if parent_spath != "/" else "/" + name
        key = tuple(c for c in sp.split("/") if c)
        if key in self.mounts:
            return os.stat(self.mounts[key][0], follow_symlinks=False), sp
        return os.stat(name, dir_fd=dirfd, follow_symlinks=False), sp

    def open_dir(self, loc):
        """fd of the directory at loc (O_RDONLY), refusing symlinks."""
        return os.open(loc.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                       dir_fd=loc.dirfd)

    def child_dir_fd(self, dirfd, parent_spath, name):
        sp = (parent_spath.rstrip("/") + "/" + name) if parent_spath != "/" else "/" + name
        key = tuple(c for c in sp.split("/") if c)
        if key in self.mounts:
            return os.open(self.mounts[key][0], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)

    def open_read(self, loc):
        return os.open(loc.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=loc.dirfd)

    def open_write_trunc(self, loc, mode=0o777):
        """O_WRONLY|O_CREAT|O_TRUNC at an already-followed location."""
        try:
            s = loc.lstat()
        except FileNotFoundError:
            s = None
        if s is not None and st.S_ISDIR(s.st_mode):
            raise fserr(errno.EISDIR)
        if not loc.writable:
            raise fserr(errno.EROFS)
        fd = os.open(loc.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     mode, dir_fd=loc.dirfd)
        try:
            os.set_blocking(fd, True)
        except OSError:
            pass
        return fd

    def mkdir(self, loc, mode=0o777):
        if loc.exists():
            raise fserr(errno.EEXIST)
        if not loc.parent_writable:
            raise fserr(errno.EROFS)
        os.mkdir(loc.name, mode, dir_fd=loc.dirfd)

    def unlink(self, loc):
        if loc.mountroot:
            raise fserr(errno.EBUSY)
        if not loc.parent_writable:
            loc.lstat()
            raise fserr(errno.EROFS)
        os.unlink(loc.name, dir_fd=loc.dirfd)

    def rename(self, src, dst):
        if src.mountroot or dst.mountroot:
            raise fserr(errno.EBUSY)
        if not src.parent_writable or not dst.parent_writable:
            raise fserr(errno.EROFS)
        if self._mount_key(src.spath) != self._mount_key(dst.spath):
            raise fserr(errno.EXDEV)
        os.rename(src.name, dst.name, src_dir_fd=src.dirfd, dst_dir_fd=dst.dirfd)

    def _mount_key(self, spath):
        comps = [c for c in spath.split("/") if c][:-1]
        for i in range(len(comps), -1, -1):
            if tuple(comps[:i]) in self.mounts:
                return tuple(comps[:i])
        return ()

    def _proc_path(self, loc):
        fd = os.open(loc.name, O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=loc.dirfd)
        return fd, "/proc/self/fd/%d" % fd

    def chmod(self, loc, mode):
        s = loc.lstat()
        if st.S_ISLNK(s.st_mode):
            raise fserr(errno.ELOOP)
        if not loc.writable:
            raise fserr(errno.EROFS)
        fd, p = self._proc_path(loc)
        try:
            os.chmod(p, mode)
        finally:
            os.close(fd)

    def chown(self, loc, uid, gid):
        s = loc.lstat()
        if st.S_ISLNK(s.st_mode):
            raise fserr(errno.ELOOP)
        if not loc.writable:
            raise fserr(errno.EROFS)
        fd, p = self._proc_path(loc)
        try:
            os.chown(p, uid, gid)
        finally:
            os.close(fd)

    def rmtree(self, loc):
        """os.RemoveAll: unlink a non-directory (symlinks not followed),
        delete a directory recursively; a missing path is not an error."""
        try:
            s = loc.lstat()
        except FileNotFoundError:
            return
        if not st.S_ISDIR(s.st_mode):
            self.unlink(loc)
            return
        if not loc.writable:
            raise fserr(errno.EROFS)
        dfd = self.open_dir(loc)
        try:
            self._rm_contents(dfd)
        finally:
            os.close(dfd)
        if loc.mountroot:
            raise fserr(errno.EBUSY)
        if not loc.parent_writable:
            raise fserr(errno.EROFS)
        try:
            os.rmdir(loc.name, dir_fd=loc.dirfd)
        except FileNotFoundError:
            pass

    def _rm_contents(self, dfd):
        for name in os.listdir(dfd):
            try:
                s = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if st.S_ISDIR(s.st_mode):
                try:
                    cfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
                except FileNotFoundError:
                    continue
                try:
                    self._rm_contents(cfd)
                finally:
                    os.close(cfd)
                try:
                    os.rmdir(name, dir_fd=dfd)
                except FileNotFoundError:
                    pass
            else:
                try:
                    os.unlink(name, dir_fd=dfd)
                except FileNotFoundError:
                    pass

    def makedirs(self, spath, mode=0o777):
        """os.MkdirAll: create every missing component (mode before umask);
        an existing directory is fine, also one made meanwhile; returns the
        list of created sandbox paths. An error carries the component that
        failed in its .spath."""
        comps = [c for c in spath.split("/") if c]
        created = []
        sp = ""
        for c in comps:
            sp = sp + "/" + c
            try:
                with self.resolve(sp, follow=True) as loc:
                    try:
                        s = loc.lstat()
                    except FileNotFoundError:
                        s = None
                    if s is not None:
                        if not st.S_ISDIR(s.st_mode):
                            raise fserr(errno.ENOTDIR, sp)
                        continue
                    try:
                        self.mkdir(loc, mode)
                        created.append(sp)
                    except FileExistsError:
                        pass
            except OSError as e:
                if getattr(e, "spath", None) is None:
                    e.spath = sp
                raise
        return created


_user_cache = {}
_group_cache = {}


def _cached_name(cache, lookup, num):
    """The name for a uid/gid, or the number as text when it has none
    (as execd reports it)."""
    n = cache.get(num)
    if n is None:
        try:
            n = lookup(num)
        except KeyError:
            n = str(num)
        cache[num] = n
    return n


def user_name(uid):
    return _cached_name(_user_cache, lambda u: pwd.getpwuid(u).pw_name, uid)


def group_name(gid):
    return _cached_name(_group_cache, lambda g: grp.getgrgid(g).gr_name, gid)


def lookup_user(name):
    try:
        p = pwd.getpwnam(name)
        return p.pw_uid, p.pw_gid
    except KeyError:
        return None


def lookup_group(name):
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def file_type(mode):
    if st.S_ISLNK(mode):
        return "symlink"
    if st.S_ISDIR(mode):
        return "directory"
    if st.S_ISREG(mode):
        return "file"
    return "other"


def file_info(spath, s):
    from .util import go_time
    return {
        "path": spath,
        "type": file_type(s.st_mode),
        "size": s.st_size,
        "modified_at": go_time(s.st_mtime_ns),
        "created_at": go_time(s.st_ctime_ns),
        "owner": user_name(s.st_uid),
        "group": group_name(s.st_gid),
        "mode": int(oct(s.st_mode & 0o777)[2:]),
    }

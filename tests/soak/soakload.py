"""The soak's workload: seeded random file operations done on an osbfs
mount and on a local reference directory side by side, while the server
injects faults.  test_soak.py drives it; this module defines no tests.

Every operation is done on the mount first, then on the reference.  When
both succeed, or both fail with the same errno, they agree.  When only the
mount fails (a fault osbfs could not hide, shown to the caller as an
error), the operation's outcome is what the mount shows: the touched paths
are copied from the mount into the reference (with the faults paused so
that the truth can be read), and the case is counted, never hidden.  When
only the reference fails, or the mount's read gives other bytes than the
reference's, that is a difference.

The tree lives under w/ of the mount.  Jobs (started through the control
tree) write jobs-out/jN.txt and append one line "job N TOKEN" to joblog;
the test checks that every line appears exactly once.
"""

import collections
import errno
import io
import os
import random
import shutil
import stat
import subprocess
import tarfile
import time

import jobhelp

# names with the characters the file API makes hard ($ takes another route)
NAMES = ["a", "b", "c.txt", "d e", "f$g", "h%i", "j#k", "l+m", "n&o", "p?q", "r.py",
         "s_long_name_" + "x" * 40, "t", "u", "v.o", "w~"]
DIRNAMES = ["d1", "d2", "d 3", "d$4", "src", "lib", "out"]
MODES = [0o644, 0o644, 0o644, 0o600, 0o755, 0o640]
MAX_FILES = 300
HELD_MAX = 4
MAX_DEPTH = 12

# the errnos a fault may show through the mount; any other errno the
# reference did not give is a difference
FAULT_ERRNOS = (errno.EIO, errno.ETIMEDOUT, errno.ECONNRESET, errno.EAGAIN, errno.ENOTCONN)


class Difference(Exception):
    pass


class Soak:
    def __init__(self, mount, ref, rng, log, faults_on, faults_off, oplog=None):
        self.m = mount
        self.ref = ref
        self.rng = rng
        self.log = log
        self.faults_on = faults_on
        self.faults_off = faults_off
        self.ops = collections.Counter()
        self.failed = collections.Counter()   # (kind, errno) -> n: the mount failed, the reference resynced
        self.differences = []
        self.held = []        # (rel, mount fd, ref fd)
        self.jobs = []        # started and not yet waited: (jid, n, token, outputs)
        self.job_tokens = {}  # token -> "done" | "started" | "unknown" (the start failed)
        self.job_n = 0
        self.current = None   # (description, start time) for the watchdog
        self.history = collections.deque(maxlen=40)
        self.oplog = oplog    # a file: every operation, one a line

    # -- paths ---------------------------------------------------------------

    def mp(self, rel):
        return self.m.p(rel)

    def rp(self, rel):
        return os.path.join(self.ref, rel)

    def tree(self):
        """(files, dirs, links) under w/ of the reference, relative paths."""
        files, dirs, links = [], ["w"], []
        for r, ds, fs in os.walk(self.rp("w")):
            rel = os.path.relpath(r, self.ref)
            for d in ds:
                p = os.path.join(rel, d)
                if os.path.islink(self.rp(p)):
                    links.append(p)
                else:
                    dirs.append(p)
            for f in fs:
                p = os.path.join(rel, f)
                (links if os.path.islink(self.rp(p)) else files).append(p)
        return files, dirs, links

    def data(self, n=None):
        r = self.rng
        if n is None:
            n = r.choice([0, 1, 10, 100, 1000, 4096, 5000, 20000, 70000, 200000]) + r.randint(0, 99)
        return r.randbytes(n)

    # -- running one operation on both sides ------------------------------------

    def note(self, text):
        line = "%s %d %s" % (time.strftime("%H:%M:%S"), sum(self.ops.values()), text)
        self.history.append(line)
        if self.oplog:
            self.oplog.write(line + "\n")

    def both(self, kind, fn, touched, desc=""):
        """fn(root) on the mount, then on the reference; settles the
        outcome as the module's docstring says."""
        self.ops[kind] += 1
        self.note("%s %s %s" % (kind, touched, desc))
        self.current = ("%s %s" % (kind, touched), time.monotonic())
        merr = None
        try:
            fn(self.m.p())
        except OSError as e:
            merr = e
        rerr = None
        try:
            fn(self.ref)
        except OSError as e:
            rerr = e
        me = merr.errno if merr else None
        re_ = rerr.errno if rerr else None
        if me == re_:
            return me
        if me in FAULT_ERRNOS and re_ is None:
            self.failed[(kind, errno.errorcode.get(me, me))] += 1
            self.log("  %s %s failed on the mount: %s (the reference takes the mount's state)"
                     % (kind, touched, merr))
        else:
            self.difference("%s %s: the mount gave %s, the reference %s"
                            % (kind, touched, merr or "success", rerr or "success"))
        self.resync(touched)
        return me

    def difference(self, text):
        self.log("DIFFERENCE: %s\n  after:\n    %s" % (text, "\n    ".join(self.history)))
        self.differences.append(text)

    def retrying(self, fn, what, tries=40):
        """fn() until it does not fail with a fault's errno (with the
        faults paused after a few tries)."""
        paused = False
        try:
            for i in range(tries):
                try:
                    return fn()
                except OSError as e:
                    if e.errno not in FAULT_ERRNOS or i == tries - 1:
                        raise
                    if i == 3 and not paused:
                        self.faults_off()
                        paused = True
                    time.sleep(0.5)
        finally:
            if paused:
                self.faults_on()

    def resync(self, touched):
        """Copies the touched paths from the mount into the reference."""
        self.close_held()
        self.faults_off()
        try:
            for rel in touched:
                self.retrying(lambda: self._copy_from_mount(rel), "resync " + rel)
        finally:
            self.faults_on()

    def _copy_from_mount(self, rel):
        rp = self.rp(rel)
        if os.path.lexists(rp):
            if os.path.isdir(rp) and not os.path.islink(rp):
                shutil.rmtree(rp)
            else:
                os.unlink(rp)
        try:
            st = os.lstat(self.mp(rel))
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(self.mp(rel)), rp)
        elif stat.S_ISDIR(st.st_mode):
            os.mkdir(rp)
            for n in os.listdir(self.mp(rel)):
                self._copy_from_mount(os.path.join(rel, n))
            os.chmod(rp, stat.S_IMODE(st.st_mode))
        else:
            with open(self.mp(rel), "rb") as f:
                b = f.read()
            with open(rp, "wb") as f:
                f.write(b)
            os.chmod(rp, stat.S_IMODE(st.st_mode))

    # -- the operations --------------------------------------------------------

    def pick_file(self, files):
        # now and then a file held open: renamed over, unlinked, written
        # by name while a descriptor is open on it
        if self.held and self.rng.random() < 0.2:
            rel = self.rng.choice(self.held)[0]
            if rel in files:
                return rel
        return self.rng.choice(files) if files else None

    def new_name(self, dirs):
        d = self.rng.choice(dirs)
        return os.path.join(d, self.rng.choice(NAMES))

    def op_write_new(self, files, dirs, links):
        rel = self.new_name(dirs)
        data, mode = self.data(), self.rng.choice(MODES)

        def fn(root):
            p = os.path.join(root, rel)
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, data)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        self.both("create", fn, [rel])

    def op_pwrite(self, files, dirs, links):
        rel = self.pick_file(files)
        if not rel:
            return
        off = self.rng.randint(0, 250000)
        data = self.data(self.rng.randint(1, 30000))

        def fn(root):
            fd = os.open(os.path.join(root, rel), os.O_WRONLY | os.O_NOFOLLOW)
            try:
                os.pwrite(fd, data, off)
            finally:
                os.close(fd)
        self.both("pwrite", fn, [rel])

    def op_append(self, files, dirs, links):
        rel = self.pick_file(files)
        if not rel:
            return
        data = self.data(self.rng.randint(1, 3000))

        def fn(root):
            fd = os.open(os.path.join(root, rel), os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        self.both("append", fn, [rel])

    def op_truncate(self, files, dirs, links):
        rel = self.pick_file(files)
        if not rel:
            return
        size = self.rng.choice([0, self.rng.randint(0, 100000)])
        self.both("truncate", lambda root: os.truncate(os.path.join(root, rel), size), [rel])

    def op_editor_save(self, files, dirs, links):
        rel = self.pick_file(files) if self.rng.random() < 0.8 else self.new_name(dirs)
        if not rel:
            return
        d, n = os.path.split(rel)
        tmp = os.path.join(d, "." + n + ".swp%d" % self.rng.randint(0, 999))
        data = self.data()
        try:
            mode = stat.S_IMODE(os.lstat(self.rp(rel)).st_mode)
        except OSError:
            mode = 0o644
        do_fsync = self.rng.random() < 0.5

        def fn(root):
            p = os.path.join(root, tmp)
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, data)
                os.fchmod(fd, mode)
                if do_fsync and root != self.ref:
                    try:
                        os.fsync(fd)
                    except OSError as e:
                        # fsync may fail under faults: the data stays local
                        # and goes later; nothing the reference must follow
                        if e.errno not in FAULT_ERRNOS:
                            raise
                        self.failed[("fsync", errno.errorcode.get(e.errno))] += 1
            finally:
                os.close(fd)
            os.rename(p, os.path.join(root, rel))
        self.both("editor_save", fn, [tmp, rel])

    def op_unlink(self, files, dirs, links):
        rel = self.pick_file(files + links)
        if not rel:
            return
        self.both("unlink", lambda root: os.unlink(os.path.join(root, rel)), [rel])

    def op_rename_file(self, files, dirs, links):
        src = self.pick_file(files + links)
        if not src:
            return
        dst = self.new_name(dirs)
        self.both("rename", lambda root: os.rename(os.path.join(root, src), os.path.join(root, dst)),
                  [src, dst])

    def op_mkdir(self, files, dirs, links):
        if len(dirs) > 25:
            return
        rel = os.path.join(self.rng.choice(shallow(dirs)), self.rng.choice(DIRNAMES))
        self.both("mkdir", lambda root: os.mkdir(os.path.join(root, rel), 0o755), [rel])

    def op_rename_dir(self, files, dirs, links):
        cand = [d for d in dirs if d != "w"]
        if not cand:
            return
        src = self.rng.choice(cand)
        parent = self.rng.choice([d for d in dirs if not (d + "/").startswith(src + "/")])
        dst = os.path.join(parent, self.rng.choice(DIRNAMES))
        if (dst + "/").startswith(src + "/"):
            return
        below = max(d.count("/") - src.count("/") for d in dirs if (d + "/").startswith(src + "/"))
        if dst.count("/") + below > MAX_DEPTH:
            return   # the tree stays shallow enough for hours of this
        self.both("rename_dir", lambda root: os.rename(os.path.join(root, src), os.path.join(root, dst)),
                  [src, dst])

    def op_rmtree(self, files, dirs, links):
        cand = [d for d in dirs if d != "w"]
        if not cand:
            return
        rel = self.rng.choice(cand)

        def fn(root):
            p = os.path.join(root, rel)
            # bottom-up, as rm -r does: unlink files, then rmdir
            for r, ds, fs in os.walk(p, topdown=False):
                for f in fs:
                    os.unlink(os.path.join(r, f))
                for d in ds:
                    q = os.path.join(r, d)
                    if os.path.islink(q):
                        os.unlink(q)
                    else:
                        os.rmdir(q)
            os.rmdir(p)
        self.both("rmtree", fn, [rel])

    def op_chmod(self, files, dirs, links):
        rel = self.pick_file(files)
        if not rel:
            return
        mode = self.rng.choice(MODES)
        self.both("chmod", lambda root: os.chmod(os.path.join(root, rel), mode), [rel])

    def op_symlink(self, files, dirs, links):
        rel = self.new_name(dirs)
        target = self.rng.choice(NAMES + ["missing", "../x"])
        self.both("symlink", lambda root: os.symlink(target, os.path.join(root, rel)), [rel])

    def op_untar(self, files, dirs, links):
        if len(files) > MAX_FILES - 40:
            return
        rel = os.path.join(self.rng.choice(shallow(dirs)), "t%d" % self.rng.randint(0, 9999))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
            sub = ["", "src/", "src/pkg/", "doc/"]
            for d in sub[1:]:
                ti = tarfile.TarInfo(d.rstrip("/"))
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            for i in range(self.rng.randint(3, 30)):
                ti = tarfile.TarInfo(self.rng.choice(sub) + "f%d%s" % (i, self.rng.choice(["", ".c", " x", "$y"])))
                b = self.data(self.rng.choice([0, 10, 300, 3000, 40000]))
                ti.size, ti.mode, ti.mtime = len(b), self.rng.choice(MODES), 1700000000 + i
                t.addfile(ti, io.BytesIO(b))
            ti = tarfile.TarInfo("src/link")
            ti.type, ti.linkname = tarfile.SYMTYPE, "pkg"
            t.addfile(ti)
        tarbytes = buf.getvalue()

        def fn(root):
            p = os.path.join(root, rel)
            os.mkdir(p, 0o755)
            r = subprocess.run(["tar", "--no-same-owner", "-xf", "-", "-C", p], input=tarbytes,
                               stderr=subprocess.PIPE)
            if r.returncode != 0:
                raise OSError(errno.EIO, "tar: " + r.stderr.decode(errors="replace")[-300:])
        self.both("untar", fn, [rel])

    # files held open across renames and unlinks

    def op_hold(self, files, dirs, links):
        rel = self.pick_file(files)
        if not rel or len(self.held) >= HELD_MAX:
            return
        fds = []

        def fn(root):
            fds.append(os.open(os.path.join(root, rel), os.O_RDWR | os.O_NOFOLLOW))
        if self.both("hold", fn, [rel]) is None and len(fds) == 2:
            self.held.append((rel, fds[0], fds[1]))
        else:
            for fd in fds:
                os.close(fd)

    def op_held_io(self, files, dirs, links):
        if not self.held:
            return
        rel, mfd, rfd = self.rng.choice(self.held)
        self.ops["held_io"] += 1
        self.note("held_io %s" % rel)
        off = self.rng.randint(0, 100000)
        if self.rng.random() < 0.5:
            data = self.data(self.rng.randint(1, 20000))
            try:
                os.pwrite(mfd, data, off)
            except OSError as e:
                self.difference("write through a held file (%s) failed: %s" % (rel, e))
                self.close_held()
                return
            os.pwrite(rfd, data, off)
        else:
            try:
                got = self.retrying(lambda: os.pread(mfd, 50000, off), "held read")
            except OSError as e:
                self.difference("read through a held file (%s) failed: %s" % (rel, e))
                self.close_held()
                return
            want = os.pread(rfd, 50000, off)
            if got != want:
                self.difference("read through a held file (once %s) at %d: %d bytes, %d expected"
                                % (rel, off, len(got), len(want)))

    def close_held(self):
        for rel, mfd, rfd in self.held:
            try:
                os.close(mfd)
            except OSError:
                pass
            os.close(rfd)
        self.held = []

    def op_held_close(self, files, dirs, links):
        if not self.held:
            return
        i = self.rng.randrange(len(self.held))
        rel, mfd, rfd = self.held.pop(i)
        self.ops["held_close"] += 1
        try:
            os.close(mfd)
        except OSError as e:
            self.difference("close of a held file (once %s): %s" % (rel, e))
        os.close(rfd)

    # reads checked against the reference

    def op_read(self, files, dirs, links):
        rel = self.pick_file(files) if self.rng.random() < 0.9 else self.new_name(dirs)
        if not rel:
            return
        self.ops["read"] += 1
        self.note("read %s" % rel)
        self.current = ("read " + rel, time.monotonic())

        def rd(root):
            try:
                fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                return None
            try:
                chunks = []
                while True:
                    b = os.read(fd, 1 << 20)
                    if not b:
                        return b"".join(chunks)
                    chunks.append(b)
            finally:
                os.close(fd)
        try:
            want = rd(self.ref)
        except OSError as e:
            want = e.errno   # a symlink (O_NOFOLLOW), a directory
        try:
            got = self.retrying(lambda: rd(self.m.p()), "read")
        except OSError as e:
            got = e.errno
            if got != want:
                self.difference("read %s failed: %s (the reference: %s)" % (rel, e, want))
            return
        if got != want:
            def show(v):
                return "missing" if v is None else "errno %d" % v if isinstance(v, int) else "%d bytes" % len(v)
            self.difference("read %s: %s, the reference %s" % (rel, show(got), show(want)))

    def op_stat(self, files, dirs, links):
        rel = self.rng.choice(files + dirs + links)
        self.ops["stat"] += 1
        self.note("stat %s" % rel)
        try:
            st = self.retrying(lambda: os.lstat(self.mp(rel)), "stat")
        except OSError as e:
            self.difference("lstat %s: %s" % (rel, e))
            return
        rs = os.lstat(self.rp(rel))
        if stat.S_IFMT(st.st_mode) != stat.S_IFMT(rs.st_mode) or \
                stat.S_IMODE(st.st_mode) != stat.S_IMODE(rs.st_mode) or \
                (stat.S_ISREG(st.st_mode) and st.st_size != rs.st_size):
            self.difference("lstat %s: mode %o size %d, the reference mode %o size %d"
                            % (rel, st.st_mode, st.st_size, rs.st_mode, rs.st_size))

    def op_listdir(self, files, dirs, links):
        rel = self.rng.choice(dirs)
        self.ops["listdir"] += 1
        self.note("listdir %s" % rel)
        try:
            got = sorted(self.retrying(lambda: os.listdir(self.mp(rel)), "listdir"))
        except OSError as e:
            self.difference("listdir %s: %s" % (rel, e))
            return
        want = sorted(os.listdir(self.rp(rel)))
        if got != want:
            self.difference("listdir %s: %s more, %s missing"
                            % (rel, sorted(set(got) - set(want)), sorted(set(want) - set(got))))

    def op_fsync(self, files, dirs, links):
        rel = self.pick_file(files)
        if not rel:
            return
        self.ops["fsync"] += 1
        self.note("fsync %s" % rel)
        try:
            fd = os.open(self.mp(rel), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as e:
            if e.errno not in FAULT_ERRNOS:
                self.difference("open %s for fsync: %s" % (rel, e))
            return
        try:
            os.fsync(fd)
        except OSError as e:
            # the promise: fsync fails only when the sandbox could not
            # take the data (it stays local and is retried)
            self.failed[("fsync", errno.errorcode.get(e.errno, e.errno))] += 1
        finally:
            os.close(fd)

    # jobs through the control tree

    def op_job(self, files, dirs, links, sync=None):
        self.job_n += 1
        n = self.job_n
        token = "%016x" % self.rng.getrandbits(64)
        k = self.rng.randint(1, 50)
        body = ("soak job %d %s\n" % (n, token)).encode() * k
        out = "jobs-out/j%d.txt" % n
        outputs = {out: body}
        cmd = ("echo 'job %d %s' >> joblog && for i in $(seq %d); do echo 'soak job %d %s'; done > %s"
               " && chmod 644 %s" % (n, token, k, n, token, out, out))
        # some jobs copy a file of the tree: the job sees every write made before it
        if sync is None:
            sync = self.rng.random() < 0.3
        src = self.pick_file(files) if sync else None
        if src:
            copy = "jobs-out/j%d.copy" % n
            cmd += " && cat %s > %s && chmod 644 %s" % (shquote(src), copy, copy)
            with open(self.rp(src), "rb") as f:
                outputs[copy] = f.read()
        self.ops["job"] += 1
        self.note("job %d %s (src %s)" % (n, token, src))
        self.current = ("job start %d" % n, time.monotonic())
        try:
            jid = jobhelp.start(self.m, cmd)
        except OSError as e:
            self.failed[("job_start", errno.errorcode.get(e.errno, e.errno))] += 1
            self.log("  job %d: start failed: %s (settled at the end)" % (n, e))
            self.job_tokens[token] = "unknown"
            self.jobs.append((None, n, token, outputs))
            return
        finally:
            self.current = None
        self.job_tokens[token] = "started"
        self.jobs.append((jid, n, token, outputs))
        if src:
            self.wait_job(len(self.jobs) - 1)

    def wait_job(self, i):
        jid, n, token, outputs = self.jobs.pop(i)
        if jid is None:
            self.jobs.append((jid, n, token, outputs))  # settled at the end
            return
        self.ops["job_wait"] += 1
        self.current = ("job wait %d %s" % (n, jid), time.monotonic())
        try:
            st = self.retrying(lambda: jobhelp.job_file(self.m, jid, "wait").strip(), "wait")
        finally:
            self.current = None
        self.job_tokens[token] = "done"
        if st != "exited 0":
            extra = []
            for f in ("info", "stderr"):
                try:
                    extra.append(jobhelp.job_file(self.m, jid, f).strip())
                except OSError as e:
                    extra.append(str(e))
            self.difference("job %d (%s, token %s) ended %r: %s" % (n, jid, token, st, " | ".join(extra)))
            self.job_tokens[token] = "failed"
            return
        for rel, b in outputs.items():
            with open(self.rp(rel), "wb") as f:
                f.write(b)
            os.chmod(self.rp(rel), 0o644)
            try:
                got = self.retrying(lambda: open(self.mp(rel), "rb").read(), "read")
            except OSError as e:
                got = e
            if got != b:
                self.difference("job %d's %s through the mount: %s" % (
                    n, rel, got if isinstance(got, OSError) else "%d bytes, %d expected" % (len(got), len(b))))

    def op_job_wait(self, files, dirs, links):
        if self.jobs:
            self.wait_job(0)

    def drain_jobs(self):
        for i in range(len(self.jobs) - 1, -1, -1):
            if self.jobs[i][0] is not None:
                self.wait_job(i)

    def settle_unknown_jobs(self):
        """Jobs whose start failed: each ran once or not at all.  Finds
        them by their command in the control tree, waits for them, and
        takes their outputs as the sandbox has them."""
        for jid, n, token, outputs in list(self.jobs):
            found = None
            for j in os.listdir(self.m.p(".osb", "jobs")):
                try:
                    if token in jobhelp.job_file(self.m, j, "cmd"):
                        found = j
                except OSError:
                    pass
            if found:
                jobhelp.job_file(self.m, found, "wait")
                self.job_tokens[token] = "done"
            else:
                self.job_tokens[token] = "not started"
            for rel in outputs:
                self._copy_from_mount(rel)
        self.jobs = []

    # -- the loop --------------------------------------------------------------

    WEIGHTS = [
        ("write_new", 10), ("pwrite", 8), ("append", 8), ("truncate", 4), ("editor_save", 10),
        ("unlink", 4), ("rename_file", 6), ("mkdir", 3), ("rename_dir", 2), ("rmtree", 0.5),
        ("chmod", 3), ("symlink", 2), ("untar", 0.7), ("hold", 3), ("held_io", 5),
        ("held_close", 2), ("read", 14), ("stat", 4), ("listdir", 3), ("fsync", 2),
        ("job", 1.5), ("job_wait", 1.5),
    ]

    def step(self):
        files, dirs, links = self.tree()
        names = [n for n, _ in self.WEIGHTS]
        weights = [w for _, w in self.WEIGHTS]
        if len(files) > MAX_FILES:
            weights = [w * (8 if n in ("unlink", "rmtree") else 1) for n, w in self.WEIGHTS]
        op = self.rng.choices(names, weights)[0]
        self.current = (op, time.monotonic())   # for the watchdog
        try:
            getattr(self, "op_" + op)(files, dirs, links)
        finally:
            self.current = None


def shallow(dirs):
    """The directories a new one may go into: its tree stays within
    MAX_DEPTH levels (an untar adds two)."""
    return [d for d in dirs if d.count("/") < MAX_DEPTH - 3] or ["w"]


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"

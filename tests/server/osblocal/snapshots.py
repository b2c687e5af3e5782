"""Snapshots of a sandbox's files: the table of snapshots, their capture,
their persistence and the restore of one into a new sandbox.

A snapshot holds what a commit of the container's filesystem would hold:
everything the sandbox can change, i.e. its writable directories
(/workspace, /home, /root, /tmp, /mnt), its /var/tmp and the upper
directories of its /usr, /etc and /var overlays (sandboxfs.py).  Nothing
else of a sandbox differs from a fresh one.  /tmp is kept, as a container
commit keeps it (it is no tmpfs in a container either).

Layout: DATA/snapshots/<id>/record.json (written atomically on every
change) and DATA/snapshots/<id>/files/ (a copy as `cp -a` makes it:
modes, owners, times, symlinks, special bits, hard links within the tree,
xattrs and the overlays' whiteouts survive; snapcopy.py).  The copy goes
to files.partial and is renamed when complete.

Sharing (snapcopy.py).  A snapshot's files are never written, so a file
two snapshots hold alike is one inode, hard-linked: a sandbox's
DATA/sandboxes/<id>/snapbase.json names the snapshot it last shared files
with (its last snapshot, or the one it was restored from) and, for each of
its regular files, its inode and ctime then and that snapshot's inode; a
capture links that inode for each file whose inode and ctime are the same
(not changed since) and copies the others.  A snapshot of a sandbox that
changed little since its last one, or since its restore, is thus a walk
and links (the bench tree: some 0.2 s, against 0.3 s to 1.5 s for a copy
on a busy disk); a first snapshot is a copy.  Files are never hard-linked
between a sandbox and a snapshot: a write in place on one would change the
other (a restore copies; snapbase.json records the copy's inodes).

States: Creating -> Ready, or Failed (reason snapshot_capture_failed and
the cause); Deleting while its files go.  Capture runs in a thread of its
own: it holds the source sandbox's lock (so the sandbox can neither be
paused nor deleted meanwhile and new execd requests wait) and stops its
processes (SIGSTOP, as a pause does) for the copy's duration.  A server
restarted while a snapshot was Creating marks it Failed; Deleting ones are
finished.

Switches (command line or POST /_admin/snapshots): "supported": false
answers as a runtime without snapshots (docs/SERVER.md); "hold": true
keeps new snapshots Creating until it is set back to false; "fail": true
makes the next captures fail.
"""

import json
import os
import shutil
import threading
import time

from .sandboxfs import WRITABLE_TOP, empty_trash
from .snapcopy import after, copy_tree
from .util import atomic_write_json, uuid_id

REASONS = {
    "Creating": ("snapshot_accepted", "Snapshot creation accepted."),
    "Ready": ("snapshot_ready", "Snapshot is ready."),
    "Deleting": ("snapshot_delete_requested", "Snapshot deletion requested."),
}
STATES = ("Creating", "Ready", "Failed", "Deleting")


class SnapshotError(Exception):
    """An answer of the API: status, code, message."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def not_found(snap_id):
    return SnapshotError(404, "SNAPSHOT::NOT_FOUND", "Snapshot %s not found" % snap_id)


def _trees(fs):
    """(name in the snapshot, host directory) of everything a snapshot keeps."""
    out = [(d, os.path.join(fs.rootfs, d)) for d in WRITABLE_TOP]
    out.append(("vartmp", fs.vartmp))
    for d in fs.sys_top:
        out.append(("sys-" + d, os.path.join(fs.sys, d, "upper")))
    return out


KNOWN = "snapbase.json"  # in a sandbox's directory: what its last snapshot shares


def _read_known(fs):
    """(snapshot id, {tree: {path: (inode, ctime, inode in the snapshot)}})
    recorded by the sandbox's last capture or its restore; (None, {})."""
    try:
        with open(os.path.join(fs.base, KNOWN)) as f:
            k = json.load(f)
        return k["snapshot"], {t: {r[0]: tuple(r[1:]) for r in rows} for t, rows in k["trees"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None, {}


def _write_known(fs, snap_id, trees):
    atomic_write_json(os.path.join(fs.base, KNOWN), {"snapshot": snap_id, "trees": trees})


class Snapshots:
    def __init__(self, app, supported=True):
        self.app = app
        self.root = os.path.join(app.data_dir, "snapshots")
        self.trash = os.path.join(app.data_dir, "trash")
        self.lock = threading.Condition(threading.RLock())
        self.recs = {}
        self.supported = supported
        self.hold = False
        self.fail = False

    # -- records ------------------------------------------------------------------

    def _dir(self, snap_id):
        return os.path.join(self.root, snap_id)

    def _save(self, rec):
        atomic_write_json(os.path.join(self._dir(rec["id"]), "record.json"), rec)

    def _set_state(self, rec, state, reason=None, message=None):
        r, m = REASONS.get(state, (None, None))
        rec.update(state=state, reason=reason or r, message=message or m, lastTransitionAt=time.time())
        self._save(rec)
        self.lock.notify_all()

    def load(self):
        os.makedirs(self.root, exist_ok=True)
        with self.lock:
            for sid in sorted(os.listdir(self.root)):
                self._load_one(sid)

    def _load_one(self, sid):
        try:
            with open(os.path.join(self._dir(sid), "record.json")) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            return
        if rec.get("state") == "Deleting":
            self._remove_files(sid)
            return
        if rec.get("state") == "Creating":
            shutil.rmtree(os.path.join(self._dir(sid), "files.partial"), ignore_errors=True)
            self._set_state(rec, "Failed", "snapshot_capture_failed",
                            "The server stopped before the capture finished.")
        self.recs[sid] = rec

    def settings(self):
        with self.lock:
            return {"supported": self.supported, "hold": self.hold, "fail": self.fail}

    def configure(self, body):
        with self.lock:
            for k in ("supported", "hold", "fail"):
                if k in body:
                    setattr(self, k, bool(body[k]))
            self.lock.notify_all()
        return self.settings()

    # -- the API ------------------------------------------------------------------

    def get(self, snap_id):
        with self.lock:
            rec = self.recs.get(snap_id) if self.supported else None
            if rec is None:
                raise not_found(snap_id)
            return dict(rec)

    def list(self, sandbox_id=None, name=None, states=()):
        with self.lock:
            out = [dict(r) for r in self.recs.values()
                   if self.supported and (sandbox_id is None or r["sandboxId"] == sandbox_id)
                   and (name is None or r.get("name") == name)
                   and (not states or r["state"] in states)]
        out.sort(key=lambda r: r["createdAt"], reverse=True)
        return out

    def create(self, sb, name):
        """A new Creating snapshot of Running sandbox @sb; its capture runs
        in a thread.  Raises SnapshotError."""
        with sb.lock:
            if sb.deleted:
                raise SnapshotError(404, "DOCKER::SANDBOX_NOT_FOUND", "Sandbox %s not found" % sb.id)
            if sb.state != "Running":
                raise SnapshotError(409, "SNAPSHOT::INVALID_SOURCE_STATE",
                                    "Snapshot can only be created from a Running sandbox.")
        if not self.supported:
            raise SnapshotError(501, "SNAPSHOT::NOT_IMPLEMENTED",
                                "Snapshot management is not implemented for this runtime.")
        now = time.time()
        rec = {"id": uuid_id(), "sandboxId": sb.id, "name": name, "createdAt": now}
        os.makedirs(self._dir(rec["id"]))
        with self.lock:
            self._set_state(rec, "Creating")
            self.recs[rec["id"]] = rec
            out = dict(rec)
        threading.Thread(target=self._capture, args=(sb, rec), name="snapshot-" + rec["id"][:8],
                         daemon=True).start()
        return out

    def delete(self, snap_id):
        with self.lock:
            rec = self.recs.get(snap_id) if self.supported else None
            if rec is None:
                raise not_found(snap_id)
            if rec["state"] == "Creating":
                raise SnapshotError(409, "SNAPSHOT::INVALID_STATE",
                                    "Snapshot %s is still being created and cannot be deleted" % snap_id)
            self._set_state(rec, "Deleting")
            del self.recs[snap_id]
        self._remove_files(snap_id)

    def check_restore(self, snap_id):
        """The record of a snapshot a sandbox may be created from."""
        if not self.supported:
            raise SnapshotError(400, "SANDBOX::API_NOT_SUPPORTED", "Snapshots are not supported by this runtime.")
        with self.lock:
            rec = self.recs.get(snap_id)
            if rec is None:
                raise not_found(snap_id)
            if rec["state"] != "Ready":
                raise SnapshotError(409, "SNAPSHOT::NOT_READY", "Snapshot %s is not ready for restore." % snap_id)
            return dict(rec)

    def restore(self, snap_id, fs):
        """Copy snapshot @snap_id's files into the new sandbox filesystem
        @fs (made, overlays not mounted yet).  The table's lock keeps the
        snapshot from being deleted meanwhile."""
        with self.lock:
            if snap_id not in self.recs:
                raise not_found(snap_id)
            files = os.path.join(self._dir(snap_id), "files")
            trees = {}
            for name, dst in _trees(fs):
                src = os.path.join(files, name)
                if os.path.isdir(src):
                    os.makedirs(dst, exist_ok=True)
                    trees[name] = [(r[0], r[3], r[4], r[1]) for r in copy_tree(src, dst, into=True)]
        after(r[2] for rows in trees.values() for r in rows)
        _write_known(fs, snap_id, trees)

    # -- capture ------------------------------------------------------------------

    def _capture(self, sb, rec):
        with self.lock:
            while self.hold and self.recs.get(rec["id"]) is rec:
                self.lock.wait()
            fail = self.fail
        try:
            if fail:
                raise OSError("capture failed (injected by /_admin/snapshots)")
            self._copy_sandbox(sb, rec["id"])
        except OSError as e:
            shutil.rmtree(os.path.join(self._dir(rec["id"]), "files.partial"), ignore_errors=True)
            with self.lock:
                self._set_state(rec, "Failed", "snapshot_capture_failed", "Snapshot capture failed: %s" % e)
            return
        with self.lock:
            self._set_state(rec, "Ready")

    def _base(self, sb):
        """The files of the Ready snapshot @sb last shared files with, and
        what it shares; (None, {})."""
        base_id, known = _read_known(sb.fs)
        with self.lock:
            rec = self.recs.get(base_id) if base_id else None
            if rec is None or rec["state"] != "Ready":
                return None, {}
        return os.path.join(self._dir(base_id), "files"), known

    def _copy_sandbox(self, sb, snap_id):
        part = os.path.join(self._dir(snap_id), "files.partial")
        os.makedirs(part)
        base, known = self._base(sb)
        trees = {}
        with sb.lock:  # neither paused nor deleted meanwhile
            if sb.deleted or sb.state != "Running":
                raise OSError("sandbox %s is no longer running" % sb.id)
            sb.freeze(True)
            try:
                for name, src in _trees(sb.fs):
                    if os.path.isdir(src) and not os.path.islink(src):
                        out = copy_tree(src, os.path.join(part, name), base and os.path.join(base, name),
                                        known.get(name))
                        trees[name] = [r[:4] for r in out]
                after(r[2] for rows in trees.values() for r in rows)
            finally:
                sb.freeze(False)
        os.rename(part, os.path.join(self._dir(snap_id), "files"))
        with sb.lock:
            if not sb.deleted:
                _write_known(sb.fs, snap_id, trees)

    def _remove_files(self, snap_id):
        d = self._dir(snap_id)
        try:
            os.makedirs(self.trash, exist_ok=True)
            os.rename(d, os.path.join(self.trash, "snapshot-" + snap_id))
        except OSError:
            shutil.rmtree(d, ignore_errors=True)
            return
        empty_trash(self.trash)

"""Checkpoints through files: .osb/snapshots/ lists the mounted sandbox's
snapshots; mkdir makes one holding everything written through the mount,
rmdir deletes one; info and wait inside (README.md, "Checkpoints through
files").  What a user checks: errnos, last_error's text, the snapshot's
files in a sandbox made from it, and the requests each action costs."""

import errno
import json
import os

import pytest

from osbtest import wait_until

SNAP_POST = "POST /v1/sandboxes/{sandboxId}/snapshots"
SNAP_LIST = "GET /v1/snapshots"
SNAP_GET = "GET /v1/snapshots/{snapshotId}"


def counts(srv):
    t = srv.stats()["total"]
    return {k: v for k, v in t.items() if "snapshots" in k}


def last_error(m):
    with open(m.p(".osb", "info")) as f:
        return json.load(f)["last_error"] or ""


def err_of(fn, *args):
    with pytest.raises(OSError) as e:
        fn(*args)
    return e.value.errno


def server_snaps(srv, sid, name=None):
    q = "?sandboxId=" + sid + ("&name=" + name if name else "")
    st, _, b = srv.request("GET", "/v1/snapshots" + q)
    assert st == 200, (st, b)
    return b["items"]


def from_snapshot(srv, snap_id):
    body = {"snapshotId": snap_id, "resourceLimits": {}, "timeout": 600}
    st, _, b = srv.request("POST", "/v1/sandboxes", body)
    assert st == 202, (st, b)
    return b["id"]


def snaps_admin(srv, **kw):
    st, b = srv.admin("POST", "/_admin/snapshots", kw)
    assert st == 200, (st, b)


def test_mkdir_keeps_unsaved_writes(server, make_mount):
    """mkdir first sends what is written (held back by a long write-back
    delay), costs one list (the kernel's lookup) and one create; ls, info,
    wait; a sandbox made from it has the bytes; rmdir deletes it."""
    m = make_mount(options=["writeback_delay=1h"])
    snaps = m.p(".osb", "snapshots")
    assert os.listdir(snaps) == []
    data = os.urandom(5000)
    with open(m.p("notes.bin"), "wb") as f:
        f.write(data)
    server.reset_stats()
    os.mkdir(os.path.join(snaps, "cp-1"))
    assert counts(server) == {SNAP_LIST: 1, SNAP_POST: 1}
    assert os.listdir(snaps) == ["cp-1"]
    assert sorted(os.listdir(os.path.join(snaps, "cp-1"))) == ["info"]
    with open(os.path.join(snaps, "cp-1", "wait")) as f:
        assert f.read() == "Ready\n"
    with open(os.path.join(snaps, "cp-1", "info")) as f:
        info = json.load(f)
    assert info["name"] == "cp-1" and info["state"] == "Ready"
    assert set(info) == {"id", "name", "state", "reason", "message", "created_at", "size"}
    sid = from_snapshot(server, info["id"])
    try:
        wait_until(lambda: server.read_file(sid, m.spath("notes.bin")) == data, 60,
                   "the snapshot's copy of notes.bin")
    finally:
        server.delete_sandbox(sid)
    os.rmdir(os.path.join(snaps, "cp-1"))
    assert os.listdir(snaps) == []
    assert server_snaps(server, m.sandbox_id) == []


def test_names_refused(server, make_mount):
    m = make_mount()
    snaps = m.p(".osb", "snapshots")
    for bad in ("-x", "a b", "x" * 64, "end.", "caf\u00e9"):
        assert err_of(os.mkdir, os.path.join(snaps, bad)) == errno.EINVAL, bad
        assert "a snapshot's name is 1 to 63" in last_error(m)
    os.mkdir(os.path.join(snaps, "taken"))
    # the kernel answers from the name it holds, before osbfs hears of it
    assert err_of(os.mkdir, os.path.join(snaps, "taken")) == errno.EEXIST
    with open(os.path.join(snaps, "taken", "wait")) as f:
        assert f.read() == "Ready\n"
    assert len(server_snaps(server, m.sandbox_id)) == 1
    os.rmdir(os.path.join(snaps, "taken"))


def test_creating_is_busy(server, make_mount):
    """rmdir of a snapshot still Creating: EBUSY, why in last_error; wait
    returns once it is Ready."""
    m = make_mount()
    snaps = m.p(".osb", "snapshots")
    snaps_admin(server, hold=True)
    try:
        os.mkdir(os.path.join(snaps, "held"))
        with open(os.path.join(snaps, "held", "info")) as f:
            assert json.load(f)["state"] == "Creating"
        assert err_of(os.rmdir, os.path.join(snaps, "held")) == errno.EBUSY
        assert "still being made (Creating)" in last_error(m)
    finally:
        snaps_admin(server, hold=False)
    with open(os.path.join(snaps, "held", "wait")) as f:
        assert f.read() == "Ready\n"
    os.rmdir(os.path.join(snaps, "held"))


def test_failed_capture_wait(server, make_mount):
    m = make_mount()
    snaps = m.p(".osb", "snapshots")
    snaps_admin(server, fail=True)
    try:
        os.mkdir(os.path.join(snaps, "bad"))
        with open(os.path.join(snaps, "bad", "wait")) as f:
            assert f.read().startswith("Failed: ")
    finally:
        snaps_admin(server, fail=False)
    os.rmdir(os.path.join(snaps, "bad"))


def test_server_without_snapshots(server, make_mount):
    m = make_mount()
    snaps = m.p(".osb", "snapshots")
    snaps_admin(server, supported=False)
    try:
        assert os.listdir(snaps) == []
        assert err_of(os.mkdir, os.path.join(snaps, "x")) == errno.EOPNOTSUPP
        assert "the server has no snapshots" in last_error(m)
    finally:
        snaps_admin(server, supported=True)


def test_lost_answer_makes_one(server, make_mount):
    """The create's answer is dropped after it was done: mkdir succeeds
    and exactly one snapshot exists (settled by a list, not resent)."""
    m = make_mount()
    server.set_faults(next=1, kinds=["reset_after"], scope="lifecycle", method="POST",
                      path="/snapshots$")
    try:
        os.mkdir(m.p(".osb", "snapshots", "once"))
    finally:
        server.clear_faults()
    assert len(server_snaps(server, m.sandbox_id, "once")) == 1
    assert os.listdir(m.p(".osb", "snapshots")) == ["once"]
    with open(m.p(".osb", "snapshots", "once", "wait")) as f:
        assert f.read() == "Ready\n"
    os.rmdir(m.p(".osb", "snapshots", "once"))


def test_ls_l_costs_one_list(server, make_mount):
    """Snapshots made elsewhere show; ls -l of them is one list request."""
    m = make_mount()
    made = []
    for i in range(3):
        st, _, b = server.request("POST", "/v1/sandboxes/%s/snapshots" % m.sandbox_id,
                                  {"name": "n%d" % i} if i else None)
        assert st == 202, (st, b)
        made.append(b["id"])
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("invalidate\n")
    server.reset_stats()
    snaps = m.p(".osb", "snapshots")
    names = os.listdir(snaps)
    for n in names:
        os.lstat(os.path.join(snaps, n))
    assert sorted(names) == sorted(["n1", "n2", made[0]])
    assert counts(server) == {SNAP_LIST: 1}
    for n in names:
        with open(os.path.join(snaps, n, "wait")) as f:
            assert f.read() == "Ready\n"
        os.rmdir(os.path.join(snaps, n))


def test_osb_snapshot_commands(server, osbc, make_sandbox):
    """osb snapshot create/list/get/delete, and a sandbox made from one
    with osb sandbox create --snapshot."""
    sid = make_sandbox()
    server.write_file(sid, "/workspace/kept.txt", b"kept\n")
    snap = json.loads(osbc.ok("-o", "json", "snapshot", "create", sid, "--name", "v1", "--wait").out)
    assert snap["name"] == "v1" and snap["status"]["state"] == "Ready" and snap["sandbox_id"] == sid
    listed = json.loads(osbc.ok("-o", "json", "snapshot", "list", "--sandbox", sid,
                                "--state", "Ready").out)["items"]
    assert [s["id"] for s in listed] == [snap["id"]]
    assert osbc.ok("-o", "raw", "snapshot", "get", snap["id"]).out == snap["id"] + "\n"
    new = osbc.ok("-o", "raw", "sandbox", "create", "--snapshot", snap["id"]).out.strip()
    try:
        assert server.read_file(new, "/workspace/kept.txt") == b"kept\n"
    finally:
        server.delete_sandbox(new)
    osbc.ok("snapshot", "delete", snap["id"])
    assert "not found" in osbc.fails("snapshot", "get", snap["id"]).err.lower()
    snaps_admin(server, supported=False)
    try:
        res = osbc.fails("snapshot", "create", sid)
        assert "not implemented" in res.err.lower(), res.describe()
    finally:
        snaps_admin(server, supported=True)

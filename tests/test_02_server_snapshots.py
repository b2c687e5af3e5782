"""The local server's snapshots (POST /v1/sandboxes/{id}/snapshots,
GET /v1/snapshots, GET|DELETE /v1/snapshots/{id}, a sandbox created with
snapshotId): statuses and bodies as the real server gives them
(docs/SERVER.md), and the files a sandbox restored from a snapshot holds,
checked on the server's data directory."""

import os
import stat

from osbtest import wait_until

SNAP_KEYS = {"id", "sandboxId", "status", "createdAt"}


def snapshot(srv, sid, name=None, want="Ready"):
    """A new snapshot of sandbox @sid, once in state @want."""
    st, h, b = srv.request("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": name} if name else None)
    assert st == 202, (st, b)
    assert b["status"]["state"] == "Creating" and b["sandboxId"] == sid
    assert h["location"] == "/v1/snapshots/" + b["id"]
    return wait_snapshot(srv, b["id"], want)


def wait_snapshot(srv, snap_id, want):
    def state():
        st, _, b = srv.request("GET", "/v1/snapshots/" + snap_id)
        assert st == 200, (st, b)
        return b if b["status"]["state"] == want else None
    return wait_until(state, 30, "snapshot %s to be %s" % (snap_id, want))


def restore(srv, snap_id, **kw):
    """A new Running sandbox made from snapshot @snap_id; its id."""
    body = {"snapshotId": snap_id, "resourceLimits": {}, "timeout": 600}
    body.update(kw)
    st, _, b = srv.request("POST", "/v1/sandboxes", body)
    assert st == 202, (st, b)
    return b["id"]


def rootfs(srv, sid):
    st, info = srv.admin("GET", "/_admin/sandboxes/" + sid)
    assert st == 200, info
    return info["rootfs"]


def manifest(top):
    """path -> what a copy must keep of it: type and mode bits, owner,
    mtime (ns), and the bytes or the link's target."""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            s = os.lstat(p)
            what = (stat.S_IFMT(s.st_mode), stat.S_IMODE(s.st_mode), s.st_uid, s.st_gid, s.st_mtime_ns)
            if stat.S_ISLNK(s.st_mode):
                what += (os.readlink(p),)
            elif stat.S_ISREG(s.st_mode):
                with open(p, "rb") as f:
                    what += (f.read(),)
            out[os.path.relpath(p, top)] = what
    return out


def make_tree(root, nfiles=300):
    """@nfiles files in /workspace/tree of a sandbox whose "/" is host
    directory @root, with the special cases a copy could lose, plus files
    in /root, /home and /tmp."""
    ws = os.path.join(root, "workspace", "tree")
    os.makedirs(os.path.join(ws, "empty"))
    for i in range(nfiles):
        d = os.path.join(ws, "d%02d" % (i % 20))
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "f%03d" % i)
        with open(p, "wb") as f:
            f.write(bytes(range(256)) * (i % 7) + b"file %d\n" % i)
        os.chmod(p, (0o600, 0o644, 0o755, 0o4755, 0o2711)[i % 5])
        os.utime(p, ns=(1_500_000_000_123_456_789 + i, 1_600_000_000_987_654_321 + i))
    os.symlink("d00/f000", os.path.join(ws, "rel-link"))
    os.symlink("/etc/nowhere", os.path.join(ws, "dangling"))
    os.link(os.path.join(ws, "d01", "f001"), os.path.join(ws, "hardlink"))
    sticky = os.path.join(ws, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    os.chown(os.path.join(ws, "d02", "f002"), 1234, 5678)
    for d in ("root", "home", "tmp"):
        with open(os.path.join(root, d, "in-" + d), "wb") as f:
            f.write(b"kept in /%s\n" % d.encode())
    for d, _, _ in os.walk(ws, topdown=False):
        os.utime(d, ns=(1_400_000_000_000_000_001, 1_400_000_000_000_000_002))


# ---------------------------------------------------------------- the API

def test_snapshot_create_get_list_delete(server, make_sandbox):
    a, b = make_sandbox(), make_sandbox()
    server.reset_stats()
    s1 = snapshot(server, a)
    s2 = snapshot(server, a, name="before-import")
    s3 = snapshot(server, b)
    assert set(s1) == SNAP_KEYS and set(s2) == SNAP_KEYS | {"name"} and s2["name"] == "before-import"
    assert s1["status"]["reason"] == "snapshot_ready" and s1["status"]["lastTransitionAt"]

    def ids(query):
        st, _, r = server.request("GET", "/v1/snapshots?" + query)
        assert st == 200, (st, r)
        return [x["id"] for x in r["items"]], r["pagination"]

    got, pg = ids("sandboxId=" + a)
    assert got == [s2["id"], s1["id"]]  # newest first
    assert pg == {"page": 1, "pageSize": 20, "totalItems": 2, "totalPages": 1, "hasNextPage": False}
    assert ids("sandboxId=%s&pageSize=1" % a) == ([s2["id"]], {"page": 1, "pageSize": 1, "totalItems": 2,
                                                                "totalPages": 2, "hasNextPage": True})
    assert ids("sandboxId=%s&pageSize=1&page=2" % a)[0] == [s1["id"]]
    assert ids("sandboxId=%s&pageSize=1&page=3" % a)[0] == []
    assert ids("sandboxId=%s&state=Ready&state=Failed" % b)[0] == [s3["id"]]
    assert ids("sandboxId=%s&state=Creating" % b)[0] == []
    assert ids("name=before-import")[0] == [s2["id"]]
    assert ids("sandboxId=nope") == ([], {"page": 1, "pageSize": 20, "totalItems": 0, "totalPages": 0,
                                          "hasNextPage": False})

    st, _, r = server.request("DELETE", "/v1/snapshots/" + s1["id"])
    assert st == 204
    st, _, r = server.request("GET", "/v1/snapshots/" + s1["id"])
    assert st == 404 and r == {"code": "SNAPSHOT::NOT_FOUND", "message": "Snapshot %s not found" % s1["id"]}
    assert server.request("DELETE", "/v1/snapshots/" + s1["id"])[0] == 404
    assert ids("sandboxId=" + a)[0] == [s2["id"]]

    counts = server.stats()["total"]
    assert counts["POST /v1/sandboxes/{sandboxId}/snapshots"] == 3
    assert counts["GET /v1/snapshots"] == 9
    assert counts["DELETE /v1/snapshots/{snapshotId}"] == 2
    assert counts["GET /v1/snapshots/{snapshotId}"] >= 4

    server.set_faults(scope="lifecycle", path="/snapshots", next=1, kinds=["503"])
    try:
        assert server.request("GET", "/v1/snapshots/" + s2["id"], raw=True)[0] == 503
        assert server.request("GET", "/v1/snapshots/" + s2["id"])[0] == 200
    finally:
        server.clear_faults()


def test_snapshot_errors(server, sandbox):
    def post(sid, body, raw=False):
        return server.request("POST", "/v1/sandboxes/%s/snapshots" % sid, body, raw=raw)

    st, _, b = post("nope", {})
    assert st == 404 and b["code"] == "DOCKER::SANDBOX_NOT_FOUND"
    for body, typ in (({"name": ""}, "string_too_short"), ({"name": 5}, "string_type"),
                      ({"name": "x", "other": 1}, "extra_forbidden"), ([1], "model_attributes_type")):
        st, _, b = post(sandbox, body)
        assert st == 422 and b["detail"][0]["type"] == typ, (body, st, b)
    st, _, b = server.request("GET", "/v1/snapshots?pageSize=0")
    assert st == 422 and b["detail"][0]["loc"] == ["query", "pageSize"]
    st, _, b = server.request("GET", "/v1/snapshots?pageSize=201")
    assert st == 422
    st, _, b = server.request("GET", "/v1/sandboxes/%s/snapshots" % sandbox)
    assert st == 405
    st, _, b = server.request("DELETE", "/v1/snapshots/nope")
    assert st == 404 and b["code"] == "SNAPSHOT::NOT_FOUND"
    st, _, b = server.request("POST", "/v1/sandboxes", {"snapshotId": "nope", "resourceLimits": {}})
    assert st == 404 and b == {"code": "SNAPSHOT::NOT_FOUND", "message": "Snapshot nope not found"}

    assert server.request("POST", "/v1/sandboxes/%s/pause" % sandbox)[0] == 202
    try:
        st, _, b = post(sandbox, None)
        assert st == 409 and b == {"code": "SNAPSHOT::INVALID_SOURCE_STATE",
                                   "message": "Snapshot can only be created from a Running sandbox."}
    finally:
        server.request("POST", "/v1/sandboxes/%s/resume" % sandbox)


def test_snapshot_creating_and_failed(make_server):
    s = make_server()
    sid = s.create_sandbox()
    assert s.admin("POST", "/_admin/snapshots", {"hold": True}) == (200, {"supported": True, "hold": True,
                                                                           "fail": False})
    st, _, held = s.request("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
    assert st == 202
    st, _, b = s.request("DELETE", "/v1/snapshots/" + held["id"])
    assert st == 409 and b["code"] == "SNAPSHOT::INVALID_STATE"
    st, _, b = s.request("POST", "/v1/sandboxes", {"snapshotId": held["id"], "resourceLimits": {}})
    assert st == 409 and b == {"code": "SNAPSHOT::NOT_READY",
                               "message": "Snapshot %s is not ready for restore." % held["id"]}
    st, _, b = s.request("GET", "/v1/snapshots?state=Creating")
    assert [x["id"] for x in b["items"]] == [held["id"]]
    s.admin("POST", "/_admin/snapshots", {"hold": False, "fail": True})
    failed = snapshot(s, sid, want="Failed")
    assert failed["status"]["reason"] == "snapshot_capture_failed"
    assert "capture failed" in failed["status"]["message"]
    wait_snapshot(s, held["id"], "Failed")
    assert s.request("DELETE", "/v1/snapshots/" + failed["id"])[0] == 204


def test_no_snapshots_switch(make_server):
    s = make_server(extra_args=["--no-snapshots"])
    sid = s.create_sandbox()
    st, _, b = s.request("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
    assert st == 501 and b == {"code": "SNAPSHOT::NOT_IMPLEMENTED",
                               "message": "Snapshot management is not implemented for this runtime."}
    assert s.request("GET", "/v1/snapshots")[2]["items"] == []
    st, _, b = s.request("POST", "/v1/sandboxes", {"snapshotId": "x", "resourceLimits": {}})
    assert st == 400 and b["code"] == "SANDBOX::API_NOT_SUPPORTED"
    s.admin("POST", "/_admin/snapshots", {"supported": True})
    snap = snapshot(s, sid)
    s.admin("POST", "/_admin/snapshots", {"supported": False})
    assert s.request("GET", "/v1/snapshots/" + snap["id"])[0] == 404
    assert s.request("GET", "/v1/snapshots")[2]["pagination"]["totalItems"] == 0


# ---------------------------------------------------------------- the files

def test_restore_has_the_snapshot_files(server, make_sandbox, cleanup_sandboxes):
    src = make_sandbox()
    root = rootfs(server, src)
    make_tree(root)
    code, _, err = server.run(src, "mkdir -p /usr/local/share/snap && echo sys > /usr/local/share/snap/x"
                                   " && echo etc > /etc/snap-test")
    assert code == 0, err
    want = manifest(os.path.join(root, "workspace"))
    snap = snapshot(server, src, name="tree")

    # the source changes after the snapshot: a write in place, a new file
    with open(os.path.join(root, "workspace", "tree", "d01", "f001"), "r+b") as f:
        f.write(b"CHANGED")
    with open(os.path.join(root, "workspace", "tree", "new"), "wb") as f:
        f.write(b"new")
    server.delete_sandbox(src)  # the snapshot outlives its source

    dst = restore(server, snap["id"])
    cleanup_sandboxes.append(dst)
    st, _, info = server.request("GET", "/v1/sandboxes/" + dst)
    assert info["snapshotId"] == snap["id"] and "image" not in info
    assert info["entrypoint"] == ["tail", "-f", "/dev/null"]
    droot = rootfs(server, dst)
    assert manifest(os.path.join(droot, "workspace")) == want
    for d in ("root", "home", "tmp"):
        with open(os.path.join(droot, d, "in-" + d), "rb") as f:
            assert f.read() == b"kept in /%s\n" % d.encode()
    wait_until(lambda: server.request("GET", "/v1/sandboxes/" + dst)[2]["status"]["state"] == "Running", 30,
               "the restored sandbox to run")
    code, out, err = server.run(dst, "cat /usr/local/share/snap/x /etc/snap-test")
    assert (code, out) == (0, "sys\netc\n"), err
    # the restored sandbox writes in place; the snapshot keeps its bytes
    with open(os.path.join(droot, "workspace", "tree", "d03", "f003"), "r+b") as f:
        f.write(b"AGAIN")
    again = restore(server, snap["id"])
    cleanup_sandboxes.append(again)
    assert manifest(os.path.join(rootfs(server, again), "workspace")) == want
    assert server.request("DELETE", "/v1/snapshots/" + snap["id"])[0] == 204


def snap_files(srv, snap_id, *path):
    return os.path.join(srv.data_dir, "snapshots", snap_id, "files", *path)


def shared_with(srv, a, b):
    """The files of snapshot @b's /workspace that are snapshot @a's own
    inodes (hard links), and those that are not."""
    top = snap_files(srv, b, "workspace")
    same, other = set(), set()
    for d, _, files in os.walk(top):
        for n in files:
            rel = os.path.relpath(os.path.join(d, n), top)
            s = os.lstat(os.path.join(d, n))
            if not stat.S_ISREG(s.st_mode):
                continue
            try:
                shared = os.lstat(snap_files(srv, a, "workspace", rel)).st_ino == s.st_ino
            except FileNotFoundError:
                shared = False
            (same if shared else other).add(rel)
    return same, other


def test_snapshots_share_unchanged_files(server, make_sandbox, cleanup_sandboxes):
    src = make_sandbox()
    root = rootfs(server, src)
    make_tree(root)
    ws = os.path.join(root, "workspace")
    want_a = manifest(ws)
    a = snapshot(server, src)["id"]

    # after A: a write in place of the same size, a chmod, a new file, a
    # removed one; a second snapshot shares the rest with A
    with open(os.path.join(ws, "tree", "d03", "f003"), "r+b") as f:
        f.write(b"AGAIN")
    os.chmod(os.path.join(ws, "tree", "d04", "f004"), 0o640)
    with open(os.path.join(ws, "tree", "new"), "wb") as f:
        f.write(b"new")
    os.unlink(os.path.join(ws, "tree", "d05", "f005"))
    want_b = manifest(ws)
    b = snapshot(server, src)["id"]
    same, other = shared_with(server, a, b)
    changed = {"tree/d03/f003", "tree/d04/f004", "tree/new"}
    assert other == changed and len(same) == 301 - 1 - 2  # 300 and a hard link, - f005, - 2 changed
    assert manifest(snap_files(server, a, "workspace")) == want_a
    assert manifest(snap_files(server, b, "workspace")) == want_b

    # a sandbox restored from B writes in place: neither snapshot changes;
    # its own snapshot shares what it did not change with B
    c = restore(server, b)
    cleanup_sandboxes.append(c)
    croot = rootfs(server, c)
    with open(os.path.join(croot, "workspace", "tree", "d06", "f006"), "r+b") as f:
        f.write(b"IN C")
    assert manifest(snap_files(server, a, "workspace")) == want_a
    assert manifest(snap_files(server, b, "workspace")) == want_b
    want_d = manifest(os.path.join(croot, "workspace"))
    d = snapshot(server, c)["id"]
    same, other = shared_with(server, b, d)
    assert other == {"tree/d06/f006"} and len(same) == 300
    assert manifest(snap_files(server, d, "workspace")) == want_d

    # the snapshot shared with is gone: the next one copies
    assert server.request("DELETE", "/v1/snapshots/" + d)[0] == 204
    e = snapshot(server, c)["id"]
    assert manifest(snap_files(server, e, "workspace")) == want_d
    for s in (a, b, e):
        assert server.request("DELETE", "/v1/snapshots/" + s)[0] == 204


def test_snapshots_persist_over_restart(make_server):
    s = make_server()
    sid = s.create_sandbox()
    root = rootfs(s, sid)
    with open(os.path.join(root, "workspace", "kept"), "wb") as f:
        f.write(b"kept over a restart\n")
    ready = snapshot(s, sid, name="kept")
    s.admin("POST", "/_admin/snapshots", {"hold": True})
    st, _, held = s.request("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
    assert st == 202
    s.restart()
    assert s.request("GET", "/v1/snapshots/" + ready["id"])[2] == ready
    st, _, b = s.request("GET", "/v1/snapshots/" + held["id"])
    assert b["status"]["state"] == "Failed" and b["status"]["reason"] == "snapshot_capture_failed"
    dst = restore(s, ready["id"])
    with open(os.path.join(rootfs(s, dst), "workspace", "kept"), "rb") as f:
        assert f.read() == b"kept over a restart\n"
    # what a snapshot shares with the last one is known after a restart
    again = snapshot(s, sid)
    assert os.lstat(snap_files(s, again["id"], "workspace", "kept")).st_ino == \
        os.lstat(snap_files(s, ready["id"], "workspace", "kept")).st_ino

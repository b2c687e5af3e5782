"""Forks: `osbfs -o snapshot=NAME|ID MNT` mounts a new sandbox made from a
snapshot (README.md, "Checkpoints through files").  What a user checks:
the fork holds the original's files as they were (bytes, modes, symlinks,
mtimes), the two go their own ways after, a snapshot is found by id or by
name and waited for while it is Creating, every refusal is one line naming
the cause, and what a fork's mount costs in requests."""

import contextlib
import json
import os
import stat
import threading
import uuid

import pytest

from mounthelp import Mount, fsync_path, is_mounted
from snaphelp import MTIME_NS, fill, tree, uniq
from osbtest import wait_until

SNAP_GET = "GET /v1/snapshots/{snapshotId}"
SNAP_LIST = "GET /v1/snapshots"
CREATE = "POST /v1/sandboxes"
GET_SANDBOX = "GET /v1/sandboxes/{sandboxId}"
ENDPOINT = "GET /v1/sandboxes/{sandboxId}/endpoints/{port}"
# the requests of a fork's mount by name until it is mounted: measured
# 12 in four runs (6 to the lifecycle server, 6 to execd: a ping, the
# root's stat, two listings, two commands: what any mount's start sends),
# and room for two background requests that come early; by id, one less
FORK_BUDGET = 14

def sent(srv):
    """The requests counted since the last reset, the tests' own left out."""
    return {k: v for k, v in srv.stats()["total"].items() if "/_admin" not in k}


def lifecycle(calls):
    return {k: v for k, v in calls.items() if " /v1/" in k}


def info(m):
    with open(m.p(".osb", "info")) as f:
        return json.load(f)


def snaps_admin(srv, **kw):
    st, b = srv.admin("POST", "/_admin/snapshots", kw)
    assert st == 200, (st, b)


def snapshot_api(srv, sid, name, ready=True):
    """A snapshot of sandbox @sid named @name, through the API: its id."""
    st, _, b = srv.request("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": name})
    assert st == 202, (st, b)
    if ready:
        wait_until(lambda: snap_state(srv, b["id"]) == "Ready", 60, "snapshot %s Ready" % name)
    return b["id"]


def snap_state(srv, snap_id):
    st, _, b = srv.request("GET", "/v1/snapshots/" + snap_id)
    assert st == 200, (st, b)
    return b["status"]["state"]


def made_from(srv, snap_id):
    """The ids of the sandboxes made from snapshot @snap_id."""
    st, _, b = srv.request("GET", "/v1/sandboxes?pageSize=200")
    assert st == 200, (st, b)
    return [s["id"] for s in b["items"] if s.get("snapshotId") == snap_id]


def by_label(srv, name):
    st, _, b = srv.request("GET", "/v1/sandboxes?metadata=name%%3D%s&pageSize=200" % name)
    assert st == 200, (st, b)
    return [s["id"] for s in b["items"]]


@pytest.fixture
def snaps(server):
    """A list of the snapshot ids a test makes.  At teardown, after every
    mount (make_mount is asked for after this fixture, so it ends first),
    each sandbox made from them goes, then they do."""
    ids = []
    yield ids
    for snap_id in ids:
        for sid in made_from(server, snap_id):
            server.delete_sandbox(sid)
        server.request("DELETE", "/v1/snapshots/" + snap_id)


def fork(make_mount, ref, options=()):
    return make_mount(options=["snapshot=" + ref] + list(options), create=False)


def failed_fork(server, tmp_path, ref, options=(), sandbox_id=None):
    """A mount that must fail: its exit status and its line naming why
    (a refused option adds the usage line)."""
    m = Mount(server, sandbox_id=sandbox_id, options=["snapshot=" + ref] + list(options),
              workdir=str(tmp_path / uuid.uuid4().hex[:6]))
    m.start(expect_fail=True, timeout=60)
    assert m.exit_code not in (None, 0), m.log()
    assert not is_mounted(m.path)
    lines = [l for l in m.log().splitlines() if l.strip()]
    assert len(lines) == (2 if m.exit_code == 2 else 1), lines
    return m.exit_code, lines[0]


def invalidate(m):
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("invalidate\n")


def test_fork_by_name_and_by_id(server, snaps, make_mount):
    """A fork by name and one by id beside the original hold its files as
    they were; writes in any of the three stay there."""
    orig = make_mount()
    fill(orig)
    name = uniq("base")
    os.mkdir(orig.p(".osb", "snapshots", name))
    with open(orig.p(".osb", "snapshots", name, "wait")) as f:
        assert f.read() == "Ready\n"
    with open(orig.p(".osb", "snapshots", name, "info")) as f:
        snap_id = json.load(f)["id"]
    snaps.append(snap_id)
    want = tree(orig.p())
    assert want["data.bin"][1] == 0o640 and want["data.bin"][3] == MTIME_NS
    assert want["link"][:2] == ("link", "data.bin")

    server.reset_stats()
    by_name = fork(make_mount, name)
    sid = by_name.sandbox_id
    calls = sent(server)
    assert sid and sid != orig.sandbox_id
    # a name: its id asked for (none), one page of that name; then the
    # create, the sandbox (twice: connect, info), execd's endpoint
    assert lifecycle(calls) == {SNAP_GET: 1, SNAP_LIST: 1, CREATE: 1, GET_SANDBOX: 2,
                                ENDPOINT: 1}, calls
    # and the mount's own start in the sandbox, as any mount's
    assert sum(calls.values()) <= FORK_BUDGET, calls
    i = info(by_name)
    assert i["sandbox_id"] == sid and i["snapshot_id"] == snap_id and i["image"] is None
    assert info(orig)["snapshot_id"] is None
    assert tree(by_name.p()) == want

    server.reset_stats()
    by_id = fork(make_mount, snap_id)
    calls = sent(server)
    # an id: one get, no list
    assert lifecycle(calls) == {SNAP_GET: 1, CREATE: 1, GET_SANDBOX: 2, ENDPOINT: 1}, calls
    assert sum(calls.values()) <= FORK_BUDGET - 1, calls
    assert by_id.sandbox_id not in (sid, orig.sandbox_id)
    assert info(by_id)["snapshot_id"] == snap_id
    assert tree(by_id.p()) == want
    assert sorted(made_from(server, snap_id)) == sorted([sid, by_id.sandbox_id])

    # each goes its own way
    with open(by_name.p("fork-only.txt"), "w") as f:
        f.write("only in the fork\n")
    fsync_path(by_name.p("fork-only.txt"))
    with open(orig.p("data.bin"), "ab") as f:
        f.write(b"more")
    fsync_path(orig.p("data.bin"))
    os.chmod(by_id.p("bin", "run.sh"), 0o700)
    fsync_path(by_id.p("bin", "run.sh"))
    for m in (orig, by_name, by_id):
        invalidate(m)
    assert server.stat(orig.sandbox_id, orig.spath("fork-only.txt")) is None
    assert not os.path.exists(orig.p("fork-only.txt"))
    assert not os.path.exists(by_id.p("fork-only.txt"))
    assert os.path.getsize(orig.p("data.bin")) == 70004
    assert os.path.getsize(by_name.p("data.bin")) == 70000
    assert os.path.getsize(by_id.p("data.bin")) == 70000
    assert stat.S_IMODE(os.stat(by_id.p("bin", "run.sh")).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(orig.p("bin", "run.sh")).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(by_name.p("bin", "run.sh")).st_mode) == 0o755
    os.rmdir(orig.p(".osb", "snapshots", name))


def test_refusals(server, snaps, make_sandbox, tmp_path):
    """An unknown snapshot, a name two snapshots have, a sandbox id beside
    snapshot=, image= beside it, a Failed snapshot: one line each, and no
    sandbox made."""
    before = len(server.request("GET", "/v1/sandboxes?pageSize=200")[2]["items"])
    ghost = uniq("ghost")
    code, line = failed_fork(server, tmp_path, ghost)
    assert code == 1 and ghost in line and "no snapshot has the id or the name" in line, line
    assert server.url.split("//")[1] in line, line

    dup = uniq("dup")
    a, b = make_sandbox(), make_sandbox()
    snaps.extend([snapshot_api(server, a, dup), snapshot_api(server, b, dup)])
    code, line = failed_fork(server, tmp_path, dup)
    assert "2 snapshots are named" in line and dup in line and "give the id" in line, line
    assert snaps[0] in line and snaps[1] in line, line

    code, line = failed_fork(server, tmp_path, snaps[0], sandbox_id=a)
    assert code == 2 and "snapshot= makes a new sandbox" in line, line
    code, line = failed_fork(server, tmp_path, snaps[0], options=["image=python:3.11"])
    assert code == 2 and "snapshot= and image=" in line, line

    snaps_admin(server, fail=True)
    try:
        bad = snapshot_api(server, a, uniq("bad"), ready=False)
        snaps.append(bad)
        wait_until(lambda: snap_state(server, bad) == "Failed", 60, "the capture to fail")
    finally:
        snaps_admin(server, fail=False)
    code, line = failed_fork(server, tmp_path, bad)
    assert "snapshot %s is Failed" % bad in line and "snapshot_capture_failed" in line, line
    after = len(server.request("GET", "/v1/sandboxes?pageSize=200")[2]["items"])
    assert after == before + 2  # a and b


@contextlib.contextmanager
def held_snapshot(server, snaps, make_sandbox, fname):
    """A sandbox holding /workspace/@fname (its name its bytes), and a
    snapshot of it kept Creating while the block runs: (sandbox, name)."""
    src = make_sandbox()
    server.write_file(src, "/workspace/" + fname, fname.encode())
    name = uniq("held")
    snaps_admin(server, hold=True)
    try:
        snaps.append(snapshot_api(server, src, name, ready=False))
        yield src, name
    finally:
        snaps_admin(server, hold=False)


def test_waits_while_creating(server, snaps, make_sandbox, make_mount):
    """A snapshot still Creating is waited for (the log says so), within
    start_timeout: past it, the mount fails saying so."""
    with held_snapshot(server, snaps, make_sandbox, "held.txt") as (_, name):
        late = make_mount(options=["snapshot=" + name, "start_timeout=1s"], create=False,
                          start=False)
        late.start(expect_fail=True)
        assert "still Creating after 1 s (start_timeout)" in late.log(), late.log()
        m = make_mount(options=["snapshot=" + name], create=False, start=False)
        t = threading.Thread(target=m.start)
        t.start()
        wait_until(lambda: "is still Creating: waiting" in m.log(), 30, "the mount to wait")
    t.join()
    assert is_mounted(m.path), m.log()
    with open(m.p("held.txt")) as f:
        assert f.read() == "held.txt"


def test_name_labels_the_fork_and_finds_it_again(server, snaps, make_sandbox, make_mount,
                                                 tmp_path):
    """name= with snapshot=: the fork carries the label; a second mount
    finds it (logged) and makes none; a sandbox of that name made from
    anything else is refused."""
    src = make_sandbox()
    server.write_file(src, "/workspace/a.txt", b"a\n")
    name = uniq("lbl")
    snap_id = snapshot_api(server, src, name)
    snaps.append(snap_id)
    label = uniq("task")
    m1 = fork(make_mount, name, ["name=" + label])
    assert by_label(server, label) == [m1.sandbox_id]
    with open(m1.p("mine.txt"), "w") as f:
        f.write("kept\n")
    m1.stop()
    m2 = fork(make_mount, name, ["name=" + label])
    assert m2.sandbox_id == m1.sandbox_id
    assert "exists, made from snapshot %s: mounting it" % name in m2.log(), m2.log()
    with open(m2.p("mine.txt")) as f:
        assert f.read() == "kept\n"
    m2.stop()
    assert made_from(server, snap_id) == [m1.sandbox_id]

    other = uniq("plain")
    make_sandbox(metadata={"name": other})
    code, line = failed_fork(server, tmp_path, name, options=["name=" + other])
    assert "exists and was made from image python:3.11, not from snapshot" in line, line
    assert made_from(server, snap_id) == [m1.sandbox_id]


def test_lost_create_answer(server, snaps, make_sandbox, make_mount, tmp_path):
    """The create's answer is lost after it was done: with name= the
    listing finds the one it made, and the mount goes on; without, the
    mount fails saying a sandbox may have been made.  Never two."""
    src = make_sandbox()
    name = uniq("lost")
    snap_id = snapshot_api(server, src, name)
    snaps.append(snap_id)
    label = uniq("again")
    server.set_faults(next=1, kinds=["reset_after"], scope="lifecycle", method="POST",
                      path="^/v1/sandboxes$")
    try:
        m = fork(make_mount, name, ["name=" + label])
    finally:
        server.clear_faults()
    assert "the answer was lost" in m.log(), m.log()
    assert by_label(server, label) == [m.sandbox_id]
    assert made_from(server, snap_id) == [m.sandbox_id]
    m.stop()

    server.set_faults(next=1, kinds=["reset_after"], scope="lifecycle", method="POST",
                      path="^/v1/sandboxes$")
    try:
        code, line = failed_fork(server, tmp_path, name)
    finally:
        server.clear_faults()
    assert "the answer was lost: a sandbox may have been made" in line, line
    assert len(made_from(server, snap_id)) == 2


def test_osb_create_takes_a_name_too(server, snaps, make_sandbox, osbc, running):
    """`osb sandbox create --snapshot` finds the snapshot as osbfs does:
    by id or by name, waiting while it is Creating; several of one name
    are refused."""
    with held_snapshot(server, snaps, make_sandbox, "o.txt") as (src, name):
        server.reset_stats()
        started = running(osbc, "sandbox", "create", "--snapshot", name)
        # its id asked for (none), then the snapshot found by name asked again
        wait_until(lambda: sent(server).get(SNAP_GET, 0) >= 2, 30, "osb to wait")
    sid = started.readline().strip()
    assert started.finish().rc == 0
    assert made_from(server, snaps[0]) == [sid]
    assert server.read_file(sid, "/workspace/o.txt") == b"o.txt"
    snaps.append(snapshot_api(server, src, name))
    res = osbc.fails("sandbox", "create", "--snapshot", name)
    assert "2 snapshots are named" in res.err, res.describe()

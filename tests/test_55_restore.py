"""Restores: `echo 'restore NAME' > .osb/ctl` moves the mount onto a new
sandbox made from a snapshot (README.md, "Checkpoints through files").
What a user checks: after a job wrecked the workspace and a package, every
file is back byte for byte with its mode, link target and mtime, and the
package too; info names the new sandbox and name= follows it; the old one
is deleted (or kept with restore_keeps=yes); a running job refuses the
restore unless `force`; an unknown snapshot, and faults on the create,
leave the mount as it was with no sandbox left behind; a daemon killed
after a restore comes back by name on the restored sandbox with nothing
lost; and what a checkpoint and a restore cost in requests."""

import errno
import json
import os
import re
import subprocess
import time

import pytest

from jobhelp import expect_errno, last_error, read, start, status, wait, write
from osbtest import wait_until
from osbtest import ROOT
from snaphelp import MTIME_NS, fill, tree, uniq

CREATE = "POST /v1/sandboxes"
SNAP_POST = "POST /v1/sandboxes/{sandboxId}/snapshots"
SNAP_GET = "GET /v1/snapshots/{snapshotId}"
SNAP_LIST = "GET /v1/snapshots"
DELETE = "DELETE /v1/sandboxes/{sandboxId}"

# "the package": a program and its data under /usr/local, which a
# snapshot keeps (the sandbox's own /usr)
INSTALL = ("mkdir -p /usr/local/share/toypkg && echo 1.0 > /usr/local/share/toypkg/VERSION"
           " && printf '#!/bin/sh\\necho toy 1.0\\n' > /usr/local/bin/toy"
           " && chmod 755 /usr/local/bin/toy")
UNINSTALL = "rm -rf /usr/local/share/toypkg /usr/local/bin/toy"
# what a bad try does to the workspace: everything goes, dot files too
WRECK = "find . -mindepth 1 -delete && " + UNINSTALL
# a restore's requests: lifecycle ones (the snapshot asked for, the
# create, its state, execd's endpoint twice: the new handle's and the
# switch's, the old one deleted) and execd ones (the new sandbox's ping
# and the mounted directory's stat, the feed started again); measured 14
# in three runs, with room for background requests that come meanwhile
RESTORE_BUDGET = 20
# mkdir .osb/snapshots/NAME: the kernel's lookup (one list) and the
# create; with nothing written, the sync sends nothing
MKDIR_BUDGET = 2


def sent(srv):
    """The requests counted since the last reset, the tests' own left out."""
    return {k: v for k, v in srv.stats()["total"].items() if "/_admin" not in k}


def info(m):
    return json.loads(read(m.p(".osb", "info")))


def restore(m, ref, force=False):
    write(m.p(".osb", "ctl"), "restore %s%s\n" % (ref, " force" if force else ""))


def checkpoint(m, name):
    """mkdir .osb/snapshots/NAME, then its wait: the snapshot's id."""
    os.mkdir(m.p(".osb", "snapshots", name))
    assert read(m.p(".osb", "snapshots", name, "wait")) == "Ready\n"
    return json.loads(read(m.p(".osb", "snapshots", name, "info")))["id"]


def sandboxes(srv):
    st, _, b = srv.request("GET", "/v1/sandboxes?pageSize=200")
    assert st == 200, (st, b)
    return {s["id"]: s for s in b["items"]}


def exists(srv, sid):
    st, _, _ = srv.request("GET", "/v1/sandboxes/" + sid)
    assert st in (200, 404), st
    return st == 200


def by_label(srv, name):
    st, _, b = srv.request("GET", "/v1/sandboxes?metadata=name%%3D%s&pageSize=200" % name)
    assert st == 200, (st, b)
    return sorted(s["id"] for s in b["items"])


def run_job(m, cmd):
    jid = start(m, cmd)
    assert wait(m, jid) == "exited 0", read(m.p(".osb", "jobs", jid, "stderr"))
    return jid


@pytest.fixture
def snaps(server):
    """Snapshot ids a test makes, deleted at teardown, and the sandboxes
    it leaves: the mounts end first (make_mount is asked for after)."""
    made = {"snaps": [], "sandboxes": []}
    yield made
    for sid in made["sandboxes"]:
        if exists(server, sid):
            server.delete_sandbox(sid)
    for snap_id in made["snaps"]:
        server.request("DELETE", "/v1/snapshots/" + snap_id)


def test_restore_after_a_bad_try(server, snaps, make_mount):
    """Checkpoint, a job that empties the workspace and uninstalls the
    package, restore: every file back as it was, the package too; the
    mount is on a new sandbox carrying the name, the old one deleted;
    the requests of mkdir and of the restore within their budgets."""
    name = uniq("ws")
    m = make_mount(options=["name=" + name])
    old = m.sandbox_id
    snaps["sandboxes"].append(old)
    fill(m)
    with open(m.p(".hidden"), "w") as f:
        f.write("dot\n")
    run_job(m, INSTALL)
    want = tree(m.p())
    assert want["data.bin"][3] == MTIME_NS and want["link"][:2] == ("link", "data.bin")
    write(m.p(".osb", "ctl"), "sync\n")
    server.reset_stats()
    cp = uniq("before")
    snaps["snaps"].append(checkpoint(m, cp))
    # the wait and info reads ask for the snapshot: not mkdir's own
    calls = sent(server)
    mk = {k: v for k, v in calls.items() if k != SNAP_GET}
    assert mk == {SNAP_LIST: 1, SNAP_POST: 1}, calls
    assert sum(mk.values()) <= MKDIR_BUDGET

    run_job(m, WRECK)
    assert os.listdir(m.p()) == []
    jid = run_job(m, "test ! -e /usr/local/bin/toy")

    server.reset_stats()
    t0 = time.monotonic()
    restore(m, cp)
    took = time.monotonic() - t0
    calls = sent(server)
    new = info(m)["sandbox_id"]
    snaps["sandboxes"].append(new)
    assert new != old
    assert calls.get(CREATE) == 1 and calls.get(DELETE) == 1, calls
    assert sum(calls.values()) <= RESTORE_BUDGET, calls
    print("restore took %.2f s, %d requests" % (took, sum(calls.values())))

    assert tree(m.p()) == want
    assert run_job(m, "test -x /usr/local/bin/toy && toy > toy.out") and read(m.p("toy.out")) == "toy 1.0\n"
    os.unlink(m.p("toy.out"))
    i = info(m)
    assert i["restored_from"] == old and i["snapshot_id"] == snaps["snaps"][0]
    # the jobs of the old sandbox went with it; its snapshots stay listed
    assert jid not in os.listdir(m.p(".osb", "jobs"))
    assert os.listdir(m.p(".osb", "snapshots")) == [cp]
    assert not exists(server, old)
    assert by_label(server, name) == [new]
    # the new sandbox takes writes as any
    with open(m.p("after.txt"), "w") as f:
        f.write("after\n")
    write(m.p(".osb", "ctl"), "sync\n")
    assert server.read_file(new, m.spath("after.txt")) == b"after\n"


def checkpointed(make_mount, snaps, name, options=()):
    """A mount with one file, @name (NAME.txt, holding "NAME" and a
    newline), and a checkpoint of it; both for the snaps fixture to
    remove."""
    m = make_mount(options=options)
    snaps["sandboxes"].append(m.sandbox_id)
    with open(m.p(name), "w") as f:
        f.write(name[:-len(".txt")] + "\n")
    cp = uniq("cp")
    snaps["snaps"].append(checkpoint(m, cp))
    return m, cp


def test_restore_while_a_job_runs(server, snaps, make_mount):
    """A running job refuses the restore (EBUSY, the reason in last_error);
    `force` restores, and the job is gone from jobs/."""
    m, cp = checkpointed(make_mount, snaps, "kept.txt")
    with open(m.p("later.txt"), "w") as f:
        f.write("later\n")
    jid = start(m, "sleep 300")
    wait_until(lambda: status(m, jid) == "running", 30, "the job to run")
    expect_errno(errno.EBUSY, restore, m, cp)
    assert "1 job is running" in last_error(m) and "force" in last_error(m)
    assert info(m)["sandbox_id"] == m.sandbox_id
    assert os.path.exists(m.p("later.txt"))

    restore(m, cp, force=True)
    new = info(m)["sandbox_id"]
    snaps["sandboxes"].append(new)
    assert new != m.sandbox_id
    assert sorted(os.listdir(m.p())) == ["kept.txt"]
    assert jid not in os.listdir(m.p(".osb", "jobs"))
    assert info(m)["jobs"]["running"] == 0


def test_unknown_snapshot(server, make_mount):
    m = make_mount()
    before = set(sandboxes(server))
    expect_errno(errno.ENOENT, restore, m, uniq("nothing"))
    assert "no snapshot has the id or the name" in last_error(m)
    expect_errno(errno.EINVAL, write, m.p(".osb", "ctl"), "restore\n")
    expect_errno(errno.EINVAL, write, m.p(".osb", "ctl"), "restore a b\n")
    assert info(m)["sandbox_id"] == m.sandbox_id
    assert set(sandboxes(server)) == before


@pytest.mark.parametrize("kind", ["500", "reset", "reset_after"])
def test_faults_on_the_create(server, snaps, make_mount, kind):
    """The create refused (500), lost before it was done (reset) or lost
    after (reset_after): one sandbox at most is made, none is left over,
    and the mount is where the outcome says, with its files."""
    m, cp = checkpointed(make_mount, snaps, "a.txt", options=["writeback_delay=1h"])
    old = m.sandbox_id
    # written after the checkpoint and not sent yet: the restore sends it
    # first, so a failed one loses nothing
    with open(m.p("b.txt"), "w") as f:
        f.write("b\n")
    count = len(sandboxes(server))
    server.set_faults(next=1, kinds=[kind], scope="lifecycle", method="POST",
                      path="/v1/sandboxes$")
    try:
        if kind == "reset_after":
            restore(m, cp)
        else:
            expect_errno(errno.EIO, restore, m, cp)
    finally:
        server.clear_faults()
    if kind == "reset_after":
        new = info(m)["sandbox_id"]
        snaps["sandboxes"].append(new)
        assert new != old and not exists(server, old)
        assert sorted(os.listdir(m.p())) == ["a.txt"]
    else:
        assert "the mount stays on sandbox " + old in last_error(m)
        assert info(m)["sandbox_id"] == old
        assert server.read_file(old, m.spath("b.txt")) == b"b\n"
        assert sorted(os.listdir(m.p())) == ["a.txt", "b.txt"]
    assert len(sandboxes(server)) == count


def test_faults_during_the_restore(server, snaps, make_mount):
    """execd of the new sandbox not answering at first, and a lifecycle
    server dropping answers at random: the restore either moves or leaves
    the mount as it was; no sandbox is left over either way."""
    m, cp = checkpointed(make_mount, snaps, "a.txt")
    old = m.sandbox_id
    count = len(sandboxes(server))
    server.set_faults(rate=0.3, kinds=["reset", "503"], scope="lifecycle",
                      path="/v1/sandboxes")
    try:
        try:
            restore(m, cp)
            moved = True
        except OSError:
            moved = False
    finally:
        server.clear_faults()
    now = info(m)["sandbox_id"]
    snaps["sandboxes"].append(now)
    assert moved == (now != old), last_error(m)
    assert os.listdir(m.p()) == ["a.txt"]
    # a delete of the old one that failed is said, and left for the test
    if moved and exists(server, old):
        assert "could not be deleted" in read(m.p(".osb", "log"))
        count += 1
    assert len(sandboxes(server)) == count


def test_keeps_and_kill9(server, snaps, make_mount):
    """restore_keeps=yes keeps the old sandbox (named too); a daemon
    killed with writes not yet sent after the restore, mounted again by
    name, is on the restored sandbox and sends them."""
    name = uniq("kk")
    opts = ["name=" + name, "restore_keeps=yes", "writeback_delay=1h"]
    m, cp = checkpointed(make_mount, snaps, "a.txt", options=opts)
    old = m.sandbox_id
    restore(m, cp)
    new = info(m)["sandbox_id"]
    snaps["sandboxes"].append(new)
    assert exists(server, old) and by_label(server, name) == sorted([old, new])
    assert new in info(m)["cache"]["dir"]
    with open(m.p("unsent.txt"), "w") as f:
        f.write("unsent\n")
    m.kill9()

    again = make_mount(options=opts, cache_dir=m.cache_dir)
    assert again.sandbox_id == new
    write(again.p(".osb", "ctl"), "sync\n")
    assert server.read_file(new, again.spath("unsent.txt")) == b"unsent\n"
    assert sorted(os.listdir(again.p())) == ["a.txt", "unsent.txt"]
    assert server.read_file(old, m.spath("a.txt")) == b"a\n"


def readme_recipe():
    """The README's recipe: the sh block that restores."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    found = [b for b in blocks if "restore before" in b]
    assert len(found) == 1, "the README has no recipe that restores"
    return found[0]


@pytest.mark.parametrize("outcome", ["fails", "works"])
def test_readme_recipe(server, snaps, make_mount, outcome):
    """The recipe as printed, from the directory holding mnt: a try that
    fails leaves the workspace as it was at the checkpoint; one that works
    keeps what it did."""
    m = make_mount()
    snaps["sandboxes"].append(m.sandbox_id)
    assert os.path.basename(m.path) == "mnt"
    with open(m.p("data.txt"), "w") as f:
        f.write("v1\n")
    with open(m.p("migrate.sh"), "w") as f:
        f.write("#!/bin/sh\necho v2 > data.txt\nrm -f migrate.sh\n%s\n"
                % ("exit 3" if outcome == "fails" else "exit 0"))
    os.chmod(m.p("migrate.sh"), 0o755)
    p = subprocess.run(["sh", "-e", "-c", readme_recipe()], cwd=os.path.dirname(m.path),
                       capture_output=True, text=True, timeout=300)
    snap = json.loads(read(m.p(".osb", "snapshots", "before", "info")))["id"]
    snaps["snaps"].append(snap)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "Ready\n"
    now = info(m)["sandbox_id"]
    snaps["sandboxes"].append(now)
    if outcome == "fails":
        assert now != m.sandbox_id
        assert sorted(os.listdir(m.p())) == ["data.txt", "migrate.sh"]
        assert read(m.p("data.txt")) == "v1\n"
    else:
        assert now == m.sandbox_id
        assert os.listdir(m.p()) == ["data.txt"] and read(m.p("data.txt")) == "v2\n"
    # the name is the session server's: the next test may take it again
    os.rmdir(m.p(".osb", "snapshots", "before"))
    snaps["snaps"].remove(snap)


def test_a_restore_killed_before_its_delete(server, snaps, make_mount):
    """A daemon killed after the restore's create landed and before the
    old sandbox was deleted leaves both, named alike: a mount by that name
    takes the restored one and deletes the old one, as the restore would
    have (kept with restore_keeps=yes)."""
    for keeps in (False, True):
        name = uniq("mid")
        opts = ["name=" + name] + (["restore_keeps=yes"] if keeps else [])
        m = make_mount(options=opts)
        old = m.sandbox_id
        snaps["sandboxes"].append(old)
        with open(m.p("a.txt"), "w") as f:
            f.write("a\n")
        snap = checkpoint(m, uniq("cp"))
        snaps["snaps"].append(snap)
        m.kill9()
        # what the restore's create made before the daemon was killed
        body = {"snapshotId": snap, "image": None,
                "metadata": {"name": name, "osbfs-restored-from": old}}
        new = server.create_sandbox(**body)
        snaps["sandboxes"].append(new)
        again = make_mount(options=opts, cache_dir=m.cache_dir)
        assert again.sandbox_id == new
        assert exists(server, old) == keeps
        assert os.listdir(again.p()) == ["a.txt"]
        again.stop()

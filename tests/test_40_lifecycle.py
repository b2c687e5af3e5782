"""A sandbox's whole life through the mount: found or made by name, kept
alive while used, paused when idle and resumed on the next access,
destroyed at unmount; TLS with a CA, the server proxy, secured execd
endpoints; and a clear message for every failure."""

import errno
import os
import threading
import time

import pytest

from jobhelp import info
from mounthelp import Mount, is_mounted
from osbtest import make_ca, wait_until


def state(srv, sid):
    status, _, body = srv.request("GET", "/v1/sandboxes/" + sid)
    if status == 404:
        return None
    return body["status"]["state"]


def list_by_name(srv, name):
    status, _, body = srv.request("GET", "/v1/sandboxes?metadata=name%%3D%s&pageSize=200" % name)
    assert status == 200
    return [s["id"] for s in body["items"]]


# ---- names ----

def test_name_creates_then_reconnects(server, make_mount):
    m1 = make_mount(options=["name=proj-a1"], create=False)
    sid = m1.sandbox_id
    with open(m1.p("kept"), "w") as f:
        f.write("across mounts")
    m1.stop()
    m2 = make_mount(options=["name=proj-a1"], create=False)
    try:
        assert m2.sandbox_id == sid
        assert open(m2.p("kept")).read() == "across mounts"
        assert list_by_name(server, "proj-a1") == [sid]
    finally:
        m2.stop()
        server.delete_sandbox(sid)


def test_two_mounts_racing_on_one_name_share_one_sandbox(server, make_mount):
    mounts = [make_mount(options=["name=race-b2"], create=False, start=False) for _ in range(2)]
    errors = []

    def start(m):
        try:
            m.start()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=start, args=(m,)) for m in mounts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        assert mounts[0].sandbox_id == mounts[1].sandbox_id
        assert list_by_name(server, "race-b2") == [mounts[0].sandbox_id]
        with open(mounts[0].p("one"), "w") as f:
            f.write("seen by both")
        fd = os.open(mounts[0].p("one"), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        with open(mounts[1].p(".osb", "ctl"), "w") as f:
            f.write("invalidate\n")
        assert open(mounts[1].p("one")).read() == "seen by both"
    finally:
        for m in mounts:
            m.stop()
        for sid in list_by_name(server, "race-b2"):
            server.delete_sandbox(sid)


# ---- keepalive, idle pause, destroy ----

def test_keepalive_outlives_several_ttls(make_server, make_mount):
    srv = make_server(extra_args=["--min-timeout", "1"])
    m = make_mount(srv=srv, sandbox_id=None, create=False, options=["timeout=3", "keepalive"])
    sid = m.sandbox_id
    srv.reset_stats()
    t_end = time.time() + 12  # four times the TTL
    i = 0
    while time.time() < t_end:
        with open(m.p("beat"), "w") as f:
            f.write(str(i))
        os.listdir(m.p())
        i += 1
        time.sleep(0.2)
    assert state(srv, sid) == "Running"
    renews = srv.stats()["total"].get("POST /v1/sandboxes/{sandboxId}/renew-expiration", 0)
    print("\nkeepalive: %d renewals in 12 s of use with a 3 s TTL (%d writes)" % (renews, i))
    assert 3 <= renews <= 12
    m.stop()


def test_keepalive_is_the_default_and_needs_no_use(make_server, make_mount):
    srv = make_server(extra_args=["--min-timeout", "1"])
    m = make_mount(srv=srv, sandbox_id=None, create=False, options=["timeout=3"])
    sid = m.sandbox_id
    srv.reset_stats()
    inf = info(m)
    assert inf["keepalive"] is True
    assert 0 <= inf["expires_in_s"] <= 4
    # nothing touches the mount for four TTLs
    time.sleep(12)
    assert state(srv, sid) == "Running"
    renews = srv.stats()["total"].get("POST /v1/sandboxes/{sandboxId}/renew-expiration", 0)
    assert 3 <= renews <= 12, renews
    assert info(m)["state"] == "Running"
    assert m.stop() == 0


def test_without_keepalive_the_ttl_ends_it(make_server, make_mount):
    srv = make_server(extra_args=["--min-timeout", "1"])
    m = make_mount(srv=srv, create=False,
                   options=["timeout=2", "request_timeout=3s", "keepalive=no"])
    sid = m.sandbox_id
    # info and the log say it is about to go
    inf = info(m)
    assert inf["keepalive"] is False
    assert "expires in" in inf["expiry_warning"] and "renew" in inf["expiry_warning"]
    wait_until(lambda: "expires in" in m.log(), 10, "the log's warning", step=0.1)
    wait_until(lambda: state(srv, sid) is None, 15, "the sandbox to expire", step=0.1)
    # the mount stays up and says what happened
    with pytest.raises(OSError) as ei:
        os.listdir(m.p("x-" + str(time.time())))
    assert ei.value.errno == errno.EIO
    inf = wait_until(lambda: info(m)["state"] == "Deleted" and info(m), 30,
                     "the mount to see the sandbox deleted", step=0.1)
    assert "no longer exists" in inf["last_error"]
    m.stop()  # the sandbox is gone, but nothing was lost: status 0
    assert "nothing was waiting to be uploaded" in m.log()


def test_idle_pause_then_transparent_resume(server, make_mount):
    m = make_mount(options=["idle_pause=1s", "attr_timeout=0", "dir_timeout=0"])
    sid = m.sandbox_id
    server.write_file(sid, m.spath("data.txt"), b"still here after a pause")
    wait_until(lambda: state(server, sid) == "Paused", 20, "the idle pause", step=0.1)
    # the daemon hears of it when the pause call's answer comes back
    wait_until(lambda: info(m)["state"] == "Paused", 10, "the mount to see the pause", step=0.1)
    t0 = time.time()
    assert open(m.p("data.txt"), "rb").read() == b"still here after a pause"
    print("\nfirst read after an idle pause: %.2f s" % (time.time() - t0))
    assert state(server, sid) == "Running"
    assert info(m)["state"] == "Running"


def paused_after(server, m, access):
    """Pauses @m's sandbox through .osb/ctl, waits past attr_timeout and
    dir_timeout (1 s), does @access: whether the sandbox is still paused."""
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("pause\n")
    assert state(server, m.sandbox_id) == "Paused"
    time.sleep(1.5)
    access()
    still = state(server, m.sandbox_id) == "Paused"
    if still:
        with open(m.p(".osb", "ctl"), "w") as f:
            f.write("resume\n")
    return still


@pytest.mark.parametrize("access,resumes", [
    ("stat the mount's root", True), ("list the mount's root", True),
    ("read a cached file", True), ("read .osb/info, log and README", False),
    ("list .osb/jobs", False),
])
def test_what_resumes_a_paused_sandbox_as_readme_says(server, make_mount, access, resumes):
    m = make_mount()
    with open(m.p("f"), "w") as f:
        f.write("x")
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")
    assert open(m.p("f")).read() == "x"
    do = {"stat the mount's root": lambda: os.stat(m.p()),
          "list the mount's root": lambda: os.listdir(m.p()),
          "read a cached file": lambda: open(m.p("f")).read(),
          "read .osb/info, log and README": lambda: [open(m.p(".osb", n)).read()
                                                     for n in ("info", "log", "README")],
          "list .osb/jobs": lambda: os.listdir(m.p(".osb", "jobs"))}[access]
    assert paused_after(server, m, do) is not resumes


def test_a_pause_lasts_while_only_fresh_caches_are_read(server, make_mount):
    m = make_mount(options=["attr_timeout=1h", "dir_timeout=1h"])
    with open(m.p("f"), "w") as f:
        f.write("x")
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")
    assert open(m.p("f")).read() == "x" and "f" in os.listdir(m.p())

    def cached():
        os.stat(m.p())
        assert "f" in os.listdir(m.p())
        assert open(m.p("f")).read() == "x"
    assert paused_after(server, m, cached)


def test_job_resumes_paused_sandbox_and_keeps_it_awake(server, make_mount):
    m = make_mount(options=["idle_pause=1s"])
    sid = m.sandbox_id
    wait_until(lambda: state(server, sid) == "Paused", 20, "the idle pause", step=0.1)
    fd = os.open(m.p(".osb", "run"), os.O_RDWR)
    os.write(fd, b"sleep 4; echo done\n")
    jid = os.read(fd, 200).decode().strip()
    os.close(fd)
    with open(m.p(".osb", "jobs", jid, "wait")) as f:
        assert f.read().strip() == "exited 0"
    with open(m.p(".osb", "jobs", jid, "stdout")) as f:
        assert f.read() == "done\n"


def test_destroy_on_unmount(server, make_mount):
    m = make_mount(options=["destroy_on_unmount"], create=False)
    sid = m.sandbox_id
    assert state(server, sid) == "Running"
    assert m.stop() == 0
    assert state(server, sid) is None


def test_ctl_pause_resume_renew_kill(server, make_mount):
    m = make_mount()
    sid = m.sandbox_id
    before = server.request("GET", "/v1/sandboxes/" + sid)[2]["expiresAt"]
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("renew 3600\n")
    after = server.request("GET", "/v1/sandboxes/" + sid)[2]["expiresAt"]
    assert after > before
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("pause\n")
    assert state(server, sid) == "Paused"
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("resume\n")
    assert state(server, sid) == "Running"
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("kill\n")
    assert state(server, sid) is None
    assert info(m)["state"] == "Deleted"
    # the sandbox is gone, but nothing was lost: the daemon ends with 0,
    # as when it is deleted from outside (test_sandbox_deleted_while_mounted)
    m.stop()


# ---- connections ----

def test_tls_with_ca_file(make_server, make_mount, tmp_path):
    pki = make_ca(tmp_path)
    srv = make_server(extra_args=["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key")])
    assert srv.url.startswith("https://")
    m = make_mount(srv=srv, create=False, options=["cacert=%s" % (pki / "ca.pem")])
    with open(m.p("over-tls"), "w") as f:
        f.write("encrypted in transit")
    m.stop()
    assert srv.read_file(m.sandbox_id, m.spath("over-tls")) == b"encrypted in transit"


def test_tls_sessions_are_resumed(make_server, make_mount, tmp_path):
    """A mount does one full TLS handshake per host in its life: every
    connection after it resumes a session, also when several begin at
    once and when the one whose ticket was kept has ended, as the server
    counts it and as .osb/info does."""
    pki = make_ca(tmp_path)
    srv = make_server(extra_args=["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key")])
    m = make_mount(srv=srv, create=False, options=["cacert=%s" % (pki / "ca.pem")])
    # each in a directory of its own: reads that walk one directory
    # would come in one archive (test_39), over one connection
    names = ["d%02d/e/f" % i for i in range(40)]
    for n in names:
        os.makedirs(os.path.dirname(m.p(n)))
        with open(m.p(n), "w") as f:
            f.write("file " + n)
    for verb in ("sync", "invalidate"):
        with open(m.p(".osb", "ctl"), "w") as f:
            f.write(verb + "\n")
    before = info(m)["client"]
    srv.reset_stats()
    got = {}
    start = threading.Barrier(8)

    def reader(k):
        start.wait()
        for n in names[k::8]:
            with open(m.p(n)) as f:
                got[n] = f.read()

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {n: "file " + n for n in names}
    after = info(m)["client"]
    stats = srv.stats()  # over a connection of its own: a full handshake
    execd = stats["sandboxes"][m.sandbox_id]
    # new connections to execd (a command opens one of its own, several
    # at once), each resuming a session
    hs, resumed = execd.get("tls handshakes", 0), execd.get("tls resumed", 0)
    assert hs >= 8 and resumed == hs, (hs, resumed)
    total = stats["total"]
    assert total["tls handshakes"] - total.get("tls resumed", 0) == 1, stats
    assert after["connections"] - before["connections"] == total["tls handshakes"] - 1, (before, after, stats)
    assert after["tls_handshakes"] - before["tls_handshakes"] == total["tls handshakes"] - 1, (before, after, stats)
    assert after["tls_resumed"] - before["tls_resumed"] == total.get("tls resumed", 0), (before, after, stats)
    # in the mount's life: one full handshake to the lifecycle server, one
    # to execd
    assert after["tls_handshakes"] - after["tls_resumed"] == 2, after
    m.stop()


def test_tls_untrusted_certificate_is_refused(make_server, tmp_path):
    pki = make_ca(tmp_path)
    srv = make_server(extra_args=["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key")])
    m = Mount(srv, sandbox_id="anything", workdir=str(tmp_path / "w"))
    m.start(expect_fail=True)
    assert m.exit_code != 0
    lines = [l for l in m.log().splitlines() if l.strip()]
    assert len(lines) == 1 and "certificate" in lines[0].lower(), lines


def test_tls_insecure_accepts_any_certificate(make_server, make_mount, tmp_path):
    pki = make_ca(tmp_path)
    srv = make_server(extra_args=["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key")])
    m = make_mount(srv=srv, create=False, options=["insecure"])
    assert os.path.isdir(m.p())
    m.stop()


def test_server_proxy(server, make_mount):
    m = make_mount(options=["server_proxy"])
    with open(m.p("via-proxy"), "w") as f:
        f.write("proxied")
    assert "/sandboxes/%s/proxy/44772" % m.sandbox_id in info(m)["endpoint"]
    m.stop()
    assert server.read_file(m.sandbox_id, m.spath("via-proxy")) == b"proxied"


def test_secured_endpoint_headers_are_sent(make_server, make_mount):
    srv = make_server(extra_args=["--secure-access"])
    m = make_mount(srv=srv, create=False)
    with open(m.p("secured"), "w") as f:
        f.write("with the execd token")
    m.stop()
    assert srv.read_file(m.sandbox_id, m.spath("secured")) == b"with the execd token"
    assert "token" not in m.log().lower() or "X-EXECD" not in m.log()


# ---- failures ----

def test_failed_sandbox_fails_the_mount(server, tmp_path):
    sid = server.create_sandbox()
    try:
        server.admin("POST", "/_admin/sandboxes/%s/state" % sid,
                     {"state": "Failed", "reason": "IMAGE_PULL_FAILED", "message": "no such image"})
        m = Mount(server, sandbox_id=sid, workdir=str(tmp_path))
        m.start(expect_fail=True)
        lines = [l for l in m.log().splitlines() if l.strip()]
        assert m.exit_code != 0
        assert len(lines) == 1 and "Failed" in lines[0] and "no such image" in lines[0], lines
    finally:
        server.delete_sandbox(sid)


def test_stuck_pending_fails_after_the_deadline(server, tmp_path):
    sid = server.create_sandbox()
    try:
        server.admin("POST", "/_admin/sandboxes/%s/state" % sid, {"state": "Pending"})
        m = Mount(server, sandbox_id=sid, workdir=str(tmp_path), options=["start_timeout=2s"])
        t0 = time.time()
        m.start(expect_fail=True)
        assert time.time() - t0 < 20
        lines = [l for l in m.log().splitlines() if l.strip()]
        assert m.exit_code != 0
        assert len(lines) == 1 and "Pending" in lines[0], lines
    finally:
        server.delete_sandbox(sid)


def test_pending_then_running_mounts(make_server, make_mount):
    srv = make_server(extra_args=["--pending-seconds", "2"])
    m = make_mount(srv=srv, create=False)
    assert os.path.isdir(m.p())
    m.stop()


def test_sandbox_deleted_while_mounted(server, make_mount):
    m = make_mount(options=["attr_timeout=0", "dir_timeout=0", "request_timeout=3s"])
    sid = m.sandbox_id
    server.delete_sandbox(sid)
    with pytest.raises(OSError) as ei:
        os.listdir(m.p())
    assert ei.value.errno == errno.EIO
    inf = info(m)
    assert inf["state"] == "Deleted"
    assert sid in inf["last_error"] and "no longer exists" in inf["last_error"]
    m.stop()  # the sandbox is gone, but nothing was lost: status 0
    assert "nothing was waiting to be uploaded" in m.log()
    assert not is_mounted(m.path)


# ---- the server restarted, execd at another address ----

def sync(m):
    with open(m.p(".osb", "ctl"), "w") as f:
        f.write("sync\n")


def restart_moving_execd(srv, sid):
    """Restarts @srv so that every sandbox's execd listens on a new port
    (as a restarted Docker host maps them anew); returns its new URL."""
    old = srv.endpoint(sid)[0]
    srv.stop()
    srv.extra_args.append("--new-execd-ports")
    srv.start()
    new = srv.endpoint(sid)[0]
    assert new != old
    return new


@pytest.mark.parametrize("proxy", [False, True], ids=["direct", "server_proxy"])
def test_a_restart_that_moves_execd_needs_no_remount(make_server, make_mount, proxy):
    srv = make_server()
    m = make_mount(srv=srv, options=["writeback_delay=1h"] + (["server_proxy"] if proxy else []))
    sid = m.sandbox_id
    with open(m.p("pending.txt"), "w") as f:
        f.write("written before the restart")
    assert srv.stat(sid, m.spath("pending.txt")) is None
    new = restart_moving_execd(srv, sid)
    sync(m)
    assert srv.read_file(sid, m.spath("pending.txt")) == b"written before the restart"
    if proxy:
        assert "/sandboxes/%s/proxy/44772" % sid in info(m)["endpoint"]
    else:
        assert info(m)["endpoint"] == new
        assert "execd of sandbox %s is now at %s" % (sid, new) in m.log()
    assert info(m)["server"] == "reachable"


def test_an_away_mount_finds_execd_at_its_new_address(make_server, make_mount):
    srv = make_server()
    m = make_mount(srv=srv, options=["writeback_delay=1h", "attr_timeout=0", "request_timeout=2s"])
    sid = m.sandbox_id
    with open(m.p("pending.txt"), "w") as f:
        f.write("written while away")
    srv.kill()
    with pytest.raises(OSError) as e:
        os.stat(m.p("nothing-here"))
    assert e.value.errno == errno.EIO
    assert info(m)["server"] == "away"
    new = restart_moving_execd(srv, sid)
    # nothing touches the mount: only its watchdog asks
    wait_until(lambda: info(m)["server"] == "reachable", 30, "the watchdog to find execd again")
    assert info(m)["endpoint"] == new
    sync(m)
    assert srv.read_file(sid, m.spath("pending.txt")) == b"written while away"

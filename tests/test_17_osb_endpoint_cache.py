"""`osb exec` on the execd endpoint kept from an earlier run: no endpoint
lookup before the command, the state asked beside it (a paused sandbox
resumed, a deleted one said), a stale endpoint looked up again and the
command still run exactly once; the kept file private and never reached
through a planted link; OSB_NO_CACHE and --no-cache."""

import glob
import os
import stat

from osbhelp import W
from osbtest import free_port

COUNT = W + "/runs"
COUNT_ONCE = "echo run >> %s; echo hi" % COUNT


def cache_files(osb):
    return glob.glob(os.path.join(osb.cache_home, "osb", "ep-*"))


def kept(osb):
    files = cache_files(osb)
    assert len(files) == 1, files
    with open(files[0]) as f:
        return files[0], f.read()


def rewrite_url(osb, url):
    path, text = kept(osb)
    lines = [("url " + url) if ln.startswith("url ") else ln for ln in text.splitlines()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def runs(server, sandbox):
    return server.read_file(sandbox, COUNT).decode().count("run\n")


def routes(server, sandbox):
    return server.stats()["sandboxes"].get(sandbox, {})


def test_second_exec_asks_no_endpoint(server, osb, sandbox):
    osb.ok("exec", sandbox, "--", "true")
    server.reset_stats()
    assert osb.ok("exec", sandbox, "--", "echo", "hi").out == "hi\n"
    got = routes(server, sandbox)
    assert got.pop("POST /command") == 1, got
    assert got.pop("GET /v1/sandboxes/{sandboxId}", 0) <= 1, got
    assert got == {}, got


def test_the_kept_endpoint_is_private(osb, sandbox):
    osb.ok("exec", sandbox, "--", "true")
    path, text = kept(osb)
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert ("id %s\n" % sandbox) in text and "\nurl http" in text, text


def test_a_stale_endpoint_is_looked_up_again(server, osb, sandbox):
    osb.ok("exec", sandbox, "--", "true")
    good = kept(osb)[1]
    rewrite_url(osb, "http://127.0.0.1:%d/proxy/44772" % free_port())
    server.reset_stats()
    res = osb.ok("exec", sandbox, "--", COUNT_ONCE)
    assert res.out == "hi\n"
    assert runs(server, sandbox) == 1
    assert routes(server, sandbox).get("POST /command") == 1
    assert kept(osb)[1] == good  # kept right again


def test_a_stale_endpoint_without_retries(server, osb, sandbox):
    # libosb makes no second attempt: osb looks execd up and sends it once more
    osb.ok("exec", sandbox, "--", "true")
    rewrite_url(osb, "http://127.0.0.1:%d/proxy/44772" % free_port())
    assert osb.ok("--retries", "0", "exec", sandbox, "--", COUNT_ONCE).out == "hi\n"
    assert runs(server, sandbox) == 1


def test_a_failed_sandbox_is_said(server, osb, sandbox):
    osb.ok("exec", sandbox, "--", "true")
    server.admin("POST", "/_admin/sandboxes/%s/state" % sandbox,
                 {"state": "Failed", "reason": "OOM", "message": "boom"})
    res = osb.fails("--retries", "1", "exec", sandbox, "--", "true", rc=255)
    assert res.err == "osb: %s: the sandbox is Failed (OOM: boom)\n" % sandbox, res.describe()


def test_an_unknown_host_is_looked_up_again(server, osb, sandbox):
    osb.ok("exec", sandbox, "--", "true")
    rewrite_url(osb, "http://no-such-host.invalid:1/proxy/44772")
    assert osb.ok("exec", sandbox, "--", COUNT_ONCE).out == "hi\n"
    assert runs(server, sandbox) == 1


def test_a_refusing_endpoint_is_looked_up_again(server, osb, sandbox):
    # execd answers 404 at a wrong address: the command did not run there
    osb.ok("exec", sandbox, "--", "true")
    url = server.execd_url(sandbox)
    rewrite_url(osb, url + "/nowhere")
    server.reset_stats()
    assert osb.ok("exec", sandbox, "--", COUNT_ONCE).out == "hi\n"
    assert runs(server, sandbox) == 1
    assert routes(server, sandbox).get("GET /v1/sandboxes/{sandboxId}/endpoints/{port}") == 1


def test_a_paused_sandbox_is_resumed_beside_the_command(server, osb, sandbox):
    osb.ok("exec", sandbox, "--", "true")
    server.request("POST", "/v1/sandboxes/%s/pause" % sandbox)
    server.reset_stats()
    res = osb.run("exec", sandbox, "--", COUNT_ONCE)
    assert (res.rc, res.out) == (0, "hi\n"), res.describe()
    assert res.err == "osb: sandbox %s is paused: resuming it\n" % sandbox, res.describe()
    assert runs(server, sandbox) == 1
    got = routes(server, sandbox)
    assert got.get("POST /command") == 1 and "GET /v1/sandboxes/{sandboxId}/endpoints/{port}" not in got, got
    st, _, b = server.request("GET", "/v1/sandboxes/%s" % sandbox)
    assert st == 200 and b["status"]["state"] == "Running", b


def test_a_deleted_sandbox_is_said(server, osb, sandbox):
    osb.ok("exec", sandbox, "--", "true")
    server.delete_sandbox(sandbox)
    res = osb.run("exec", sandbox, "--", "true")
    assert res.rc == 255 and res.out == "", res.describe()
    assert res.err.startswith("osb: %s: " % sandbox) and res.err.count("\n") == 1, res.describe()
    assert "not found" in res.err.lower() or "404" in res.err, res.describe()
    assert cache_files(osb) == []


def test_no_cache(server, osb, sandbox):
    osb.ok("exec", sandbox, "--", "true", env={"OSB_NO_CACHE": "1"})
    assert cache_files(osb) == []
    osb.ok("exec", sandbox, "--", "true")
    assert len(cache_files(osb)) == 1
    for how in ({"OSB_NO_CACHE": "1"}, None):
        server.reset_stats()
        args = ("exec", sandbox, "--", "true") if how else ("--no-cache", "exec", sandbox, "--", "true")
        osb.ok(*args, env=how)
        assert routes(server, sandbox).get("GET /v1/sandboxes/{sandboxId}/endpoints/{port}") == 1


def test_a_planted_link_is_not_followed(osb, sandbox, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, os.path.join(osb.cache_home, "osb"))
    osb.ok("exec", sandbox, "--", "true")
    osb.ok("exec", sandbox, "--", "true")
    assert os.listdir(elsewhere) == []


def test_a_kept_file_others_may_read_is_ignored(server, osb, sandbox):
    osb.ok("exec", sandbox, "--", "true")
    path, _ = kept(osb)
    rewrite_url(osb, "http://127.0.0.1:%d/proxy/44772" % free_port())
    os.chmod(path, 0o644)
    server.reset_stats()
    osb.ok("exec", sandbox, "--", "true")
    assert routes(server, sandbox).get("GET /v1/sandboxes/{sandboxId}/endpoints/{port}") == 1
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_spawn_uses_the_kept_endpoint(server, osb, sandbox):
    osb.ok("exec", sandbox, "--", "true")
    server.reset_stats()
    osb.ok("spawn", sandbox, "--", "true")
    assert "GET /v1/sandboxes/{sandboxId}/endpoints/{port}" not in routes(server, sandbox)

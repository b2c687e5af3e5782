"""A mount that cannot work fails at once, with one line naming the cause
and the URL tried, and a non-zero exit; and the options are checked."""

import os
import subprocess
import time

from mounthelp import OSBFS, Mount, is_mounted
from osbtest import free_port, wait_until


def failed_mount(server, tmp_path, sandbox_id=None, options=(), api_key=None, env=None):
    m = Mount(server, sandbox_id=sandbox_id, options=options, workdir=str(tmp_path),
              api_key=api_key, env=env)
    t0 = time.time()
    m.start(expect_fail=True, timeout=60)
    took = time.time() - t0
    assert m.exit_code not in (None, 0), m.log()
    assert not is_mounted(m.path)
    lines = [l for l in m.log().splitlines() if l.strip()]
    return lines, took


def test_server_down(server, tmp_path):
    class Down:
        host, port, api_key = "127.0.0.1", free_port(), "k"
        url = "http://127.0.0.1:%d" % port
    lines, took = failed_mount(Down, tmp_path, sandbox_id="abc")
    assert took < 20
    assert len(lines) == 1, lines
    assert "127.0.0.1:%d" % Down.port in lines[0]
    assert "connect" in lines[0].lower()


def test_wrong_key(server, tmp_path):
    sid = server.create_sandbox()
    try:
        lines, took = failed_mount(server, tmp_path, sandbox_id=sid, api_key="wrong-key")
        assert len(lines) == 1, lines
        assert "401" in lines[0] and "INVALID_API_KEY" in lines[0]
        assert "wrong-key" not in "\n".join(lines)
        assert server.url.split("//")[1] in lines[0]
    finally:
        server.delete_sandbox(sid)


def test_missing_key(server, tmp_path):
    lines, _ = failed_mount(server, tmp_path, sandbox_id="abc", api_key="")
    assert len(lines) == 1 and "MISSING_API_KEY" in lines[0], lines
    assert "OPEN_SANDBOX_API_KEY" in lines[0] and "api_key_file=" in lines[0], lines


def test_unknown_sandbox(server, tmp_path):
    lines, took = failed_mount(server, tmp_path, sandbox_id="0000-no-such-sandbox")
    assert len(lines) == 1, lines
    assert "0000-no-such-sandbox" in lines[0] and "not found" in lines[0]
    assert took < 20


def test_key_from_file_and_never_in_argv(server, tmp_path):
    keyfile = tmp_path / "key"
    keyfile.write_text(server.api_key + "\n")
    sid = server.create_sandbox()
    try:
        m = Mount(server, sandbox_id=sid, options=["api_key_file=%s" % keyfile], workdir=str(tmp_path),
                  api_key="")
        m.start()
        try:
            with open("/proc/%d/cmdline" % m.proc.pid, "rb") as f:
                assert server.api_key.encode() not in f.read()
            assert server.api_key not in m.log()
            assert os.listdir(m.p()) is not None
        finally:
            assert m.stop() == 0
    finally:
        server.delete_sandbox(sid)


def test_bad_option_values(server, tmp_path):
    for opt, word in (("attr_timeout=soon", "attr_timeout"), ("nonsense_flag_x", None),
                      ("protocol=gopher", "protocol"), ("name=bad name!", "name")):
        r = subprocess.run([str(OSBFS), "-f", "-o", opt, str(tmp_path / "mnt")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30,
                           env=dict(os.environ, OPEN_SANDBOX_DOMAIN="127.0.0.1:%d" % server.port,
                                    OPEN_SANDBOX_API_KEY=server.api_key))
        assert r.returncode != 0, opt
        if word:
            assert word in r.stderr, (opt, r.stderr)


def test_help_lists_options():
    r = subprocess.run([str(OSBFS), "--help"], stdout=subprocess.PIPE, text=True)
    assert r.returncode == 0
    for opt in ("domain", "api_key_file", "cache_dir", "writeback_delay", "keepalive", "idle_pause", "name"):
        assert opt in r.stdout


def test_existing_read_only_directory_mounts(server, tmp_path):
    sid = server.create_sandbox()
    try:
        m = Mount(server, sandbox_id=sid, sdir="/usr", workdir=str(tmp_path))
        m.start()
        try:
            assert "bin" in os.listdir(m.p())
            assert os.path.isdir(m.p("bin"))
        finally:
            assert m.stop() == 0
    finally:
        server.delete_sandbox(sid)


def run_osbfs(server, mountpoint, options=(), timeout=60):
    env = dict(os.environ, OPEN_SANDBOX_DOMAIN="127.0.0.1:%d" % server.port,
               OPEN_SANDBOX_API_KEY=server.api_key)
    argv = [str(OSBFS), "-f"]
    for o in options:
        argv += ["-o", o]
    return subprocess.run(argv + [str(mountpoint)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, env=env)


def sandboxes_made(server):
    return server.stats()["total"].get("POST /v1/sandboxes", 0)


def test_local_conditions_are_checked_before_a_sandbox_is_made(server, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    (tmp_path / "mnt").mkdir()
    for mountpoint, options, words in (
            (tmp_path / "missing", [], ["does not exist", "No such file", "mkdir"]),
            (afile, [], ["not a directory"]),
            (tmp_path / "mnt", ["cache_dir=%s/sub" % afile], ["cache dir", "Not a directory"])):
        server.reset_stats()
        r = run_osbfs(server, mountpoint, ["cache_dir=%s" % (tmp_path / "cache")] + options)
        assert r.returncode != 0, r.stderr
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert len(lines) == 1, lines
        assert any(w in lines[0] for w in words), lines
        assert str(mountpoint) in lines[0] or "cache dir" in lines[0]
        assert sandboxes_made(server) == 0, server.stats()["total"]


def test_a_mount_that_fails_after_making_its_sandbox_deletes_it(server, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    server.reset_stats()
    # the sandbox is made slowly; meanwhile the mountpoint goes, so the
    # mount itself fails after the local checks passed
    server.set_faults(next=1, kinds=["delay"], delay_ms=2500, scope="lifecycle",
                      method="POST", path="/v1/sandboxes$")
    env = dict(os.environ, OPEN_SANDBOX_DOMAIN="127.0.0.1:%d" % server.port,
               OPEN_SANDBOX_API_KEY=server.api_key)
    p = subprocess.Popen([str(OSBFS), "-f", "-o", "cache_dir=%s" % (tmp_path / "cache"), str(mnt)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(lambda: sandboxes_made(server) >= 1, 20, "the sandbox to be asked for")
        mnt.rmdir()
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        server.clear_faults()
    assert p.returncode != 0, err
    assert "deleted sandbox" in err, err
    sid = err.split("deleted sandbox ")[1].split(",")[0]
    st, _, _ = server.request("GET", "/v1/sandboxes/" + sid)
    assert st == 404
    assert server.stats()["total"].get("DELETE /v1/sandboxes/{sandboxId}", 0) == 1

"""A mount that cannot work fails at once, with one line naming the cause
and the URL tried, and a non-zero exit; and the options are checked."""

import os
import subprocess
import time

from mounthelp import OSBFS, Mount, is_mounted
from osbtest import free_port


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

"""The code interpreter through the control tree: .osb/code/LANG/{input,
output,result.json,ctl}, contexts made by mkdir, state between runs and
across a remount, interrupt, reset, MIME results, and every bad use."""

import base64
import errno
import json
import os
import shutil
import subprocess
import threading
import time

import pytest

from jobhelp import deadline, expect_errno, last_error, osb, read, write
from osbtest import wait_until

HAVE_NODE = shutil.which("node", path="/usr/bin:/bin") is not None


def code(m, *parts):
    return osb(m, "code", *parts)


def run(m, src, lang="python", ctx=None, timeout=120):
    """Writes @src to the context's input (the close returns when the run
    has ended) and returns its output."""
    parts = [lang] + ([ctx] if ctx else [])
    with deadline(timeout):
        write(code(m, *parts, "input"), src)
    return read(code(m, *parts, "output"))


def result(m, lang="python", ctx=None):
    parts = [lang] + ([ctx] if ctx else [])
    return json.loads(read(code(m, *parts, "result.json")))


def sections(out):
    """output's layout: {"status": ..., "stdout": ..., ...}."""
    assert out.endswith("\n"), out
    lines = out[:-1].split("\n")
    assert lines[0].startswith("status: "), out
    d = {"status": lines[0][len("status: "):]}
    parts = {}
    name = None
    for ln in lines[1:]:
        if ln.startswith("--- "):
            name = ln[4:]
            parts[name] = []
        else:
            parts[name].append(ln)
    d.update({k: "\n".join(v) for k, v in parts.items()})
    return d


def all_requests(server, sid):
    s = server.stats().get("sandboxes", {}).get(sid, {})
    return {k: v for k, v in s.items() if v}


def code_requests(server, sid):
    s = server.stats().get("sandboxes", {}).get(sid, {})
    return {k: v for k, v in s.items() if "/code" in k}


# ---- languages ----

def test_listing_shows_the_languages_the_sandbox_offers(mount, server):
    names = set(os.listdir(code(mount)))
    want = {"python", "bash"} | ({"javascript"} if HAVE_NODE else set())
    assert names == want
    assert set(os.listdir(code(mount, "python"))) == {"input", "output", "result.json", "ctl"}
    reqs = code_requests(server, mount.sandbox_id)
    # one context asked for per language, each once
    assert reqs.get("POST /code/context") == 6, reqs
    os.listdir(code(mount))
    assert code_requests(server, mount.sandbox_id).get("POST /code/context") == 6


def test_a_language_without_a_kernel_is_enoent_with_the_reason(mount):
    expect_errno(errno.ENOENT, os.stat, code(mount, "java"))
    assert "code/java" in last_error(mount)
    expect_errno(errno.ENOENT, os.stat, code(mount, "cobol"))
    err = last_error(mount)
    assert "code/cobol: not a language" in err and "python" in err, err
    # the reason is said again each time the language is named, so that
    # last_error is about it, not about whatever failed in between
    expect_errno(errno.ENOENT, os.stat, code(mount, "java", "input"))
    err = last_error(mount)
    assert "code/java" in err and "no such language" in err, err


def test_nothing_run_yet_is_idle(mount):
    assert read(code(mount, "python", "output")) == "status: idle\n"
    r = result(mount)
    assert r["status"] == "idle" and r["results"] == [] and r["error"] is None


# ---- runs ----

def test_state_is_kept_between_runs_and_the_last_value_shows(mount):
    out = run(mount, "x = 41\nprint('set')")
    assert sections(out) == {"status": "ok", "stdout": "set"}
    d = sections(run(mount, "x + 1"))
    assert d == {"status": "ok", "value": "42"}
    r = result(mount)
    assert r["results"] == [{"text": "42"}]
    assert r["language"] == "python" and r["execution_count"] == 2
    assert read(code(mount, "python", "input")) == "x + 1"


def test_stderr_has_its_own_section(mount):
    d = sections(run(mount, "import sys\nprint('out')\nprint('bad', file=sys.stderr)"))
    assert d["stdout"] == "out" and d["stderr"] == "bad" and d["status"] == "ok"
    assert result(mount)["stderr"] == "bad\n"


def test_an_error_is_a_result_with_its_traceback(mount):
    d = sections(run(mount, "def f():\n    return 1 / 0\nf()"))
    assert d["status"] == "error"
    assert d["error"] == "ZeroDivisionError: division by zero"
    assert "Traceback" in d["traceback"] and "in f" in d["traceback"]
    e = result(mount)["error"]
    assert e["ename"] == "ZeroDivisionError" and e["evalue"] == "division by zero"
    assert isinstance(e["traceback"], list) and e["traceback"]


def test_a_syntax_error_is_a_result_not_an_errno(mount):
    d = sections(run(mount, "def (:"))
    assert d["status"] == "error" and d["error"].startswith("SyntaxError")


def test_a_figure_comes_back_as_png(mount):
    pytest.importorskip("matplotlib")
    src = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
           "fig, ax = plt.subplots()\nax.plot([1, 2, 3], [1, 4, 9])\nfig")
    d = sections(run(mount, src))
    assert d["status"] == "ok" and "Figure" in d["value"]
    assert "result.json" in d["note"]
    (bundle,) = result(mount)["results"]
    png = base64.b64decode(bundle["image/png"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert "Figure" in bundle["text"]
    # and as a file beside the output, for tools that cannot decode base64
    assert d["images"] == "image-1.png" and "beside" in d["note"], d
    path = code(mount, "python", "image-1.png")
    assert open(path, "rb").read() == png
    assert os.stat(path).st_size == len(png)
    assert "image-1.png" in os.listdir(code(mount, "python"))
    # the next run's images replace them
    run(mount, "1")
    assert "image-1.png" not in os.listdir(code(mount, "python"))
    expect_errno(errno.ENOENT, os.stat, path)


def test_each_image_of_a_result_is_a_file_as_it_came(mount):
    src = ("class Pic:\n"
           "    def _repr_png_(self): return bytes(range(256)) * 3\n"
           "    def _repr_svg_(self): return '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'\n"
           "Pic()")
    d = sections(run(mount, src))
    assert d["status"] == "ok" and d["images"] == "image-1.png\nimage-2.svg", d
    assert open(code(mount, "python", "image-1.png"), "rb").read() == bytes(range(256)) * 3
    assert read(code(mount, "python", "image-2.svg")) == '<svg xmlns="http://www.w3.org/2000/svg"/>'
    # no context can take an image's name
    expect_errno(errno.EINVAL, os.mkdir, code(mount, "python", "image-7.png"))


def test_a_figure_left_open_is_shown_as_inline_plots_are(mount):
    pytest.importorskip("matplotlib")
    src = "import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nprint('drawn')"
    d = sections(run(mount, src))
    assert d["status"] == "ok" and d["stdout"] == "drawn"
    (bundle,) = result(mount)["results"]
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    # shown once: the next run has none
    run(mount, "1")
    assert result(mount)["results"] == [{"text": "1"}]


def test_files_the_code_writes_show_through_the_mount_at_once(mount):
    os.listdir(mount.p())  # the root's listing is cached
    run(mount, "open('made_by_code.txt', 'w').write('hi')")
    with open(mount.p("made_by_code.txt")) as f:
        assert f.read() == "hi"


def test_the_code_sees_files_written_just_before(mount):
    with open(mount.p("data.txt"), "w") as f:
        f.write("12345")
    assert sections(run(mount, "len(open('data.txt').read())"))["value"] == "5"


def test_a_mebibyte_of_code_runs(mount):
    src = "s = '" + "a" * (1 << 20) + "'\nlen(s)"
    assert sections(run(mount, src))["value"] == str(1 << 20)


def test_binary_input_is_einval(mount):
    expect_errno(errno.EINVAL, write, code(mount, "python", "input"), b"x = 1\x00\xff")
    assert "input" in last_error(mount)
    expect_errno(errno.EINVAL, write, code(mount, "python", "input"), "   \n")


def test_input_written_to_a_temp_file_and_renamed(mount):
    tmp = code(mount, "python", ".input.tmp")
    with open(tmp, "w") as f:
        f.write("y = 6 * 7\ny")
    os.rename(tmp, code(mount, "python", "input"))
    assert sections(read(code(mount, "python", "output")))["value"] == "42"
    assert ".input.tmp" not in os.listdir(code(mount, "python"))


def test_input_written_in_place_in_pieces(mount):
    fd = os.open(code(mount, "python", "input"), os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"z = 'a'")
    os.write(fd, b" * 3\nz")
    os.close(fd)
    assert sections(read(code(mount, "python", "output")))["value"] == "'aaa'"


# ---- contexts ----

def test_two_contexts_of_one_language_are_kept_apart(mount):
    os.mkdir(code(mount, "python", "other"))
    assert "other" in os.listdir(code(mount, "python"))
    assert set(os.listdir(code(mount, "python", "other"))) == {"input", "output", "result.json",
                                                               "ctl"}
    run(mount, "x = 'default'")
    run(mount, "x = 'other'", ctx="other")
    assert sections(run(mount, "x"))["value"] == "'default'"
    assert sections(run(mount, "x", ctx="other"))["value"] == "'other'"
    expect_errno(errno.EEXIST, os.mkdir, code(mount, "python", "other"))
    expect_errno(errno.EINVAL, os.mkdir, code(mount, "python", "-bad"))
    expect_errno(errno.EPERM, os.mkdir, code(mount, "python", "other", "deeper"))
    expect_errno(errno.EPERM, os.mkdir, code(mount, "elsewhere"))


def test_rmdir_removes_a_context(mount, server):
    os.mkdir(code(mount, "python", "tmp"))
    run(mount, "v = 1", ctx="tmp")
    cid = result(mount, ctx="tmp")["context"]
    os.rmdir(code(mount, "python", "tmp"))
    assert "tmp" not in os.listdir(code(mount, "python"))
    expect_errno(errno.ENOENT, os.stat, code(mount, "python", "tmp"))
    st, _, body = server.execd(mount.sandbox_id, "GET", "/code/contexts", raw=True)
    assert cid not in body.decode()
    names = [os.path.basename(p) for p in server_listing(server, mount.sandbox_id)]
    assert not [n for n in names if cid in n], names
    # the name is free again, for a fresh context
    os.mkdir(code(mount, "python", "tmp"))
    d = sections(run(mount, "v", ctx="tmp"))
    assert d["status"] == "error" and d["error"].startswith("NameError")
    expect_errno(errno.ENOENT, os.rmdir, code(mount, "python", "nosuch"))
    expect_errno(errno.ENOTDIR, os.rmdir, code(mount, "python", "input"))
    expect_errno(errno.EPERM, os.rmdir, code(mount, "python"))


def test_rmdir_of_a_context_running_code_is_ebusy(make_mount):
    m = make_mount(options=["request_timeout=1s"])
    os.mkdir(code(m, "python", "busy"))
    with deadline(60):
        write(code(m, "python", "busy", "input"), "import time\ntime.sleep(600)")
    expect_errno(errno.EBUSY, os.rmdir, code(m, "python", "busy"))
    assert "interrupt" in last_error(m)
    write(code(m, "python", "busy", "ctl"), "interrupt")
    wait_until(lambda: not read(code(m, "python", "busy", "output")).startswith("status: running"),
               30, "the run's end")
    os.rmdir(code(m, "python", "busy"))


def server_listing(server, sid):
    st, _, body = server.execd(sid, "GET", "/directories/list",
                               {"path": "/tmp/.osbfs/code", "depth": "1"}, raw=True)
    assert st == 200, body
    return [e["path"] for e in json.loads(body)]


def test_a_context_the_sandbox_lost_is_replaced_and_said_so(mount, server):
    run(mount, "x = 1")
    old = result(mount)["context"]
    st = server.execd(mount.sandbox_id, "DELETE", "/code/contexts/" + old)[0]
    assert st == 200
    d = sections(run(mount, "x"))
    assert d["status"] == "error" and d["error"].startswith("NameError")
    assert "lost this context" in d["note"]
    r = result(mount)
    assert r["context_lost"] is True and r["context"] != old
    d = sections(run(mount, "x = 2\nx"))
    assert d == {"status": "ok", "value": "2"}


def test_reset_gives_a_fresh_context(mount):
    run(mount, "x = 5")
    write(code(mount, "python", "ctl"), "reset\n")
    assert sections(read(code(mount, "python", "output")))["status"] == "idle"
    d = sections(run(mount, "x"))
    assert d["status"] == "error" and d["error"].startswith("NameError")


def test_ctl_refuses_unknown_verbs_and_idle_interrupts(mount):
    expect_errno(errno.EINVAL, write, code(mount, "python", "ctl"), "explode")
    assert "unknown verb" in last_error(mount)
    expect_errno(errno.ESRCH, write, code(mount, "python", "ctl"), "interrupt")


def test_interrupt_stops_an_endless_loop(make_mount):
    m = make_mount(options=["request_timeout=2s"])
    t0 = time.monotonic()
    with deadline(60):
        write(code(m, "python", "input"), "n = 0\nwhile True:\n    n += 1")
    # the close came back at request_timeout, the run goes on
    assert time.monotonic() - t0 < 30
    assert sections(read(code(m, "python", "output")))["status"] == "running"
    assert result(m)["finished_at"] is None
    expect_errno(errno.EBUSY, write, code(m, "python", "input"), "1")
    assert "in progress" in last_error(m)
    write(code(m, "python", "ctl"), "interrupt")
    wait_until(lambda: sections(read(code(m, "python", "output")))["status"] != "running",
               30, "the run's end")
    d = sections(read(code(m, "python", "output")))
    assert d["status"] == "error" and d["error"].startswith("KeyboardInterrupt")
    # the state is still there
    assert int(sections(run(m, "n"))["value"]) > 0


def test_unmount_during_a_run_ends_cleanly(make_mount):
    m = make_mount(options=["request_timeout=2s"])
    with deadline(60):
        write(code(m, "python", "input"), "import time\ntime.sleep(600)")
    assert sections(read(code(m, "python", "output")))["status"] == "running"
    t0 = time.monotonic()
    assert m.stop(timeout=60) == 0
    assert time.monotonic() - t0 < 30


def test_state_survives_a_remount(make_mount, server):
    m = make_mount()
    run(m, "kept = 'across'")
    os.mkdir(code(m, "python", "side"))
    run(m, "kept = 'side'", ctx="side")
    sid = m.sandbox_id
    m.stop()
    server.reset_stats()
    m2 = make_mount(sandbox_id=sid)
    assert sections(run(m2, "kept"))["value"] == "'across'"
    assert sections(run(m2, "kept", ctx="side"))["value"] == "'side'"
    reqs = code_requests(server, sid)
    assert reqs.get("POST /code/context", 0) == 0, reqs
    assert reqs.get("GET /code/contexts") == 1, reqs


def test_a_record_named_as_a_file_is_no_context(make_mount, server):
    # the sandbox may write any record: one of a live context named like
    # a file of code/LANG/ (or no job name) is skipped, not listed twice
    m = make_mount()
    run(m, "x = 1")
    os.mkdir(code(m, "python", "side"))
    run(m, "x = 2", ctx="side")
    cid = result(m, ctx="side")["context"]
    sid = m.sandbox_id
    m.stop()
    for name in ("input", "result.json", "latest"):
        server.write_file(sid, "/tmp/.osbfs/code/python@%s@%s" % (name, cid), b"")
    m2 = make_mount(sandbox_id=sid)
    names = os.listdir(code(m2, "python"))
    assert sorted(names) == ["ctl", "input", "output", "result.json", "side"], names
    assert sections(run(m2, "x", ctx="side"))["value"] == "2"


def test_bash_context_keeps_exported_state(mount):
    run(mount, "export GREETING=hello", lang="bash")
    d = sections(run(mount, "echo $GREETING world", lang="bash"))
    assert d["status"] == "ok" and d["stdout"] == "hello world"


@pytest.mark.skipif(not HAVE_NODE, reason="no node")
def test_javascript_context_keeps_state(mount):
    run(mount, "var a = 20;", lang="javascript")
    assert sections(run(mount, "a * 2 + 2", lang="javascript"))["value"] == "42"
    d = sections(run(mount, "null.x", lang="javascript"))
    assert d["status"] == "error" and d["error"].startswith("TypeError")


def test_a_language_whose_context_never_comes_is_enoent(make_server, make_mount):
    """An execd without a Jupyter server never answers POST /code/context:
    after request_timeout the language is refused for the mount."""
    s = make_server()
    m = make_mount(srv=s, options=["request_timeout=2s"])
    s.set_faults(next=1, kinds=["delay"], delay_ms=8000, path="/code/context$", method="POST")
    t0 = time.monotonic()
    expect_errno(errno.ENOENT, os.stat, code(m, "python"))
    assert time.monotonic() - t0 < 8
    assert "no answer in time" in last_error(m)
    s.clear_faults()
    expect_errno(errno.ENOENT, os.stat, code(m, "python"))  # not asked again


# ---- what it costs ----

def test_requests_per_operation(mount, server):
    sid = mount.sandbox_id
    server.reset_stats()
    os.stat(code(mount, "python"))
    # the records' listing, the context, its record
    assert code_requests(server, sid) == {"POST /code/context": 1}
    assert all_requests(server, sid) == {"GET /directories/list": 1, "POST /code/context": 1,
                                         "POST /files/upload": 1}
    server.reset_stats()
    run(mount, "x = 1")
    run(mount, "x + 1")
    assert all_requests(server, sid) == {"POST /code": 2}
    server.reset_stats()
    read(code(mount, "python", "output"))
    read(code(mount, "python", "result.json"))
    os.listdir(code(mount, "python"))
    assert all_requests(server, sid) == {}


def test_a_close_still_waiting_at_a_lazy_unmount(make_mount):
    """fusermount -u -z while a writer's close waits for a run: the close
    returns at request_timeout, then the daemon interrupts the run and
    exits cleanly."""
    m = make_mount(options=["request_timeout=4s"])
    done = []

    def writer():
        try:
            write(code(m, "python", "input"), "import time\ntime.sleep(600)")
            done.append(0)
        except OSError as e:
            done.append(e.errno)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    wait_until(lambda: os.path.exists(code(m, "python")) and
               read(code(m, "python", "output")).startswith("status: running"),
               30, "the run's start")
    subprocess.run(["fusermount3", "-u", "-z", m.p()], check=True, timeout=30)
    t.join(30)
    assert not t.is_alive() and done == [0]
    t0 = time.monotonic()
    assert m.stop(timeout=60) == 0
    assert time.monotonic() - t0 < 30


# ---- a run whose answer was lost ----
#
# The server runs the code, then drops the connection (reset_after) or
# drops it first (reset). osbfs never sends the code again: it runs a
# probe that does nothing in the same context, whose execution count
# says whether the lost run ran.

def lose_next_runs(server, kind, n=1):
    server.set_faults(next=n, kinds=[kind], scope="execd", path="/code$", method="POST")


def write_input(m, src):
    """Writes @src to python's input; the errno of the close, 0 if none."""
    try:
        write(code(m, "python", "input"), src)
    except OSError as e:
        return e.errno
    return 0


def test_a_run_whose_answer_was_lost_but_ran_says_so(mount, server):
    run(mount, "n = 0")
    lose_next_runs(server, "reset_after")
    try:
        assert write_input(mount, "n += 1") == 0
    finally:
        server.clear_faults()
    d = sections(read(code(mount, "python", "output")))
    assert d["status"] == "ran", d
    assert "answer was lost" in d["note"]
    r = result(mount)
    assert r["status"] == "ran" and r["answer_lost"] is True and r["failure"] is None
    assert sections(run(mount, "n"))["value"] == "1"   # it ran, once


def test_a_run_lost_before_it_ran_is_failed_and_nothing_ran(mount, server):
    run(mount, "n = 0")
    lose_next_runs(server, "reset")
    try:
        assert write_input(mount, "n += 1") == errno.EIO
    finally:
        server.clear_faults()
    d = sections(read(code(mount, "python", "output")))
    assert d["status"].startswith("failed: ") and "nothing ran" in d["status"], d
    assert sections(run(mount, "n"))["value"] == "0"


def test_a_run_that_cannot_be_settled_is_unknown_not_run_twice(mount, server):
    run(mount, "n = 0")
    lose_next_runs(server, "reset_after", n=2)   # the run, and the probe
    try:
        assert write_input(mount, "n += 1") == errno.EIO
    finally:
        server.clear_faults()
    d = sections(read(code(mount, "python", "output")))
    assert d["status"].startswith("unknown: its answer was lost"), d
    assert sections(run(mount, "n"))["value"] == "1"

"""-o setup=FILE: the software a sandbox declares (the hosted-sandbox
seed's `sandbox:` section), installed by the job jobs/setup before any
other job starts, reused while the declaration is unchanged, and reported
when an install fails."""

import errno
import json
import os
import subprocess
import threading
import time

import pytest

from jobhelp import expect_errno, info, last_error, osb, read, start, status, wait, write
from mounthelp import OSBFS
from osbtest import execd_routes, wait_until

MARKER = "/tmp/.osbfs/setup/installed"


def setup_file(tmp_path, text, name="setup.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def setup_info(m):
    return info(m)["setup"]


def settled(m, timeout=120):
    """Waits for the setup to end; returns info's setup section."""
    return wait_until(lambda: (lambda s: s if s["state"] in ("done", "failed") else None)(setup_info(m)),
                      timeout, "the setup to end")


def job_file(m, name):
    return read(osb(m, "jobs", "setup", name))


def commands(server, sid):
    return execd_routes(server, sid).get("POST /command", 0)


# the mounts whose commands are counted: without the change feed, whose
# own command would count
NO_FEED = ["feed=no"]


# ---- the file: refused before anything is mounted ----

def refused(make_mount, tmp_path, text):
    path = setup_file(tmp_path, text)
    m = make_mount(options=["setup=" + path], start=False, create=False)
    m.start(expect_fail=True)
    assert m.exit_code not in (0, None)
    line = [ln for ln in m.log().splitlines() if ln.startswith("osbfs: ")][0]
    assert line.startswith("osbfs: %s:" % path), line
    return line[len("osbfs: %s:" % path):]


def test_an_unknown_key_is_refused_with_its_line(make_mount, tmp_path):
    msg = refused(make_mount, tmp_path,
                  "sandbox:\n  toolchain: auto\n  python:\n    version: \"3.12\"\n    pakages: [numpy]\n")
    assert msg.startswith("5: unknown key \"pakages\" in python"), msg


def test_a_bad_toolchain_is_refused_with_its_line(make_mount, tmp_path):
    msg = refused(make_mount, tmp_path, "sandbox:\n  toolchain: sometimes\n")
    assert msg.startswith("2: toolchain must be auto or never"), msg


@pytest.mark.parametrize("text,line,words", [
    ("packages: numpy\n", 1, "must be a list"),
    ("packages: [[a, b]]\n", 1, "not a list"),
    ("packages:\n  - 42\n", 2, "is a number"),
    ("packages: [a]\npackages: [b]\n", 2, "duplicate key \"packages\""),
    ("packages: [\"\"]\n", 1, "empty package name"),
    ("packages: [\"--force-yes\"]\n", 1, "take it for an option"),
    ("python:\n  packages: [\"numpy;rm\"]\n", 2, "not a package name"),
    ("node:\n  version: [22]\n", 2, "must be a version"),
    ("sandbox: [numpy]\n", 1, "must be a mapping"),
    ("packages: [a\n", 2, "not valid YAML"),
])
def test_a_wrong_type_or_name_is_refused(make_mount, tmp_path, text, line, words):
    msg = refused(make_mount, tmp_path, text)
    assert msg.startswith("%d: " % line) and words in msg, msg


def test_a_missing_setup_file_is_refused(make_mount, tmp_path):
    m = make_mount(options=["setup=%s" % (tmp_path / "nope.yaml")], start=False, create=False)
    m.start(expect_fail=True)
    assert m.exit_code not in (0, None)
    assert "nope.yaml: No such file or directory" in m.log()


# ---- a failed install ----

def test_a_system_package_that_does_not_exist_fails_the_setup(make_mount, tmp_path):
    path = setup_file(tmp_path, "sandbox:\n  toolchain: never\n  packages: [osbfs-no-such-package]\n")
    m = make_mount(options=["setup=" + path])
    t0 = time.monotonic()
    assert read(osb(m, "jobs", "setup", "wait")).strip() == "exited 100"
    took = time.monotonic() - t0
    assert status(m, "setup") == "exited 100"
    assert "Unable to locate package osbfs-no-such-package" in job_file(m, "stderr")
    s = settled(m)
    assert s["state"] == "failed"
    assert s["error"] == "setup failed (apt-get install exited 100): see .osb/jobs/setup/stderr"
    # later jobs fail fast, pointing at it
    t1 = time.monotonic()
    e = expect_errno(errno.ENOPKG, start, m, "echo never")
    assert time.monotonic() - t1 < 5, e
    assert "setup failed (apt-get install exited 100): see .osb/jobs/setup/stderr" in last_error(m)
    os.mkdir(osb(m, "jobs", "later"))
    expect_errno(errno.ENOPKG, write, osb(m, "jobs", "later", "cmd"), "echo never")
    expect_errno(errno.ENOPKG, write, osb(m, "code", "python", "input"), "print(1)")
    assert server_has_no_marker(m)
    print("setup with a missing apt package failed after %.1f s" % took)


def server_has_no_marker(m):
    try:
        m.server.read_file(m.sandbox_id, MARKER)
    except Exception:  # noqa: BLE001
        return True
    return False


def test_a_pip_package_that_does_not_exist_fails_the_setup(make_mount, tmp_path):
    path = setup_file(tmp_path, "sandbox:\n  python:\n    packages: [numpy-osbfs-missing]\n")
    m = make_mount(options=["setup=" + path])
    s = settled(m, timeout=240)
    assert s["state"] == "failed"
    assert s["error"].startswith("setup failed (pip install exited 1)"), s
    err = job_file(m, "stderr")
    assert "No matching distribution found for numpy-osbfs-missing" in err, err
    assert "osbfs setup: failed: pip install exited 1" in err


def test_a_python_version_mismatch_with_toolchain_never_names_both(make_mount, tmp_path):
    path = setup_file(tmp_path, "sandbox:\n  toolchain: never\n  python:\n    version: \"3.12\"\n")
    m = make_mount(options=["setup=" + path])
    s = settled(m)
    assert s["state"] == "failed"
    found = subprocess.run(["/usr/bin/python3", "--version"], capture_output=True, text=True).stdout.strip()
    assert "python.version is 3.12, the sandbox has %s (toolchain: never)" % found in s["error"], s


def test_toolchain_auto_tries_to_install_the_declared_python_and_says_so(make_mount, tmp_path):
    path = setup_file(tmp_path, "sandbox:\n  toolchain: auto\n  python:\n    version: \"3.99\"\n")
    m = make_mount(options=["setup=" + path])
    s = settled(m, timeout=300)
    found = subprocess.run(["/usr/bin/python3", "--version"], capture_output=True, text=True).stdout.strip()
    assert s["state"] == "failed"
    assert ("python.version is 3.99, the sandbox has %s, and python3.99 could not be installed "
            "(apt-get install exited 100)" % found) in s["error"], s
    assert "installing with apt-get: python3.99" in job_file(m, "stdout")
    assert "Unable to locate package python3.99" in job_file(m, "stderr")


def test_a_node_version_mismatch_with_toolchain_never_names_both(make_mount, tmp_path):
    path = setup_file(tmp_path, "toolchain: never\nnode:\n  version: \"19\"\n")
    m = make_mount(options=["setup=" + path])
    s = settled(m)
    found = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    assert s["state"] == "failed"
    assert "node.version is 19, the sandbox has %s (toolchain: never)" % found in s["error"], s


def test_a_matching_python_version_is_a_setup_that_succeeds(make_mount, tmp_path):
    found = subprocess.run(["/usr/bin/python3", "--version"], capture_output=True, text=True).stdout
    minor = ".".join(found.split()[1].split(".")[:2])
    path = setup_file(tmp_path, "sandbox:\n  toolchain: never\n  python:\n    version: \"%s\"\n" % minor)
    m = make_mount(options=["setup=" + path])
    assert settled(m)["state"] == "done"
    assert "python: python3, Python %s" % minor in job_file(m, "stdout")
    jid = start(m, "echo ok")
    assert wait(m, jid) == "exited 0"


# ---- success, reuse ----

GIT = "sandbox:\n  toolchain: auto\n  packages: [git]\n"


def test_a_declaration_is_installed_once_and_reused_by_a_remount(server, make_mount, tmp_path):
    path = setup_file(tmp_path, GIT)
    m = make_mount(options=["setup=" + path])
    sid = m.sandbox_id
    assert read(osb(m, "jobs", "setup", "wait")).strip() == "exited 0"
    s = settled(m)
    assert s["state"] == "done" and not s["reused"] and s["error"] is None
    assert "installing with apt-get: git" in job_file(m, "stdout")
    marker = server.read_file(sid, MARKER).decode()
    assert marker.startswith("osbfs-setup 1\nhash %s\n" % s["hash"]) and "pkg git\n" in marker
    jid = start(m, "echo after")
    assert wait(m, jid) == "exited 0"
    m.stop()

    server.reset_stats()
    # the same cache dir, as a remount on this machine has it (a new one
    # would ask the special mode bits of the mount's root once, by command)
    m2 = make_mount(sandbox_id=sid, options=["setup=" + path] + NO_FEED, cache_dir=m.cache_dir)
    s2 = settled(m2)
    assert s2["state"] == "done" and s2["reused"]
    assert commands(server, sid) == 0, execd_routes(server, sid)
    # the earlier setup job is still listed, with its output
    assert status(m2, "setup") == "exited 0"
    print("remount with the same setup: %s" % json.dumps(execd_routes(server, sid), sort_keys=True))


def test_a_changed_declaration_installs_only_what_was_added(server, make_mount, tmp_path):
    m = make_mount(options=["setup=" + setup_file(tmp_path, GIT)])
    sid = m.sandbox_id
    assert settled(m)["state"] == "done"
    m.stop()
    path = setup_file(tmp_path, GIT.replace("[git]", "[git, make]"), "changed.yaml")
    m2 = make_mount(sandbox_id=sid, options=["setup=" + path])
    s = settled(m2)
    assert s["state"] == "done" and not s["reused"], s
    out = job_file(m2, "stdout")
    assert "installing with apt-get: make\n" in out, out
    assert "git" not in read(osb(m2, "jobs", "setup", "cmd")).split("OSBFS_MARKER")[0]
    marker = server.read_file(sid, MARKER).decode()
    assert "pkg git\n" in marker and "pkg make\n" in marker


def test_a_garbage_marker_is_taken_as_absent(server, make_mount, tmp_path):
    m = make_mount(options=["setup=" + setup_file(tmp_path, GIT)])
    sid = m.sandbox_id
    assert settled(m)["state"] == "done"
    m.stop()
    server.write_file(sid, MARKER, b"osbfs-setup 1\nhash zz\n\x00" + b"x" * 300000)
    m2 = make_mount(sandbox_id=sid, options=["setup=" + setup_file(tmp_path, GIT)])
    s = settled(m2)
    assert s["state"] == "done" and not s["reused"], s
    assert "installing with apt-get: git" in job_file(m2, "stdout")


# ---- while the setup runs ----

def test_files_work_and_a_job_waits_while_the_setup_runs(server, make_mount, tmp_path):
    # the marker's read takes 3 s: the setup is under way meanwhile
    server.set_faults(next=1, kinds=["delay"], delay_ms=3000, path="installed", method="GET")
    try:
        m = make_mount(options=["setup=" + setup_file(tmp_path, GIT)])
        t0 = time.monotonic()
        with open(m.p("during.txt"), "w") as f:
            f.write("written during the setup\n")
        with open(m.p("during.txt")) as f:
            assert f.read() == "written during the setup\n"
        os.listdir(m.p())
        assert time.monotonic() - t0 < 2.5
        assert setup_info(m)["state"] in ("checking", "running")
        got = {}
        th = threading.Thread(target=lambda: got.update(jid=start(m, "cat during.txt")))
        th.start()
        th.join(1)
        assert th.is_alive(), "the job started before the setup ended"
        th.join(120)
        assert not th.is_alive()
        assert setup_info(m)["state"] == "done"
        assert wait(m, got["jid"]) == "exited 0"
        assert read(osb(m, "jobs", got["jid"], "stdout")) == "written during the setup\n"
        assert "waits for the setup" in m.log()
    finally:
        server.clear_faults()


def test_a_setup_running_when_its_mount_died_is_followed_not_run_again(server, make_mount, tmp_path):
    path = setup_file(tmp_path, "packages: [git, make, curl, coreutils]\n")
    m = make_mount(options=["setup=" + path])
    sid = m.sandbox_id
    wait_until(lambda: setup_info(m)["state"] != "checking", 60, "the setup job to start")
    m.kill9()
    server.reset_stats()
    m2 = make_mount(sandbox_id=sid, options=["setup=" + path] + NO_FEED, cache_dir=m.cache_dir)
    s = settled(m2)
    assert s["state"] == "done", s
    # followed (still running) or reused (ended meanwhile): never sent again
    assert commands(server, sid) == 0, execd_routes(server, sid)
    assert status(m2, "setup") == "exited 0"
    assert job_file(m2, "stdout").count("installing with apt-get") == 1
    assert "following it" in m2.log() or s["reused"]
    print("remount after kill -9 during setup: %s" % ("followed the running job" if "following it" in m2.log() else "reused"))


def test_without_setup_info_says_null_and_jobs_start_at_once(mount):
    assert info(mount)["setup"] is None
    jid = start(mount, "echo hi")
    assert wait(mount, jid) == "exited 0"
    assert "setup" not in os.listdir(osb(mount, "jobs"))


# ---- installs that write /usr (each sandbox has its own /usr, /etc, /var) ----

def test_a_system_package_is_installed_and_runs_in_a_later_job(make_mount, tmp_path):
    m = make_mount(options=["setup=" + setup_file(tmp_path, "sandbox:\n  toolchain: never\n  packages: [sl]\n")])
    s = settled(m, timeout=600)
    assert s["state"] == "done", (s, job_file(m, "stderr")[-3000:])
    jid = start(m, "dpkg -s sl | grep '^Status:'; test -x /usr/games/sl && echo runs")
    assert wait(m, jid) == "exited 0"
    assert read(osb(m, "jobs", jid, "stdout")) == "Status: install ok installed\nruns\n"


def test_an_npm_package_is_installed_and_runs_in_a_later_job(make_mount, tmp_path):
    m = make_mount(options=["setup=" + setup_file(tmp_path, "sandbox:\n  node:\n    packages: [json]\n")])
    s = settled(m, timeout=600)
    assert s["state"] == "done", (s, job_file(m, "stderr")[-3000:])
    assert "installing with npm: json" in job_file(m, "stdout")
    jid = start(m, "json --version")
    assert wait(m, jid) == "exited 0", read(osb(m, "jobs", jid, "stderr"))
    assert read(osb(m, "jobs", jid, "stdout")).startswith("json ")


def test_the_readme_chart_recipe_works_as_printed(make_mount, tmp_path):
    """README.md's "Make a chart" recipe: its setup file, its mount (as
    make_mount makes it), then its lines as printed, with its mnt/."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "README.md")) as f:
        text = f.read()
    block = text.split("```sh\nprintf 'sandbox:")[1].split("```")[0]
    lines = ("printf 'sandbox:" + block).strip().split("\n")
    assert lines[1].startswith("osbfs -o setup=chart.yaml mnt"), lines
    rest = "\n".join(ln.split("  #")[0].rstrip() for ln in lines[2:])
    work = tmp_path / "user"
    work.mkdir()
    r = subprocess.run(["bash", "-ec", lines[0]], cwd=str(work), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = make_mount(options=["setup=" + str(work / "chart.yaml")])
    os.symlink(m.p(), str(work / "mnt"))
    r = subprocess.run(["bash", "-ec", rest], cwd=str(work), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stderr, job_file(m, "stderr")[-3000:])
    assert r.stdout == "exited 0\n", r.stdout
    s = setup_info(m)
    assert s["state"] == "done", s
    assert "matplotlib" in job_file(m, "stdout")
    png = (work / "chart.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    assert m.server.read_file(m.sandbox_id, m.spath("chart.png")) == png

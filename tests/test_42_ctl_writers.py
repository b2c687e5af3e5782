"""Control files take every way programs write a file: in place,
truncate-and-write, and a temporary file renamed over the control file
(editors, agents' file tools, write-file-atomic libraries: the rename is
the write, and returns what the write's close would). A failed write of
any kind leaves nothing behind: no temporary file, no job."""

import errno
import json
import os
import subprocess
import tempfile
import time

import pytest

from jobhelp import expect_errno, info, job_file, last_error, last_log_line, osb, read, start, status, wait
from osbtest import wait_until

POLICY = {"defaultAction": "deny", "egress": [{"action": "allow", "target": "pypi.org"}]}


def atomic_write(path, data, mode=0o644):
    """What write-file-atomic and most agents' file tools do: a new file
    next to the target, written, synced, given the target's mode, then
    renamed over it."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data.encode() if isinstance(data, str) else data)
        os.fsync(fd)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    try:
        os.rename(tmp, path)
    except OSError:
        # what such writers do when the rename fails
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return tmp


def python_replace(path, data):
    """Python's idiom: tempfile in the same directory, then os.replace."""
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), delete=False) as f:
        f.write(data)
        tmp = f.name
    os.replace(tmp, path)
    return tmp


def in_place(path, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def truncate_write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


WRITERS = {"in_place": in_place, "truncate_write": truncate_write,
           "atomic_write": atomic_write, "python_replace": python_replace}


def names(m, *parts):
    return sorted(os.listdir(osb(m, *parts)))


def job_names(m):
    return set(os.listdir(osb(m, "jobs"))) - {"latest"}


def latest(m):
    return os.readlink(osb(m, "jobs", "latest"))


@pytest.mark.parametrize("how", sorted(WRITERS))
def test_run_takes_every_way_of_writing(mount, how):
    before = job_names(mount)
    WRITERS[how](osb(mount, "run"), "echo via %s" % how)
    # run is run again at once (not the temporary file renamed over it)
    assert os.stat(osb(mount, "run")).st_mode & 0o777 == 0o644
    jid = latest(mount)
    assert jid not in before
    again = start(mount, "true")
    assert wait(mount, again) == "exited 0"
    assert wait(mount, jid) == "exited 0"
    assert job_file(mount, jid, "stdout") == "via %s\n" % how
    # one job each, and no temporary file left
    assert job_names(mount) == before | {jid, again}
    assert names(mount) == sorted(["README", "info", "ctl", "egress", "log", "run", "jobs", "code", "snapshots"])


@pytest.mark.parametrize("how", sorted(WRITERS))
def test_a_named_jobs_cmd_and_ctl_take_every_way_of_writing(mount, how):
    name = "w-" + how.replace("_", "-")
    os.mkdir(osb(mount, "jobs", name))
    WRITERS[how](osb(mount, "jobs", name, "cmd"), "echo started; sleep 60")
    assert status(mount, name) == "running"
    wait_until(lambda: job_file(mount, name, "stdout") == "started\n", 30, "the job's output")
    WRITERS[how](osb(mount, "jobs", name, "ctl"), "kill\n")
    assert wait(mount, name) == "killed SIGTERM"
    assert job_file(mount, name, "stdout") == "started\n"
    assert sorted(os.listdir(osb(mount, "jobs", name))) == sorted(
        ["cmd", "status", "exit_code", "stdout", "stderr", "ctl", "info"])


@pytest.mark.parametrize("how", sorted(WRITERS))
def test_ctl_takes_every_way_of_writing(mount, server, how):
    secs = {"atomic_write": 3000, "in_place": 3600, "python_replace": 4200,
            "truncate_write": 4800}[how]
    WRITERS[how](osb(mount, "ctl"), "renew %d\n" % secs)
    st, _, sb = server.request("GET", "/v1/sandboxes/" + mount.sandbox_id)
    assert st == 200
    exp = sb["expiresAt"]
    assert info(mount)["expires_at"][:19] == exp[:19]
    got = time.mktime(time.strptime(exp[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert abs(got - (time.time() + secs)) < 120


@pytest.mark.parametrize("how", sorted(WRITERS))
def test_egress_takes_every_way_of_writing(make_mount, make_sandbox, how):
    sid = make_sandbox(networkPolicy=POLICY)
    m = make_mount(sandbox_id=sid)
    WRITERS[how](osb(m, "egress"), "allow example.com\n")
    rules = json.loads(read(osb(m, "egress")))["policy"]["egress"]
    assert {"action": "allow", "target": "example.com"} in rules


def test_a_failed_write_by_rename_fails_the_rename_and_leaves_nothing(mount):
    jobs = job_names(mount)
    with pytest.raises(OSError) as e:
        atomic_write(osb(mount, "ctl"), "frobnicate\n")
    assert e.value.errno == errno.EINVAL
    assert "frobnicate" in last_error(mount)
    with pytest.raises(OSError) as e:
        atomic_write(osb(mount, "run"), b"\xff\xfe not text")
    assert e.value.errno == errno.EINVAL
    # a job's cmd: the named job stays as it was made, waiting for one
    os.mkdir(osb(mount, "jobs", "later"))
    with pytest.raises(OSError) as e:
        atomic_write(osb(mount, "jobs", "later", "cmd"), "   \n")
    assert e.value.errno == errno.EINVAL
    assert status(mount, "later") == "created"
    # the temporary files went with the failed writes: the writers'
    # own clean-up found nothing to remove
    assert names(mount) == sorted(["README", "info", "ctl", "egress", "log", "run", "jobs", "code", "snapshots"])
    assert job_names(mount) == jobs | {"later"}
    for p in (osb(mount, "ctl.tmp-%d" % os.getpid()), osb(mount, "run.tmp-%d" % os.getpid())):
        expect_errno(errno.ENOENT, os.stat, p)


def test_a_rename_over_a_read_only_file_is_refused_and_keeps_the_temporary_file(mount):
    tmp = osb(mount, "info.new")
    with open(tmp, "w") as f:
        f.write("{}")
    expect_errno(errno.EACCES, os.rename, tmp, osb(mount, "info"))
    expect_errno(errno.EISDIR, os.rename, tmp, osb(mount, "jobs"))
    with open(tmp) as f:
        assert f.read() == "{}"
    os.unlink(tmp)
    expect_errno(errno.ENOENT, os.stat, tmp)


def test_a_temporary_file_is_a_file_until_it_is_renamed(mount):
    tmp = osb(mount, "run.partial")
    with open(tmp, "w") as f:
        f.write("echo one\n")
    with open(tmp, "a") as f:
        f.write("echo two\n")
    st = os.stat(tmp)
    assert st.st_size == 18 and (st.st_mode & 0o777) == 0o600
    with open(tmp) as f:
        assert f.read() == "echo one\necho two\n"
    os.truncate(tmp, 9)
    # renamed to another temporary name, then over run
    os.rename(tmp, osb(mount, "run.ready"))
    expect_errno(errno.ENOENT, os.stat, tmp)
    # not listed: a tree walker never comes across it
    assert "run.ready" not in os.listdir(osb(mount))
    os.rename(osb(mount, "run.ready"), osb(mount, "run"))
    jid = latest(mount)
    assert wait(mount, jid) == "exited 0"
    assert job_file(mount, jid, "stdout") == "one\n"
    expect_errno(errno.ENOENT, os.stat, osb(mount, "run.ready"))


def test_temporary_files_are_bounded_and_listed_in_info(mount):
    made = []
    try:
        for i in range(64):
            p = osb(mount, "run.t%d" % i)
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            made.append(p)
        assert sorted(info(mount)["scratch"]) == sorted("run.t%d" % i for i in range(64))
        expect_errno(errno.ENOSPC, os.open, osb(mount, "run.t64"), os.O_WRONLY | os.O_CREAT,
                     0o600)
        assert last_error(mount) == (
            ".osb: 64 temporary files wait to be renamed over a control file already: "
            "info's \"scratch\" lists them; remove them (rm) or rename them over their files")
    finally:
        for p in made:
            os.unlink(p)
    assert info(mount)["scratch"] == []
    os.close(os.open(osb(mount, "run.t64"), os.O_WRONLY | os.O_CREAT, 0o600))
    os.unlink(osb(mount, "run.t64"))


def test_info_lists_each_temporary_file_until_it_is_renamed(mount):
    os.mkdir(osb(mount, "jobs", "later"))
    for p in (osb(mount, "run.tmp"), osb(mount, "jobs", "later", ".cmd.swp")):
        with open(p, "w") as f:
            f.write("true\n")
    assert sorted(info(mount)["scratch"]) == ["jobs/later/.cmd.swp", "run.tmp"]
    # not listed in the directory: a tree walker never comes across it
    assert "run.tmp" not in os.listdir(osb(mount))
    os.rename(osb(mount, "jobs", "later", ".cmd.swp"), osb(mount, "jobs", "later", "cmd"))
    assert info(mount)["scratch"] == ["run.tmp"]
    os.unlink(osb(mount, "run.tmp"))
    assert info(mount)["scratch"] == []


# the names a temporary file may have: [. # .#]FILE[. ~ - _ # + ...], or tmp*
TEMP_NAMES = ["run.tmp", "run~", ".run.swp", ".#run", "#run#", "run.tmp.123.456",
              ".ctl.Xy12Ab", "egress-new", "run_1", "run+", "tmpab12_cd", ".tmp.x",
              "info.new", "README.bak"]


def create(path):
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def test_a_temporary_file_needs_a_temporary_name_of_a_control_file(mount):
    for name in TEMP_NAMES:
        os.close(os.open(osb(mount, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(osb(mount, name))
    os.mkdir(osb(mount, "jobs", "j"))
    for name in ("cmd.tmp", ".ctl.swp", "cmd~", "tmp123"):
        os.close(os.open(osb(mount, "jobs", "j", name), os.O_WRONLY | os.O_CREAT, 0o600))
        os.unlink(osb(mount, "jobs", "j", name))
    # a misspelled control file is refused, not kept out of sight
    for parts, files in ((("runs",), "README info ctl egress log run"),
                         (("newfile",), "README info ctl egress log run"),
                         (("jobs", "j", "cmnd"), "cmd status exit_code stdout stderr wait ctl info"),
                         (("jobs", "j", "run.tmp"), "cmd status exit_code stdout stderr wait ctl info")):
        expect_errno(errno.EACCES, create, osb(mount, *parts))
        msg = ("create .osb/%s: no such control file (the files here are: %s); a new file "
               "here may only be a temporary one to rename over one of them, named like "
               "FILE.tmp, FILE~, .FILE.swp, .#FILE or tmp*" % ("/".join(parts), files))
        assert last_error(mount) == msg
        assert last_log_line(mount).endswith(msg)
        expect_errno(errno.ENOENT, os.stat, osb(mount, *parts))
    # nor can a temporary file be renamed to such a name
    with open(osb(mount, "run.tmp"), "w") as f:
        f.write("true")
    expect_errno(errno.EACCES, os.rename, osb(mount, "run.tmp"), osb(mount, "runs"))
    assert "rename to .osb/runs: no such control file" in last_error(mount)
    os.unlink(osb(mount, "run.tmp"))
    assert info(mount)["scratch"] == []


def test_a_removed_jobs_temporary_files_go_with_it(mount):
    os.mkdir(osb(mount, "jobs", "gone"))
    with open(osb(mount, "jobs", "gone", "cmd.tmp"), "w") as f:
        f.write("true")
    os.rmdir(osb(mount, "jobs", "gone"))
    os.mkdir(osb(mount, "jobs", "gone"))
    expect_errno(errno.ENOENT, os.stat, osb(mount, "jobs", "gone", "cmd.tmp"))
    os.rmdir(osb(mount, "jobs", "gone"))


def test_a_file_from_the_workspace_is_copied_in_not_moved(mount):
    src = mount.p("cmd.sh")
    with open(src, "w") as f:
        f.write("echo copied")
    # a rename across the control tree's edge is EXDEV, and mv's copy
    # instead first removes the target, which a control file refuses
    expect_errno(errno.EXDEV, os.rename, src, osb(mount, "run"))
    r = subprocess.run(["mv", src, osb(mount, "run")], capture_output=True, text=True)
    assert r.returncode != 0 and "Operation not permitted" in r.stderr
    assert os.path.exists(src)
    r = subprocess.run(["cp", src, osb(mount, "run")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    jid = latest(mount)
    assert wait(mount, jid) == "exited 0"
    assert job_file(mount, jid, "stdout") == "copied\n"


def test_a_job_started_by_rename_reads_back_its_id_from_jobs_latest(mount):
    jid0 = start(mount, "true")
    wait(mount, jid0)
    atomic_write(osb(mount, "run"), "echo $OSBFS_JOB")
    jid = latest(mount)
    assert jid != jid0
    wait(mount, jid)
    assert job_file(mount, jid, "stdout") == jid + "\n"


def test_the_readme_examples_of_each_way_work_as_printed(mount):
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    block = readme.split("A control file takes every way a program writes a file")[1]
    block = block.split("```sh\n")[1].split("```")[0]
    jobs = set(os.listdir(osb(mount, "jobs")))
    script = "set -e\ncd %s\n%s" % (os.path.dirname(mount.p()), block.replace(
        "mnt/", os.path.basename(mount.p()) + "/"))
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    new = set(os.listdir(osb(mount, "jobs"))) - jobs - {"latest"}
    assert len(new) == 2
    outs = sorted(job_file(mount, j, "stdout") for j in new if wait(mount, j) == "exited 0")
    assert "hi\n" in outs
    assert "run.tmp" not in os.listdir(osb(mount))

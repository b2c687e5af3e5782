"""What an agent with nothing but file tools does: write files, start a job
under .osb/jobs/, wait for it and read what it made, with open, write and
read alone (README.md, "Running commands: the control tree"). And the
ordering promises jobs keep: a job sees every write that completed before
it started; what a job changed shows through the mount when it ends."""

import errno
import os

from jobhelp import expect_errno, info, job_file, last_error, osb, read, start, wait, write


def sys_write(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        n = os.write(fd, data)
    finally:
        os.close(fd)
    return n


def sys_read(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            b = os.read(fd, 65536)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        os.close(fd)


TRAIN = b"""import time
for epoch in range(3):
    time.sleep(0.2)
    print("epoch", epoch, "loss", 1.0 / (epoch + 1), flush=True)
with open("model.txt", "w") as f:
    f.write("trained\\n")
"""


def test_agent_pattern_with_open_write_read_only(mount):
    assert sys_write(mount.p("train.py"), TRAIN) == len(TRAIN)
    os.mkdir(osb(mount, "jobs", "train"))
    sys_write(osb(mount, "jobs", "train", "cmd"), b"python3 train.py\n", os.O_WRONLY | os.O_TRUNC)
    assert sys_read(osb(mount, "jobs", "train", "wait")) == b"exited 0\n"
    assert sys_read(osb(mount, "jobs", "train", "stdout")) == (
        b"epoch 0 loss 1.0\nepoch 1 loss 0.5\nepoch 2 loss 0.3333333333333333\n")
    assert sys_read(osb(mount, "jobs", "train", "stderr")) == b""
    assert sys_read(mount.p("model.txt")) == b"trained\n"


def tool_write(path, data):
    """An agent's write-file tool: it makes the parent directories, then
    writes a temporary file next to the target and renames it over."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    sys_write(tmp, data)
    os.replace(tmp, path)


def test_agent_session_with_file_writes_only_parents_made_by_the_write(mount):
    # as .osb/README says: a write that makes its parents makes the job
    text = " ".join(sys_read(osb(mount, "README")).decode().split())
    assert "A write to jobs/NAME/cmd that makes its parent directories makes the job" in text
    tool_write(mount.p("train.py"), TRAIN)
    tool_write(osb(mount, "jobs", "train", "cmd"), b"python3 train.py\n")
    assert sys_read(osb(mount, "jobs", "train", "wait")) == b"exited 0\n"
    assert sys_read(mount.p("model.txt")) == b"trained\n"
    # a misspelled file is refused, and the log names the real ones
    expect_errno(errno.EACCES, tool_write, osb(mount, "jobs", "train", "cmnd"), b"true\n")
    assert "create .osb/jobs/train/cmnd.tmp.%d: no such control file" % os.getpid() in \
        last_error(mount)
    # the name is taken: reusing it says so, and how to free it
    expect_errno(errno.EACCES, tool_write, osb(mount, "jobs", "train", "cmd"), b"true\n")
    assert "echo forget > .osb/jobs/train/ctl" in last_error(mount)
    tool_write(osb(mount, "jobs", "train", "ctl"), b"forget\n")
    expect_errno(errno.ENOENT, os.stat, osb(mount, "jobs", "train"))
    tool_write(osb(mount, "jobs", "train", "cmd"), b"echo again\n")
    assert sys_read(osb(mount, "jobs", "train", "wait")) == b"exited 0\n"
    assert sys_read(osb(mount, "jobs", "train", "stdout")) == b"again\n"
    assert info(mount)["scratch"] == []


def test_agent_reads_the_readme_first(mount):
    text = sys_read(osb(mount, "README")).decode()
    for word in ("run", "jobs/", "wait", "stdout", "kill", "ctl", "egress", "info"):
        assert word in text


def test_a_job_sees_a_file_edited_just_before(make_mount):
    # a long write-back delay: only the flush before the start gets the
    # edits into the sandbox
    m = make_mount(options=["writeback_delay=600s"])
    for version in range(1, 6):
        sys_write(m.p("script.py"), b"print('version %d')\n" % version)
        jid = start(m, "python3 script.py")
        assert wait(m, jid) == "exited 0"
        assert job_file(m, jid, "stdout") == "version %d\n" % version


def test_a_job_sees_a_file_still_open_for_writing(make_mount):
    m = make_mount(options=["writeback_delay=600s"])
    with open(m.p("data.txt"), "w") as f:
        f.write("written so far\n")
        f.flush()
        jid = start(m, "cat data.txt")
        assert wait(m, jid) == "exited 0"
    assert job_file(m, jid, "stdout") == "written so far\n"


def test_what_a_job_changed_shows_at_once_after_wait(make_mount, server):
    m = make_mount(options=["attr_timeout=600s", "dir_timeout=600s"])
    sys_write(m.p("keep.txt"), b"old\n")
    sys_write(m.p("gone.txt"), b"bye\n")
    os.mkdir(m.p("sub"))
    write(osb(m, "ctl"), "sync")
    # cached: the listing, the attributes, the content
    assert sorted(os.listdir(m.p())) == ["gone.txt", "keep.txt", "sub"]
    assert sys_read(m.p("keep.txt")) == b"old\n"
    assert os.listdir(m.p("sub")) == []
    jid = start(m, "echo new, longer > keep.txt; rm gone.txt; echo made > sub/made.txt; "
                   "mkdir -p deep/er && echo x > deep/er/x.txt")
    assert wait(m, jid) == "exited 0"
    assert sorted(os.listdir(m.p())) == ["deep", "keep.txt", "sub"]
    assert sys_read(m.p("keep.txt")) == b"new, longer\n"
    assert os.stat(m.p("keep.txt")).st_size == 12
    assert os.listdir(m.p("sub")) == ["made.txt"]
    assert sys_read(m.p("sub", "made.txt")) == b"made\n"
    assert sys_read(m.p("deep", "er", "x.txt")) == b"x\n"
    assert not os.path.exists(m.p("gone.txt"))


def test_a_start_fails_with_eio_when_files_cannot_be_uploaded(make_mount, server):
    m = make_mount(options=["writeback_delay=600s"])
    sys_write(m.p("input.txt"), b"needed by the job\n")
    server.set_faults(path="/files/upload", kinds=["500"], rate=1.0)
    try:
        expect_errno(errno.EIO, write, osb(m, "run"), "cat input.txt")
        assert "not started" in last_error(m)
        assert info(m)["jobs"]["total"] == 0
        os.mkdir(osb(m, "jobs", "named"))
        expect_errno(errno.EIO, write, osb(m, "jobs", "named", "cmd"), "cat input.txt")
        assert job_file(m, "named", "status") == "created\n"
    finally:
        server.clear_faults()
    # the same named job starts once the sandbox takes the file
    write(osb(m, "jobs", "named", "cmd"), "cat input.txt")
    assert wait(m, "named") == "exited 0"
    out = read(osb(m, "jobs", "named", "stdout"))
    assert out == "needed by the job\n", (
        "stdout %r; stderr %r; info %s; in the sandbox: %r; log:\n%s"
        % (out, read(osb(m, "jobs", "named", "stderr")), read(osb(m, "jobs", "named", "info")),
           server.run(m.sandbox_id, "cat /tmp/.osbfs/jobs/named/stdout; ls -la /tmp/.osbfs/jobs/named")[1],
           m.log()))

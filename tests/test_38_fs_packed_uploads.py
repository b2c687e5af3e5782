"""Many new small files of one write-back batch go to the sandbox as one
tar archive, unpacked by one command that also gives them their modes,
owners and times: an untar costs the server its bytes, not a request
part and a times entry per file. What the sandbox gets is checked file by
file; a failed unpack is retried and loses nothing."""

import hashlib
import os

from jobhelp import osb, write
from osbtest import execd_routes


def sync(m):
    write(osb(m, "ctl"), "sync")


NAMES = [
    "plain.txt",
    "with space.txt",
    "dollar$1.class",
    "ünïcödé.md",
    "quote'd \"name\".txt",
    "deep/" + "a" * 60 + "/" + "b" * 60 + "/long-path-over-a-hundred.txt",
    "sub/x.c",
    "sub/y.h",
    "sub/empty",
    "sub/more/z.py",
]


def make_files(m):
    want = {}
    for i, n in enumerate(NAMES):
        os.makedirs(os.path.dirname(m.p("t", n)), exist_ok=True)
        data = b"" if n.endswith("empty") else hashlib.sha256(n.encode()).digest() * (i * 40 + 1)
        with open(m.p("t", n), "wb") as f:
            f.write(data)
        mode = [0o644, 0o600, 0o755, 0o640, 0o444][i % 5]
        os.chmod(m.p("t", n), mode)
        mtime = 1_600_000_000_123_456_789 + i * 1_000_000_007
        os.utime(m.p("t", n), ns=(mtime, mtime))
        want[n] = (hashlib.sha256(data).hexdigest(), mode, mtime)
    return want


def sandbox_facts(server, sid, top):
    """{relative path: (sha256, mode, mtime in ns, owner)} of the files."""
    code, out, err = server.run(
        sid, "cd %s && find . -type f -print0 | while IFS= read -r -d '' f; do "
             "printf '%%s\\t%%s\\t%%s\\t%%s\\n' \"$(sha256sum < \"$f\" | cut -d' ' -f1)\" "
             "\"$(stat -c '%%a %%.9Y %%U' \"$f\")\" x \"${f#./}\"; done" % top)
    assert code == 0, err
    res = {}
    for line in out.splitlines():
        digest, st, _, path = line.split("\t")
        mode, mtime, owner = st.split()
        secs, frac = mtime.split(".")
        res[path] = (digest, int(mode, 8), int(secs) * 10**9 + int(frac), owner)
    return res


def mount_with_new_files(make_mount):
    """A mount whose directory t/ is in the sandbox, with NAMES written
    in it and not sent yet: (mount, what the files are to be)."""
    m = make_mount(options=["writeback_delay=1h"])
    os.mkdir(m.p("t"))
    sync(m)
    return m, make_files(m)


def test_new_files_go_as_one_archive_with_modes_owners_and_times(server, make_mount):
    m, want = mount_with_new_files(make_mount)
    sid = m.sandbox_id
    server.reset_stats()
    sync(m)
    got = execd_routes(server, sid)
    # one upload (the archive), its unpacking, and the directories
    assert got.get("POST /files/upload") == 1, got
    assert got.get("POST /command", 0) <= 3, got
    facts = sandbox_facts(server, sid, m.spath("t"))
    assert sorted(facts) == sorted(want)
    for n, (digest, mode, mtime) in want.items():
        assert facts[n][:3] == (digest, mode, mtime), n
        assert facts[n][3] == "root", n
    # the archive does not stay behind
    code, out, _ = server.run(sid, "ls -a /tmp/.osbfs | grep -c '^pack-' || true")
    assert out.strip() == "0"
    # and the mount shows what it showed before
    for n, (digest, mode, mtime) in want.items():
        st = os.stat(m.p("t", n))
        assert (st.st_mode & 0o7777, st.st_mtime_ns) == (mode, mtime), n


def test_special_bits_and_mode_0_travel_in_the_archive(server, make_mount):
    m = make_mount(options=["writeback_delay=1h"])
    sid = m.sandbox_id
    os.mkdir(m.p("o"))
    sync(m)
    for i in range(10):
        with open(m.p("o", "f%d" % i), "w") as f:
            f.write("%d\n" % i)
    os.chmod(m.p("o", "f0"), 0o4755)
    os.chmod(m.p("o", "f1"), 0o2750)
    os.chmod(m.p("o", "f2"), 0)
    server.reset_stats()
    sync(m)
    assert execd_routes(server, sid).get("POST /files/upload") == 1
    code, out, err = server.run(sid, "cd %s && stat -c '%%n %%a %%U' f0 f1 f2 f3 f4" % m.spath("o"))
    assert code == 0, err
    assert out.split("\n")[:5] == ["f0 4755 root", "f1 2750 root", "f2 0 root", "f3 644 root",
                                   "f4 644 root"]


def test_a_failed_unpack_is_retried_and_loses_nothing(server, make_mount):
    m, want = mount_with_new_files(make_mount)
    sid = m.sandbox_id
    # every command fails for a while: the unpack, and its repeats
    server.reset_stats()
    server.set_faults(next=40, kinds=["500"], method="POST", path="/command$")
    try:
        write(osb(m, "ctl"), "sync")
    except OSError:
        pass  # the times could not be set yet: retried
    finally:
        server.clear_faults()
    assert execd_routes(server, sid).get("POST /command", 0) >= 8
    sync(m)
    facts = sandbox_facts(server, sid, m.spath("t"))
    assert sorted(facts) == sorted(want)
    for n, (digest, mode, mtime) in want.items():
        assert facts[n][:3] == (digest, mode, mtime), n

"""256 MiB through `osb put` and `osb get`: sha256 on both sides, and the
peak RSS of each osb process (os.wait4's ru_maxrss), printed and held
under 32 MiB: memory use must not depend on the size.  Under a sanitizer
build the figures are printed but only sanity-checked (ASan's shadow
memory and quarantine are not ours).  Not marked slow: it must run
everywhere, so it is kept to about ten seconds."""

import os
import threading

from osbhelp import W, make_file, sanitized_build, sha256_file

SIZE = 256 << 20
RSS_LIMIT_KIB = 32 << 10
RSS_LIMIT_SANITIZED_KIB = 1 << 20


def sandbox_sha256(server, sid, path):
    code, out, err = server.run(sid, "sha256sum " + path, timeout=120)
    assert code == 0, err
    return out.split()[0]


def check_rss(capsys, what, res):
    mib = res.maxrss_kib / 1024.0
    with capsys.disabled():
        print("\n  %-28s %6.1f MiB peak RSS, %5.2f s, %6.0f MB/s%s" % (
            what, mib, res.seconds, SIZE / 1e6 / res.seconds, "  (sanitizer build)" if sanitized_build() else ""))
    limit = RSS_LIMIT_SANITIZED_KIB if sanitized_build() else RSS_LIMIT_KIB
    assert res.maxrss_kib < limit, "%s: peak RSS %.1f MiB >= %d MiB" % (what, mib, limit >> 10)


def test_256mib_put_and_get(server, osb, sandbox, workdir, capsys):
    src = os.path.join(workdir, "big.bin")
    want = make_file(src, SIZE >> 20)

    res = osb.ok("put", src, W + "/big.bin", timeout=300, measure_rss=True)
    check_rss(capsys, "osb put FILE", res)
    assert server.stat(sandbox, W + "/big.bin")["size"] == SIZE
    assert sandbox_sha256(server, sandbox, W + "/big.bin") == want

    dst = os.path.join(workdir, "back.bin")
    res = osb.ok("get", W + "/big.bin", dst, timeout=300, measure_rss=True)
    check_rss(capsys, "osb get FILE", res)
    assert os.path.getsize(dst) == SIZE and sha256_file(dst) == want
    os.unlink(dst)


def test_256mib_through_stdin_and_stdout(server, osb, sandbox, workdir, capsys):
    src = os.path.join(workdir, "big.bin")
    want = make_file(src, SIZE >> 20)

    # a pipe, not a file: osb spools it to an unnamed temporary file
    r, w = os.pipe()

    def feed():
        with open(src, "rb") as f, os.fdopen(w, "wb") as wf:
            for b in iter(lambda: f.read(1 << 20), b""):
                wf.write(b)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    with os.fdopen(r, "rb") as rf:
        res = osb.ok("put", "-", W + "/piped.bin", stdin=rf, timeout=300, measure_rss=True)
    feeder.join(30)
    check_rss(capsys, "osb put - (pipe)", res)
    assert sandbox_sha256(server, sandbox, W + "/piped.bin") == want

    out = os.path.join(workdir, "stdout.bin")
    with open(out, "wb") as f:
        res = osb.run("get", W + "/piped.bin", "-", stdout=f, timeout=300, measure_rss=True)
    assert res.rc == 0 and res.err == "", res.describe()
    check_rss(capsys, "osb get - (stdout)", res)
    assert sha256_file(out) == want

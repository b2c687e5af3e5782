"""Names in a listing that the kernel cannot take (or would take for
others) are skipped, with one line in the log: a hostile sandbox can list
anything."""

import os
import subprocess

import pytest

from mounthelp import make_mount  # noqa: F401  (fixture)


@pytest.fixture
def mount(make_mount):
    """No caching of names and attributes: links made in the sandbox show
    at once."""
    return make_mount(options=["attr_timeout=0", "dir_timeout=0", "negative_timeout=0"])


def read_bytes(p):
    with open(p, "rb") as f:
        return f.read()



# ---- names in a listing that the kernel cannot take ------------------------------------


BAD_NAMES = {
    "empty": b"",
    "dot": b".",
    "dotdot": b"..",
    "too-long": b"n" * 256,
    "not-utf8": b"bad\xff\xfename",
}


def raw_listing(d):
    """Every name readdir gives, "." and ".." too, as bytes (ls -f: no
    sorting, no filtering)."""
    r = subprocess.run(["ls", "-f", "-a", "-1", "--quoting-style=literal", d],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return sorted(r.stdout.split(b"\n")[:-1])


@pytest.mark.parametrize("kind", sorted(BAD_NAMES))
def test_listing_skips_names_the_kernel_cannot_take(server, mount, kind):
    server.write_file(mount.sandbox_id, mount.spath("h", "real"), b"r")
    server.inject_listing(mount.sandbox_id, mount.spath("h"), [BAD_NAMES[kind]])
    assert raw_listing(mount.p("h")) == [b".", b"..", b"real"]
    assert read_bytes(mount.p("h", "real")) == b"r"


def test_listing_with_bad_names_is_logged_once(server, mount):
    server.write_file(mount.sandbox_id, mount.spath("h", "real"), b"r")
    server.inject_listing(mount.sandbox_id, mount.spath("h"), list(BAD_NAMES.values()))
    assert sorted(os.listdir(mount.p("h"))) == ["real"]
    lines = [l for l in mount.log().splitlines() if "skipped" in l]
    assert len(lines) == 1, lines
    assert "/workspace/h" in lines[0] and " 5 " in lines[0], lines[0]

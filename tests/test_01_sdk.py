"""Fidelity of the local server, checked with the official OpenSandbox
TypeScript SDK (@alibaba-group/opensandbox, pinned in tests/sdk/).  The
script tests/sdk/fidelity.mjs asserts every step itself and exits non-zero
at the first failure."""

import os
import shutil
import subprocess

import pytest

from osbtest import ROOT

SDK_DIR = ROOT / "tests" / "sdk"


def test_sdk_fidelity(make_server):
    if not (SDK_DIR / "node_modules" / "@alibaba-group" / "opensandbox").is_dir():
        pytest.fail("tests/sdk/node_modules is missing: run `npm ci --prefix tests/sdk` first")
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (Debian: apt-get install nodejs npm)")
    s = make_server()
    env = dict(os.environ, OPENSANDBOX_DISABLE_METRICS="1")
    p = subprocess.run([node, "fidelity.mjs", "%s:%d" % (s.host, s.port), s.api_key], cwd=str(SDK_DIR),
                       capture_output=True, text=True, timeout=180, env=env)
    report = "--- fidelity.mjs stdout ---\n%s\n--- stderr ---\n%s" % (p.stdout, p.stderr)
    print(report)
    assert p.returncode == 0, report
    assert "ALL FIDELITY CHECKS PASSED" in p.stdout, report

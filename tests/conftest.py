"""Fixtures shared by every osbfs test file.

server       session scope: one local server (api key "test-key") on a
             temp data dir; stopped at the end of the session
sandbox      function scope: a new Running sandbox on `server`, deleted at
             teardown even when the test fails
make_server  function scope factory: make_server(extra_args=[...],
             api_key=...) -> a started LocalServer; all stopped at teardown
"""

import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from osbtest import LocalServer  # noqa: E402


def pytest_configure(config):
    # also registered in tests/pytest.ini; this covers runs that use another ini
    config.addinivalue_line("markers", "slow: long-running test (large transfers, soak)")


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("osb-server")
    s = LocalServer(d / "data", api_key="test-key")
    s.start()
    yield s
    s.stop()


@pytest.fixture
def sandbox(server):
    sid = server.create_sandbox()
    yield sid
    try:
        server.delete_sandbox(sid)
    except Exception:
        pass


@pytest.fixture
def make_server(tmp_path):
    started = []

    def make(extra_args=(), api_key="test-key", data_dir=None):
        d = data_dir or (tmp_path / ("srv%d" % len(started)))
        s = LocalServer(d, api_key=api_key, extra_args=extra_args)
        started.append(s)
        s.start()
        return s

    yield make
    for s in started:
        try:
            s.stop()
        except Exception:
            s.kill()

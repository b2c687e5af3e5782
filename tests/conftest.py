"""The fixtures of the osbfs tests, all of them here; the helper modules
(osbtest, osbhelp, mounthelp, jobhelp) hold plain functions and classes.
A test file may still define a fixture of its own, for itself only.

server             session scope: one local server (api key "test-key") on
                   a temp data dir; stopped at the end of the session
sandbox            a new Running sandbox on `server`, deleted at teardown
                   even when the test fails
make_server        factory: make_server(extra_args=[...], api_key=...) -> a
                   started LocalServer; all stopped at teardown
workdir            a local scratch directory, removed at teardown
shared_dir         the same, that every local user can reach (for allow_other)
osb, osbc          `osb` (osbhelp.Osb) on a new sandbox / on no sandbox
cleanup_sandboxes  a list of sandbox ids to delete at teardown
running            running(osb, *args): background osb runs, stopped at
                   teardown
make_sandbox       factory: make_sandbox(srv=None, **create arguments) -> the
                   id of a new sandbox, deleted at teardown once every
                   mount of make_mount is stopped
make_mount         factory: make_mount(sandbox_id=None, options=(), ...) ->
                   a started mounthelp.Mount; all stopped at teardown and
                   checked: exit status 0, no sanitizer report
mount              a mount of a new sandbox's /workspace, default options
"""

import os
import shutil
import signal
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mounthelp import Mount  # noqa: E402
from osbhelp import Osb  # noqa: E402
from osbtest import LocalServer  # noqa: E402


def pytest_configure(config):
    # A suite started under nohup, or in the background by a shell without
    # job control, inherits SIGHUP or SIGINT ignored, and every process it
    # starts (the local server, its sandboxes' commands, a `cat` the tests
    # interrupt) would too: the tests of signals need them as a terminal
    # gives them.
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
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


@pytest.fixture
def workdir():
    """A local scratch directory, removed at teardown."""
    d = tempfile.mkdtemp(prefix="osb-test-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def shared_dir():
    """A directory every local user can reach (pytest's tmp dirs are 0700)."""
    d = tempfile.mkdtemp(prefix="osbfs-shared-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def osb(server, sandbox):
    """osb on a new sandbox of the session server."""
    return Osb(server, sandbox)


@pytest.fixture
def osbc(server):
    """osb on the session server, no sandbox chosen."""
    return Osb(server)


@pytest.fixture
def cleanup_sandboxes(server):
    """A list to append the ids of sandboxes a test creates; each is
    deleted at teardown, whatever happened."""
    ids = []
    yield ids
    for sid in ids:
        try:
            server.delete_sandbox(sid)
        except Exception:
            pass


@pytest.fixture
def running():
    """start(osb, *args): background osb processes, stopped at teardown."""
    procs = []

    def start(o, *args):
        r = o.start(*args)
        procs.append(r)
        return r
    yield start
    for r in procs:
        r.close()


@pytest.fixture
def make_sandbox(server):
    """make_sandbox(srv=None, **create_sandbox arguments) -> the id of a
    new Running sandbox on @srv (the session server by default).  Each is
    deleted at teardown, after make_mount has stopped its mounts (it
    depends on this fixture): a sandbox deleted under a mount would end
    its daemon with status 1."""
    made = []

    def make(srv=None, **kw):
        srv = srv or server
        sid = srv.create_sandbox(**kw)
        made.append((srv, sid))
        return sid

    yield make
    for srv, sid in made:
        try:
            srv.delete_sandbox(sid)
        except Exception:
            pass


@pytest.fixture
def make_mount(server, tmp_path, make_sandbox):
    """make_mount(sandbox_id=None, options=(), srv=None, start=True,
    create=True, **Mount arguments) -> a started Mount, on a new sandbox
    (make_sandbox) unless told which.  At teardown each one still running
    is stopped and checked: exit status 0, no sanitizer report.  A test
    that expects another status stops it itself with
    m.stop(expect_status=...)."""
    mounts = []

    def make(sandbox_id=None, options=(), srv=None, start=True, create=True, **kw):
        srv = srv or server
        if sandbox_id is None and create and not any(o.startswith("name=") for o in options):
            sandbox_id = make_sandbox(srv)
        kw.setdefault("workdir", str(tmp_path / ("m%d" % len(mounts))))
        os.makedirs(kw["workdir"], exist_ok=True)
        m = Mount(srv, sandbox_id=sandbox_id, options=options, **kw)
        mounts.append(m)
        if start:
            m.start()
        return m

    yield make
    errors = []
    for m in mounts:
        try:
            m.stop()
        except Exception as e:  # noqa: BLE001
            errors.append(str(e))
    if errors:
        raise AssertionError("\n".join(errors))


@pytest.fixture
def mount(make_mount):
    """A mount of a new sandbox's /workspace with default options."""
    return make_mount()

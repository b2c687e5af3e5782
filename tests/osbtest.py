"""Helpers shared by the osbfs test suites: a handle on the local
OpenSandbox-compatible server (tests/server/opensandbox_local.py) with raw
HTTP helpers for the lifecycle, execd and admin APIs.  Standard library only.
"""

import http.client
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("OSBFS_BUILD_DIR", ROOT / "build"))
SERVER_SCRIPT = ROOT / "tests" / "server" / "opensandbox_local.py"


def _conn(host, port, timeout, tls):
    if tls:
        import ssl
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    return http.client.HTTPConnection(host, port, timeout=timeout)


def http_request(url, method, path, body=None, headers=None, timeout=60, raw=False):
    """One request on a fresh connection.  url: "http://host:port[/prefix]".
    body: bytes, str, or a JSON-able object.  Returns (status, headers,
    body) where body is parsed JSON when the response says JSON (and raw is
    False), else bytes."""
    u = urllib.parse.urlsplit(url)
    conn = _conn(u.hostname, u.port, timeout, u.scheme == "https")
    hdrs = dict(headers or {})
    data = None
    if body is not None:
        if isinstance(body, (bytes, bytearray)):
            data = bytes(body)
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, (u.path.rstrip("/") if u.path else "") + path, body=data, headers=hdrs)
        resp = conn.getresponse()
        content = resp.read()
        rh = {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()
    if not raw and "json" in rh.get("content-type", "") and content:
        try:
            return resp.status, rh, json.loads(content)
        except ValueError:
            pass
    return resp.status, rh, content


def parse_events(body):
    """execd stream body -> list of event dicts (raw "JSON\\n\\n" framing;
    a bare trailing error object is included too)."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", "replace")
    out = []
    for line in body.split("\n"):
        line = line.strip()
        if not line or line.startswith(":"):
            continue
        if line.startswith("data:"):
            line = line[5:].strip()
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def multipart_body(parts, boundary=None):
    """parts: list of (name, filename or None, content_type or None, bytes)."""
    boundary = boundary or "osbtest" + uuid.uuid4().hex
    chunks = []
    for name, filename, ctype, data in parts:
        disp = 'form-data; name="%s"' % name
        if filename is not None:
            disp += '; filename="%s"' % filename
        chunks.append(b"--" + boundary.encode() + b"\r\n")
        chunks.append(("Content-Disposition: %s\r\n" % disp).encode())
        if ctype:
            chunks.append(("Content-Type: %s\r\n" % ctype).encode())
        chunks.append(b"\r\n")
        chunks.append(data)
        chunks.append(b"\r\n")
    chunks.append(b"--" + boundary.encode() + b"--\r\n")
    return b"".join(chunks), "multipart/form-data; boundary=" + boundary


def execd_routes(server, sid):
    """Requests sandbox sid's execd got since the last reset_stats(), by
    route (the lifecycle API, which the keepalive may call at any time,
    does not count)."""
    routes = server.stats().get("sandboxes", {}).get(sid, {})
    return {r: n for r, n in routes.items() if "/sandboxes" not in r}


def execd_requests(server, sid):
    return sum(execd_routes(server, sid).values())


def route_count(server, sid, key):
    return execd_routes(server, sid).get(key, 0)


def wait_until(predicate, timeout, what, step=0.05):
    """Calls predicate() every @step seconds until it returns a true value,
    and returns that value.  After @timeout seconds raises AssertionError
    naming @what and predicate's last value.  The one way the tests wait
    for something that happens on another process's schedule."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %ss waiting for %s (last value: %r)"
                                 % (timeout, what, value))
        time.sleep(step)


def make_ca(tmp_path):
    """A test CA and a server certificate for 127.0.0.1 signed by it, in
    tmp_path/pki: ca.pem, server.pem, server.key."""
    d = tmp_path / "pki"
    d.mkdir()

    def ossl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
         "-days", "2", "-subj", "/CN=osbfs test CA")
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
         "-subj", "/CN=127.0.0.1")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    return d


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class LocalServer:
    """One local server process.  start() waits for its "ready" line;
    stop()/kill() end it by pid; restart() starts it again on the same port
    and data dir."""

    def __init__(self, data_dir, api_key="test-key", extra_args=()):
        self.data_dir = str(data_dir)
        self.api_key = api_key
        self.extra_args = list(extra_args)
        self.host = "127.0.0.1"
        self.port = 0
        self.url = None
        self.proc = None
        self.scheme = "https" if "--tls-cert" in self.extra_args else "http"
        self._endpoints = {}
        self._stderr_path = os.path.join(self.data_dir, "server-stderr.log")

    # -- process -----------------------------------------------------------------

    def start(self, timeout=20):
        os.makedirs(self.data_dir, exist_ok=True)
        cmd = [sys.executable, str(SERVER_SCRIPT), "--port", str(self.port), "--data-dir", self.data_dir]
        if self.api_key:
            cmd += ["--api-key", self.api_key]
        cmd += self.extra_args
        self._stderr = open(self._stderr_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL)
        line = [None]

        def reader():
            line[0] = self.proc.stdout.readline()

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(timeout)
        if not line[0] or not line[0].startswith(b"ready "):
            self.kill()
            raise RuntimeError("server did not start within %ss; stderr:\n%s" % (timeout, self.stderr_text()[-4000:]))
        self.url = line[0].decode().split()[1].rstrip("/")
        u = urllib.parse.urlsplit(self.url)
        self.host, self.port = u.hostname, u.port
        self._endpoints.clear()
        return self

    def stderr_text(self):
        try:
            with open(self._stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _wait_exit(self, timeout):
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, timeout=10):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if not self._wait_exit(timeout):
                self.kill()
                return
        self._cleanup()

    def kill(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._wait_exit(30)
        self._cleanup()

    def _cleanup(self):
        try:
            self.proc.stdout.close()
        except Exception:
            pass
        try:
            self._stderr.close()
        except Exception:
            pass

    def restart(self, timeout=20):
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.start(timeout=max(1, deadline - time.monotonic()))
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    # -- raw HTTP --------------------------------------------------------------------

    def request(self, method, path, body=None, headers=None, api_key=True, raw=False, timeout=60):
        hdrs = dict(headers or {})
        if api_key and self.api_key:
            hdrs.setdefault("OPEN-SANDBOX-API-KEY", api_key if isinstance(api_key, str) else self.api_key)
        return http_request(self.url, method, path, body, hdrs, timeout=timeout, raw=raw)

    def admin(self, method, path, body=None):
        st, _, b = http_request(self.url, method, path, body)
        return st, b

    def set_faults(self, **kw):
        st, b = self.admin("POST", "/_admin/faults", kw)
        assert st == 200, (st, b)
        return b

    def clear_faults(self):
        self.admin("DELETE", "/_admin/faults")

    def stats(self):
        return self.admin("GET", "/_admin/stats")[1]

    def reset_stats(self):
        self.admin("POST", "/_admin/stats/reset")

    def inject_listing(self, sid, directory, names):
        """The next listing of directory (a sandbox path) in sandbox sid also
        holds names (bytes), as a hostile sandbox could make it."""
        st, b = self.admin("POST", "/_admin/sandboxes/%s/listing" % sid,
                           {"path": directory, "names_hex": [n.hex() for n in names]})
        assert st == 200, (st, b)

    # -- lifecycle helpers ---------------------------------------------------------------

    def create_sandbox(self, timeout=600, wait=60, **kw):
        body = {"image": {"uri": "python:3.11"}, "entrypoint": ["tail", "-f", "/dev/null"],
                "resourceLimits": {"cpu": "500m", "memory": "512Mi"}}
        if timeout is not None:
            body["timeout"] = timeout
        body.update(kw)
        st, _, b = self.request("POST", "/v1/sandboxes", body)
        assert st == 202, (st, b)
        sid = b["id"]

        def running():
            st, _, g = self.request("GET", "/v1/sandboxes/" + sid)
            return st == 200 and g["status"]["state"] == "Running"

        def pings():
            try:
                return self.execd(sid, "GET", "/ping", timeout=5)[0] == 200
            except OSError:
                return False

        deadline = time.monotonic() + wait
        wait_until(running, wait, "sandbox %s to be Running" % sid, step=0.1)
        wait_until(pings, deadline - time.monotonic(), "execd of %s to answer /ping" % sid, step=0.1)
        return sid

    def delete_sandbox(self, sid):
        self._endpoints.pop(sid, None)
        st, _, _ = self.request("DELETE", "/v1/sandboxes/" + sid)
        return st

    def endpoint(self, sid, port=44772, server_proxy=False):
        key = (sid, port, server_proxy)
        if key not in self._endpoints:
            q = "?use_server_proxy=true" if server_proxy else ""
            st, _, b = self.request("GET", "/v1/sandboxes/%s/endpoints/%d%s" % (sid, port, q))
            assert st == 200, (st, b)
            self._endpoints[key] = ("%s://%s" % (self.scheme, b["endpoint"]), b.get("headers") or {})
        return self._endpoints[key]

    def execd_url(self, sid):
        return self.endpoint(sid)[0]

    def execd(self, sid, method, path, params=None, body=None, headers=None, timeout=60, raw=False):
        url, eh = self.endpoint(sid)
        hdrs = dict(eh)
        hdrs.update(headers or {})
        if params:
            path = path + "?" + urllib.parse.urlencode(params, doseq=True, quote_via=urllib.parse.quote)
        return http_request(url, method, path, body, hdrs, timeout=timeout, raw=raw)

    def read_file(self, sid, path):
        """The file's bytes. A file rewritten while it is read (an upload
        truncates it, then writes) can end short of the length its answer
        gave: it is read again."""
        for tries in range(5):
            try:
                st, _, b = self.execd(sid, "GET", "/files/download", {"path": path}, raw=True)
                break
            except http.client.IncompleteRead:
                if tries == 4:
                    raise
                time.sleep(0.05)
        assert st == 200, (st, b)
        return b

    def write_file(self, sid, path, data, mode=None):
        meta = {"path": path}
        if mode is not None:
            meta["mode"] = mode
        body, ctype = multipart_body([("metadata", "metadata", "application/json", json.dumps(meta).encode()),
                                      ("file", os.path.basename(path) or "file", "application/octet-stream", data)])
        st, _, b = self.execd(sid, "POST", "/files/upload", body=body, headers={"Content-Type": ctype})
        assert st == 200, (st, b)

    def stat(self, sid, path):
        st, _, b = self.execd(sid, "GET", "/files/info", {"path": path})
        if st == 404:
            return None
        assert st == 200, (st, b)
        return b[path]

    def rewrite_keeping_size_and_mtime(self, sid, path, byte):
        """Rewrites @path in sandbox @sid in place, every byte @byte (a
        letter), and gives it its mtime back (touch -r): only its ctime
        says it changed."""
        before = self.stat(sid, path)
        q = shlex.quote(path)
        code, _, err = self.run(sid, "touch -r %s /tmp/ref.$$ && head -c %d /dev/zero | "
                                "tr '\\0' %s > %s && touch -r /tmp/ref.$$ %s && rm /tmp/ref.$$"
                                % (q, before["size"], byte, q, q))
        assert code == 0, err
        after = self.stat(sid, path)
        assert (after["size"], after["modified_at"]) == (before["size"], before["modified_at"])
        assert after["created_at"] != before["created_at"]

    def run(self, sid, cmd, cwd=None, timeout=60):
        body = {"command": cmd}
        if cwd:
            body["cwd"] = cwd
        st, _, b = self.execd(sid, "POST", "/command", body=body, timeout=timeout, raw=True)
        assert st == 200, (st, b)
        out, err, code = [], [], None
        for ev in parse_events(b):
            t = ev.get("type")
            if t == "stdout":
                out.append(ev.get("text", ""))
            elif t == "stderr":
                err.append(ev.get("text", ""))
            elif t == "execution_complete":
                code = 0
            elif t == "error":
                ev_ = ev.get("error") or {}
                try:
                    code = int(ev_.get("evalue"))
                except (TypeError, ValueError):
                    code = -1

        def join(lines):
            return "".join("\n" if l == "\n" else l + "\n" for l in lines)
        return code, join(out), join(err)

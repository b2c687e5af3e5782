"""HTTP/1.1 plumbing shared by every listener (lifecycle, execd, egress).

A threaded server (daemon threads, keep-alive, TLS handshake in the worker
thread), a request handler with: request bodies read as streams (Content-Length
or chunked), responses with a Content-Length or chunked, fault injection and
request counting before dispatch, and a last-resort error path that never puts
a traceback in a response (tracebacks go to stderr).

Subclasses implement resolve(method, path) -> Route or None.
"""

import email.utils
import json
import socket
import ssl
import struct
import sys
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import hostile, util

READ_CHUNK = 1 << 20


class AbortConnection(Exception):
    """Close the connection with an RST instead of answering."""


class BadBody(Exception):
    """The request body could not be read (truncated, bad chunking)."""


class Route:
    __slots__ = ("template", "fn", "params", "sid")

    def __init__(self, template, fn, params=None, sid=None):
        self.template = template
        self.fn = fn
        self.params = params or {}
        self.sid = sid


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr, handler, app, ssl_ctx=None, bind_and_activate=True, **attrs):
        self.app = app
        self.ssl_ctx = ssl_ctx
        for k, v in attrs.items():
            setattr(self, k, v)
        super().__init__(addr, handler, bind_and_activate=bind_and_activate)

    def server_bind(self):
        # no getfqdn() lookup (slow without network)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(self.server_address)
        self.server_address = self.socket.getsockname()
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def finish_request(self, request, client_address):
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        if self.ssl_ctx is not None:
            request.settimeout(30)
            request = self.ssl_ctx.wrap_socket(request, server_side=True)
            request.settimeout(None)
            self.count_handshake(request)
        self.RequestHandlerClass(request, client_address, self)

    def shutdown_request(self, request):
        # a TLS connection ends with a close_notify, as servers send it:
        # a client whose connection just ends reads a truncation, and
        # OpenSSL then takes the session it had from it for a bad one
        if isinstance(request, ssl.SSLSocket):
            try:
                request.settimeout(0)
                request.unwrap()
            except (ssl.SSLError, OSError, ValueError):
                pass
        super().shutdown_request(request)

    def count_handshake(self, sock):
        """TLS handshakes in /_admin/stats: "tls handshakes", of which
        "tls resumed" (the client resumed an earlier session), in total and
        for the sandbox whose execd listens here."""
        sb = getattr(self, "sandbox", None)
        sid = sb.id if sb is not None else None
        self.app.stats.count("tls handshakes", sid)
        if sock.session_reused:
            self.app.stats.count("tls resumed", sid)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, socket.timeout, OSError)):
            return
        traceback.print_exc(file=sys.stderr)


class BodyReader:
    """File-like reader for a request body: Content-Length, chunked, or empty."""

    def __init__(self, rfile, length=0, chunked=False):
        self.rfile = rfile
        self.remaining = length
        self.chunked = chunked
        self.chunk_left = 0
        self.eof = (not chunked) and length == 0
        self.consumed = 0

    def _next_chunk(self):
        line = self.rfile.readline(1024)
        if not line or not line.endswith(b"\n"):
            raise BadBody("truncated chunk header")
        size = line.split(b";", 1)[0].strip()
        try:
            n = int(size, 16)
        except ValueError:
            raise BadBody("bad chunk size")
        if n < 0:
            raise BadBody("bad chunk size")
        if n == 0:
            # trailers up to the empty line
            while True:
                t = self.rfile.readline(8192)
                if not t:
                    raise BadBody("truncated trailer")
                if t in (b"\r\n", b"\n"):
                    break
            self.eof = True
        self.chunk_left = n

    def read(self, n=-1):
        if self.eof:
            return b""
        if n is None or n < 0:
            parts = []
            while True:
                b = self.read(READ_CHUNK)
                if not b:
                    return b"".join(parts)
                parts.append(b)
        if self.chunked:
            if self.chunk_left == 0:
                self._next_chunk()
                if self.eof:
                    return b""
            want = min(n, self.chunk_left)
            data = self.rfile.read(want)
            if len(data) < want:
                raise BadBody("truncated chunk")
            self.chunk_left -= len(data)
            if self.chunk_left == 0:
                crlf = self.rfile.readline(3)
                if crlf not in (b"\r\n", b"\n"):
                    raise BadBody("bad chunk terminator")
            self.consumed += len(data)
            return data
        want = min(n, self.remaining)
        data = self.rfile.read1(want) if hasattr(self.rfile, "read1") else self.rfile.read(want)
        if not data:
            raise BadBody("truncated body")
        self.remaining -= len(data)
        self.consumed += len(data)
        if self.remaining == 0:
            self.eof = True
        return data

    def read_limited(self, limit):
        """Whole body, or raise BadBody if longer than limit."""
        parts, total = [], 0
        while True:
            b = self.read(READ_CHUNK)
            if not b:
                return b"".join(parts)
            total += len(b)
            if total > limit:
                raise BadBody("body too large")
            parts.append(b)

    def drain(self, limit=1 << 20):
        """Skip the rest of the body; False if more than limit bytes remain."""
        total = 0
        try:
            while not self.eof:
                if not self.chunked and self.remaining > limit:
                    return False
                b = self.read(READ_CHUNK)
                if not b:
                    break
                total += len(b)
                if total > limit:
                    return False
        except BadBody:
            return False
        return True


class NullWriter:
    """Sink for reset_after: the handler runs, its answer goes nowhere."""

    closed = False  # socketserver's finish() asks

    def write(self, b):
        return len(b)

    def flush(self):
        pass

    def sendfile(self, *a, **k):
        return 0

    def close(self):
        pass


class BufferWriter(NullWriter):
    """Sink for late: the handler runs now, its answer is sent later."""

    def __init__(self):
        self.parts = []

    def write(self, b):
        self.parts.append(bytes(b))
        return len(b)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 600
    rbufsize = 256 * 1024
    fault_scope = "execd"
    server_version = ""
    sys_version = ""

    # -- plumbing -----------------------------------------------------------

    def setup(self):
        super().setup()
        self.null_output = False
        self.cut_ms = None
        self.late_ms = None

    def log_message(self, fmt, *args):
        if getattr(self.server.app, "verbose", False):
            sys.stderr.write("%s [%s] %s\n" % (self.server.app.log_prefix(self), self.log_date_time_string(), fmt % args))

    def log_request(self, code="-", size="-"):
        if getattr(self.server.app, "verbose", False):
            self.log_message('"%s" %s', self.requestline, code)

    def send_response(self, code, message=None):
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Date", email.utils.formatdate(usegmt=True))
        for k, v in self.extra_headers():
            self.send_header(k, v)

    def extra_headers(self):
        return ()

    def send_error(self, code, message=None, explain=None):
        # used by BaseHTTPRequestHandler for malformed request lines/headers
        body = ("%d %s" % (code, message or self.responses.get(code, ("",))[0])).encode()
        try:
            self.send_response_only(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except OSError:
            pass
        self.close_connection = True

    def handle(self):
        self.close_connection = True
        try:
            self.handle_one_request()
            while not self.close_connection:
                self.handle_one_request()
        except AbortConnection:
            self.rst()
        except (ConnectionError, socket.timeout, ssl.SSLError, OSError, BadBody):
            self.close_connection = True

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass

    def rst(self):
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            self.connection.close()
        except OSError:
            pass

    def handle_one_request(self):
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if not self.raw_requestline:
            self.close_connection = True
            return
        if not self.parse_request():
            return
        self.started = False
        self.chunked_out = False
        self.null_output = False
        self.cut_ms = None
        self.late_ms = None
        self.t0 = time.monotonic()
        try:
            self._prepare()
        except BadBody:
            self._plain(400, "400 Bad Request")
            self.close_connection = True
            return
        try:
            self.dispatch()
        except AbortConnection:
            raise
        except BadBody:
            if not self.started:
                self._plain(400, "400 Bad Request")
            self.close_connection = True
            return
        except (ConnectionError, socket.timeout, ssl.SSLError, BrokenPipeError):
            self.close_connection = True
            return
        except Exception:
            traceback.print_exc(file=sys.stderr)
            if not self.started:
                try:
                    self.on_internal_error()
                except OSError:
                    pass
            self.close_connection = True
            return
        if self.null_output:
            raise AbortConnection()
        if self.chunked_out:
            self.stream_end()
        if not self.body.eof and not self.body.drain():
            self.close_connection = True
        try:
            self.wfile.flush()
        except AttributeError:
            pass

    def on_internal_error(self):
        self.send_json(500, {"code": "RUNTIME_ERROR", "message": "internal server error"})

    def _prepare(self):
        parts = urllib.parse.urlsplit(self.path)
        self.raw_path = parts.path or "/"
        self.url_path = urllib.parse.unquote(self.raw_path)
        self.raw_query = parts.query
        self.query = {}
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
            self.query.setdefault(k, []).append(v)
        te = self.headers.get("Transfer-Encoding", "")
        cl = self.headers.get("Content-Length")
        if te and "chunked" in te.lower():
            self.body = BodyReader(self.rfile, chunked=True)
        elif cl is not None:
            try:
                n = int(cl.strip())
                if n < 0:
                    raise ValueError
            except ValueError:
                raise BadBody("bad content-length")
            self.body = BodyReader(self.rfile, length=n)
        else:
            self.body = BodyReader(self.rfile, length=0)

    def q(self, name, default=""):
        v = self.query.get(name)
        return v[0] if v else default

    def qall(self, name):
        return self.query.get(name, [])

    # -- dispatch -------------------------------------------------------------

    def dispatch(self):
        route = self.resolve(self.command, self.url_path)
        if route is None:
            self.not_found()
            return
        app = self.server.app
        app.stats.count("%s %s" % (self.command, route.template), route.sid)
        if self.fault_scope is not None and self.faultable(route):
            f = app.faults.pick(self.fault_scope, self.command, self.raw_path)
            if f is not None and self.apply_fault(f, route):
                return
        self.serve(route)

    def serve(self, route):
        """Runs the route's handler; under a "late" fault its answer is
        held back for the fault's delay."""
        late = self.late_ms
        if late is None:
            route.fn(**route.params)
            return
        real, self.wfile = self.wfile, BufferWriter()
        self.null_output = True
        try:
            route.fn(**route.params)
        finally:
            answer, self.wfile = self.wfile, real
            self.null_output = False
            self.late_ms = None
        time.sleep(late / 1000.0)
        self.wfile.write(b"".join(answer.parts))
        self.wfile.flush()

    def faultable(self, route):
        return True

    def apply_fault(self, fault, route):
        """Returns True when the request was answered (or dropped) by the fault."""
        kind, delay_ms = fault
        if kind in hostile.KINDS:
            hostile.serve(self, route, kind)
            return True
        if kind == "delay":
            time.sleep(delay_ms / 1000.0)
            return False
        if kind == "reset":
            raise AbortConnection()
        if kind == "reset_after":
            self.wfile = NullWriter()
            self.null_output = True
            return False
        if kind == "cut":
            self.cut_ms = delay_ms
            return False
        if kind == "late":
            self.late_ms = delay_ms
            return False
        self.close_connection = True
        if kind == "500":
            self.send_json(500, {"code": "RUNTIME_ERROR", "message": "injected fault"},
                           headers=[("Connection", "close")])
        else:
            code = int(kind)
            text = {502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}[code]
            body = "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center><h1>%d %s</h1></center>\r\n</body>\r\n</html>\r\n" % (code, text, code, text)
            self.send_bytes(code, body.encode(), "text/plain; charset=utf-8", headers=[("Connection", "close")])
        return True

    def not_found(self):
        self._plain(404, "404 page not found")

    # -- responses ------------------------------------------------------------

    def _plain(self, status, text, ctype="text/plain"):
        self.send_bytes(status, text.encode() if isinstance(text, str) else text, ctype)

    def send_bytes(self, status, body, ctype=None, headers=()):
        self.started = True
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    json_ctype = "application/json; charset=utf-8"  # gin's c.JSON

    def send_json(self, status, obj, headers=()):
        self.send_bytes(status, util.json_bytes(obj), self.json_ctype, headers)

    def send_empty(self, status=200, headers=()):
        self.send_bytes(status, b"", None, headers)

    def stream_start(self, status, headers):
        self.started = True
        self.chunked_out = True
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def stream_write(self, data):
        if not data:
            return
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def stream_end(self):
        if self.chunked_out:
            self.chunked_out = False
            self.wfile.write(b"0\r\n\r\n")

    def read_json_body(self, limit=64 << 20):
        """(ok, value_or_error_text).  An empty body is an error ("EOF"), as
        for Go's json.Decoder."""
        raw = self.body.read_limited(limit)
        if not raw.strip():
            return False, "EOF"
        try:
            return True, json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return False, "invalid UTF-8 in JSON body"
        except ValueError as e:
            return False, "invalid character in JSON body: %s" % e

"""The per-sandbox execd listener (the "execd host port", as with Docker
bridge networking).

Routes are execd's (gin), served at the root and under execd's own
/proxy/<port>/ route: /proxy/44772/... is execd itself, /proxy/18080/... the
egress sidecar (only when the sandbox has a networkPolicy; otherwise the
proxy's 502), /proxy/<P>/... any other port is reverse-proxied to
127.0.0.1:P on the host (502 "Bad Gateway" when that fails).

Order per request: count, fault injection, the pause gate (requests hang
while the sandbox is paused), the X-EXECD-ACCESS-TOKEN check (when the
sandbox has a token: --secure-access, or EXECD_ACCESS_TOKEN in its env),
then the route.  Unknown routes: gin's "404 page not found".
"""

import json
import re
import time

from .httpbase import AbortConnection, Handler, Route
from .proxy import UpstreamError, forward

EXECD_PORT = 44772
EGRESS_PORT = 18080
_PROXY = re.compile(r"^/proxy/([^/]+)(/.*)?$")


class ExecdHandler(Handler):
    fault_scope = "execd"

    def sb(self):
        return self.server.sandbox

    def log_prefix(self):
        return "execd:" + self.sb().id[:8]

    def resolve(self, method, path):
        m = _PROXY.match(path)
        if m:
            port_s, rest = m.group(1), m.group(2) or "/"
            if not port_s.isdigit():
                return Route("/proxy/{port}/*", self._proxy_bad, sid=self.sb().id)
            port = int(port_s)
            if port == EXECD_PORT:
                return self.execd_route(method, rest)
            if port == EGRESS_PORT:
                if self.sb().egress is None:
                    return Route(rest, self._bad_gateway, sid=self.sb().id)
                return Route(rest, self._egress, {"path": rest}, sid=self.sb().id)
            return Route("/proxy/{port}/*", self._proxy_other, {"port": port, "rest": rest}, sid=self.sb().id)
        return self.execd_route(method, path)

    def execd_route(self, method, path):
        sb = self.sb()
        f, c, k = sb.files, sb.cmds, sb.code
        sid = sb.id
        table = {
            ("GET", "/ping"): self._ping,
            ("GET", "/files/info"): f.info,
            ("DELETE", "/files"): f.delete_files,
            ("POST", "/files/permissions"): f.permissions,
            ("POST", "/files/mv"): f.move,
            ("GET", "/files/search"): f.search,
            ("POST", "/files/replace"): f.replace,
            ("POST", "/files/upload"): f.upload,
            ("GET", "/files/download"): f.download,
            ("GET", "/directories/list"): f.list_dir,
            ("POST", "/directories"): f.make_dirs,
            ("DELETE", "/directories"): f.remove_dirs,
            ("POST", "/command"): c.run,
            ("DELETE", "/command"): c.interrupt,
            ("POST", "/session"): c.create_session,
            ("POST", "/code/context"): k.create_context,
            ("POST", "/code"): k.run,
            ("DELETE", "/code"): c.interrupt,
            ("GET", "/code/contexts"): k.list_contexts,
            ("DELETE", "/code/contexts"): k.delete_by_language,
            ("GET", "/metrics"): self._metrics,
            ("GET", "/metrics/watch"): self._watch_metrics,
        }
        fn = table.get((method, path))
        if fn is not None:
            return Route(path, lambda: fn(self), sid=sid)
        parts = path.split("/")
        # /command/status/:id, /command/:id/logs, /session/:id/run, /session/:id, /code/contexts/:id
        if len(parts) == 4 and parts[1] == "command" and parts[2] == "status" and parts[3] and method == "GET":
            return Route("/command/status/{id}", lambda: c.status(self, parts[3]), sid=sid)
        if len(parts) == 4 and parts[1] == "command" and parts[3] == "logs" and parts[2] and method == "GET":
            return Route("/command/{id}/logs", lambda: c.logs(self, parts[2]), sid=sid)
        if len(parts) == 4 and parts[1] == "session" and parts[3] == "run" and parts[2] and method == "POST":
            return Route("/session/{sessionId}/run", lambda: c.run_in_session(self, parts[2]), sid=sid)
        if len(parts) == 3 and parts[1] == "session" and parts[2] and method == "DELETE":
            return Route("/session/{sessionId}", lambda: c.delete_session(self, parts[2]), sid=sid)
        if len(parts) == 4 and parts[1] == "code" and parts[2] == "contexts" and parts[3]:
            if method == "GET":
                return Route("/code/contexts/{id}", lambda: k.get_context(self, parts[3]), sid=sid)
            if method == "DELETE":
                return Route("/code/contexts/{id}", lambda: k.delete_context(self, parts[3]), sid=sid)
        return None

    def dispatch(self):
        sb = self.sb()
        if sb.deleted or sb.state == "Failed":
            raise AbortConnection()
        route = self.resolve(self.command, self.url_path)
        app = self.server.app
        app.stats.count("%s %s" % (self.command, route.template if route else self.url_path), sb.id)
        f = app.faults.pick("execd", self.command, self.raw_path)
        if f is not None and self.apply_fault(f, route):
            return
        sb.gate()
        tok = sb.execd_token()
        if tok and self.headers.get("X-EXECD-ACCESS-TOKEN") != tok:
            return self.send_json(401, {"error": "Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN"})
        if route is None:
            return self.not_found()
        self.serve(route)

    # -- small handlers ------------------------------------------------------------

    def _ping(self, _h=None):
        self.send_empty(200)

    def _metrics(self, _h=None):
        self.send_json(200, self._sample())

    def _watch_metrics(self, _h=None):
        """execd's stream: after each second a sample, one JSON object a
        line (no SSE framing), until the client goes away."""
        self.stream_start(200, [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])
        try:
            while True:
                time.sleep(1)
                self.stream_write(json.dumps(self._sample()).encode() + b"\n")
                self.wfile.flush()
        except OSError:
            self.close_connection = True

    @staticmethod
    def _sample():
        import os
        try:
            with open("/proc/meminfo") as fh:
                mi = {l.split(":")[0]: int(l.split()[1]) for l in fh if len(l.split()) >= 2}
            total = mi.get("MemTotal", 0) / 1024.0
            used = total - mi.get("MemAvailable", 0) / 1024.0
        except (OSError, ValueError):
            total = used = 0.0
        return {"cpu_count": float(os.cpu_count() or 1), "cpu_used_pct": 0.0,
                "mem_total_mib": total, "mem_used_mib": used,
                "timestamp": int(time.time() * 1000)}

    def _bad_gateway(self):
        self.send_bytes(502, b"Bad Gateway", "text/plain; charset=utf-8")

    def _proxy_bad(self):
        self.send_bytes(502, b"Bad Gateway", "text/plain; charset=utf-8")

    def _egress(self, path):
        self.sb().egress.handle(self, path)

    def _proxy_other(self, port, rest):
        target = rest + ("?" + self.raw_query if self.raw_query else "")
        try:
            forward(self, "127.0.0.1", port, target, add=[("X-Forwarded-Host", self.headers.get("Host", ""))],
                    extra_req_headers=[("Host", "127.0.0.1:%d" % port)], drop=("host",))
        except UpstreamError:
            if not self.started:
                self._bad_gateway()
            else:
                self.close_connection = True

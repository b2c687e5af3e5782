"""The lifecycle server (FastAPI in the real thing), on the main port:
the /v1 API (also mounted at /), the server proxy, /health, and /_admin.

Errors are {"code","message"}; request validation failures are FastAPI's
422 {"detail":[...]}; unknown routes {"detail":"Not Found"}.  The API key
(OPEN-SANDBOX-API-KEY) is checked first, with the exemptions of
docs/SERVER.md §2.1.
Every response carries X-Request-ID.
"""

import json
import math
import re
import time
import urllib.parse
import uuid

from . import validation as V
from .egress import normalize_policy
from .faults import parse_rule
from .httpbase import Handler, Route
from .proxy import UpstreamError, forward
from .snapshots import SnapshotError
from .util import iso_time

_EXEMPT_PREFIX = ("/health", "/docs", "/redoc", "/openapi.json")
_PROXY_RE = re.compile(r"^(/v1)?/sandboxes/[^/]+/proxy/\d+(/|$)")
_PROXY_ROUTE = re.compile(r"^(/v1)?/sandboxes/([^/]+)/proxy/(\d+)(/.*)?$")


def api_error(h, status, code, message):
    h.send_json(status, {"code": code, "message": message})


def not_found_sandbox(h, sid):
    api_error(h, 404, "DOCKER::SANDBOX_NOT_FOUND", "Sandbox %s not found" % sid)


def unprocessable(h, errors):
    h.send_json(422, {"detail": errors})


def sandbox_json(sb, create=False):
    r = sb.rec
    status = {"state": r["state"]}
    if r.get("reason"):
        status["reason"] = r["reason"]
    if r.get("message"):
        status["message"] = r["message"]
    if r.get("lastTransitionAt"):
        status["lastTransitionAt"] = iso_time(r["lastTransitionAt"])
    d = {"id": r["id"]}
    if create:
        d["status"] = status
        d["metadata"] = r.get("metadata") or {}
        if r.get("platform"):
            d["platform"] = r["platform"]
        if r.get("expiresAt") is not None:
            d["expiresAt"] = iso_time(r["expiresAt"])
        d["createdAt"] = iso_time(r["createdAt"])
        d["entrypoint"] = r.get("entrypoint")
        return d
    if r.get("image"):
        d["image"] = {"uri": r["image"]["uri"]}
    if r.get("snapshotId"):
        d["snapshotId"] = r["snapshotId"]
    if r.get("platform"):
        d["platform"] = r["platform"]
    d["status"] = status
    d["metadata"] = r.get("metadata") or {}
    d["entrypoint"] = r.get("entrypoint")
    if r.get("expiresAt") is not None:
        d["expiresAt"] = iso_time(r["expiresAt"])
    d["createdAt"] = iso_time(r["createdAt"])
    return d


def snapshot_json(r):
    """A Snapshot as the API gives it (None fields left out)."""
    status = {"state": r["state"]}
    for k in ("reason", "message"):
        if r.get(k):
            status[k] = r[k]
    status["lastTransitionAt"] = iso_time(r["lastTransitionAt"])
    d = {"id": r["id"], "sandboxId": r["sandboxId"]}
    if r.get("name") is not None:
        d["name"] = r["name"]
    d["status"] = status
    d["createdAt"] = iso_time(r["createdAt"])
    return d


class LifecycleHandler(Handler):
    fault_scope = "lifecycle"
    json_ctype = "application/json"  # starlette's JSONResponse

    def log_prefix(self):
        return "lifecycle"

    def extra_headers(self):
        rid = getattr(self, "request_id", None)
        return [("X-Request-ID", rid)] if rid else []

    def _prepare(self):
        self.request_id = self.headers.get("X-Request-ID") or str(uuid.uuid4())
        super()._prepare()

    def not_found(self):
        self.send_json(404, {"detail": "Not Found"})

    def on_internal_error(self):
        api_error(self, 500, "GENERAL::UNKNOWN_ERROR", "An unexpected error occurred.")

    def faultable(self, route):
        return not route.template.startswith("/_admin")

    # -- auth -------------------------------------------------------------------------

    def auth_ok(self):
        key = self.server.app.api_key
        path = self.url_path
        if not key or path.startswith("/_admin/") or path == "/_admin":
            return True
        if path.startswith(_EXEMPT_PREFIX):
            return True
        if _PROXY_RE.match(path) and ".." not in path:
            return True
        got = self.headers.get("OPEN-SANDBOX-API-KEY")
        if not got:
            api_error(self, 401, "MISSING_API_KEY",
                      "Authentication credentials were not provided. Please include the OPEN-SANDBOX-API-KEY header.")
            return False
        if got != key:
            api_error(self, 401, "INVALID_API_KEY", "Invalid API key.")
            return False
        return True

    def dispatch(self):
        if not self.auth_ok():
            return
        super().dispatch()

    # -- routing ----------------------------------------------------------------------

    def resolve(self, method, path):
        app = self.server.app
        if path.startswith("/_admin/"):
            return self.admin_route(method, path)
        m = _PROXY_ROUTE.match(path)
        if m:
            pre = m.group(1) or ""
            return Route(pre + "/sandboxes/{sandboxId}/proxy/{port}", self.server_proxy,
                         {"sid": m.group(2), "port": int(m.group(3)), "rest": m.group(4) or "/"}, sid=m.group(2))
        if path == "/health" and method == "GET":
            return Route("/health", lambda: self.send_json(200, {"status": "healthy"}))
        pre = ""
        p = path
        if p.startswith("/v1/") or p == "/v1":
            pre, p = "/v1", p[3:]
        parts = p.split("/")
        if p in ("/sandboxes", "/sandboxes/"):
            if method == "POST":
                return Route(pre + "/sandboxes", self.create)
            if method == "GET":
                return Route(pre + "/sandboxes", self.list)
            return Route(pre + "/sandboxes", self.method_not_allowed)
        if len(parts) >= 3 and parts[1] == "sandboxes" and parts[2]:
            sid = parts[2]
            rest = parts[3:]
            t = pre + "/sandboxes/{sandboxId}"
            if not rest:
                if method == "GET":
                    return Route(t, self.get, {"sid": sid}, sid=sid)
                if method == "DELETE":
                    return Route(t, self.delete, {"sid": sid}, sid=sid)
                return Route(t, self.method_not_allowed)
            if len(rest) == 1 and rest[0] in ("pause", "resume", "renew-expiration", "metadata"):
                want = "PATCH" if rest[0] == "metadata" else "POST"
                fn = {"pause": self.pause, "resume": self.resume, "renew-expiration": self.renew,
                      "metadata": self.patch_metadata}[rest[0]]
                if method != want:
                    return Route(t + "/" + rest[0], self.method_not_allowed)
                return Route(t + "/" + rest[0], fn, {"sid": sid}, sid=sid)
            if len(rest) == 1 and rest[0] == "snapshots":
                if method != "POST":
                    return Route(t + "/snapshots", self.method_not_allowed)
                return Route(t + "/snapshots", self.snapshot_create, {"sid": sid}, sid=sid)
            if len(rest) == 2 and rest[0] == "endpoints":
                if method != "GET":
                    return Route(t + "/endpoints/{port}", self.method_not_allowed)
                return Route(t + "/endpoints/{port}", self.endpoint, {"sid": sid, "port": rest[1]}, sid=sid)
        if p in ("/snapshots", "/snapshots/"):
            if method != "GET":
                return Route(pre + "/snapshots", self.method_not_allowed)
            return Route(pre + "/snapshots", self.snapshot_list)
        if len(parts) == 3 and parts[1] == "snapshots" and parts[2]:
            t = pre + "/snapshots/{snapshotId}"
            fn = {"GET": self.snapshot_get, "DELETE": self.snapshot_delete}.get(method)
            if fn is None:
                return Route(t, self.method_not_allowed)
            return Route(t, fn, {"snap_id": parts[2]})
        return None

    def method_not_allowed(self):
        self.send_json(405, {"detail": "Method Not Allowed"})

    def _sb(self, sid):
        return self.server.app.sandboxes.get(sid)

    def _json_body(self):
        """(ok, value); on failure a 422 has been sent."""
        raw = self.body.read_limited(16 << 20)
        if not raw.strip():
            unprocessable(self, [V.missing(("body",), None)])
            return False, None
        try:
            return True, json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            pos = getattr(e, "pos", 0) or 0
            unprocessable(self, [V.err("json_invalid", ("body", pos), "JSON decode error", {},
                                       {"error": getattr(e, "msg", "Invalid JSON")})])
            return False, None

    # -- lifecycle --------------------------------------------------------------------

    def create(self):
        app = self.server.app
        ok, body = self._json_body()
        if not ok:
            return
        errors = V.validate_create(body, app.min_timeout)
        if errors:
            return unprocessable(self, errors)
        timeout = body.get("timeout")
        if timeout is not None:
            timeout = int(timeout)
            if app.max_timeout is not None and timeout > app.max_timeout:
                return api_error(self, 400, "SANDBOX::INVALID_PARAMETER",
                                 "Sandbox timeout %ds exceeds the configured maximum of %ds." % (timeout, app.max_timeout))
        snap_id = (body.get("snapshotId") or body.get("snapshot_id") or "").strip() or None
        if snap_id is not None:
            try:
                app.snapshots.check_restore(snap_id)
            except SnapshotError as e:
                return api_error(self, e.status, e.code, e.message)
        if body.get("secureAccess") or body.get("secure_access"):
            return api_error(self, 400, "SANDBOX::INVALID_PARAMETER",
                             "secureAccess is only supported for Kubernetes sandboxes in gateway mode.")
        md = body.get("metadata") or {}
        prob = V.metadata_problem(md)
        if prob:
            return api_error(self, 400, "SANDBOX::INVALID_METADATA_LABEL", prob)
        np_ = body.get("networkPolicy", body.get("network_policy"))
        pol = None
        if np_ is not None:
            try:
                pol = normalize_policy(np_)
            except ValueError as e:
                return api_error(self, 400, "SANDBOX::INVALID_PARAMETER", "Invalid networkPolicy: %s" % e)
        try:
            sb = app.create_sandbox(body, timeout, md, np_, pol, snap_id)
        except SnapshotError as e:
            return api_error(self, e.status, e.code, e.message)
        except OSError as e:
            return api_error(self, 500, "DOCKER::SANDBOX_START_FAILED",
                             "Restoring snapshot %s failed: %s" % (snap_id, e))
        self.send_json(202, sandbox_json(sb, create=True))

    def list(self):
        app = self.server.app
        errors = []
        page = self._qint("page", 1, 1, None, errors)
        size = self._qint("pageSize", 20, 1, 200, errors)
        if errors:
            return unprocessable(self, errors)
        states = {s.lower() for s in self.qall("state")}
        mfilter = {}
        for raw in self.qall("metadata"):
            try:
                mfilter.update(urllib.parse.parse_qsl(raw, keep_blank_values=True, strict_parsing=True))
            except ValueError:
                return api_error(self, 400, "INVALID_METADATA_FORMAT",
                                 "Invalid metadata filter format: %s" % raw)
        items = []
        for sb in list(app.sandboxes.values()):
            if sb.deleted:
                continue
            if states and sb.state.lower() not in states:
                continue
            md = sb.rec.get("metadata") or {}
            if any(md.get(k) != v for k, v in mfilter.items()):
                continue
            items.append(sb)
        items.sort(key=lambda s: s.rec["createdAt"], reverse=True)
        self.send_page(items, page, size, sandbox_json)

    def send_page(self, items, page, size, to_json):
        """Page @page of @items (newest first), @size a page, as a list
        answer: {"items", "pagination"}."""
        total = len(items)
        pages = math.ceil(total / size) if total else 0
        chunk = items[(page - 1) * size: page * size]
        self.send_json(200, {"items": [to_json(x) for x in chunk],
                             "pagination": {"page": page, "pageSize": size, "totalItems": total,
                                            "totalPages": pages, "hasNextPage": page < pages}})

    def _qint(self, name, default, lo, hi, errors):
        v = self.qall(name)
        if not v:
            return default
        raw = v[-1]
        n = V.check_int(raw, ("query", name), errors)
        if n is None:
            return default
        if lo is not None and n < lo:
            errors.append(V.err("greater_than_equal", ("query", name), "Input should be greater than or equal to %d" % lo, raw, {"ge": lo}))
        if hi is not None and n > hi:
            errors.append(V.err("less_than_equal", ("query", name), "Input should be less than or equal to %d" % hi, raw, {"le": hi}))
        return n

    def get(self, sid):
        sb = self._sb(sid)
        if sb is None:
            return not_found_sandbox(self, sid)
        self.send_json(200, sandbox_json(sb))

    def delete(self, sid):
        app = self.server.app
        sb = self._sb(sid)
        if sb is None:
            return not_found_sandbox(self, sid)
        app.delete_sandbox(sid)
        self.send_bytes(204, b"")

    def pause(self, sid):
        sb = self._sb(sid)
        if sb is None:
            return not_found_sandbox(self, sid)
        with sb.lock:
            if sb.state != "Running":
                return api_error(self, 409, "DOCKER::SANDBOX_NOT_RUNNING",
                                 "Sandbox %s is not running (current state: %s)." % (sid, sb.state))
            sb.set_state("Paused")
        sb.freeze(True)
        self.send_bytes(202, b"")

    def resume(self, sid):
        sb = self._sb(sid)
        if sb is None:
            return not_found_sandbox(self, sid)
        with sb.lock:
            if sb.state != "Paused":
                return api_error(self, 409, "DOCKER::SANDBOX_NOT_PAUSED",
                                 "Sandbox %s is not paused (current state: %s)." % (sid, sb.state))
            sb.freeze(False)
            sb.set_state("Running")
        self.send_bytes(202, b"")

    def renew(self, sid):
        ok, body = self._json_body()
        if not ok:
            return
        errors = []
        if not isinstance(body, dict):
            return unprocessable(self, [V.err("model_attributes_type", ("body",),
                                              "Input should be a valid dictionary or object to extract fields from", body)])
        v = body.get("expiresAt", body.get("expires_at"))
        if v is None:
            return unprocessable(self, [V.missing(("body", "expiresAt"), body)])
        ts = V.parse_expiry(v, errors)
        if errors:
            return unprocessable(self, errors)
        sb = self._sb(sid)
        if sb is None:
            return not_found_sandbox(self, sid)
        with sb.lock:
            if sb.rec.get("timeout") is None:
                return api_error(self, 409, "DOCKER::INVALID_EXPIRATION",
                                 "Sandbox %s does not have automatic expiration enabled." % sid)
            if ts <= time.time():
                return api_error(self, 400, "DOCKER::INVALID_EXPIRATION", "New expiration time must be in the future.")
            sb.rec["expiresAt"] = ts
            sb.save()
        self.send_json(200, {"expiresAt": iso_time(ts)})

    def patch_metadata(self, sid):
        ok, body = self._json_body()
        if not ok:
            return
        errors = []
        if not isinstance(body, dict):
            return unprocessable(self, [V.err("dict_type", ("body",), "Input should be a valid dictionary", body)])
        V.check_dict_str(body, ("body",), errors, allow_none_values=True)
        if errors:
            return unprocessable(self, errors)
        prob = V.metadata_problem(body)
        if prob:
            return api_error(self, 400, "SANDBOX::INVALID_METADATA_LABEL", prob)
        sb = self._sb(sid)
        if sb is None:
            return not_found_sandbox(self, sid)
        with sb.lock:
            md = dict(sb.rec.get("metadata") or {})
            for k, v in body.items():
                if v is None:
                    md.pop(k, None)
                else:
                    md[k] = v
            sb.rec["metadata"] = md
            sb.save()
        self.send_json(200, sandbox_json(sb))

    # -- snapshots --------------------------------------------------------------------

    def _snapshot_body(self):
        """(ok, name) of a create-snapshot body (optional; {"name"} only);
        on failure a 422 has been sent."""
        raw = self.body.read_limited(1 << 20)
        if not raw.strip():
            return True, None
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            unprocessable(self, [V.err("json_invalid", ("body", getattr(e, "pos", 0) or 0), "JSON decode error",
                                       {}, {"error": getattr(e, "msg", "Invalid JSON")})])
            return False, None
        if body is None:
            return True, None
        errors = []
        if not V.model_attrs(body, ("body",), errors):
            return unprocessable(self, errors), None
        for k, v in body.items():
            if k != "name":
                errors.append(V.err("extra_forbidden", ("body", k), "Extra inputs are not permitted", v))
        name = body.get("name")
        if name is not None and V.check_str(name, ("body", "name"), errors) and len(name) < 1:
            errors.append(V.err("string_too_short", ("body", "name"), "String should have at least 1 character",
                                name, {"min_length": 1}))
        if errors:
            return unprocessable(self, errors), None
        return True, name

    def snapshot_create(self, sid):
        app = self.server.app
        ok, name = self._snapshot_body()
        if not ok:
            return
        sb = self._sb(sid)
        if sb is None:
            return not_found_sandbox(self, sid)
        try:
            rec = app.snapshots.create(sb, name)
        except SnapshotError as e:
            return api_error(self, e.status, e.code, e.message)
        self.send_json(202, snapshot_json(rec), headers=[("Location", "/v1/snapshots/%s" % rec["id"])])

    def snapshot_list(self):
        errors = []
        page = self._qint("page", 1, 1, None, errors)
        size = self._qint("pageSize", 20, 1, 200, errors)
        if errors:
            return unprocessable(self, errors)
        sbid, name = self.qall("sandboxId"), self.qall("name")
        recs = self.server.app.snapshots.list(sbid[-1] if sbid else None, name[-1] if name else None,
                                              set(self.qall("state")))
        self.send_page(recs, page, size, snapshot_json)

    def snapshot_get(self, snap_id):
        try:
            self.send_json(200, snapshot_json(self.server.app.snapshots.get(snap_id)))
        except SnapshotError as e:
            api_error(self, e.status, e.code, e.message)

    def snapshot_delete(self, snap_id):
        try:
            self.server.app.snapshots.delete(snap_id)
        except SnapshotError as e:
            return api_error(self, e.status, e.code, e.message)
        self.send_bytes(204, b"")

    def endpoint(self, sid, port):
        app = self.server.app
        if not re.fullmatch(r"[+-]?\d+", port):
            return unprocessable(self, [V.err("int_parsing", ("path", "port"),
                                              "Input should be a valid integer, unable to parse string as an integer", port)])
        p = int(port)
        usp_raw = self.q("use_server_proxy", "false").strip().lower()
        if usp_raw in ("true", "1", "yes", "on", "t", "y"):
            usp = True
        elif usp_raw in ("false", "0", "no", "off", "f", "n"):
            usp = False
        else:
            return unprocessable(self, [V.err("bool_parsing", ("query", "use_server_proxy"),
                                              "Input should be a valid boolean, unable to interpret input", self.q("use_server_proxy"))])
        sb = self._sb(sid)
        if sb is None:
            return not_found_sandbox(self, sid)
        if p < 1 or p > 65535:
            return api_error(self, 400, "DOCKER::INVALID_PORT", "Port %d is out of range (1-65535)." % p)
        if self.qall("expires"):
            if usp:
                return api_error(self, 400, "SANDBOX::INVALID_PARAMETER",
                                 "expires cannot be combined with use_server_proxy=true.")
            return api_error(self, 400, "SANDBOX::API_NOT_SUPPORTED",
                             "Signed endpoints are not supported by the Docker runtime.")
        self.send_json(200, app.endpoint_for(sb, p, usp))

    # -- server proxy -------------------------------------------------------------------

    def server_proxy(self, sid, port, rest):
        app = self.server.app
        if self.command not in ("GET", "POST", "PUT", "DELETE", "PATCH"):
            return self.method_not_allowed()
        sb = self._sb(sid)
        if sb is None:
            return not_found_sandbox(self, sid)
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return api_error(self, 400, "GENERAL::INVALID_REQUEST",
                             "WebSocket upgrade is not supported on the HTTP proxy route.")
        target = "/proxy/%d%s" % (port, rest) + ("?" + self.raw_query if self.raw_query else "")
        hp = sb.rec.get("hp")
        host = self.headers.get("Host", "")
        add = [("X-Forwarded-For", self.client_address[0]), ("X-Forwarded-Host", host),
               ("X-Forwarded-Proto", "https" if app.ssl_ctx else "http"),
               ("Host", "127.0.0.1:%d" % hp)]
        try:
            forward(self, "127.0.0.1", hp, target,
                    drop=("host", "authorization", "cookie", "open-sandbox-api-key", "x-forwarded-for",
                          "x-forwarded-host", "x-forwarded-proto"),
                    add=add, tls=app.ssl_ctx is not None, timeout=180.0)
        except UpstreamError as e:
            if not self.started:
                api_error(self, 502, "GENERAL::UNKNOWN_ERROR",
                          "Could not connect to the backend sandbox %s: %s" % (sid, e))
            else:
                self.close_connection = True

    # -- admin --------------------------------------------------------------------------

    def admin_route(self, method, path):
        parts = path.split("/")
        if path == "/_admin/faults":
            if method == "POST":
                return Route("/_admin/faults", self.admin_set_faults)
            if method == "DELETE":
                return Route("/_admin/faults", self.admin_clear_faults)
            if method == "GET":
                return Route("/_admin/faults", lambda: self.send_json(200, self.server.app.faults.to_json()))
        if path == "/_admin/stats" and method == "GET":
            return Route("/_admin/stats", lambda: self.send_json(200, self.server.app.stats.to_json()))
        if path == "/_admin/snapshots" and method in ("GET", "POST"):
            return Route("/_admin/snapshots", self.admin_snapshots)
        if path == "/_admin/stats/reset" and method == "POST":
            return Route("/_admin/stats/reset", self.admin_reset_stats)
        if len(parts) == 5 and parts[2] == "sandboxes" and method == "POST" and parts[4] in ("state", "expire"):
            fn = self.admin_state if parts[4] == "state" else self.admin_expire
            return Route("/_admin/sandboxes/{id}/" + parts[4], fn, {"sid": parts[3]})
        if len(parts) == 4 and parts[2] == "sandboxes" and method == "GET":
            return Route("/_admin/sandboxes/{id}", self.admin_info, {"sid": parts[3]})
        if len(parts) == 5 and parts[2] == "sandboxes" and method == "POST" and parts[4] == "listing":
            return Route("/_admin/sandboxes/{id}/listing", self.admin_listing, {"sid": parts[3]})
        return None

    def _admin_body(self):
        raw = self.body.read_limited(1 << 20)
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError as e:
            self.send_json(400, {"error": "invalid JSON: %s" % e})
            return None

    def admin_set_faults(self):
        body = self._admin_body()
        if body is None:
            return
        try:
            rule = parse_rule(body, self.server.app.fault_delay_ms)
        except ValueError as e:
            return self.send_json(400, {"error": str(e)})
        self.server.app.faults.set(rule)
        self.send_json(200, {"ok": True, "rule": rule.to_json()})

    def admin_clear_faults(self):
        self.server.app.faults.clear()
        self.send_json(200, {"ok": True})

    def admin_snapshots(self):
        snaps = self.server.app.snapshots
        if self.command == "GET":
            return self.send_json(200, snaps.settings())
        body = self._admin_body()
        if body is None:
            return
        if not isinstance(body, dict) or not set(body) <= {"supported", "hold", "fail"}:
            return self.send_json(400, {"error": "want {\"supported\", \"hold\", \"fail\": BOOL}"})
        self.send_json(200, snaps.configure(body))

    def admin_reset_stats(self):
        self.server.app.stats.reset()
        self.send_json(200, {"ok": True})

    def _admin_sandbox(self, sid):
        """(sandbox, JSON body) of an admin request on one sandbox, or
        (None, None) once an error has been answered."""
        body = self._admin_body()
        if body is None:
            return None, None
        sb = self._sb(sid)
        if sb is None:
            self.send_json(404, {"error": "no such sandbox"})
            return None, None
        return sb, body

    def admin_state(self, sid):
        sb, body = self._admin_sandbox(sid)
        if sb is None:
            return
        state = body.get("state") if isinstance(body, dict) else None
        if state not in ("Failed", "Pending", "Running"):
            return self.send_json(400, {"error": "state must be Failed, Pending or Running"})
        self.server.app.force_state(sb, state, body.get("reason"), body.get("message"))
        self.send_json(200, {"ok": True, "state": state})

    def admin_expire(self, sid):
        sb = self._sb(sid)
        if sb is None:
            return self.send_json(404, {"error": "no such sandbox"})
        self.server.app.delete_sandbox(sid)
        self.send_json(200, {"ok": True})

    def admin_listing(self, sid):
        sb, body = self._admin_sandbox(sid)
        if sb is None:
            return
        path, names = (body.get("path"), body.get("names_hex")) if isinstance(body, dict) else (None, None)
        try:
            names = [bytes.fromhex(n) for n in names]
        except (TypeError, ValueError):
            names = None
        if not isinstance(path, str) or not names:
            return self.send_json(400, {"error": "want {\"path\": DIR, \"names_hex\": [HEX, ...]}"})
        sb.files.inject_names(path, names)
        self.send_json(200, {"ok": True})

    def admin_info(self, sid):
        sb = self._sb(sid)
        if sb is None:
            return self.send_json(404, {"error": "no such sandbox"})
        r = sb.rec
        self.send_json(200, {"id": sid, "state": r["state"], "hp": r.get("hp"), "base": sb.base,
                             "rootfs": sb.fs.rootfs, "execdToken": sb.execd_token(),
                             "egressToken": r.get("egressToken"), "listening": sb.listening,
                             "processes": len(sb.procs), "egressPolicy": sb.egress_policy(),
                             "create": {k: r.get(k) for k in ("extensions", "volumes", "credentialProxy",
                                                              "imageAuth", "resourceLimits")}})

"""The egress sidecar's policy API (docs/SERVER.md §11), one per sandbox
created with networkPolicy, reached through execd's /proxy/18080/.

The policy is STORED AND REPORTED ONLY, NOT ENFORCED: commands in the
sandbox keep the host's network.  Errors are text/plain (Go http.Error:
message + "\\n"); auth is the OPENSANDBOX-EGRESS-AUTH header, a random token
per sandbox returned in the endpoint's headers for port 18080.
"""

import json

MAX_RULES = 4096


def normalize_rule(r):
    if not isinstance(r, dict):
        raise ValueError("invalid rule: expected object")
    target = r.get("target")
    if not isinstance(target, str) or not target.strip():
        raise ValueError("invalid rule: target is required")
    action = r.get("action")
    if action is None:
        action = ""
    if not isinstance(action, str):
        raise ValueError("invalid rule action")
    a = action.strip().lower() or "deny"
    if a not in ("allow", "deny"):
        raise ValueError('invalid action "%s" for target %s' % (action, target))
    return {"action": a, "target": target.strip()}


def normalize_policy(p):
    """NetworkPolicy JSON -> stored form; {} / null / missing defaultAction -> deny."""
    if p is None:
        return {"defaultAction": "deny", "egress": None}
    if not isinstance(p, dict):
        raise ValueError("invalid policy: expected object")
    da = p.get("defaultAction")
    if da is None or da == "":
        da = "deny"
    if not isinstance(da, str) or da.strip().lower() not in ("allow", "deny"):
        raise ValueError("invalid defaultAction %s" % json.dumps(da))
    eg = p.get("egress")
    if eg is not None and not isinstance(eg, list):
        raise ValueError("invalid egress: expected array")
    rules = [normalize_rule(r) for r in (eg or [])]
    return {"defaultAction": da.strip().lower(), "egress": rules if rules else (None if eg is None else [])}


def mode_of(pol):
    rules = pol.get("egress") or []
    if not rules:
        return "allow_all" if pol["defaultAction"] == "allow" else "deny_all"
    return "enforcing"


class EgressAPI:
    def __init__(self, sb):
        self.sb = sb

    def _text(self, h, status, msg):
        h.send_bytes(status, (msg + "\n").encode(), "text/plain; charset=utf-8",
                     headers=[("X-Content-Type-Options", "nosniff")])

    def _status(self, extra=None):
        pol = self.sb.egress_policy()
        d = {"status": "ok", "mode": mode_of(pol), "enforcementMode": "dns"}
        if extra:
            d.update(extra)
        return d

    def handle(self, h, path):
        if path == "/healthz":
            return h.send_bytes(200, b"ok", "text/plain; charset=utf-8")
        tok = self.sb.egress_token()
        if tok and h.headers.get("OPENSANDBOX-EGRESS-AUTH") != tok:
            return self._text(h, 401, "unauthorized")
        if path != "/policy":
            return self._text(h, 404, "404 page not found")
        m = h.command
        if m == "GET":
            pol = self.sb.egress_policy()
            out = self._status()
            out["policy"] = {"egress": pol.get("egress"), "defaultAction": pol["defaultAction"]}
            return h.send_json(200, out)
        if m not in ("PATCH", "DELETE", "POST", "PUT"):
            return self._text(h, 405, "method not allowed")
        raw = h.body.read_limited(16 << 20)
        if m in ("POST", "PUT"):
            if not raw.strip():
                self.sb.set_egress_policy({"defaultAction": "deny", "egress": None})
                return h.send_json(200, self._status({"reason": "policy reset to default deny-all"}))
            try:
                body = json.loads(raw)
                pol = normalize_policy(body)
            except ValueError as e:
                return self._text(h, 400, "invalid policy: %s" % e)
            if len(pol.get("egress") or []) > MAX_RULES:
                return self._text(h, 413, "too many rules: %d > %d" % (len(pol["egress"]), MAX_RULES))
            self.sb.set_egress_policy(pol)
            return h.send_json(200, self._status())
        if not raw.strip():
            return self._text(h, 400, "empty request body")
        try:
            body = json.loads(raw)
        except ValueError as e:
            return self._text(h, 400, "invalid JSON body: %s" % e)
        if not isinstance(body, list) or not body:
            what = "rules" if m == "PATCH" else "targets"
            return self._text(h, 400, "request body must be a non-empty JSON array of %s" % what)
        pol = self.sb.egress_policy()
        if m == "PATCH":
            try:
                patch = [normalize_rule(r) for r in body]
            except ValueError as e:
                return self._text(h, 400, str(e))
            merged, seen = [], set()
            for r in patch:
                k = r["target"].lower()
                if k in seen:
                    continue
                seen.add(k)
                merged.append(r)
            for r in pol.get("egress") or []:
                if r["target"].lower() not in seen:
                    merged.append(r)
            if len(merged) > MAX_RULES:
                return self._text(h, 413, "too many rules: %d > %d" % (len(merged), MAX_RULES))
            self.sb.set_egress_policy({"defaultAction": pol["defaultAction"], "egress": merged})
            return h.send_json(200, self._status())
        # DELETE
        if any(not isinstance(t, str) for t in body):
            return self._text(h, 400, "request body must be a non-empty JSON array of targets")
        drop = {t.strip().lower() for t in body}
        old = pol.get("egress") or []
        kept = [r for r in old if r["target"].lower() not in drop]
        if len(kept) == len(old):
            return h.send_json(200, self._status({"reason": "no matching targets found"}))
        self.sb.set_egress_policy({"defaultAction": pol["defaultAction"], "egress": kept})
        return h.send_json(200, self._status())

"""Fault injection and request statistics for the reliability tests.

A fault rule (POST /_admin/faults, or --fault-* on the command line) picks
requests by scope ("execd": every per-sandbox execd/egress listener;
"lifecycle": the main port except /_admin; "all"), an optional method and an
optional path regex (re.search on the raw request path, so "/files/upload"
matches "/proxy/44772/files/upload" too).  A picked request fails with one of
the rule's kinds, chosen at random:

  reset        close the connection with an RST before the request has any effect
  reset_after  perform the request, discard the answer, then close with an RST
  500          execd's JSON error {"code":"RUNTIME_ERROR","message":"injected fault"}
  502/503/504  a gateway's text/plain error page
  delay        wait delay_ms, then serve normally
  cut          serve a download, but send only the first half of its body,
               wait delay_ms, then close with an RST (a transfer broken
               mid-way; other requests are served whole)
  late         perform the request now, send its answer after delay_ms (an
               answer that was true when made and is old when it arrives)
  garbage, endless, huge_header, lie
               a hostile server's answers (hostile.py)

"next": N makes the next N matching requests fail; after those, "rate" (a
fraction) applies.  Counting: every request that reaches a listener is counted
under "METHOD /route/template", overall and per sandbox id.
"""

import random
import re
import threading

from . import hostile

KINDS = ("reset", "reset_after", "500", "502", "503", "504", "delay", "cut", "late") + hostile.KINDS


class FaultRule:
    def __init__(self, rate=0.0, next_n=0, kinds=("reset", "500", "502", "503"),
                 delay_ms=0, scope="execd", path=None, method=None):
        self.rate = float(rate)
        self.next_n = int(next_n)
        self.kinds = list(kinds) or ["500"]
        self.delay_ms = int(delay_ms)
        self.scope = scope
        self.path_re = re.compile(path) if path else None
        self.path = path
        self.method = method.upper() if method else None

    def to_json(self):
        return {"rate": self.rate, "next": self.next_n, "kinds": self.kinds,
                "delay_ms": self.delay_ms, "scope": self.scope,
                "path": self.path, "method": self.method}


def parse_rule(obj, default_delay=0):
    """Build a FaultRule from the admin JSON body; raises ValueError."""
    if not isinstance(obj, dict):
        raise ValueError("body must be a JSON object")
    kinds = obj.get("kinds", ["reset", "500", "502", "503"])
    if isinstance(kinds, str):
        kinds = [k for k in kinds.split(",") if k]
    if not isinstance(kinds, list) or not kinds:
        raise ValueError("kinds must be a non-empty list")
    kinds = [str(k) for k in kinds]
    for k in kinds:
        if k not in KINDS:
            raise ValueError("unknown fault kind %r (known: %s)" % (k, ", ".join(KINDS)))
    scope = obj.get("scope", "execd")
    if scope not in ("execd", "lifecycle", "all"):
        raise ValueError("scope must be execd, lifecycle or all")
    rate = obj.get("rate", 0)
    nxt = obj.get("next", 0)
    delay = obj.get("delay_ms", default_delay)
    for name, v in (("rate", rate), ("next", nxt), ("delay_ms", delay)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ValueError("%s must be a non-negative number" % name)
    if rate > 1:
        raise ValueError("rate must be <= 1")
    path = obj.get("path")
    if path is not None:
        if not isinstance(path, str):
            raise ValueError("path must be a string")
        try:
            re.compile(path)
        except re.error as e:
            raise ValueError("bad path regex: %s" % e)
    method = obj.get("method")
    if method is not None and not isinstance(method, str):
        raise ValueError("method must be a string")
    return FaultRule(rate, int(nxt), kinds, int(delay), scope, path, method)


class Faults:
    def __init__(self, seed=None):
        self.lock = threading.Lock()
        self.rule = None
        self.rng = random.Random(seed)
        self.injected = 0

    def set(self, rule):
        with self.lock:
            self.rule = rule

    def clear(self):
        with self.lock:
            self.rule = None

    def pick(self, scope, method, path):
        """Return (kind, delay_ms) for a request, or None."""
        with self.lock:
            r = self.rule
            if r is None:
                return None
            if r.scope != "all" and r.scope != scope:
                return None
            if r.method and r.method != method:
                return None
            if r.path_re and not r.path_re.search(path):
                return None
            hit = False
            if r.next_n > 0:
                r.next_n -= 1
                hit = True
            elif r.rate > 0 and self.rng.random() < r.rate:
                hit = True
            if not hit:
                return None
            self.injected += 1
            return self.rng.choice(r.kinds), r.delay_ms

    def to_json(self):
        with self.lock:
            return {"rule": self.rule.to_json() if self.rule else None, "injected": self.injected}


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.total = {}
        self.per_sandbox = {}

    def count(self, key, sid=None):
        with self.lock:
            self.total[key] = self.total.get(key, 0) + 1
            if sid:
                d = self.per_sandbox.setdefault(sid, {})
                d[key] = d.get(key, 0) + 1

    def reset(self):
        with self.lock:
            self.total = {}
            self.per_sandbox = {}

    def to_json(self):
        with self.lock:
            return {"total": dict(self.total),
                    "sandboxes": {k: dict(v) for k, v in self.per_sandbox.items()}}

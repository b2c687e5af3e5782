"""The server as a whole: configuration, the sandbox table, persistence,
the expiry/pending ticker, endpoints, forced states."""

import hashlib
import json
import os
import ssl
import sys
import threading
import time

from .faults import FaultRule, Faults, Stats
from .httpbase import Server
from .lifecycle import LifecycleHandler
from .sandbox import Sandbox
from .sandboxfs import empty_trash
from .snapshots import Snapshots
from .util import uuid_id


def image_auth(auth):
    """A registry login as the record keeps it: the user, and the
    password's sha256 only (the record is a file on disk)."""
    if not isinstance(auth, dict):
        return None
    pw = auth.get("password") or ""
    return {"username": auth.get("username"), "passwordSha256": hashlib.sha256(pw.encode()).hexdigest()}

TICK = 0.1


class App:
    def __init__(self, args):
        self.args = args
        self.host = args.host
        self.public_host = "127.0.0.1" if args.host in ("0.0.0.0", "", "::") else args.host
        self.api_key = args.api_key
        self.data_dir = os.path.abspath(args.data_dir)
        self.min_timeout = args.min_timeout
        self.max_timeout = args.max_timeout
        self.pending_seconds = args.pending_seconds
        self.secure_access = args.secure_access
        self.endpoint_style = args.endpoint_style
        self.verbose = args.verbose
        self.fault_delay_ms = args.fault_delay_ms
        self.faults = Faults(args.fault_seed)
        self.stats = Stats()
        if args.fault_rate:
            self.faults.set(FaultRule(rate=args.fault_rate, kinds=[k for k in args.fault_kinds.split(",") if k],
                                      delay_ms=args.fault_delay_ms, scope="execd"))
        self.ssl_ctx = None
        if args.tls_cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(args.tls_cert, args.tls_key)
            self.ssl_ctx = ctx
        self.lock = threading.RLock()
        self.sandboxes = {}
        self.snapshots = Snapshots(self, supported=not args.no_snapshots)
        self.main = None

    def log_prefix(self, handler):
        f = getattr(handler, "log_prefix", None)
        return f() if f else "-"

    # -- startup -------------------------------------------------------------------------

    def load(self):
        root = os.path.join(self.data_dir, "sandboxes")
        os.makedirs(root, exist_ok=True)
        trash = os.path.join(self.data_dir, "trash")
        if os.path.isdir(trash):
            empty_trash(trash)  # left by a server that was killed
        self.snapshots.load()
        now = time.time()
        for sid in sorted(os.listdir(root)):
            p = os.path.join(root, sid, "record.json")
            try:
                with open(p) as f:
                    rec = json.load(f)
            except (OSError, ValueError):
                continue
            sb = Sandbox(self, rec)
            if rec.get("expiresAt") is not None and rec["expiresAt"] <= now:
                sb.destroy()
                continue
            sb.fs.create()  # idempotent: recreate mount points if missing
            sb.fs.mount_sys()  # the kept upper directories, mounted again
            self.sandboxes[sid] = sb
            sb.start_after_load()

    def serve(self):
        self.main = Server((self.host, self.args.port), LifecycleHandler, self, self.ssl_ctx)
        threading.Thread(target=self._ticker, name="ticker", daemon=True).start()
        scheme = "https" if self.ssl_ctx else "http"
        sys.stdout.write("ready %s://%s:%d\n" % (scheme, self.public_host, self.main.server_port))
        sys.stdout.flush()
        self.main.serve_forever(poll_interval=0.2)

    def shutdown(self):
        for sb in list(self.sandboxes.values()):
            sb.close_listener()
            sb.kill_all()
            sb.fs.umount_sys()

    # -- sandboxes ---------------------------------------------------------------------------

    def create_sandbox(self, body, timeout, md, np_, pol, snap_id=None):
        """A sandbox's record from a valid create request; with @snap_id,
        its files are those of that snapshot (checked Ready)."""
        now = time.time()
        img = body.get("image") or {}
        rec = {
            "id": uuid_id(),
            "image": {"uri": img.get("uri")} if snap_id is None else None,
            "snapshotId": snap_id,
            "entrypoint": body.get("entrypoint") or (["tail", "-f", "/dev/null"] if snap_id else None),
            "env": body.get("env") or {},
            "metadata": dict(md),
            "timeout": timeout,
            "createdAt": now,
            "expiresAt": (now + timeout) if timeout is not None else None,
            "resourceLimits": body.get("resourceLimits", body.get("resource_limits")),
            "platform": body.get("platform"),
            # kept to be read back by tests (/_admin/sandboxes/ID); a
            # local sandbox mounts no volumes and pulls no image
            "extensions": body.get("extensions"),
            "volumes": body.get("volumes"),
            "credentialProxy": body.get("credentialProxy"),
            "imageAuth": image_auth(img.get("auth")),
            "networkPolicy": np_,
            "egressPolicy": pol,
            "hp": None,
            "pendingUntil": (now + self.pending_seconds) if self.pending_seconds > 0 else None,
            "pendingHold": False,
        }
        state = "Pending" if self.pending_seconds > 0 else "Running"
        from .sandbox import REASONS
        rec["state"] = state
        rec["reason"], rec["message"] = REASONS[state]
        rec["lastTransitionAt"] = now
        seed = (lambda fs: self.snapshots.restore(snap_id, fs)) if snap_id else None
        sb = Sandbox.create(self, rec, seed)
        with self.lock:
            self.sandboxes[rec["id"]] = sb
        return sb

    def delete_sandbox(self, sid):
        with self.lock:
            sb = self.sandboxes.pop(sid, None)
        if sb is not None:
            sb.destroy()

    def force_state(self, sb, state, reason=None, message=None):
        with sb.lock:
            if state == "Failed":
                sb.set_state("Failed", reason or "CONTAINER_FAILED", message or "Sandbox container failed.")
            elif state == "Pending":
                sb.rec["pendingHold"] = True
                sb.rec["pendingUntil"] = None
                sb.set_state("Pending", reason, message)
            else:
                sb.rec["pendingHold"] = False
                sb.rec["pendingUntil"] = None
                sb.freeze(False)
                sb.set_state("Running", reason, message)
        if state == "Running":
            sb.activate()
        else:
            if state == "Failed":
                sb.kill_all()
            sb.deactivate()

    def endpoint_for(self, sb, port, server_proxy):
        host = self.public_host
        if server_proxy:
            ep = "%s:%d/sandboxes/%s/proxy/%d" % (host, self.main.server_port, sb.id, port)
        elif self.endpoint_style == "host" and port == 44772:
            ep = "%s:%d" % (host, sb.rec["hp"])
        else:
            ep = "%s:%d/proxy/%d" % (host, sb.rec["hp"], port)
        out = {"endpoint": ep}
        headers = {}
        if port == 44772 and sb.rec.get("execdToken"):
            headers["X-EXECD-ACCESS-TOKEN"] = sb.rec["execdToken"]
        if port == 18080 and sb.rec.get("egressToken"):
            headers["OPENSANDBOX-EGRESS-AUTH"] = sb.rec["egressToken"]
        if headers:
            out["headers"] = headers
        return out

    # -- timers --------------------------------------------------------------------------

    def _ticker(self):
        while True:
            time.sleep(TICK)
            now = time.time()
            for sid, sb in list(self.sandboxes.items()):
                try:
                    exp = sb.rec.get("expiresAt")
                    if exp is not None and now >= exp:
                        self.delete_sandbox(sid)
                        continue
                    pu = sb.rec.get("pendingUntil")
                    if sb.state == "Pending" and pu is not None and now >= pu and not sb.rec.get("pendingHold"):
                        with sb.lock:
                            sb.rec["pendingUntil"] = None
                            sb.set_state("Running")
                        sb.activate()
                except Exception:  # keep the ticker alive whatever happens
                    import traceback
                    traceback.print_exc(file=sys.stderr)

"""One sandbox: its persistent record, filesystem, execd listener, processes
and state machine (Pending -> Running <-> Paused; Failed; deleted/expired).

The record (DATA/sandboxes/<id>/record.json) is written atomically on every
change.  Command, session and code-context records are in memory only: they
are lost when the server restarts, as they are when a real execd restarts.
"""

import os
import secrets
import signal
import threading
import time

from . import procs
from .code_api import CodeAPI
from .commands_api import CommandsAPI
from .egress import EgressAPI
from .files_api import FilesAPI
from .httpbase import AbortConnection, Server
from .sandboxfs import SandboxFS
from .util import atomic_write_json

BASE_ENV = {"HOME": "/root", "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

REASONS = {
    "Running": ("CONTAINER_RUNNING", "Sandbox container started successfully."),
    "Pending": ("SANDBOX_PENDING", "Sandbox is being provisioned."),
    "Paused": ("CONTAINER_PAUSED", "Sandbox container is paused."),
}


class Sandbox:
    def __init__(self, app, rec):
        self.app = app
        self.rec = rec
        self.id = rec["id"]
        self.base = os.path.join(app.data_dir, "sandboxes", self.id)
        self.fs = SandboxFS(self.base)
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.procs = set()
        self.frozen = False
        self.deleted = False
        self.files = FilesAPI(self)
        self.cmds = CommandsAPI(self)
        self.code = CodeAPI(self, self.cmds)
        self.egress = EgressAPI(self) if rec.get("networkPolicy") is not None else None
        self.listener = None
        self.listening = False
        self.thread = None

    # -- record ------------------------------------------------------------------

    @property
    def state(self):
        return self.rec["state"]

    def save(self):
        with self.lock:
            if self.deleted:
                return
            atomic_write_json(os.path.join(self.base, "record.json"), self.rec)

    def set_state(self, state, reason=None, message=None):
        with self.lock:
            r, m = REASONS.get(state, (None, None))
            self.rec["state"] = state
            self.rec["reason"] = reason if reason is not None else r
            self.rec["message"] = message if message is not None else m
            self.rec["lastTransitionAt"] = time.time()
            self.save()
            self.cond.notify_all()

    def execd_env(self):
        env = dict(BASE_ENV)
        for k, v in (self.rec.get("env") or {}).items():
            if v is not None:
                env[k] = v
        return env

    def execd_cwd(self):
        return "/"

    def execd_token(self):
        env = self.rec.get("env") or {}
        if env.get("EXECD_ACCESS_TOKEN"):
            return env["EXECD_ACCESS_TOKEN"]
        return self.rec.get("execdToken")

    def egress_token(self):
        return self.rec.get("egressToken")

    def egress_policy(self):
        with self.lock:
            p = self.rec.get("egressPolicy") or {"defaultAction": "deny", "egress": None}
            return {"defaultAction": p.get("defaultAction", "deny"), "egress": p.get("egress")}

    def set_egress_policy(self, pol):
        with self.lock:
            self.rec["egressPolicy"] = pol
            self.save()

    # -- processes ------------------------------------------------------------------

    def track_proc(self, p):
        with self.lock:
            self.procs.add(p)
            if self.frozen:
                procs.signal_tree(p.pid, signal.SIGSTOP)

    def forget_proc(self, p):
        with self.lock:
            self.procs.discard(p)

    def freeze(self, stop):
        with self.lock:
            self.frozen = stop
            ps = list(self.procs)
        sig = signal.SIGSTOP if stop else signal.SIGCONT
        for p in ps:
            if p.poll() is None:
                procs.signal_tree(p.pid, sig)
        procs.signal_held(self.fs, sig)

    def kill_all(self):
        self.code.stop_all()
        with self.lock:
            ps = list(self.procs)
            self.procs.clear()
        for p in ps:
            procs.kill_tree(p)
            try:
                p.wait(5)
            except Exception:
                pass
        procs.stop_holder(self.fs)

    # -- the pause gate ---------------------------------------------------------------

    def gate(self):
        """Block while paused (a frozen container accepts connections but
        does not answer); drop the connection if the sandbox went away."""
        with self.cond:
            while not self.deleted and self.rec["state"] == "Paused":
                self.cond.wait(0.5)
            if self.deleted or self.rec["state"] == "Failed":
                raise AbortConnection()

    # -- the execd listener --------------------------------------------------------------

    def _new_listener(self, port):
        from .execd import ExecdHandler
        srv = Server((self.app.host, port), ExecdHandler, self.app, self.app.ssl_ctx, bind_and_activate=False,
                     sandbox=self)
        try:
            srv.server_bind()
        except OSError:
            srv.server_close()
            raise
        return srv

    def bind(self, avoid=None):
        """The execd listener, bound (not listening yet): on the port of the
        record when it is free, else on a new one, never on @avoid."""
        hp = self.rec.get("hp") or 0
        try:
            srv = self._new_listener(0 if hp == avoid else hp)
        except OSError:
            srv = self._new_listener(0)
        held = []
        while avoid and srv.server_port == avoid:
            held.append(srv)  # kept bound so that the next pick differs
            srv = self._new_listener(0)
        for h in held:
            h.server_close()
        self.listener = srv
        self.listening = False
        if self.rec.get("hp") != srv.server_port:
            self.rec["hp"] = srv.server_port
            self.save()

    def activate(self):
        """Start accepting connections (Running/Paused)."""
        with self.lock:
            if self.deleted or self.listening:
                return
            if self.listener is None:
                self.bind()
            self.listener.server_activate()
            self.listening = True
            srv = self.listener
            self.thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1},
                                           name="execd-%s" % self.id[:8], daemon=True)
            self.thread.start()

    def deactivate(self):
        """Refuse connections (Pending, Failed): close the listening socket
        and keep the port bound without listening."""
        with self.lock:
            srv = self.listener
            was = self.listening
            self.listening = False
            self.listener = None
        if srv is not None:
            if was:
                srv.shutdown()
            srv.server_close()
        with self.lock:
            if not self.deleted:
                self.bind()

    def close_listener(self):
        with self.lock:
            srv = self.listener
            was = self.listening
            self.listener = None
            self.listening = False
        if srv is not None:
            if was:
                srv.shutdown()
            srv.server_close()

    # -- creation / destruction ------------------------------------------------------------

    @classmethod
    def create(cls, app, rec, seed=None):
        """A new sandbox; seed(fs), when given, fills its filesystem before
        the overlays are mounted (a restore from a snapshot).  A seed's
        failure removes what was made and is raised again."""
        sb = cls(app, rec)
        sb.fs.create()
        if seed is not None:
            try:
                seed(sb.fs)
            except Exception:
                sb.fs.remove()
                raise
        sb.fs.mount_sys()
        if rec.get("networkPolicy") is not None:
            rec["egressToken"] = secrets.token_hex(16)
        if app.secure_access:
            rec["execdToken"] = secrets.token_hex(16)
        sb.bind()
        sb.save()
        if rec["state"] == "Running":
            sb.activate()
        return sb

    def start_after_load(self):
        self.bind(avoid=self.rec.get("hp") if self.app.args.new_execd_ports else None)
        if self.state in ("Running", "Paused"):
            self.activate()

    def destroy(self):
        with self.lock:
            if self.deleted:
                return
            self.deleted = True
            self.cond.notify_all()
        self.close_listener()
        self.freeze(False)
        self.kill_all()
        self.fs.remove()

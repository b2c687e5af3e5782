"""execd's code-interpreter API (docs/SERVER.md §10): /code/context, /code,
/code/contexts, DELETE /code?id= (interrupt).

Real execd drives Jupyter kernels; here each context is one persistent
interpreter process inside the sandbox (bubblewrap), with its state kept
between runs: python (exec in a persistent globals dict; the value of a
trailing expression becomes a "result" event {"text": repr(value)}),
javascript (node, vm.runInThisContext) and bash (a shell that sources each
cell).  Other languages answer 500 as an execd whose image has no such
kernel.  Event sequence per run: init (text = context id), execution_count,
stdout/stderr (text chunks, newlines kept), result, then error or
execution_complete; the body ends right after the terminal event.
"""

import json
import os
import select
import shutil
import signal
import subprocess
import threading
import time

from . import procs
from .events import EventStream, error_event
from .files_api import FilesAPI, jtype, respond_error
from .pathutil import ExpandError, expand_abs
from .util import hex_id, json_bytes

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")
SUPPORTED = {}
if shutil.which("python3", path="/usr/bin:/bin"):
    SUPPORTED["python"] = "pykernel.py"
if shutil.which("node", path="/usr/bin:/bin"):
    SUPPORTED["javascript"] = "jskernel.js"
SUPPORTED["bash"] = "bashkernel.sh"
KNOWN_NOT_INSTALLED = ("java", "typescript", "go", "sql", "r")


def _src(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return f.read()


class Kernel:
    def __init__(self, sb, language, cwd):
        self.sb = sb
        self.language = language
        self.cwd = cwd
        self.id = hex_id()
        self.proc = None
        self.busy = threading.Lock()
        self.fds = {}

    def start(self):
        src = _src(SUPPORTED[self.language])
        if self.language == "python":
            argv = ["/usr/bin/python3", "-u", "-c", src]
        elif self.language == "javascript":
            argv = ["/usr/bin/node", "-e", src]
        else:
            argv = ["/bin/bash", "--noprofile", "--norc", "-c", src]
        req_r, req_w = os.pipe()
        ev_r, ev_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        env = dict(self.sb.execd_env())
        env["OSB_KFD_IN"] = str(req_r)
        env["OSB_KFD_OUT"] = str(ev_w)
        if self.language == "python":
            env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            self.proc = procs.run_in_sandbox(self.sb.fs, self.cwd, argv, env, out_w, err_w,
                                             pass_fds=(req_r, ev_w))
        finally:
            for fd in (req_r, ev_w, out_w, err_w):
                os.close(fd)
        self.sb.track_proc(self.proc)
        self.fds = {"req": req_w, "ev": ev_r, "out": out_r, "err": err_r}
        for k in ("ev", "out", "err"):
            os.set_blocking(self.fds[k], False)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is not None:
            procs.kill_tree(self.proc)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            self.sb.forget_proc(self.proc)
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = {}
        self.proc = None

    def interrupt(self):
        """SIGINT to the interpreter (not to bwrap)."""
        if not self.alive():
            return
        for pid in procs.descendants(self.proc.pid):
            try:
                with open("/proc/%d/comm" % pid) as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if comm == "bwrap":
                continue
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def execute(self, code, stream):
        """Run one cell; stream events.  Returns when the terminal event has
        been sent."""
        if not self.alive():
            self.stop()
            self.start()
        t0 = time.monotonic()
        if self.language == "bash":
            name = "execd-code-%s.sh" % hex_id()
            from .commands_api import _open_tmp
            fd = _open_tmp(self.sb.fs, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                os.write(fd, code.encode("utf-8", "surrogateescape"))
            finally:
                os.close(fd)
            line = "/tmp/%s\n" % name
        else:
            line = json.dumps({"code": code}) + "\n"
        try:
            os.write(self.fds["req"], line.encode())
        except OSError:
            stream.write(error_event("KernelDied", "the kernel is not running", []))
            return
        buf = b""
        failed = False
        count = 0
        while True:
            r, _, _ = select.select([self.fds["ev"], self.fds["out"], self.fds["err"]], [], [], 0.2)
            if self.fds["out"] in r:
                self._pipe(stream, "out")
            if self.fds["err"] in r:
                self._pipe(stream, "err")
            if self.fds["ev"] in r:
                try:
                    chunk = os.read(self.fds["ev"], 1 << 16)
                except BlockingIOError:
                    chunk = None
                if chunk == b"":
                    self._pipe(stream, "out")
                    self._pipe(stream, "err")
                    stream.write(error_event("KernelDied", "the kernel died unexpectedly", []))
                    self.stop()
                    return
                if chunk:
                    buf += chunk
                    while b"\n" in buf:
                        ln, buf = buf.split(b"\n", 1)
                        try:
                            ev = json.loads(ln)
                        except ValueError:
                            continue
                        t = ev.get("type")
                        if t == "execution_count":
                            count = ev.get("n", 0)
                            stream.send("execution_count", execution_count=count)
                        elif t == "result":
                            self._drain(stream)
                            bundle = {"text": ev.get("text", "")}
                            bundle.update(ev.get("data") or {})
                            stream.send("result", results=bundle)
                        elif t == "error":
                            self._drain(stream)
                            failed = True
                            stream.write(error_event(ev.get("ename", "Error"), ev.get("evalue", ""), ev.get("traceback")))
                        elif t in ("done", "exit"):
                            self._drain(stream)
                            if t == "exit" and ev.get("rc", 0) != 0:
                                rc = ev.get("rc")
                                failed = True
                                stream.write(error_event("CommandExecError", str(rc), ["exit status %d" % rc]))
                            if not failed:
                                stream.send("execution_complete", execution_time=int((time.monotonic() - t0) * 1000))
                            return
            stream.maybe_ping()

    def _pipe(self, stream, which):
        try:
            data = os.read(self.fds[which], 1 << 16)
        except (BlockingIOError, OSError):
            return
        if data:
            stream.send("stdout" if which == "out" else "stderr", text=data.decode("utf-8", "replace"))

    def _drain(self, stream):
        for which in ("out", "err"):
            while True:
                try:
                    data = os.read(self.fds[which], 1 << 16)
                except (BlockingIOError, OSError):
                    break
                if not data:
                    break
                stream.send("stdout" if which == "out" else "stderr", text=data.decode("utf-8", "replace"))


class CodeAPI:
    def __init__(self, sb, commands):
        self.sb = sb
        self.commands = commands
        self.contexts = {}
        self.defaults = {}
        self.lock = threading.Lock()

    def has_context(self, cid):
        return cid in self.contexts

    def interrupt(self, cid):
        k = self.contexts.get(cid)
        if k:
            k.interrupt()

    def stop_all(self):
        with self.lock:
            ks = list(self.contexts.values())
            self.contexts.clear()
            self.defaults.clear()
        for k in ks:
            k.stop()

    def _no_kernel(self, h, language, what="creating context"):
        respond_error(h, 500, "RUNTIME_ERROR",
                      "error %s. no kernel available for language %s in this sandbox" % (what, language))

    def _new_context(self, language, cwd):
        k = Kernel(self.sb, language, cwd)
        k.start()
        with self.lock:
            self.contexts[k.id] = k
        return k

    # POST /code/context
    def create_context(self, h):
        ok, req = h.read_json_body()
        if not ok:
            return respond_error(h, 400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. %s" % req)
        if not isinstance(req, dict):
            return respond_error(h, 400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s into Go value of type model.CodeContextRequest" % jtype(req))
        language = req.get("language") or ""
        cwd = req.get("cwd") or ""
        if not isinstance(language, str) or not isinstance(cwd, str):
            return respond_error(h, 400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. json: cannot unmarshal into Go struct field CodeContextRequest of type string")
        if language not in SUPPORTED:
            return self._no_kernel(h, language or '""')
        if cwd:
            try:
                cwd = expand_abs(cwd, self.sb.execd_env(), self.sb.execd_cwd())
            except ExpandError as e:
                return respond_error(h, 500, "RUNTIME_ERROR", "error creating context. %s" % e)
            r = FilesAPI(self.sb).mkdir_all(cwd)
            if r is not None:
                return respond_error(h, 500, "RUNTIME_ERROR", "error creating context. %s" % r[1])
        run_cwd = cwd or self.sb.execd_cwd()
        try:
            k = self._new_context(language, run_cwd)
        except OSError as e:
            return respond_error(h, 500, "RUNTIME_ERROR", "error creating context. %s" % e)
        h.send_json(200, {"id": k.id, "language": language, "cwd": cwd})

    # POST /code
    def run(self, h):
        ok, req = h.read_json_body()
        if not ok:
            return respond_error(h, 400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. %s" % req)
        if not isinstance(req, dict):
            return respond_error(h, 400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s into Go value of type model.RunCodeRequest" % jtype(req))
        code = req.get("code")
        ctx = req.get("context") or {}
        if code is not None and not isinstance(code, str) or not isinstance(ctx, dict):
            return respond_error(h, 400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. json: cannot unmarshal into Go struct field RunCodeRequest")
        if not code:
            return respond_error(h, 400, "INVALID_REQUEST_BODY", "invalid request, validation error: Key: 'RunCodeRequest.Code' Error:Field validation for 'Code' failed on the 'required' tag")
        cid = ctx.get("id") or ""
        language = ctx.get("language") or ""
        if language in ("", "command", "background-command"):
            env = dict(self.sb.execd_env())
            return self.commands.execute(h, code, self.sb.execd_cwd(), language == "background-command", 0, env)
        if cid:
            k = self.contexts.get(cid)
            if k is None:
                return respond_error(h, 500, "RUNTIME_ERROR", "error running codes. context not found: %s" % cid)
        else:
            if language not in SUPPORTED:
                return self._no_kernel(h, language, "running codes")
            with self.lock:
                k = self.contexts.get(self.defaults.get(language, ""))
            if k is None:
                try:
                    k = self._new_context(language, self.sb.execd_cwd())
                except OSError as e:
                    return respond_error(h, 500, "RUNTIME_ERROR", "error running codes. %s" % e)
                self.defaults[language] = k.id
        s = EventStream(h, self.sb)
        s.start()
        s.send("init", text=k.id)
        if not k.busy.acquire(blocking=False):
            s.write(json_bytes({"code": "RUNTIME_ERROR", "message": "error running codes. session is busy"}))
            return
        try:
            k.execute(code, s)
        finally:
            k.busy.release()

    # GET /code/contexts
    def list_contexts(self, h):
        lang = h.q("language")
        if lang in ("command", "background-command", "sql"):
            return respond_error(h, 500, "RUNTIME_ERROR", "error listing contexts. unsupported language: %s" % lang)
        out = [{"id": k.id, "language": k.language} for k in list(self.contexts.values())
               if not lang or k.language == lang]
        h.send_json(200, out)

    # DELETE /code/contexts?language=
    def delete_by_language(self, h):
        lang = h.q("language")
        if not lang:
            return respond_error(h, 400, "MISSING_QUERY", "missing query parameter 'language'")
        with self.lock:
            ks = [k for k in self.contexts.values() if k.language == lang]
            for k in ks:
                self.contexts.pop(k.id, None)
                if self.defaults.get(lang) == k.id:
                    self.defaults.pop(lang, None)
        for k in ks:
            k.stop()
        h.send_empty(200)

    def get_context(self, h, cid):
        k = self.contexts.get(cid)
        if k is None:
            return respond_error(h, 404, "CONTEXT_NOT_FOUND", "context %s not found" % cid)
        h.send_json(200, {"id": k.id, "language": k.language})

    def delete_context(self, h, cid):
        with self.lock:
            k = self.contexts.pop(cid, None)
            if k is not None and self.defaults.get(k.language) == cid:
                self.defaults.pop(k.language, None)
        if k is None:
            return respond_error(h, 404, "CONTEXT_NOT_FOUND", "context %s not found" % cid)
        k.stop()
        h.send_empty(200)

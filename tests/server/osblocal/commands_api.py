"""execd's /command and /session APIs (docs/SERVER.md §8, §9).

Command records live in memory, per sandbox, for the life of the server
process, like execd's map (never pruned); a server restart forgets them, as
an execd restart does.  Output files stay in the sandbox's /tmp:
<id>.stdout / <id>.stderr (foreground) and <id>.output (background).
"""

import errno
import os
import re
import shlex
import stat as st
import subprocess
import threading
import time

from . import procs
from .events import EventStream, LineSplitter, error_event, event, GRACE
from .files_api import jtype, respond_error
from .pathutil import ExpandError, expand_abs
from .sandboxfs import lookup_user
from .util import go_time_now, hex_id, json_bytes, uuid_id

TAIL_EVERY = 0.05


def go_duration(ms):
    if ms % 1000 == 0:
        s = ms // 1000
        h, rem = divmod(s, 3600)
        m, sec = divmod(rem, 60)
        out = ""
        if h:
            out += "%dh" % h
        if h or m:
            out += "%dm" % m
        return out + "%ds" % sec
    if ms < 1000:
        return "%dms" % ms
    return ("%.3f" % (ms / 1000.0)).rstrip("0").rstrip(".") + "s"


class Command:
    def __init__(self, cid, content, background):
        self.id = cid
        self.content = content
        self.background = background
        self.proc = None
        self.started_at = go_time_now()
        self.finished_at = None
        self.exit_code = None
        self.error = None
        self.done = threading.Event()
        self.killed_by = None

    def status_json(self):
        d = {"id": self.id, "content": self.content, "running": not self.done.is_set()}
        if self.done.is_set():
            d["exit_code"] = self.exit_code
            if self.error:
                d["error"] = self.error
        d["started_at"] = self.started_at
        if self.done.is_set():
            d["finished_at"] = self.finished_at
        return d


def _open_tmp(fs, name, flags):
    """Open <sandbox /tmp>/name host-side without following symlinks."""
    dfd = os.open(fs.tmp_host(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    finally:
        os.close(dfd)


def _bad(h, msg):
    respond_error(h, 400, "INVALID_REQUEST_BODY", msg)


def _uint(v, field):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise ValueError("json: cannot unmarshal %s into Go struct field RunCommandRequest.%s of type uint32" % (jtype(v), field))
    v = int(v)
    if v < 0 or v >= 1 << 32:
        raise ValueError("json: cannot unmarshal number %d into Go struct field RunCommandRequest.%s of type uint32" % (v, field))
    return v


class CommandsAPI:
    def __init__(self, sb):
        self.sb = sb
        self.fs = sb.fs
        self.commands = {}
        self.sessions = {}
        self.lock = threading.Lock()

    # -- helpers ---------------------------------------------------------------

    def check_cwd(self, raw):
        """Expand and check a cwd; returns (cwd, None) or (None, message)."""
        try:
            cwd = expand_abs(raw, self.sb.execd_env(), self.sb.execd_cwd())
        except ExpandError as e:
            return None, "invalid working directory %s: %s" % (raw, e)
        try:
            with self.fs.resolve(cwd, follow=True) as loc:
                s = loc.lstat()
        except OSError:
            return None, "working directory does not exist: %s" % cwd
        if not st.S_ISDIR(s.st_mode):
            return None, "working directory is not a directory: %s" % cwd
        return cwd, None

    def _monitor(self, cmd, timeout_ms, files):
        p = cmd.proc
        try:
            if timeout_ms:
                try:
                    p.wait(timeout_ms / 1000.0)
                except subprocess.TimeoutExpired:
                    cmd.killed_by = "timeout"
                    procs.kill_tree(p)
            p.wait()
        finally:
            code, err = procs.exit_info(p.returncode)
            cmd.exit_code, cmd.error = code, err
            cmd.finished_at = go_time_now()
            for fd in files:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.sb.forget_proc(p)
            cmd.done.set()

    # -- POST /command -------------------------------------------------------------

    def run(self, h):
        ok, req = h.read_json_body()
        if not ok:
            return _bad(h, "error parsing request, MAYBE invalid body format. %s" % req)
        if not isinstance(req, dict):
            return _bad(h, "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s into Go value of type model.RunCommandRequest" % jtype(req))
        command = req.get("command")
        cwd_raw = req.get("cwd")
        bg = req.get("background", False)
        timeout = req.get("timeout")
        envs = req.get("envs")
        try:
            if command is not None and not isinstance(command, str):
                raise ValueError("json: cannot unmarshal %s into Go struct field RunCommandRequest.command of type string" % jtype(command))
            if cwd_raw is not None and not isinstance(cwd_raw, str):
                raise ValueError("json: cannot unmarshal %s into Go struct field RunCommandRequest.cwd of type string" % jtype(cwd_raw))
            if bg is None:
                bg = False
            if not isinstance(bg, bool):
                raise ValueError("json: cannot unmarshal %s into Go struct field RunCommandRequest.background of type bool" % jtype(bg))
            if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or (isinstance(timeout, float) and not timeout.is_integer())):
                raise ValueError("json: cannot unmarshal %s into Go struct field RunCommandRequest.timeout of type int64" % jtype(timeout))
            uid = _uint(req.get("uid"), "uid")
            gid = _uint(req.get("gid"), "gid")
            if envs is not None:
                if not isinstance(envs, dict) or any(not isinstance(v, str) for v in envs.values()):
                    raise ValueError("json: cannot unmarshal %s into Go struct field RunCommandRequest.envs of type map[string]string" % jtype(envs))
        except ValueError as e:
            return _bad(h, "error parsing request, MAYBE invalid body format. %s" % e)
        if not command:
            return _bad(h, "invalid request, validation error: Key: 'RunCommandRequest.Command' Error:Field validation for 'Command' failed on the 'required' tag")
        timeout = int(timeout or 0)
        if timeout < 0:
            return _bad(h, "invalid request, validation error: timeout must be non-negative")
        if gid is not None and uid is None:
            return _bad(h, "invalid request, validation error: uid is required when gid is provided")
        cwd = self.sb.execd_cwd()
        if cwd_raw:
            cwd, msg = self.check_cwd(cwd_raw)
            if msg:
                return _bad(h, msg)
        groups_from = None
        if uid is not None:
            pw = None
            try:
                import pwd
                pw = pwd.getpwuid(uid)
            except KeyError:
                pass
            if gid is None:
                gid = pw.pw_gid if pw else uid
            groups_from = pw.pw_name if pw else None
        env = dict(self.sb.execd_env())
        env.update(envs or {})
        self.execute(h, command, cwd, bg, timeout, env, uid, gid, groups_from)

    def execute(self, h, command, cwd, bg, timeout, env, uid=None, gid=None, groups_from=None):
        """Start a command and stream its events on h (the shell runner
        behind /command and /code with language "command")."""
        cid = hex_id()
        cmd = Command(cid, command, bg)
        s = EventStream(h, self.sb)
        s.start()
        s.send("init", text=cid)
        s.ping()
        t0 = time.monotonic()
        try:
            if bg:
                out = _open_tmp(self.fs, cid + ".output", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                files, outs = [out], (out, out)
                readers = []
            else:
                o = _open_tmp(self.fs, cid + ".stdout", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                e = _open_tmp(self.fs, cid + ".stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                ro = _open_tmp(self.fs, cid + ".stdout", os.O_RDONLY)
                re_ = _open_tmp(self.fs, cid + ".stderr", os.O_RDONLY)
                files, outs = [o, e], (o, e)
                readers = [ro, re_]
            argv = ["/bin/bash", "-c", command]
            cmd.proc = procs.run_in_sandbox(self.fs, cwd, argv, env, outs[0], outs[1],
                                            uid=uid, gid=gid, groups_from=groups_from)
        except OSError as e:
            msg = "fork/exec /bin/bash: %s" % os.strerror(e.errno or errno.EIO).lower() if isinstance(e, OSError) else str(e)
            if bg:
                s.write(json_bytes({"code": "RUNTIME_ERROR", "message": "error running commands %s" % msg}))
            else:
                s.write(error_event("CommandExecError", msg, [msg]))
            s.grace()
            return
        # parent copies of the child's output fds
        for fd in files:
            try:
                os.close(fd)
            except OSError:
                pass
        self.sb.track_proc(cmd.proc)
        with self.lock:
            self.commands[cid] = cmd
        threading.Thread(target=self._monitor, args=(cmd, timeout, []), daemon=True).start()
        if bg:
            s.send("execution_complete", execution_time=int((time.monotonic() - t0) * 1000))
            s.grace()
            return
        self._tail_foreground(s, cmd, readers)

    def _tail_foreground(self, s, cmd, readers):
        splitters = [LineSplitter(), LineSplitter()]
        kinds = ["stdout", "stderr"]
        t0 = time.monotonic()
        try:
            while True:
                finished = cmd.done.is_set()
                for i, fd in enumerate(readers):
                    while True:
                        b = os.read(fd, 1 << 16)
                        if not b:
                            break
                        for line in splitters[i].feed(b):
                            s.send(kinds[i], text=line)
                if finished:
                    break
                s.maybe_ping()
                cmd.done.wait(TAIL_EVERY)
            for i in range(2):
                for line in splitters[i].flush():
                    s.send(kinds[i], text=line)
        finally:
            for fd in readers:
                os.close(fd)
        elapsed = int((time.monotonic() - t0) * 1000)
        if cmd.exit_code == 0:
            s.send("execution_complete", execution_time=elapsed)
        else:
            evalue = "-1" if cmd.exit_code == -1 else str(cmd.exit_code)
            s.write(error_event("CommandExecError", evalue, [cmd.error or "exit status %s" % cmd.exit_code]))
        s.grace()

    # -- status / logs / interrupt ------------------------------------------------------

    def status(self, h, cid):
        cmd = self.commands.get(cid)
        if cmd is None:
            return respond_error(h, 404, "INVALID_REQUEST_BODY", "command not found: %s" % cid)
        h.send_json(200, cmd.status_json())

    def logs(self, h, cid):
        cmd = self.commands.get(cid)
        if cmd is None:
            return respond_error(h, 400, "INVALID_REQUEST_BODY", "command not found: %s" % cid)
        if not cmd.background:
            return respond_error(h, 400, "INVALID_REQUEST_BODY", "command %s is not running in background" % cid)
        raw = h.q("cursor")
        cursor = 0
        if re.fullmatch(r"[+-]?[0-9]+", raw or ""):
            cursor = int(raw)
            if cursor < 0:
                return respond_error(h, 400, "INVALID_REQUEST_BODY", "invalid cursor: %s" % raw)
        try:
            fd = _open_tmp(self.fs, cid + ".output", os.O_RDONLY)
        except OSError as e:
            return respond_error(h, 500, "RUNTIME_ERROR", "error reading command output: open /tmp/%s.output: %s" % (cid, os.strerror(e.errno).lower()))
        try:
            size = os.fstat(fd).st_size
            data = b""
            if cursor < size:
                parts, off = [], cursor
                while off < size:
                    b = os.pread(fd, min(1 << 20, size - off), off)
                    if not b:
                        break
                    parts.append(b)
                    off += len(b)
                data = b"".join(parts)
                end = cursor + len(data)
            else:
                end = cursor
        finally:
            os.close(fd)
        h.send_bytes(200, data, "text/plain; charset=utf-8", headers=[("EXECD-COMMANDS-TAIL-CURSOR", str(end))])

    def interrupt(self, h):
        cid = h.q("id")
        if not cid:
            return respond_error(h, 400, "MISSING_QUERY", "missing query parameter 'id'")
        code = self.sb.code
        if code is not None and code.has_context(cid):
            code.interrupt(cid)
            return h.send_empty(200)
        cmd = self.commands.get(cid)
        if cmd is not None:
            if cmd.done.is_set() or cmd.proc is None:
                return respond_error(h, 500, "RUNTIME_ERROR", "error interruptting code context. command session %s is not running" % cid)
            procs.terminate_group(cmd.proc, 3.0)
            cmd.done.wait(5)
            return h.send_empty(200)
        if cid in self.sessions:
            self._delete_session(cid)
            return h.send_empty(200)
        return respond_error(h, 500, "RUNTIME_ERROR", "error interruptting code context. no such session")

    # -- bash sessions ----------------------------------------------------------------------

    def create_session(self, h):
        raw = h.body.read_limited(1 << 20)
        cwd = None
        if raw.strip():
            import json
            try:
                req = json.loads(raw)
            except ValueError as e:
                return _bad(h, "error parsing request, MAYBE invalid body format. %s" % e)
            if req is not None and not isinstance(req, dict):
                return _bad(h, "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s into Go value of type model.CreateSessionRequest" % jtype(req))
            c = (req or {}).get("cwd")
            if c is not None and not isinstance(c, str):
                return _bad(h, "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s into Go struct field CreateSessionRequest.cwd of type string" % jtype(c))
            if c:
                try:
                    cwd = expand_abs(c, self.sb.execd_env(), self.sb.execd_cwd())
                except ExpandError as e:
                    return respond_error(h, 500, "RUNTIME_ERROR", "error creating session. %s" % e)
                from .files_api import FilesAPI
                r = FilesAPI(self.sb).mkdir_all(cwd)
                if r is not None:
                    return respond_error(h, 500, "RUNTIME_ERROR", "error creating session. %s" % r[1])
        sid = uuid_id()
        with self.lock:
            self.sessions[sid] = {"cwd": cwd or self.sb.execd_cwd(), "exports": "", "proc": None,
                                  "lock": threading.Lock()}
        h.send_json(200, {"session_id": sid})

    def delete_session(self, h, sid):
        if sid not in self.sessions:
            return respond_error(h, 404, "CONTEXT_NOT_FOUND", "session %s not found" % sid)
        self._delete_session(sid)
        h.send_empty(200)

    def _delete_session(self, sid):
        with self.lock:
            sess = self.sessions.pop(sid, None)
        if sess and sess["proc"] is not None:
            procs.kill_tree(sess["proc"])

    def run_in_session(self, h, sid):
        ok, req = h.read_json_body()
        if not ok:
            return _bad(h, "error parsing request, MAYBE invalid body format. %s" % req)
        if not isinstance(req, dict):
            return _bad(h, "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s into Go value of type model.RunInSessionRequest" % jtype(req))
        command = req.get("command")
        cwd_raw = req.get("cwd")
        timeout = req.get("timeout")
        if command is not None and not isinstance(command, str):
            return _bad(h, "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s into Go struct field RunInSessionRequest.command of type string" % jtype(command))
        if cwd_raw is not None and not isinstance(cwd_raw, str):
            return _bad(h, "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s into Go struct field RunInSessionRequest.cwd of type string" % jtype(cwd_raw))
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
            return _bad(h, "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s into Go struct field RunInSessionRequest.timeout of type int64" % jtype(timeout))
        if not command:
            return _bad(h, "invalid request, validation error: Key: 'RunInSessionRequest.Command' Error:Field validation for 'Command' failed on the 'required' tag")
        timeout = int(timeout or 0)
        if timeout < 0:
            return _bad(h, "invalid request, validation error: timeout must be non-negative")
        if timeout == 0:
            timeout = 24 * 3600 * 1000
        sess = self.sessions.get(sid)
        if sess is None:
            return respond_error(h, 500, "RUNTIME_ERROR", "error running in session. context not found")
        cwd = None
        if cwd_raw:
            cwd, msg = self.check_cwd(cwd_raw)
            if msg:
                return _bad(h, msg)
        with sess["lock"]:
            self._session_run(h, sid, sess, command, cwd, timeout)

    def _session_run(self, h, sid, sess, command, cwd_override, timeout_ms):
        n = hex_id()
        script_name = "execd-session-%s.sh" % n
        state_name = "execd-session-%s.state" % n
        out_name = "execd-session-%s.out" % n
        start_cwd = cwd_override or sess["cwd"]
        script = "%s\ncd %s 2>/dev/null\n%s\n__osb_rc=$?\n{ export -p; echo __OSB_PWD__; pwd; } > /tmp/%s 2>/dev/null\nexit $__osb_rc\n" % (
            sess["exports"], shlex.quote(start_cwd), command, state_name)
        s = EventStream(h, self.sb)
        try:
            fd = _open_tmp(self.fs, script_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                os.write(fd, script.encode("utf-8", "surrogateescape"))
            finally:
                os.close(fd)
            out = _open_tmp(self.fs, out_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            rd = _open_tmp(self.fs, out_name, os.O_RDONLY)
        except OSError as e:
            return respond_error(h, 500, "RUNTIME_ERROR", "error running in session. %s" % e)
        s.start()
        s.send("init", text=sid)
        s.ping()
        try:
            env = dict(self.sb.execd_env())
            try:
                proc = procs.run_in_sandbox(self.fs, "/", ["/bin/bash", "--noprofile", "--norc", "/tmp/" + script_name],
                                            env, out, out)
            finally:
                os.close(out)
            sess["proc"] = proc
            self.sb.track_proc(proc)
            t0 = time.monotonic()
            deadline = t0 + timeout_ms / 1000.0
            sp = LineSplitter()
            timed_out = False
            while True:
                done = proc.poll() is not None
                while True:
                    b = os.read(rd, 1 << 16)
                    if not b:
                        break
                    for line in sp.feed(b):
                        if line != "\n" and line.strip() != "":
                            s.send("stdout", text=line)
                if done:
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    procs.kill_tree(proc)
                    proc.wait()
                    break
                s.maybe_ping()
                time.sleep(TAIL_EVERY)
            for line in sp.flush():
                if line.strip():
                    s.send("stdout", text=line)
            self.sb.forget_proc(proc)
            sess["proc"] = None
            if timed_out:
                s.write(json_bytes({"code": "RUNTIME_ERROR", "message": "error running in session. timeout after %s" % go_duration(timeout_ms)}))
                return
            self._load_session_state(sess, state_name)
            rc = proc.returncode
            code, err = procs.exit_info(rc)
            if code == 0:
                s.send("execution_complete", execution_time=int((time.monotonic() - t0) * 1000))
            else:
                s.write(error_event("CommandExecError", str(code), [err]))
            s.grace()
        finally:
            os.close(rd)
            for name in (script_name, state_name, out_name):
                try:
                    dfd = os.open(self.fs.tmp_host(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    try:
                        os.unlink(name, dir_fd=dfd)
                    finally:
                        os.close(dfd)
                except OSError:
                    pass

    def _load_session_state(self, sess, state_name):
        try:
            fd = _open_tmp(self.fs, state_name, os.O_RDONLY)
        except OSError:
            return
        try:
            if not st.S_ISREG(os.fstat(fd).st_mode):
                return
            data = os.read(fd, 4 << 20).decode("utf-8", "surrogateescape")
        finally:
            os.close(fd)
        if "\n__OSB_PWD__\n" not in data:
            return
        exports, _, rest = data.rpartition("\n__OSB_PWD__\n")
        pwd = rest.strip("\n")
        lines = [l for l in exports.split("\n")
                 if not re.match(r"declare -[a-zA-Z-]* (PWD|OLDPWD|SHLVL|_)(=|$)", l)]
        sess["exports"] = "\n".join(lines)
        if pwd:
            sess["cwd"] = pwd

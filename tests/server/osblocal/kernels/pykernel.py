# Python "kernel" for execd code contexts: run inside the sandbox as
# `python3 -u -c <this source>`.  Requests arrive as JSON lines on fd
# OSB_KFD_IN; events go as JSON lines to fd OSB_KFD_OUT; the code's own
# stdout/stderr are the process's fds 1 and 2 (piped to the server).
import ast, json, os, signal, sys, traceback
_in = os.fdopen(int(os.environ["OSB_KFD_IN"]), "r", encoding="utf-8")
_out = os.fdopen(int(os.environ["OSB_KFD_OUT"]), "w", encoding="utf-8", buffering=1)
for _k in ("OSB_KFD_IN", "OSB_KFD_OUT"):
    os.environ.pop(_k, None)
signal.signal(signal.SIGINT, signal.default_int_handler)
_g = {"__name__": "__main__", "__builtins__": __builtins__}
_n = 0


def _emit(**d):
    _out.write(json.dumps(d) + "\n")
    _out.flush()


for _line in _in:
    try:
        _req = json.loads(_line)
    except ValueError:
        continue
    _n += 1
    _emit(type="execution_count", n=_n)
    try:
        try:
            _tree = ast.parse(_req.get("code", ""), "<cell-%d>" % _n, "exec")
            _last = None
            if _tree.body and isinstance(_tree.body[-1], ast.Expr):
                _last = ast.Expression(_tree.body.pop().value)
            exec(compile(_tree, "<cell-%d>" % _n, "exec"), _g)
            _v = eval(compile(_last, "<cell-%d>" % _n, "eval"), _g) if _last is not None else None
            sys.stdout.flush()
            sys.stderr.flush()
            if _v is not None:
                _g["_"] = _v
                _emit(type="result", text=repr(_v))
            _emit(type="done", ok=True)
        except BaseException as _e:  # KeyboardInterrupt, SystemExit too
            sys.stdout.flush()
            sys.stderr.flush()
            _tb = traceback.format_exception(type(_e), _e, _e.__traceback__)
            _tb = [l.rstrip("\n") for l in _tb if not l.startswith('  File "<string>"')]
            _emit(type="error", ename=type(_e).__name__, evalue=str(_e), traceback=_tb)
            _emit(type="done", ok=False)
    except KeyboardInterrupt:
        _emit(type="error", ename="KeyboardInterrupt", evalue="", traceback=["KeyboardInterrupt"])
        _emit(type="done", ok=False)

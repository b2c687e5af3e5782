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


def _bundle(v):
    """The value's other MIME types, as Jupyter's display formatter gives
    them: _repr_png_/_repr_html_/..., and a matplotlib figure as PNG."""
    import base64
    out = {}
    for meth, mime in (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"),
                       ("_repr_svg_", "image/svg+xml"), ("_repr_html_", "text/html"),
                       ("_repr_markdown_", "text/markdown"), ("_repr_json_", "application/json")):
        f = getattr(type(v), meth, None)
        if f is None:
            continue
        try:
            d = f(v)
        except Exception:
            continue
        if d is None:
            continue
        if isinstance(d, bytes):
            d = base64.b64encode(d).decode("ascii")
        out[mime] = d
    if "image/png" not in out and type(v).__module__.startswith("matplotlib"):
        fig = getattr(v, "figure", None) or v
        if hasattr(fig, "savefig"):
            import io
            b = io.BytesIO()
            fig.savefig(b, format="png")
            out["image/png"] = base64.b64encode(b.getvalue()).decode("ascii")
    return out


def _show_figures(shown):
    """The figures a cell left open, each as a result and then closed, as
    IPython's inline backend shows them at the end of a cell."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for n in plt.get_fignums():
        fig = plt.figure(n)
        if fig is not shown:
            _emit(type="result", text=repr(fig), data=_bundle(fig))
    plt.close("all")


os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("MPLCONFIGDIR", "/tmp/.matplotlib")
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
                _emit(type="result", text=repr(_v), data=_bundle(_v))
            _show_figures(_v)
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

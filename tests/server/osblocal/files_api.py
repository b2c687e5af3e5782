"""execd's filesystem API (docs/SERVER.md §5): /files/*, /directories.

Messages follow execd's controller code (handleFileError: ENOENT -> 404
FILE_NOT_FOUND "file not found. <err>", anything else -> 500 RUNTIME_ERROR
"error accessing file: <err>"), with Go's os.PathError texts.  Every path is
resolved by sandboxfs in the sandbox's own namespace.
"""

import email.utils
import errno
import os
import re
import ssl
import stat as st
import threading
import time
import urllib.parse

from . import multipart
from .httpbase import AbortConnection
from .pathutil import ExpandError, expand_abs, expand_path, go_clean
from .sandboxfs import file_info, lookup_group, lookup_user
from .util import errtext, go_time_now, json_bytes


def respond_error(h, status, code, message=None):
    body = {"code": code}
    if message:
        body["message"] = message
    h.send_json(status, body)


def file_error(h, e, detail):
    if isinstance(e, OSError) and e.errno == errno.ENOENT:
        respond_error(h, 404, "FILE_NOT_FOUND", "file not found. %s" % detail)
    else:
        respond_error(h, 500, "RUNTIME_ERROR", "error accessing file: %s" % detail)


def perr(op, path, e):
    return "%s %s: %s" % (op, path, errtext(e))


def bind_error(h, err):
    respond_error(h, 400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. %s" % err)


class Perm:
    __slots__ = ("owner", "group", "mode")

    def __init__(self, owner="", group="", mode=0):
        self.owner, self.group, self.mode = owner, group, mode


def decode_perm(v, what="Permission"):
    """Go json.Unmarshal into model.Permission; returns Perm or raises ValueError."""
    if v is None:
        return Perm()
    if not isinstance(v, dict):
        raise ValueError("json: cannot unmarshal %s into Go value of type model.%s" % (jtype(v), what))
    p = Perm()
    for k, field in (("owner", "owner"), ("group", "group")):
        x = v.get(k)
        if x is None:
            continue
        if not isinstance(x, str):
            raise ValueError("json: cannot unmarshal %s into Go struct field %s.%s of type string" % (jtype(x), what, k))
        setattr(p, field, x)
    m = v.get("mode")
    if m is not None:
        if isinstance(m, bool) or not isinstance(m, int):
            if isinstance(m, float) and m.is_integer():
                m = int(m)
            else:
                raise ValueError("json: cannot unmarshal %s into Go struct field %s.mode of type int" % (jtype(m), what))
        p.mode = m
    return p


def jtype(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


def raw_json_string(b):
    """bytes -> a JSON string literal holding those very bytes (invalid
    UTF-8 included), as a hostile execd could send."""
    out = bytearray(b'"')
    for c in b:
        if c in (0x22, 0x5C):
            out += b"\\" + bytes([c])
        elif c < 0x20:
            out += b"\\u%04x" % c
        else:
            out.append(c)
    return bytes(out + b'"')


class FilesAPI:
    def __init__(self, sb):
        self.sb = sb
        self.fs = sb.fs
        self.inject_lock = threading.Lock()
        self.injected = {}  # directory -> [name bytes] for its next listing

    def inject_names(self, directory, names):
        """Test hook (POST /_admin/sandboxes/{id}/listing): the next
        /directories/list of directory also lists names (bytes, sent as they
        are), as the execd of a hostile sandbox could answer."""
        with self.inject_lock:
            self.injected[directory] = list(names)

    # helpers ---------------------------------------------------------------

    def env(self):
        return self.sb.execd_env()

    def cwd(self):
        return self.sb.execd_cwd()

    def abs(self, p):
        return expand_abs(p, self.env(), self.cwd())

    def raw(self, p):
        """ExpandPath without Abs; relative paths are relative to execd's cwd
        for the kernel, so join (without cleaning) for the resolver."""
        e = expand_path(p, self.env())
        if not e.startswith("/"):
            e = self.cwd().rstrip("/") + "/" + e
        return e

    def chmod_file(self, spath, perm):
        """execd's ChmodFile (docs/SERVER.md §5.9).  Returns None or an
        error text."""
        try:
            a = self.abs(spath)
        except ExpandError as e:
            return str(e)
        if perm.mode != 0:
            digits = str(perm.mode)
            if not re.fullmatch(r"[0-7]+", digits):
                return 'strconv.ParseUint: parsing "%s": invalid syntax' % digits
            mode = int(digits, 8)
            if mode >= 1 << 32:
                return 'strconv.ParseUint: parsing "%s": value out of range' % digits
            try:
                with self.fs.resolve(a, follow=True) as loc:
                    self.fs.chmod(loc, mode & 0o777)
            except OSError as e:
                return perr("chmod", a, e)
        uid = gid = -1
        if perm.owner:
            u = lookup_user(perm.owner)
            if u is not None:
                uid = u[0]
        if perm.group:
            g = lookup_group(perm.group)
            if g is not None:
                gid = g
        if uid == -1 and gid == -1:
            uid, gid = os.getuid(), os.getgid()
        try:
            with self.fs.resolve(a, follow=True) as loc:
                self.fs.chown(loc, uid, gid)
        except OSError as e:
            return perr("chown", a, e)
        return None

    def mkdir_all(self, spath):
        """os.MkdirAll(spath, 0777); returns None or (errno, error text)."""
        p = go_clean(spath) if spath.startswith("/") else go_clean(self.cwd() + "/" + spath)
        try:
            with self.fs.resolve(p, follow=True) as loc:
                s = loc.lstat()
                if st.S_ISDIR(s.st_mode):
                    return None
                return errno.ENOTDIR, perr("mkdir", p, errno.ENOTDIR)
        except FileNotFoundError:
            pass
        except OSError as e:
            if e.errno != errno.ENOENT:
                return e.errno, perr("mkdir", p, e)
        try:
            self.fs.makedirs(p)
        except OSError as e:
            return e.errno, perr("mkdir", getattr(e, "spath", None) or p, e)
        return None

    # GET /files/info --------------------------------------------------------

    def info(self, h):
        paths = h.qall("path")
        resp = {}
        for p in paths:
            try:
                a = self.abs(p)
            except ExpandError as e:
                return file_error(h, None, "invalid path %s: %s" % (p, e))
            try:
                with self.fs.resolve(a, follow=False) as loc:
                    s = loc.lstat()
            except OSError as e:
                if e.errno == errno.ENOENT:
                    return file_error(h, e, "file not found: %s: %s" % (p, perr("lstat", a, e)))
                return file_error(h, e, "error accessing file %s: %s" % (p, perr("lstat", a, e)))
            resp[p] = file_info(a, s)
        h.send_json(200, resp)

    # DELETE /files -----------------------------------------------------------

    def delete_files(self, h):
        for p in h.qall("path"):
            try:
                a = self.abs(p)
            except ExpandError as e:
                return respond_error(h, 500, "RUNTIME_ERROR", "error removing file %s. invalid path: %s" % (p, e))
            try:
                with self.fs.resolve(a, follow=True) as loc:
                    s = loc.lstat()
            except OSError as e:
                if e.errno == errno.ENOENT:
                    continue
                return respond_error(h, 500, "RUNTIME_ERROR", "error removing file %s. %s" % (p, perr("stat", a, e)))
            if st.S_ISDIR(s.st_mode):
                return respond_error(h, 500, "RUNTIME_ERROR", "error removing file %s. path is a directory: %s" % (p, p))
            try:
                with self.fs.resolve(a, follow=False) as loc:
                    self.fs.unlink(loc)
            except OSError as e:
                return respond_error(h, 500, "RUNTIME_ERROR", "error removing file %s. failed to remove file: %s" % (p, perr("remove", a, e)))
        h.send_empty(200)

    # POST /files/permissions -------------------------------------------------

    def _perm_map(self, h):
        ok, req = h.read_json_body()
        if not ok:
            bind_error(h, req)
            return None
        if req is None:
            return {}
        if not isinstance(req, dict):
            bind_error(h, "json: cannot unmarshal %s into Go value of type map[string]model.Permission" % jtype(req))
            return None
        out = {}
        try:
            for k, v in req.items():
                out[k] = decode_perm(v)
        except ValueError as e:
            bind_error(h, e)
            return None
        return out

    def permissions(self, h):
        req = self._perm_map(h)
        if req is None:
            return
        for p, perm in req.items():
            err = self.chmod_file(p, perm)
            if err:
                return respond_error(h, 500, "RUNTIME_ERROR", "error changing permissions for %s. %s" % (p, err))
        h.send_empty(200)

    # POST /files/mv ------------------------------------------------------------

    def move(self, h):
        ok, req = h.read_json_body()
        if not ok:
            return bind_error(h, req)
        if req is None:
            req = []
        if not isinstance(req, list):
            return bind_error(h, "json: cannot unmarshal %s into Go value of type []model.RenameFileItem" % jtype(req))
        items = []
        for it in req:
            if it is None:
                it = {}
            if not isinstance(it, dict):
                return bind_error(h, "json: cannot unmarshal %s into Go value of type model.RenameFileItem" % jtype(it))
            src, dst = it.get("src"), it.get("dest")
            for name, v in (("src", src), ("dest", dst)):
                if v is not None and not isinstance(v, str):
                    return bind_error(h, "json: cannot unmarshal %s into Go struct field RenameFileItem.%s of type string" % (jtype(v), name))
            items.append((src or "", dst or ""))
        for src, dst in items:
            try:
                sa = self.abs(src)
            except ExpandError as e:
                return file_error(h, None, "invalid source path: %s" % e)
            try:
                da = self.abs(dst)
            except ExpandError as e:
                return file_error(h, None, "invalid destination path: %s" % e)
            try:
                with self.fs.resolve(sa, follow=True) as loc:
                    loc.lstat()
            except OSError as e:
                if e.errno == errno.ENOENT:
                    return file_error(h, e, "source path not found: %s: %s" % (src, perr("stat", sa, e)))
            dstdir = os.path.dirname(da) or "/"
            r = self.mkdir_all(dstdir)
            if r is not None:
                return file_error(h, None, "failed to create destination directory: %s" % r[1])
            exists = True
            try:
                with self.fs.resolve(da, follow=True) as loc:
                    loc.lstat()
            except OSError:
                exists = False
            if exists:
                return file_error(h, None, "destination path already exists: %s" % dst)
            try:
                with self.fs.resolve(sa, follow=False) as sl, self.fs.resolve(da, follow=False) as dl:
                    self.fs.rename(sl, dl)
            except OSError as e:
                return file_error(h, e, "failed to rename file: rename %s %s: %s" % (sa, da, errtext(e)))
        h.send_empty(200)

    # GET /files/search -----------------------------------------------------------

    def search(self, h):
        p = h.q("path")
        if p == "":
            return respond_error(h, 400, "MISSING_QUERY", "missing query parameter 'path'")
        try:
            a = self.abs(p)
        except ExpandError as e:
            return respond_error(h, 500, "RUNTIME_ERROR", "error converting path %s to absolute. %s" % (p, e))
        try:
            with self.fs.resolve(a, follow=True) as loc:
                loc.lstat()
        except OSError as e:
            return file_error(h, e, perr("stat", a, e))
        pattern = h.q("pattern") or "**"
        try:
            rx = glob_regex(pattern)
        except ValueError:
            rx = None
        out = []
        try:
            with self.fs.resolve(a, follow=False) as loc:
                s = loc.lstat()
                if not st.S_ISDIR(s.st_mode):
                    self._search_match(pattern, rx, a, s, out)
                else:
                    fd = self.fs.open_dir(loc)
                    try:
                        self._walk(fd, a, pattern, rx, out)
                    finally:
                        os.close(fd)
        except SearchError as e:
            return respond_error(h, 500, "RUNTIME_ERROR", "error searching files. %s" % e)
        except OSError as e:
            if e.errno != errno.ENOENT:
                return respond_error(h, 500, "RUNTIME_ERROR", "error searching files. error accessing path %s: %s" % (a, perr("lstat", a, e)))
        h.send_json(200, out)

    def _search_match(self, pattern, rx, spath, s, out):
        if rx is None:
            raise SearchError("invalid pattern %s: syntax error in pattern" % pattern)
        name = spath.rsplit("/", 1)[-1]
        if rx.fullmatch(name):
            out.append(file_info(spath, s))

    def _walk(self, dfd, dpath, pattern, rx, out):
        try:
            names = sorted(os.listdir(dfd))
        except OSError as e:
            raise SearchError("error accessing path %s: %s" % (dpath, perr("open", dpath, e)))
        for name in names:
            try:
                s, cp = self.fs.child_lstat(dfd, dpath, name)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise SearchError("error accessing path %s: %s" % (dpath, perr("lstat", dpath + "/" + name, e)))
            if st.S_ISDIR(s.st_mode):
                try:
                    cfd = self.fs.child_dir_fd(dfd, dpath, name)
                except FileNotFoundError:
                    continue
                except OSError as e:
                    raise SearchError("error accessing path %s: %s" % (cp, perr("open", cp, e)))
                try:
                    self._walk(cfd, cp, pattern, rx, out)
                finally:
                    os.close(cfd)
            else:
                self._search_match(pattern, rx, cp, s, out)

    # POST /files/replace ----------------------------------------------------------

    def replace(self, h):
        verbose = h.q("verbose") == "true"
        ok, req = h.read_json_body()
        if not ok:
            return bind_error(h, req)
        if req is None:
            req = {}
        if not isinstance(req, dict):
            return bind_error(h, "json: cannot unmarshal %s into Go value of type map[string]model.ReplaceFileContentItem" % jtype(req))
        items = []
        for k, v in req.items():
            if v is None:
                v = {}
            if not isinstance(v, dict):
                return bind_error(h, "json: cannot unmarshal %s into Go value of type model.ReplaceFileContentItem" % jtype(v))
            old, new = v.get("old"), v.get("new")
            for name, x in (("old", old), ("new", new)):
                if x is not None and not isinstance(x, str):
                    return bind_error(h, "json: cannot unmarshal %s into Go struct field ReplaceFileContentItem.%s of type string" % (jtype(x), name))
            items.append((k, old or "", new or ""))
        results = {}
        for orig, old, new in items:
            try:
                a = self.abs(orig)
            except ExpandError as e:
                return file_error(h, None, str(e))
            try:
                with self.fs.resolve(a, follow=True) as loc:
                    s = loc.lstat()
                    if st.S_ISDIR(s.st_mode):
                        raise OSError(errno.EISDIR, "is a directory")
                    fd = self.fs.open_read(loc)
                    try:
                        os.set_blocking(fd, True)
                        chunks = []
                        while True:
                            b = os.read(fd, 1 << 20)
                            if not b:
                                break
                            chunks.append(b)
                    finally:
                        os.close(fd)
            except OSError as e:
                op = "read" if e.errno == errno.EISDIR else "stat"
                return file_error(h, e, perr(op, a, e))
            if old == "":
                return respond_error(h, 400, "INVALID_REQUEST_BODY", "old content must not be empty")
            content = b"".join(chunks)
            ob, nb = old.encode(), new.encode()
            count = content.count(ob)
            data = content.replace(ob, nb)
            try:
                with self.fs.resolve(a, follow=True) as loc:
                    fd = self.fs.open_write_trunc(loc, s.st_mode & 0o777)
                    try:
                        mv = memoryview(data)
                        while mv:
                            n = os.write(fd, mv)
                            mv = mv[n:]
                    finally:
                        os.close(fd)
            except OSError as e:
                return file_error(h, e, perr("open", a, e))
            if verbose:
                results[orig] = {"replacedCount": count}
        if verbose:
            h.send_json(200, results)
        else:
            h.send_empty(200)

    # POST /files/upload -----------------------------------------------------------

    def upload(self, h):
        boundary = multipart.boundary_of(h.headers.get("Content-Type", ""))
        if boundary is None:
            return respond_error(h, 400, "INVALID_FILE", "multipart form is empty")
        try:
            parts = multipart.parse(h.body, boundary, self.fs.tmp_host())
        except multipart.MultipartError:
            h.close_connection = True
            return respond_error(h, 400, "INVALID_FILE", "multipart form is empty")
        try:
            metas = [p for p in parts if p.name == "metadata"]
            files = [p for p in parts if p.name == "file"]
            if not metas:
                return respond_error(h, 400, "INVALID_FILE_METADATA", "metadata file is missing")
            if not files:
                return respond_error(h, 400, "INVALID_FILE_CONTENT", "file is missing")
            if len(metas) != len(files):
                return respond_error(h, 400, "INVALID_FILE", "metadata and file count mismatch: %d vs %d" % (len(metas), len(files)))
            for m, f in zip(metas, files):
                err = self._upload_pair(m, f)
                if err:
                    return respond_error(h, *err)
            h.send_empty(200)
        finally:
            for p in parts:
                p.cleanup()

    def _upload_pair(self, m, f):
        import json
        raw = m.content(4 << 20)
        try:
            meta = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            return 400, "INVALID_FILE_METADATA", "invalid metadata format. %s" % e
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            return 400, "INVALID_FILE_METADATA", "invalid metadata format. json: cannot unmarshal %s into Go value of type model.FileMetadata" % jtype(meta)
        path = meta.get("path")
        if path is not None and not isinstance(path, str):
            return 400, "INVALID_FILE_METADATA", "invalid metadata format. json: cannot unmarshal %s into Go struct field FileMetadata.path of type string" % jtype(path)
        try:
            perm = decode_perm(meta, "FileMetadata")
        except ValueError as e:
            return 400, "INVALID_FILE_METADATA", "invalid metadata format. %s" % e
        if not path:
            return 400, "INVALID_FILE_METADATA", "metadata path is empty"
        try:
            target = self.raw(path)
        except ExpandError as e:
            return 500, "RUNTIME_ERROR", "error resolving target path %s. %s" % (path, e)
        shown = expand_path(path, self.env())
        tdir = os.path.dirname(go_clean(target)) or "/"
        r = self.mkdir_all(tdir)
        if r is not None:
            return 500, "RUNTIME_ERROR", "error creating target directory %s. %s" % (os.path.dirname(go_clean(shown)) or ".", r[1])
        try:
            with self.fs.resolve(target, follow=True) as loc:
                if self._adopt_spool(loc, f):
                    fd = None
                else:
                    fd = self.fs.open_write_trunc(loc, 0o777)
                if fd is not None:
                    try:
                        try:
                            f.copy_to(fd)
                        except OSError as e:
                            return 500, "RUNTIME_ERROR", "error copying file %s. %s" % (shown, perr("write", shown, e))
                        try:
                            os.fsync(fd)
                        except OSError:
                            pass
                    finally:
                        os.close(fd)
                try:
                    pfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=loc.dirfd)
                    try:
                        os.fsync(pfd)
                    finally:
                        os.close(pfd)
                except OSError:
                    pass
        except OSError as e:
            return 500, "RUNTIME_ERROR", "error opening destination file %s. %s" % (shown, perr("open", shown, e))
        err = self.chmod_file(target, perm)
        if err:
            err = self.chmod_file(target, perm)
        if err:
            return 500, "RUNTIME_ERROR", "error chmoding file %s. %s" % (shown, err)
        return None

    def _adopt_spool(self, loc, part):
        """Performance shortcut for a NEW target: rename the spooled temp
        file into place instead of copying it (an existing target is
        truncated and rewritten in place, as execd does).  The result is
        the same file: created 0777&^umask, data fsynced."""
        if part.fd is None or not part.path or not loc.writable:
            return False
        try:
            loc.lstat()
            return False
        except FileNotFoundError:
            pass
        except OSError:
            return False
        try:
            os.fsync(part.fd)
            os.fchmod(part.fd, 0o777 & ~current_umask())
            tdir = os.open(self.fs.tmp_host(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.rename(os.path.basename(part.path), loc.name, src_dir_fd=tdir, dst_dir_fd=loc.dirfd)
            finally:
                os.close(tdir)
        except OSError:
            return False
        part.path = None
        return True

    # GET /files/download ------------------------------------------------------------

    def download(self, h):
        p = h.q("path")
        if p == "":
            return respond_error(h, 400, "MISSING_QUERY", "missing query parameter 'path'")
        try:
            target = self.raw(p)
            shown = expand_path(p, self.env())
        except ExpandError as e:
            return respond_error(h, 500, "RUNTIME_ERROR", "error resolving file path: %s. %s" % (p, e))
        try:
            with self.fs.resolve(target, follow=True) as loc:
                s = loc.lstat()
                if st.S_ISDIR(s.st_mode):
                    return respond_error(h, 500, "RUNTIME_ERROR", "error accessing file: %s" % perr("read", shown, errno.EISDIR))
                fd = self.fs.open_read(loc)
        except OSError as e:
            return file_error(h, e, perr("open", shown, e))
        try:
            os.set_blocking(fd, True)
            s = os.fstat(fd)
            size = s.st_size if st.S_ISREG(s.st_mode) else 0
            base = os.path.basename(go_clean(shown)) or "/"
            headers = [("Content-Type", "application/octet-stream"),
                       ("Content-Disposition", content_disposition(base))]
            rng = h.headers.get("Range")
            if rng:
                ranges = parse_range(rng, size)
                if ranges is None:
                    # execd answers 416 {"code":"UNKNOWN"} but with the file's
                    # Content-Length already set: the body is short and the
                    # connection dies.  Reproduce: declare size, send the JSON,
                    # close.
                    body = b'{"code":"UNKNOWN"}'
                    h.started = True
                    h.close_connection = True
                    h.send_response(416)
                    for k, v in headers:
                        h.send_header(k, v)
                    h.send_header("Content-Length", str(max(size, len(body))))
                    h.end_headers()
                    h.wfile.write(body)
                    if size > len(body):
                        raise ConnectionAbortedError()
                    return
                if ranges:
                    start, length = ranges[0]
                    h.started = True
                    h.send_response(206)
                    for k, v in headers:
                        h.send_header(k, v)
                    h.send_header("Content-Range", "bytes %d-%d/%d" % (start, start + length - 1, size))
                    h.send_header("Content-Length", str(length))
                    h.end_headers()
                    send_file(h, fd, start, length)
                    return
                # every spec unsatisfiable: http.ServeContent answers 416
                body = b"invalid range: failed to overlap\n"
                h.send_bytes(416, body, "text/plain; charset=utf-8",
                             headers=[("Content-Range", "bytes */%d" % size), ("X-Content-Type-Options", "nosniff")])
                return
            lm = email.utils.formatdate(s.st_mtime, usegmt=True)
            ims = h.headers.get("If-Modified-Since")
            if ims:
                try:
                    t = email.utils.parsedate_to_datetime(ims).timestamp()
                    if int(s.st_mtime) <= t:
                        h.send_bytes(304, b"", None, headers=[("Last-Modified", lm)])
                        return
                except (TypeError, ValueError):
                    pass
            h.started = True
            h.send_response(200)
            for k, v in headers:
                h.send_header(k, v)
            h.send_header("Accept-Ranges", "bytes")
            h.send_header("Last-Modified", lm)
            h.send_header("Content-Length", str(size))
            h.end_headers()
            if h.command != "HEAD":
                send_file(h, fd, 0, size)
        finally:
            os.close(fd)

    # GET /directories/list ---------------------------------------------------------

    def list_dir(self, h):
        p = h.q("path")
        if p == "":
            return respond_error(h, 400, "MISSING_QUERY", "missing query parameter 'path'")
        depth = 1
        raw = h.q("depth")
        if raw != "":
            if not re.fullmatch(r"[+-]?[0-9]+", raw) or int(raw) < 0:
                return respond_error(h, 400, "INVALID_REQUEST_BODY", "invalid query parameter 'depth': %s" % raw)
            depth = int(raw)
        try:
            a = self.abs(p)
        except ExpandError as e:
            return respond_error(h, 500, "RUNTIME_ERROR", "error converting path %s to absolute. %s" % (p, e))
        try:
            with self.fs.resolve(a, follow=False) as loc:
                s = loc.lstat()
                if st.S_ISLNK(s.st_mode):
                    return respond_error(h, 400, "INVALID_REQUEST_BODY", "path is a symbolic link, refusing to traverse: %s" % a)
                if not st.S_ISDIR(s.st_mode):
                    return respond_error(h, 400, "INVALID_REQUEST_BODY", "path is not a directory: %s" % a)
                out = []
                if depth > 0:
                    fd = self.fs.open_dir(loc)
                    try:
                        self._list(fd, a, 0, depth, out)
                    finally:
                        os.close(fd)
        except ListError as e:
            return respond_error(h, 500, "RUNTIME_ERROR", "error listing directory %s. %s" % (a, e))
        except OSError as e:
            return file_error(h, e, perr("lstat", a, e))
        with self.inject_lock:
            extra = self.injected.pop(a, None)
        if not extra:
            return h.send_json(200, out)
        body = json_bytes(out)[:-1]
        for name in extra:
            e = json_bytes({"path": "@", "type": "file", "size": 1, "modified_at": go_time_now(),
                            "created_at": go_time_now(), "owner": "root", "group": "root", "mode": 644})
            path = raw_json_string((a.rstrip("/") + "/").encode() + name)
            body += (b"," if len(body) > 1 else b"") + e.replace(b'"@"', path, 1)
        h.send_bytes(200, body + b"]", h.json_ctype)

    def _list(self, dfd, dpath, cur, maxd, out):
        try:
            names = sorted(os.listdir(dfd))
        except OSError as e:
            raise ListError(perr("open", dpath, e))
        for name in names:
            try:
                s, cp = self.fs.child_lstat(dfd, dpath, name)
            except OSError as e:
                raise ListError(perr("lstat", (dpath.rstrip("/") + "/" + name), e))
            out.append(file_info(cp, s))
            if st.S_ISDIR(s.st_mode) and cur + 1 < maxd:
                try:
                    cfd = self.fs.child_dir_fd(dfd, dpath, name)
                except OSError as e:
                    raise ListError(perr("open", cp, e))
                try:
                    self._list(cfd, cp, cur + 1, maxd, out)
                finally:
                    os.close(cfd)

    # POST /directories ----------------------------------------------------------------

    def make_dirs(self, h):
        req = self._perm_map(h)
        if req is None:
            return
        for p, perm in req.items():
            try:
                a = self.abs(p)
            except ExpandError as e:
                return file_error(h, None, str(e))
            r = self.mkdir_all(a)
            if r is not None:
                return file_error(h, OSError(r[0], ""), r[1])
            err = self.chmod_file(a, perm)
            if err:
                return file_error(h, None, err)
        h.send_empty(200)

    # DELETE /directories ----------------------------------------------------------------

    def remove_dirs(self, h):
        for p in h.qall("path"):
            try:
                target = self.raw(p)
                shown = expand_path(p, self.env())
            except ExpandError as e:
                return respond_error(h, 500, "RUNTIME_ERROR", "error resolving directory %s. %s" % (p, e))
            if shown == "":
                continue
            if shown == "." or shown.endswith("/.") or shown == "..":
                return respond_error(h, 500, "RUNTIME_ERROR", "error removing directory %s. RemoveAll %s: invalid argument" % (p, shown))
            try:
                with self.fs.resolve(target.rstrip("/") or "/", follow=False) as loc:
                    self.fs.rmtree(loc)
            except OSError as e:
                if e.errno == errno.ENOENT:
                    continue
                return respond_error(h, 500, "RUNTIME_ERROR", "error removing directory %s. %s" % (p, perr("unlinkat", shown, e)))
        h.send_empty(200)


def current_umask():
    return 0o022  # set once by the entry script


class SearchError(Exception):
    pass


class ListError(Exception):
    pass


def content_disposition(name):
    if all(ord(c) < 128 for c in name):
        return 'attachment; filename="%s"' % name
    enc = urllib.parse.quote(name, safe="!$&'()*+,;=:@~")
    return "attachment; filename=\"%s\"; filename*=UTF-8''%s" % (enc, enc)


def parse_range(s, size):
    """execd's ParseRange: list of (start, length), or None when malformed."""
    if not s.startswith("bytes="):
        return None
    out = []
    for ra in s[6:].split(","):
        ra = ra.strip()
        if ra == "":
            continue
        i = ra.find("-")
        if i < 0:
            return None
        start, end = ra[:i].strip(), ra[i + 1:].strip()
        if start == "":
            if not re.fullmatch(r"[+-]?[0-9]+", end):
                return None
            n = int(end)
            if n < 0:
                return None
            n = min(n, size)
            r0, rl = size - n, n
        else:
            if not re.fullmatch(r"[+-]?[0-9]+", start):
                return None
            a = int(start)
            if a < 0:
                return None
            if end == "":
                r0, rl = a, size - a
            else:
                if not re.fullmatch(r"[+-]?[0-9]+", end):
                    return None
                b = int(end)
                if b < a:
                    return None
                r0, rl = a, b - a + 1
        if r0 >= size:
            continue
        if r0 + rl > size:
            rl = size - r0
        out.append((r0, rl))
    return out


def send_file(h, fd, offset, count):
    """Send count bytes of fd from offset: sendfile(2) on plain sockets.
    Under a "cut" fault, only the first half, then an RST after a pause."""
    if count <= 0:
        return
    if h.cut_ms is not None:
        send_file_bytes(h, fd, offset, max(1, count // 2))
        h.wfile.flush()
        time.sleep(h.cut_ms / 1000.0)
        raise AbortConnection()
    send_file_bytes(h, fd, offset, count)


def send_file_bytes(h, fd, offset, count):
    w = h.wfile
    if hasattr(w, "flush"):
        w.flush()
    sock = h.connection
    if not isinstance(sock, ssl.SSLSocket) and not getattr(h, "null_output", False):
        with open(fd, "rb", buffering=0, closefd=False) as f:
            sent = sock.sendfile(f, offset, count)
        if sent < count:
            raise ConnectionAbortedError("file shrank during download")
        return
    sent = 0
    while sent < count:
        b = os.pread(fd, min(1 << 20, count - sent), offset + sent)
        if not b:
            raise ConnectionAbortedError("file shrank during download")
        w.write(b)
        sent += len(b)


def glob_regex(pattern):
    """doublestar pattern -> compiled regex matched against a base name.
    Raises ValueError for a malformed pattern (ErrBadPattern)."""
    i, n = 0, len(pattern)
    out = []
    depth = 0
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 1
            if i >= n:
                raise ValueError("bad pattern")
            out.append(re.escape(pattern[i]))
        elif c == "*":
            while i + 1 < n and pattern[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            neg = False
            if j < n and pattern[j] in "!^":
                neg = True
                j += 1
            cls = []
            first = True
            while j < n and (pattern[j] != "]" or first):
                ch = pattern[j]
                if ch == "\\":
                    j += 1
                    if j >= n:
                        raise ValueError("bad pattern")
                    ch = pattern[j]
                cls.append(re.escape(ch) if ch not in "-" else "-")
                first = False
                j += 1
            if j >= n or not cls:
                raise ValueError("bad pattern")
            out.append("[" + ("^" if neg else "") + "".join(cls) + "]")
            i = j
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth > 0:
            depth -= 1
            out.append(")")
        elif c == "," and depth > 0:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise ValueError("bad pattern")
    try:
        return re.compile("".join(out), re.S)
    except re.error:
        raise ValueError("bad pattern")

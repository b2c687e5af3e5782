"""Streaming multipart/form-data parser for execd uploads.

Never holds a file in memory: every part that carries a filename is spooled
(small ones in memory, bigger ones to a temp file in the sandbox's /tmp, as
Go's multipart.Reader.ReadForm spools to os.TempDir); parts without a
filename are form values, which execd's upload handler never looks at, so
they are read and dropped.  Any syntax error raises MultipartError, which the
upload handler reports as gin does ("multipart form is empty").
"""

import io
import os
import re

CHUNK = 1 << 20
MEM_LIMIT = 1 << 20
MAX_PARTS = 1000
MAX_HEADER = 16 << 10


class MultipartError(Exception):
    pass


def boundary_of(content_type):
    if not content_type:
        return None
    ct = content_type.strip()
    if not ct.lower().startswith("multipart/form-data"):
        return None
    m = re.search(r';\s*boundary=("([^"]+)"|[^;\s]+)', ct, re.I)
    if not m:
        return None
    b = m.group(2) or m.group(1)
    if not b or len(b) > 200:
        return None
    return b.encode("latin-1", "replace")


def _disposition(value):
    """(name, filename) from a Content-Disposition value; filename None if absent."""
    parts = value.split(";")
    if parts[0].strip().lower() != "form-data":
        return None, None
    params = {}
    rest = value[len(parts[0]):]
    for m in re.finditer(r';\s*([A-Za-z0-9_.*-]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^;]*)', rest):
        k = m.group(1).lower()
        v = m.group(3) if m.group(3) is not None else m.group(2).strip()
        if m.group(3) is not None:
            v = re.sub(r"\\(.)", r"\1", v)
        params[k] = v
    if "filename*" in params and "filename" not in params:
        v = params["filename*"]
        if "''" in v:
            from urllib.parse import unquote
            v = unquote(v.split("''", 1)[1])
        params["filename"] = v
    return params.get("name"), params.get("filename")


class SpooledPart:
    def __init__(self, name, filename, tmpdir):
        self.name = name
        self.filename = filename
        self.tmpdir = tmpdir
        self.mem = io.BytesIO()
        self.fd = None
        self.path = None
        self.size = 0

    def write(self, data):
        self.size += len(data)
        if self.fd is None and self.mem.tell() + len(data) <= MEM_LIMIT:
            self.mem.write(data)
            return
        if self.fd is None:
            for _ in range(100):
                p = os.path.join(self.tmpdir, "multipart-%d" % int.from_bytes(os.urandom(5), "big"))
                try:
                    self.fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                    self.path = p
                    break
                except FileExistsError:
                    continue
            if self.fd is None:
                raise OSError("cannot create temp file")
            self._write_all(self.mem.getvalue())
            self.mem = None
        self._write_all(data)

    def _write_all(self, data):
        mv = memoryview(data)
        while mv:
            n = os.write(self.fd, mv)
            mv = mv[n:]

    def content(self, limit=1 << 20):
        if self.fd is None:
            return self.mem.getvalue()[:limit]
        return os.pread(self.fd, limit, 0)

    def copy_to(self, dst_fd):
        """Copy the whole part into dst_fd (at its current offset)."""
        if self.fd is None:
            mv = memoryview(self.mem.getvalue())
            while mv:
                n = os.write(dst_fd, mv)
                mv = mv[n:]
            return
        off = 0
        while off < self.size:
            try:
                n = os.copy_file_range(self.fd, dst_fd, min(self.size - off, 1 << 30), off)
            except OSError:
                n = 0
            if n <= 0:
                # fall back to read/write
                while off < self.size:
                    b = os.pread(self.fd, min(CHUNK, self.size - off), off)
                    if not b:
                        break
                    mv = memoryview(b)
                    while mv:
                        w = os.write(dst_fd, mv)
                        mv = mv[w:]
                    off += len(b)
                return
            off += n

    def cleanup(self):
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
        if self.path:
            try:
                os.unlink(self.path)
            except OSError:
                pass
            self.path = None


class _Sink:
    def write(self, data):
        pass


def parse(reader, boundary, tmpdir):
    """Parse the whole form; returns the list of SpooledPart with a filename
    (in order).  The caller must cleanup() every returned part."""
    buf = bytearray()
    eof = False
    files = []

    def fill():
        nonlocal eof
        if eof:
            return False
        data = reader.read(CHUNK)
        if not data:
            eof = True
            return False
        buf.extend(data)
        return True

    dash = b"--" + boundary
    try:
        # preamble: find the first boundary at a line start
        pos = 0
        while True:
            i = buf.find(dash, 0)
            if i >= 0 and (i == 0 or buf[i - 1:i] == b"\n") and len(buf) >= i + len(dash) + 2:
                pos = i + len(dash)
                break
            if len(buf) > MAX_HEADER * 4 and i < 0:
                del buf[:len(buf) - len(dash)]
            if not fill():
                raise MultipartError("no boundary")
        if buf[pos:pos + 2] == b"--":
            return files  # empty form
        # newline style after the first boundary
        j = buf.find(b"\n", pos)
        while j < 0:
            if not fill():
                raise MultipartError("truncated")
            j = buf.find(b"\n", pos)
        if buf[pos:j].rstrip(b"\r").strip(b" \t"):
            raise MultipartError("junk after boundary")
        nl = b"\r\n" if buf[j - 1:j] == b"\r" else b"\n"
        del buf[:j + 1]
        delim = nl + dash
        nparts = 0
        while True:
            nparts += 1
            if nparts > MAX_PARTS:
                raise MultipartError("too many parts")
            # headers
            end = buf.find(nl + nl) if not buf.startswith(nl) else -2
            while end == -1:
                if len(buf) > MAX_HEADER:
                    raise MultipartError("header too large")
                if not fill():
                    raise MultipartError("truncated headers")
                end = buf.find(nl + nl) if not buf.startswith(nl) else -2
            if end == -2:
                header_blob = b""
                del buf[:len(nl)]
            else:
                header_blob = bytes(buf[:end])
                del buf[:end + 2 * len(nl)]
            name = filename = None
            for line in header_blob.split(nl):
                if b":" not in line:
                    if line.strip():
                        raise MultipartError("bad header")
                    continue
                k, v = line.split(b":", 1)
                if k.strip().lower() == b"content-disposition":
                    name, filename = _disposition(v.decode("utf-8", "replace").strip())
            if filename:
                part = SpooledPart(name, os.path.basename(filename), tmpdir)
                files.append(part)
                sink = part
            else:
                sink = _Sink()
            # body up to the delimiter
            while True:
                i = buf.find(delim)
                if i >= 0:
                    if i:
                        sink.write(bytes(buf[:i]))
                    del buf[:i + len(delim)]
                    break
                keep = len(delim) - 1
                if len(buf) > keep:
                    sink.write(bytes(buf[:len(buf) - keep]))
                    del buf[:len(buf) - keep]
                if not fill():
                    raise MultipartError("truncated part")
            while len(buf) < 2:
                if not fill():
                    raise MultipartError("truncated after boundary")
            if buf[:2] == b"--":
                return files
            # transport padding then newline
            j = buf.find(b"\n")
            while j < 0:
                if len(buf) > 1024 or not fill():
                    raise MultipartError("bad boundary line")
                j = buf.find(b"\n")
            if buf[:j].rstrip(b"\r").strip(b" \t"):
                raise MultipartError("junk after boundary")
            del buf[:j + 1]
    except BaseException:
        for p in files:
            p.cleanup()
        raise

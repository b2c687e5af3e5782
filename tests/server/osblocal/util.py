"""Small shared helpers: clocks and timestamp formats, ids, Go-style error text.

Two timestamp formats are on the wire (docs/SERVER.md §1): execd speaks Go's
time.Time JSON (RFC 3339 with nanoseconds, trailing zeros trimmed, "Z" in a
UTC container); the lifecycle server speaks pydantic v2 ISO-8601
(microseconds, trailing zeros kept, omitted when zero, "Z").
"""

import codecs
import datetime as _dt
import errno as _errno
import json
import os
import time
import uuid

UTC = _dt.timezone.utc


def now_ts():
    return time.time()


def go_time(ts_ns):
    """Go time.Time JSON for a nanosecond Unix timestamp, in UTC."""
    secs, nanos = divmod(int(ts_ns), 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    if nanos:
        frac = ("%09d" % nanos).rstrip("0")
        return "%s.%sZ" % (base, frac)
    return base + "Z"


def go_time_now():
    return go_time(time.time_ns())


def iso_time(ts):
    """pydantic v2 serialisation of an aware UTC datetime given as float seconds."""
    d = _dt.datetime.fromtimestamp(ts, UTC)
    s = d.strftime("%Y-%m-%dT%H:%M:%S")
    if d.microsecond:
        s += ".%06d" % d.microsecond
    return s + "Z"


def parse_iso(s):
    """Parse an RFC 3339 / ISO-8601 datetime as pydantic would; naive -> UTC.
    Returns float seconds or raises ValueError."""
    if not isinstance(s, str) or not s:
        raise ValueError("invalid datetime")
    t = s.strip()
    if t.endswith("Z") or t.endswith("z"):
        t = t[:-1] + "+00:00"
    # fromisoformat (3.11) accepts most ISO forms; trim excess fraction digits
    if "." in t:
        head, _, rest = t.partition(".")
        digits = ""
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        digits, tail = rest[:i], rest[i:]
        t = head + ("." + digits[:6].ljust(6, "0") if digits else "") + tail
    d = _dt.datetime.fromisoformat(t)
    if d.tzinfo is None:
        d = d.replace(tzinfo=UTC)
    return d.timestamp()


def hex_id():
    """A dash-less UUID: 32 lowercase hex chars (execd command ids)."""
    return uuid.uuid4().hex


def uuid_id():
    return str(uuid.uuid4())


def ms_now():
    return int(time.time() * 1000)


def errtext(e):
    """Go's text for an errno: glibc's message with a lower-case first letter."""
    if isinstance(e, OSError):
        e = e.errno
    try:
        s = os.strerror(e)
    except Exception:
        s = "errno %s" % e
    if e == _errno.ELOOP:
        s = "too many levels of symbolic links"
    return s[:1].lower() + s[1:]


def go_path_error(op, path, e):
    """os.PathError text: "op path: errno text"."""
    return "%s %s: %s" % (op, path, errtext(e))


def _fffd(err):
    """A byte that is not UTF-8 (a name read from the disk holds it as a
    lone surrogate) becomes U+FFFD, one for each byte, as Go's JSON encoder
    writes it: execd's answers never carry the name's own bytes."""
    return b"\xef\xbf\xbd" * (err.end - err.start), err.end


codecs.register_error("osb_fffd", _fffd)


def json_bytes(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "osb_fffd")


def atomic_write_json(path, obj):
    """Write obj as JSON to path atomically: temp file + fsync + rename + dir fsync."""
    d = os.path.dirname(path)
    tmp = os.path.join(d, ".%s.tmp.%d.%d" % (os.path.basename(path), os.getpid(), time.monotonic_ns()))
    data = json.dumps(obj, indent=1, sort_keys=True).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    try:
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass

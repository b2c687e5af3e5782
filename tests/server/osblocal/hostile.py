"""Hostile answers, for the tests that a lying or broken server cannot crash,
hang or fool a client (fault kinds of faults.py; see there for how a request
is picked):

  garbage      the real answer, its body cut in half (a complete HTTP answer
               of malformed JSON, or a stream cut mid-event)
  endless      200, then a chunked body of white space, a few bytes every
               100 ms, that never ends (until the client gives up)
  huge_header  200 with a header of 100 MB, sent until the client gives up
  lie          the real answer with its JSON altered: every listing gains
               entries whose paths hold "..", leave the listed directory,
               hold a NUL-free newline or a name of 300 bytes, or repeat a
               name with another type; sizes lie (a file's size doubled plus
               one, a negative one); everything else passes unchanged

Each runs the route's handler into a buffer (as "late" does) when it needs
the real answer.
"""

import json
import time

KINDS = ("garbage", "endless", "huge_header", "lie")

HEADER_BYTES = 100 << 20


def split_response(raw):
    """(head, body) of a buffered HTTP answer, the body de-chunked."""
    head, _, body = raw.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in head.lower():
        return head, body
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        try:
            n = int(size_line.split(b";")[0], 16)
        except ValueError:
            break
        if n == 0:
            break
        out += rest[:n]
        body = rest[n + 2:]
    return head, bytes(out)


def rebuild(head, body):
    """An answer with @head's status and headers and @body, sent with a
    Content-Length and Connection: close."""
    lines = [l for l in head.split(b"\r\n")
             if not l.lower().startswith((b"content-length:", b"transfer-encoding:",
                                          b"connection:"))]
    lines.append(b"Content-Length: %d" % len(body))
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def lie_entry(e, base):
    """Hostile neighbours of listing entry @e (a FileInfo) below @base."""
    out = []
    for bad in (base + "/../../../etc/passwd", "/etc/shadow", base + "/a/../../b",
                base + "/line\nbreak", base + "/" + "n" * 300, base + "/./dot",
                base + "//double", base + "/.", base + "/.."):
        f = dict(e)
        f["path"] = bad
        out.append(f)
    dup = dict(e)
    dup["type"] = "directory" if e.get("type") != "directory" else "file"
    out.append(dup)
    neg = dict(e)
    neg["path"] = base + "/negative-size"
    neg["size"] = -5
    out.append(neg)
    return out


def lie(obj):
    if isinstance(obj, list) and obj and all(isinstance(e, dict) and "path" in e for e in obj):
        first = obj[0]
        base = str(first.get("path", "/")).rsplit("/", 1)[0] or "/"
        for e in obj:
            if isinstance(e.get("size"), int) and e.get("type", "file") == "file":
                e["size"] = e["size"] * 2 + 1
        return obj + lie_entry(first, base)
    if isinstance(obj, dict):
        if isinstance(obj.get("size"), int):
            obj["size"] = obj["size"] * 2 + 1
        for k, v in list(obj.items()):
            if isinstance(v, dict) and isinstance(v.get("size"), int):
                v["size"] = v["size"] * 2 + 1
    return obj


def buffered(h, route):
    """Runs @route's handler (None: an unknown path's) into a buffer; the
    raw answer."""
    from .httpbase import BufferWriter  # here: httpbase imports this module
    real, h.wfile = h.wfile, BufferWriter()
    h.null_output = True
    try:
        if route is None:
            h.not_found()
        else:
            route.fn(**route.params)
    finally:
        answer, h.wfile = h.wfile, real
        h.null_output = False
    return b"".join(answer.parts)


def serve(h, route, kind):
    """Answers the request at handler @h as fault @kind says."""
    h.close_connection = True
    if kind == "endless":
        h.stream_start(200, [("Content-Type", h.json_ctype)])
        while True:
            h.stream_write(b" \n")
            h.wfile.flush()
            time.sleep(0.1)
    if kind == "huge_header":
        h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Filler: ")
        chunk = b"a" * (64 << 10)
        for _ in range(HEADER_BYTES // len(chunk)):
            h.wfile.write(chunk)
        h.wfile.write(b"\r\nContent-Length: 2\r\n\r\n{}")
        h.wfile.flush()
        return
    head, body = split_response(buffered(h, route))
    if kind == "garbage":
        body = body[:len(body) // 2]
    elif kind == "lie":
        try:
            body = json.dumps(lie(json.loads(body))).encode()
        except ValueError:
            pass
    h.wfile.write(rebuild(head, body))
    h.wfile.flush()

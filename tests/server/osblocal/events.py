"""execd's streaming framing (docs/SERVER.md §8.2): one JSON object followed
by "\\n\\n" per event, no "data:" prefix, chunked, flushed per event; a ping
right after init and every 3 s; a 1 s grace before the body ends."""

import threading
import time

from .util import json_bytes, ms_now

PING_EVERY = 3.0
GRACE = 1.0
SSE_HEADERS = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
               ("Connection", "keep-alive"), ("X-Accel-Buffering", "no")]


def event(type_, text=None, execution_count=None, execution_time=None, results=None, error=None):
    d = {"type": type_}
    if text:
        d["text"] = text
    if execution_count:
        d["execution_count"] = execution_count
    if execution_time:
        d["execution_time"] = execution_time
    d["timestamp"] = ms_now()
    if results:
        d["results"] = results
    if error is not None:
        d["error"] = error
    return json_bytes(d) + b"\n\n"


def error_event(ename, evalue, traceback):
    return event("error", error={"ename": ename, "evalue": evalue, "traceback": traceback})


class EventStream:
    """Writes events to one response.  A write failure (client gone) marks
    the stream dead; the work it reports goes on (execd does not stop a
    command when its client disconnects)."""

    def __init__(self, h, sb):
        self.h = h
        self.sb = sb
        self.dead = False
        self.last_ping = 0.0
        self.lock = threading.Lock()

    def start(self):
        self.h.stream_start(200, SSE_HEADERS)

    def write(self, data):
        if self.dead:
            return
        self.sb.gate()
        with self.lock:
            try:
                self.h.stream_write(data)
            except OSError:
                self.dead = True
                self.h.close_connection = True

    def send(self, *a, **k):
        self.write(event(*a, **k))

    def ping(self):
        self.last_ping = time.monotonic()
        self.send("ping", text="pong")

    def maybe_ping(self):
        if time.monotonic() - self.last_ping >= PING_EVERY:
            self.ping()

    def grace(self, seconds=GRACE):
        end = time.monotonic() + seconds
        while not self.dead:
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, 0.1))
            self.maybe_ping()


class LineSplitter:
    """execd's tailer: "\\n", "\\r" and "\\r\\n" end a line; an empty line is
    sent as "\\n"; an incomplete line is held until its newline."""

    MAX = 64 << 10

    def __init__(self):
        self.buf = b""

    def feed(self, data):
        self.buf += data
        out = []
        b = self.buf
        i, n = 0, len(b)
        while i < n:
            jn = b.find(b"\n", i)
            jr = b.find(b"\r", i)
            if jn < 0 and jr < 0:
                break
            if jr >= 0 and (jn < 0 or jr < jn):
                if jr + 1 >= n:
                    break  # wait: maybe "\r\n"
                end = jr + 2 if b[jr + 1:jr + 2] == b"\n" else jr + 1
                j = jr
            else:
                j, end = jn, jn + 1
            out.append(self._text(b[i:j]))
            i = end
        self.buf = b[i:]
        if len(self.buf) > self.MAX:
            out.append(self._text(self.buf))
            self.buf = b""
        return out

    def flush(self):
        b, self.buf = self.buf, b""
        if b.endswith(b"\r"):
            b = b[:-1]
            return [self._text(b)]
        return [self._text(b)] if b else []

    @staticmethod
    def _text(b):
        return b.decode("utf-8", "replace") or "\n"

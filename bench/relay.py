#!/usr/bin/python3
"""bench/relay.py - a network namespace whose 127.0.0.1 is RTT away from the
host's: every byte between them waits RTT/2 each way.

    python3 bench/relay.py --rtt MS              # the relay, driven on stdin
    python3 bench/relay.py --rtt MS --self-test  # measures it and says if it is right

The relay process makes a new network namespace (unshare(2), its loopback
brought up) and stays in it: `nsenter --net=/proc/PID/ns/net CMD` runs a
command there. It reads one JSON command a line on stdin and answers one
JSON line on stdout:

  {"forward": PORT}  listen on 127.0.0.1:PORT inside the namespace; each
                     connection accepted there is relayed to 127.0.0.1:PORT
                     of the host's namespace (an upstream socket made after
                     a setns(2) of the connecting thread back to the host)
  {"stats": true}    {"ports": {PORT: {"conns", "up", "down"}}}: connections
                     accepted and bytes relayed each way since the last reset
  {"reset": true}    zero the counters

A port not forwarded has nothing listening in the namespace: a client there
reaches the host through the relay or not at all. The relay exits when its
stdin closes, and the namespace goes with it.

The delay. Each direction of a connection is a reader and a writer thread
around a queue: the reader stamps each chunk it receives with its arrival
time + RTT/2, the writer sends it (with any chunks due by then) once that
time has come. The order is kept and a chunk waits RTT/2 from its own
arrival, however many are queued: latency is added, bandwidth is not
taken, up to a cap of bytes in flight each way (--buffer, default 32 MiB,
which at 80 ms allows ~800 MiB/s). A new connection costs what a TCP
handshake would: the upstream connect is made RTT/2 after the accept, and
nothing the client sent reaches the server before accept + 1.5 RTT, so the
first answer comes back 2 RTT after the connect.

The --self-test starts a relay, an echo server on the host and measures
through the namespace: a new connection's first exchange (~2 RTT), an
exchange on an open connection (~1 RTT), chunks sent every millisecond
(each must come back ~1 RTT after it left, not later for the queue ahead of
it), a bulk transfer (checksummed, for order and throughput), the
counters, and that a port not forwarded is refused. Root only (namespaces).
Standard library only.
"""

import argparse
import collections
import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
CHUNK = 256 << 10
COALESCE = 1 << 20

_libc = ctypes.CDLL(None, use_errno=True)


def _ns_call(fn, *args):
    if fn(*args) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (fn.__name__, os.strerror(e)))


def setns(fd):
    """Moves the calling thread (only it) into the network namespace fd."""
    _ns_call(_libc.setns, fd, CLONE_NEWNET)


def own_ns_fd():
    return os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)


def loopback_up():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


class Netns:
    """A network namespace by path, for a process outside it: argv() runs
    a command inside; entered() puts the calling thread inside for a block
    (sockets made meanwhile belong to the namespace for good)."""

    def __init__(self, path):
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    def argv(self, argv):
        return ["nsenter", "--net=" + self.path, "--"] + [str(a) for a in argv]

    @contextlib.contextmanager
    def entered(self):
        home = own_ns_fd()
        try:
            setns(self.fd)
            try:
                yield
            finally:
                setns(home)
        finally:
            os.close(home)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# -- the relay (runs in the relay process) ----------------------------------------

class Pipe:
    """One direction of a connection: src -> dst, each chunk RTT/2 later."""

    def __init__(self, conn, src, dst, delay, not_before, key):
        self.conn, self.src, self.dst = conn, src, dst
        self.delay, self.not_before, self.key = delay, not_before, key
        self.q = collections.deque()
        self.queued = 0
        self.cv = threading.Condition()

    def reader(self):
        cap = self.conn.relay.cap
        while True:
            try:
                data = self.src.recv(CHUNK)
            except OSError:
                data = b""
            due = max(time.monotonic(), self.not_before) + self.delay
            self.conn.relay.count(self.conn.port, self.key, len(data))
            with self.cv:
                while self.queued > cap and not self.conn.dead:
                    self.cv.wait()
                self.q.append((due, data))
                self.queued += len(data)
                self.cv.notify_all()
            if not data or self.conn.dead:
                return

    def _next(self):
        """The next chunk and the chunks due by its time, joined; b"" at
        the end of the stream; None when the connection died."""
        with self.cv:
            while not self.q and not self.conn.dead:
                self.cv.wait()
            if self.conn.dead:
                return None, None
            due, data = self.q.popleft()
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if not data:
            return due, data
        parts = [data]
        size = len(data)
        with self.cv:
            now = time.monotonic()
            while self.q and self.q[0][0] <= now and self.q[0][1] and size < COALESCE:
                parts.append(self.q.popleft()[1])
                size += len(parts[-1])
            self.queued -= size
            self.cv.notify_all()
        return due, b"".join(parts)

    def writer(self):
        while True:
            due, data = self._next()
            if data is None:
                return
            try:
                if not data:
                    self.dst.shutdown(socket.SHUT_WR)
                    return
                self.dst.sendall(data)
            except OSError:
                self.conn.abort()
                return


class Conn:
    def __init__(self, relay, client, upstream, port, accepted):
        self.relay, self.port = relay, port
        self.socks = (client, upstream)
        self.dead = False
        self.left = 4
        self.lock = threading.Lock()
        half = relay.rtt / 2
        self.pipes = (Pipe(self, client, upstream, half, accepted + relay.rtt, "up"),
                      Pipe(self, upstream, client, half, 0.0, "down"))
        for p in self.pipes:
            for fn in (p.reader, p.writer):
                threading.Thread(target=self._run, args=(fn,), daemon=True).start()

    def _run(self, fn):
        try:
            fn()
        finally:
            with self.lock:
                self.left -= 1
                last = self.left == 0
            if last:
                for s in self.socks:
                    s.close()

    def abort(self):
        self.dead = True
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for p in self.pipes:
            with p.cv:
                p.cv.notify_all()


class Relay:
    def __init__(self, rtt, host_fd, cap):
        self.rtt, self.host_fd, self.cap = rtt, host_fd, cap
        self.lock = threading.Lock()
        self.stats = {}
        self.listeners = {}

    def count(self, port, key, n):
        with self.lock:
            self.stats[port][key] += n

    def forward(self, port):
        if port in self.listeners:
            return
        s = socket.create_server(("127.0.0.1", port), backlog=128)
        self.listeners[port] = s
        with self.lock:
            self.stats.setdefault(port, {"conns": 0, "up": 0, "down": 0})
        threading.Thread(target=self._accept, args=(s, port), daemon=True).start()

    def _accept(self, lsock, port):
        while True:
            client, _ = lsock.accept()
            accepted = time.monotonic()
            with self.lock:
                self.stats[port]["conns"] += 1
            threading.Thread(target=self._connect, args=(client, port, accepted), daemon=True).start()

    def _connect(self, client, port, accepted):
        setns(self.host_fd)  # this thread's sockets from now on: the host's
        wait = accepted + self.rtt / 2 - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            upstream = socket.create_connection(("127.0.0.1", port))
        except OSError:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()   # a reset, as a refused connection would give
            return
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        Conn(self, client, upstream, port, accepted)

    def command(self, cmd):
        if "forward" in cmd:
            self.forward(int(cmd["forward"]))
            return {"ok": True}
        if "stats" in cmd:
            with self.lock:
                return {"ports": {str(p): dict(v) for p, v in self.stats.items()}}
        if "reset" in cmd:
            with self.lock:
                for v in self.stats.values():
                    v.update(conns=0, up=0, down=0)
            return {"ok": True}
        return {"error": "unknown command %r" % (cmd,)}


def serve(rtt, cap):
    host_fd = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    _ns_call(_libc.unshare, CLONE_NEWNET)   # single-threaded yet: the whole process
    loopback_up()
    relay = Relay(rtt, host_fd, cap)
    out = sys.stdout
    out.write(json.dumps({"ready": True, "netns": "/proc/%d/ns/net" % os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = relay.command(json.loads(line))
        except (ValueError, OSError) as e:
            answer = {"error": str(e)}
        out.write(json.dumps(answer) + "\n")
        out.flush()


# -- the driver (runs in bench/run or the self-test) --------------------------------

class RelayProcess:
    """bench/relay.py as a child process: start() makes the namespace,
    forward(port) puts a host port at RTT, stats()/reset() the counters,
    stop() ends it (and the namespace with it once nothing else is in it)."""

    def __init__(self, rtt_ms, buffer_mib=32, popen=subprocess.Popen):
        self.rtt_ms, self.buffer_mib, self.popen = rtt_ms, buffer_mib, popen
        self.proc = None
        self.ns = None
        self.ports = set()

    def start(self, timeout=20):
        self.proc = self.popen([sys.executable, os.path.abspath(__file__), "--rtt", str(self.rtt_ms),
                                "--buffer", str(self.buffer_mib)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        ready = self._read(timeout)
        self.ns = Netns(ready["netns"])
        return self

    def _read(self, timeout):
        box = []
        t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout)
        if not box or not box[0]:
            raise RuntimeError("relay: no answer within %ss (exit status %s)" % (timeout, self.proc.poll()))
        answer = json.loads(box[0])
        if "error" in answer:
            raise RuntimeError("relay: " + answer["error"])
        return answer

    def ask(self, cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read(20)

    def forward(self, port):
        if port not in self.ports:
            self.ask({"forward": port})
            self.ports.add(port)

    def stats(self):
        """{port: {"conns", "up", "down"}} since the last reset."""
        return {int(p): v for p, v in self.ask({"stats": True})["ports"].items()}

    def reset(self):
        self.ask({"reset": True})

    def stop(self):
        if self.ns:
            self.ns.close()
            self.ns = None
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()


# -- the self-test ---------------------------------------------------------------------

def _echo_server():
    """An echo server on the host's 127.0.0.1 (a thread per connection)."""
    ls = socket.create_server(("127.0.0.1", 0))

    def serve_one(c):
        with c:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                b = c.recv(CHUNK)
                if not b:
                    return
                c.sendall(b)

    def accept():
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve_one, args=(c,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    return ls.getsockname()[1]


def _recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            raise RuntimeError("echo closed early")
        buf += b
    return bytes(buf)


def _connect_in(ns, port):
    with ns.entered():
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _stream_check(ns, port, rtt, n=200):
    """A 64-byte chunk every ms on one connection: each echo's delay."""
    s = _connect_in(ns, port)
    with s:
        s.sendall(b"x")
        _recv_exact(s, 1)
        sent = [0.0] * n
        lat = []

        def recv_all():
            for i in range(n):
                _recv_exact(s, 64)
                lat.append(time.monotonic() - sent[i])
        t = threading.Thread(target=recv_all)
        t.start()
        for i in range(n):
            sent[i] = time.monotonic()
            s.sendall(b"%063d\n" % i)
            time.sleep(0.001)
        t.join()
    return lat


def _bulk_check(ns, port, size):
    """size bytes of chunks of varying sizes through and back: (seconds, same bytes?)."""
    s = _connect_in(ns, port)
    data = os.urandom(size)
    got = hashlib.sha256()
    with s:
        def recv_all():
            left = size
            while left:
                b = s.recv(min(CHUNK, left))
                if not b:
                    break
                got.update(b)
                left -= len(b)
        t0 = time.monotonic()
        t = threading.Thread(target=recv_all)
        t.start()
        off, k = 0, 0
        while off < size:
            step = (1 + k * 7919 % 200000)
            s.sendall(data[off:off + step])
            off += step
            k += 1
        t.join()
        secs = time.monotonic() - t0
    return secs, got.digest() == hashlib.sha256(data).digest()


def self_test(rtt_ms, buffer_mib):
    rtt = rtt_ms / 1000
    port = _echo_server()
    relay = RelayProcess(rtt_ms, buffer_mib).start()
    bad = []

    def check(what, secs, lo, hi):
        ok = lo <= secs <= hi
        print("%-58s %8.1f ms  (%.2f RTT)%s" % (what, secs * 1e3, secs / rtt, "" if ok else "  OUT OF RANGE"))
        if not ok:
            bad.append(what)
    try:
        relay.forward(port)
        news, opens = [], []
        for _ in range(5):
            t0 = time.monotonic()
            s = _connect_in(relay.ns, port)
            with s:
                s.sendall(b"ping")
                _recv_exact(s, 4)
                news.append(time.monotonic() - t0)
                for _ in range(10):
                    t0 = time.monotonic()
                    s.sendall(b"ping")
                    _recv_exact(s, 4)
                    opens.append(time.monotonic() - t0)
        slack = 0.5 * rtt + 0.010
        check("new connection: connect, 4 bytes there and back (median)", statistics.median(news),
              2 * rtt, 2 * rtt + slack)
        check("open connection: 4 bytes there and back (median)", statistics.median(opens), rtt, rtt + slack)
        check("open connection: 4 bytes there and back (min)", min(opens), rtt, rtt + slack)
        lat = _stream_check(relay.ns, port, rtt)
        check("200 chunks sent 1 ms apart: each echo's delay, median", statistics.median(lat), rtt, rtt + slack)
        check("200 chunks sent 1 ms apart: each echo's delay, max", max(lat), rtt, rtt + 4 * slack)
        size = 64 << 20
        secs, same = _bulk_check(relay.ns, port, size)
        print("%-58s %8.1f ms  %.0f MB/s each way, %s" % ("64 MiB there and back on one connection", secs * 1e3,
                                                          size / secs / 1e6, "bytes intact" if same else
                                                          "BYTES DIFFER"))
        if not same:
            bad.append("bulk bytes")
        st = relay.stats()[port]
        want = (5 + 2, 5 * 4 * 11 + 1 + 200 * 64 + size)
        print("relay counters: %d connections, %d bytes up, %d down (expected %d, %d each way)"
              % (st["conns"], st["up"], st["down"], want[0], want[1]))
        if (st["conns"], st["up"], st["down"]) != (want[0], want[1], want[1]):
            bad.append("counters")
        other = _echo_server()
        try:
            s = _connect_in(relay.ns, other)
            s.sendall(b"ping")
            refused = s.recv(4) == b""
            s.close()
        except OSError:
            refused = True
        print("a host port not forwarded: %s" % ("unreachable" if refused else "REACHABLE"))
        if not refused:
            bad.append("unforwarded port")
    finally:
        relay.stop()
    print("self-test: " + ("ok" if not bad else "FAILED: " + ", ".join(bad)))
    return 0 if not bad else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rtt", type=float, required=True, help="round-trip time to add, in ms")
    ap.add_argument("--buffer", type=int, default=32, help="MiB in flight each way per connection (default 32)")
    ap.add_argument("--self-test", action="store_true", help="measure a relay and check its figures")
    a = ap.parse_args()
    if a.self_test:
        sys.exit(self_test(a.rtt, a.buffer))
    serve(a.rtt / 1000, a.buffer << 20)


if __name__ == "__main__":
    main()

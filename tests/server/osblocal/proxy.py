"""Streaming HTTP forwarding, used by execd's /proxy/<port>/ route and the
lifecycle server's /sandboxes/<id>/proxy/<port>/ route.  The response body
is passed on as it arrives (no buffering), so event streams pass through."""

import http.client
import socket
import ssl

HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "trailers", "transfer-encoding", "upgrade", "proxy-connection"}


class UpstreamError(Exception):
    pass


def forward(h, host, port, target, drop=(), add=(), tls=False, timeout=180.0, extra_req_headers=()):
    """Forward h's request to host:port target.  Raises UpstreamError if the
    upstream cannot be reached before anything was sent to the client."""
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    drop = {d.lower() for d in drop} | HOP
    try:
        try:
            conn.putrequest(h.command, target, skip_host=True, skip_accept_encoding=True)
            for k, v in h.headers.items():
                if k.lower() in drop or k.lower() in ("content-length", "expect"):
                    continue
                conn.putheader(k, v)
            for k, v in add:
                conn.putheader(k, v)
            for k, v in extra_req_headers:
                conn.putheader(k, v)
            has_body = h.command in ("POST", "PUT", "PATCH", "DELETE")
            body = h.body
            if has_body and body.chunked:
                conn.putheader("Transfer-Encoding", "chunked")
            elif has_body:
                conn.putheader("Content-Length", str(body.remaining))
            conn.endheaders()
        except (OSError, http.client.HTTPException) as e:
            raise UpstreamError(str(e))
        if has_body:
            while True:
                b = body.read(1 << 20)
                if not b:
                    break
                if body.chunked:
                    conn.send(b"%x\r\n%s\r\n" % (len(b), b))
                else:
                    conn.send(b)
            if body.chunked:
                conn.send(b"0\r\n\r\n")
        try:
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            raise UpstreamError(str(e))
        h.started = True
        h.send_response(resp.status)
        length = resp.getheader("Content-Length")
        for k, v in resp.getheaders():
            if k.lower() in HOP or k.lower() in ("content-length", "date", "x-request-id"):
                continue
            h.send_header(k, v)
        nobody = h.command == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
        if nobody:
            if length is not None:
                h.send_header("Content-Length", length)
            h.end_headers()
            return
        if length is not None:
            h.send_header("Content-Length", length)
            h.end_headers()
            while True:
                b = resp.read1(1 << 16)
                if not b:
                    break
                h.wfile.write(b)
        else:
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            while True:
                b = resp.read1(1 << 16)
                if not b:
                    break
                h.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            h.wfile.write(b"0\r\n\r\n")
        if resp.will_close:
            h.close_connection = True
    except (socket.timeout, http.client.HTTPException) as e:
        if not h.started:
            raise UpstreamError(str(e))
        h.close_connection = True
    finally:
        conn.close()

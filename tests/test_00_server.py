"""Raw HTTP behaviour of tests/server/opensandbox_local.py: one behaviour
per test, with the exact statuses and bodies the real OpenSandbox servers
give (docs/SERVER.md describes them)."""

import errno
import json
import os
import socket
import threading
import time
import urllib.parse

import pytest

from osbtest import http_request, multipart_body, parse_events, wait_until

KEY = {"OPEN-SANDBOX-API-KEY": "test-key"}


def upload(server, sid, parts, headers=None):
    body, ctype = multipart_body(parts)
    h = {"Content-Type": ctype}
    h.update(headers or {})
    return server.execd(sid, "POST", "/files/upload", body=body, headers=h)


def meta(path, **kw):
    d = {"path": path}
    d.update(kw)
    return ("metadata", "metadata", "application/json", json.dumps(d).encode())


def filepart(data, name="f"):
    return ("file", name, "application/octet-stream", data)


def events(server, sid, path, body, timeout=60):
    st, h, b = server.execd(sid, "POST", path, body=body, raw=True, timeout=timeout)
    assert st == 200, (st, b)
    return parse_events(b), b


# ---------------------------------------------------------------- auth

def test_auth_missing_key(server):
    st, h, b = server.request("GET", "/v1/sandboxes", api_key=False)
    assert st == 401 and b["code"] == "MISSING_API_KEY"
    assert h.get("x-request-id")


def test_auth_wrong_key(server):
    st, _, b = server.request("GET", "/v1/sandboxes", headers={"OPEN-SANDBOX-API-KEY": "nope"}, api_key=False)
    assert st == 401 and b["code"] == "INVALID_API_KEY"


def test_auth_exempt_health(server):
    st, _, b = server.request("GET", "/health", api_key=False)
    assert st == 200 and b == {"status": "healthy"}


def test_request_id_echoed(server):
    st, h, _ = server.request("GET", "/health", headers={"X-Request-ID": "abc-123"})
    assert h["x-request-id"] == "abc-123"


def test_routes_at_root_and_v1(server):
    st1, _, b1 = server.request("GET", "/sandboxes?pageSize=1")
    st2, _, b2 = server.request("GET", "/v1/sandboxes?pageSize=1")
    assert st1 == st2 == 200 and "pagination" in b1 and "pagination" in b2


def test_unknown_lifecycle_route(server):
    st, _, b = server.request("GET", "/v1/nope")
    assert st == 404 and b == {"detail": "Not Found"}


def test_server_proxy_needs_no_api_key(server, sandbox):
    st, _, b = server.request("GET", "/v1/sandboxes/%s/endpoints/44772?use_server_proxy=true" % sandbox)
    assert st == 200
    assert b["endpoint"] == "127.0.0.1:%d/sandboxes/%s/proxy/44772" % (server.port, sandbox)
    st, _, _ = http_request("http://" + b["endpoint"], "GET", "/ping")
    assert st == 200


def test_server_proxy_streams_command(server, sandbox):
    st, _, b = server.request("GET", "/v1/sandboxes/%s/endpoints/44772?use_server_proxy=true" % sandbox)
    st, _, body = http_request("http://" + b["endpoint"], "POST", "/command", {"command": "echo via-proxy"}, raw=True)
    assert st == 200
    evs = parse_events(body)
    assert [e["text"] for e in evs if e["type"] == "stdout"] == ["via-proxy"]


def test_server_proxy_strips_api_key(server, sandbox):
    # the api key must not reach the sandbox: echo the headers a command-side
    # HTTP server sees would need a port; check the dropped-header rule on
    # an execd upload path instead: an authorization header does no harm.
    st, _, b = server.request("GET", "/v1/sandboxes/%s/proxy/44772/ping" % sandbox, api_key=False)
    assert st == 200


def test_server_proxy_unknown_sandbox(server):
    st, _, b = server.request("GET", "/sandboxes/nope/proxy/44772/ping", api_key=False)
    assert st == 404 and b["code"] == "DOCKER::SANDBOX_NOT_FOUND"


def test_execd_token_secure_access(make_server):
    s = make_server(extra_args=["--secure-access"])
    sid = s.create_sandbox()
    url, headers = s.endpoint(sid)
    assert set(headers) == {"X-EXECD-ACCESS-TOKEN"}
    st, _, b = http_request(url, "GET", "/ping")
    assert st == 401
    assert b == {"error": "Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN"}
    st, _, _ = http_request(url, "GET", "/ping", headers={"X-EXECD-ACCESS-TOKEN": "wrong"})
    assert st == 401
    st, _, _ = http_request(url, "GET", "/ping", headers=headers)
    assert st == 200


def test_execd_token_from_env(server):
    sid = server.create_sandbox(env={"EXECD_ACCESS_TOKEN": "tok"}, wait=0) if False else None
    body = {"image": {"uri": "x"}, "entrypoint": ["tail"], "resourceLimits": {}, "timeout": 600,
            "env": {"EXECD_ACCESS_TOKEN": "tok"}}
    st, _, b = server.request("POST", "/v1/sandboxes", body)
    sid = b["id"]
    try:
        url, headers = server.endpoint(sid)
        assert headers == {}
        st, _, b = http_request(url, "GET", "/files/info")
        assert st == 401 and b["error"].startswith("Unauthorized")
        st, _, _ = http_request(url, "GET", "/ping", headers={"X-EXECD-ACCESS-TOKEN": "tok"})
        assert st == 200
    finally:
        server.delete_sandbox(sid)


# ---------------------------------------------------------------- lifecycle

def test_create_202_shape(server):
    body = {"image": {"uri": "python:3.11"}, "entrypoint": ["tail", "-f", "/dev/null"], "timeout": 600,
            "resourceLimits": {"cpu": "500m"}, "metadata": {"name": "proj"}, "env": {"A": "1", "B": None}}
    st, h, b = server.request("POST", "/v1/sandboxes", body)
    try:
        assert st == 202
        assert h["content-type"] == "application/json"
        assert list(b) == ["id", "status", "metadata", "expiresAt", "createdAt", "entrypoint"]
        assert len(b["id"]) == 36 and b["id"].count("-") == 4
        assert b["status"]["state"] == "Running"
        assert b["status"]["reason"] == "CONTAINER_RUNNING"
        assert b["metadata"] == {"name": "proj"}
        assert b["entrypoint"] == ["tail", "-f", "/dev/null"]
        assert b["expiresAt"].endswith("Z") and b["createdAt"].endswith("Z")
        st, _, g = server.request("GET", "/v1/sandboxes/" + b["id"])
        assert st == 200 and g["image"] == {"uri": "python:3.11"}
        assert list(g) == ["id", "image", "status", "metadata", "entrypoint", "expiresAt", "createdAt"]
    finally:
        server.delete_sandbox(b["id"])


def test_create_timeout_below_minimum_422(server):
    body = {"image": {"uri": "x"}, "entrypoint": ["a"], "resourceLimits": {}, "timeout": 30}
    st, _, b = server.request("POST", "/v1/sandboxes", body)
    assert st == 422
    assert b == {"detail": [{"type": "greater_than_equal", "loc": ["body", "timeout"],
                             "msg": "Input should be greater than or equal to 60", "input": 30, "ctx": {"ge": 60}}]}


def test_create_missing_entrypoint_422(server):
    body = {"image": {"uri": "x"}, "resourceLimits": {}}
    st, _, b = server.request("POST", "/v1/sandboxes", body)
    assert st == 422
    d = b["detail"][0]
    assert d["type"] == "value_error" and d["loc"] == ["body"]
    assert d["msg"] == "Value error, Entrypoint is required when image is provided."
    assert d["input"] == body


def test_create_missing_resource_limits_422(server):
    st, _, b = server.request("POST", "/v1/sandboxes", {"image": {"uri": "x"}, "entrypoint": ["a"]})
    assert st == 422 and b["detail"][0]["msg"].startswith("Value error, resourceLimits is required")


def test_create_malformed_json_422(server):
    st, _, b = server.request("POST", "/v1/sandboxes", b"{not json", headers={"Content-Type": "application/json"})
    assert st == 422 and b["detail"][0]["type"] == "json_invalid"


def test_create_wrong_type_422(server):
    body = {"image": {"uri": "x"}, "entrypoint": "tail", "resourceLimits": {}, "timeout": "abc"}
    st, _, b = server.request("POST", "/v1/sandboxes", body)
    assert st == 422
    types = {tuple(d["loc"]): d["type"] for d in b["detail"]}
    assert types == {("body", "timeout"): "int_parsing", ("body", "entrypoint"): "list_type"}


def test_create_max_timeout_400(make_server):
    s = make_server(extra_args=["--max-timeout", "3600"])
    st, _, b = s.request("POST", "/v1/sandboxes", {"image": {"uri": "x"}, "entrypoint": ["a"],
                                                     "resourceLimits": {}, "timeout": 7200})
    assert st == 400 and b["code"] == "SANDBOX::INVALID_PARAMETER"


def test_create_reserved_metadata_400(server):
    st, _, b = server.request("POST", "/v1/sandboxes", {"image": {"uri": "x"}, "entrypoint": ["a"],
                                                          "resourceLimits": {}, "metadata": {"opensandbox.io/x": "y"}})
    assert st == 400 and b["code"] == "SANDBOX::INVALID_METADATA_LABEL"


def test_list_page_size_over_200_422(server):
    st, _, b = server.request("GET", "/v1/sandboxes?pageSize=201")
    assert st == 422
    assert b["detail"][0]["type"] == "less_than_equal" and b["detail"][0]["loc"] == ["query", "pageSize"]


def test_list_filters_and_pagination(server):
    tag = "t%d" % int(time.time() * 1000)
    ids = []
    try:
        for i, env in enumerate(["prod", "prod", "dev"]):
            st, _, b = server.request("POST", "/v1/sandboxes", {
                "image": {"uri": "x"}, "entrypoint": ["a"], "resourceLimits": {}, "timeout": 600,
                "metadata": {"suite": tag, "env": env}})
            assert st == 202
            ids.append(b["id"])
            time.sleep(0.01)
        q = urllib.parse.quote(urllib.parse.urlencode({"suite": tag, "env": "prod"}), safe="")
        st, _, b = server.request("GET", "/v1/sandboxes?metadata=" + q)
        assert st == 200
        assert [s["id"] for s in b["items"]] == [ids[1], ids[0]]  # newest first
        assert b["pagination"] == {"page": 1, "pageSize": 20, "totalItems": 2, "totalPages": 1, "hasNextPage": False}
        q = urllib.parse.quote(urllib.parse.urlencode({"suite": tag}), safe="")
        st, _, b = server.request("GET", "/v1/sandboxes?pageSize=2&page=1&metadata=" + q)
        assert b["pagination"] == {"page": 1, "pageSize": 2, "totalItems": 3, "totalPages": 2, "hasNextPage": True}
        assert [s["id"] for s in b["items"]] == [ids[2], ids[1]]
        st, _, b = server.request("GET", "/v1/sandboxes?pageSize=2&page=2&metadata=" + q)
        assert [s["id"] for s in b["items"]] == [ids[0]] and b["pagination"]["hasNextPage"] is False
        server.request("POST", "/v1/sandboxes/%s/pause" % ids[0])
        st, _, b = server.request("GET", "/v1/sandboxes?state=paused&state=FAILED&metadata=" + q)
        assert [s["id"] for s in b["items"]] == [ids[0]]
        st, _, b = server.request("GET", "/v1/sandboxes?state=nothing&metadata=" + q)
        assert b["items"] == [] and b["pagination"]["totalPages"] == 0
    finally:
        for i in ids:
            server.delete_sandbox(i)


def test_list_malformed_metadata_400(server):
    st, _, b = server.request("GET", "/v1/sandboxes?metadata=" + urllib.parse.quote("novalue", safe=""))
    assert st == 400 and b["code"] == "INVALID_METADATA_FORMAT"


def test_pause_resume_409(server, sandbox):
    st, _, b = server.request("POST", "/v1/sandboxes/%s/resume" % sandbox)
    assert st == 409 and b["code"] == "DOCKER::SANDBOX_NOT_PAUSED"
    st, h, b = server.request("POST", "/v1/sandboxes/%s/pause" % sandbox)
    assert st == 202 and b == b""
    st, _, b = server.request("POST", "/v1/sandboxes/%s/pause" % sandbox)
    assert st == 409 and b["code"] == "DOCKER::SANDBOX_NOT_RUNNING"
    st, _, g = server.request("GET", "/v1/sandboxes/" + sandbox)
    assert g["status"]["state"] == "Paused"
    st, _, b = server.request("POST", "/v1/sandboxes/%s/resume" % sandbox)
    assert st == 202
    st, _, g = server.request("GET", "/v1/sandboxes/" + sandbox)
    assert g["status"]["state"] == "Running"


def test_renew_past_400_and_future_200(server, sandbox):
    st, _, b = server.request("POST", "/v1/sandboxes/%s/renew-expiration" % sandbox, {"expiresAt": "2001-01-01T00:00:00Z"})
    assert st == 400 and b["code"] == "DOCKER::INVALID_EXPIRATION"
    st, _, b = server.request("POST", "/v1/sandboxes/%s/renew-expiration" % sandbox, {"expiresAt": "2099-01-01T12:00:00"})
    assert st == 200 and b == {"expiresAt": "2099-01-01T12:00:00Z"}
    st, _, g = server.request("GET", "/v1/sandboxes/" + sandbox)
    assert g["expiresAt"] == "2099-01-01T12:00:00Z"


def test_renew_without_timeout_409(server):
    sid = server.create_sandbox(timeout=None)
    try:
        st, _, g = server.request("GET", "/v1/sandboxes/" + sid)
        assert "expiresAt" not in g
        st, _, b = server.request("POST", "/v1/sandboxes/%s/renew-expiration" % sid, {"expiresAt": "2099-01-01T00:00:00Z"})
        assert st == 409 and b["code"] == "DOCKER::INVALID_EXPIRATION"
    finally:
        server.delete_sandbox(sid)


def test_delete_204_then_404(server):
    sid = server.create_sandbox()
    url = server.execd_url(sid)
    st, h, b = server.request("DELETE", "/v1/sandboxes/" + sid)
    assert st == 204 and b == b""
    st, _, b = server.request("GET", "/v1/sandboxes/" + sid)
    assert st == 404 and b["code"] == "DOCKER::SANDBOX_NOT_FOUND"
    st, _, b = server.request("DELETE", "/v1/sandboxes/" + sid)
    assert st == 404
    with pytest.raises(OSError) as ei:
        http_request(url, "GET", "/ping", timeout=5)
    assert ei.value.errno == errno.ECONNREFUSED


def test_patch_metadata_merge(server, sandbox):
    st, _, b = server.request("PATCH", "/v1/sandboxes/%s/metadata" % sandbox, {"a": "1", "b": "2"})
    assert st == 200 and b["metadata"] == {"a": "1", "b": "2"}
    st, _, b = server.request("PATCH", "/v1/sandboxes/%s/metadata" % sandbox, {"a": None, "c": "3"})
    assert b["metadata"] == {"b": "2", "c": "3"}


def test_pending_then_running(make_server):
    s = make_server(extra_args=["--pending-seconds", "1.5"])
    st, _, b = s.request("POST", "/v1/sandboxes", {"image": {"uri": "x"}, "entrypoint": ["a"], "resourceLimits": {}, "timeout": 600})
    assert st == 202 and b["status"]["state"] == "Pending"
    url, _ = s.endpoint(b["id"])
    with pytest.raises(ConnectionRefusedError):
        http_request(url, "GET", "/ping", timeout=5)
    time.sleep(2)
    st, _, g = s.request("GET", "/v1/sandboxes/" + b["id"])
    assert g["status"]["state"] == "Running"
    assert http_request(url, "GET", "/ping")[0] == 200


def test_expiry_deletes_sandbox(make_server):
    s = make_server(extra_args=["--min-timeout", "1"])
    sid = s.create_sandbox(timeout=1)
    url, _ = s.endpoint(sid)
    s.execd(sid, "POST", "/command", body={"command": "sleep 60", "background": True}, raw=True)
    time.sleep(1.6)
    st, _, _ = s.request("GET", "/v1/sandboxes/" + sid)
    assert st == 404
    with pytest.raises(OSError) as ei:
        http_request(url, "GET", "/ping", timeout=5)
    assert ei.value.errno == errno.ECONNREFUSED


def test_admin_force_failed_and_pending(server, sandbox):
    url, _ = server.endpoint(sandbox)
    st, _ = server.admin("POST", "/_admin/sandboxes/%s/state" % sandbox, {"state": "Failed", "reason": "OOM", "message": "boom"})
    assert st == 200
    st, _, g = server.request("GET", "/v1/sandboxes/" + sandbox)
    assert g["status"] == {"state": "Failed", "reason": "OOM", "message": "boom", "lastTransitionAt": g["status"]["lastTransitionAt"]}
    with pytest.raises(ConnectionRefusedError):
        http_request(url, "GET", "/ping", timeout=5)
    server.admin("POST", "/_admin/sandboxes/%s/state" % sandbox, {"state": "Running"})
    assert http_request(url, "GET", "/ping")[0] == 200


# ---------------------------------------------------------------- endpoints

def test_endpoint_without_scheme(server, sandbox):
    st, _, b = server.request("GET", "/v1/sandboxes/%s/endpoints/44772" % sandbox)
    assert st == 200 and "://" not in b["endpoint"]
    assert b["endpoint"].startswith("127.0.0.1:") and b["endpoint"].endswith("/proxy/44772")
    assert "headers" not in b


def test_endpoint_errors(server, sandbox):
    st, _, b = server.request("GET", "/v1/sandboxes/%s/endpoints/0" % sandbox)
    assert st == 400 and b["code"] == "DOCKER::INVALID_PORT"
    st, _, b = server.request("GET", "/v1/sandboxes/%s/endpoints/abc" % sandbox)
    assert st == 422
    st, _, b = server.request("GET", "/v1/sandboxes/nope/endpoints/44772")
    assert st == 404 and b["code"] == "DOCKER::SANDBOX_NOT_FOUND"
    st, _, b = server.request("GET", "/v1/sandboxes/%s/endpoints/44772?expires=99999999999" % sandbox)
    assert st == 400 and b["code"] == "SANDBOX::API_NOT_SUPPORTED"


def test_endpoint_host_style(make_server):
    s = make_server(extra_args=["--endpoint-style", "host"])
    sid = s.create_sandbox()
    st, _, b = s.request("GET", "/v1/sandboxes/%s/endpoints/44772" % sid)
    assert "/" not in b["endpoint"]
    assert http_request("http://" + b["endpoint"], "GET", "/ping")[0] == 200


def test_execd_routes_also_at_root(server, sandbox):
    url = server.execd_url(sandbox).rsplit("/proxy/", 1)[0]
    assert http_request(url, "GET", "/ping")[0] == 200


def test_execd_unknown_route(server, sandbox):
    st, h, b = server.execd(sandbox, "GET", "/nope")
    assert st == 404 and b == b"404 page not found" and h["content-type"].startswith("text/plain")


def test_execd_proxy_other_port_bad_gateway(server, sandbox):
    url = server.execd_url(sandbox).rsplit("/proxy/", 1)[0]
    st, _, b = http_request(url, "GET", "/proxy/1/x")
    assert st == 502 and b == b"Bad Gateway"


# ---------------------------------------------------------------- files: download / Range

def test_download_full(server, sandbox):
    server.write_file(sandbox, "/workspace/d.bin", b"0123456789")
    st, h, b = server.execd(sandbox, "GET", "/files/download", {"path": "/workspace/d.bin"}, raw=True)
    assert st == 200 and b == b"0123456789"
    assert h["content-type"] == "application/octet-stream"
    assert h["content-disposition"] == 'attachment; filename="d.bin"'
    assert h["accept-ranges"] == "bytes" and "last-modified" in h


def test_download_range_206(server, sandbox):
    server.write_file(sandbox, "/workspace/r.bin", b"0123456789")
    st, h, b = server.execd(sandbox, "GET", "/files/download", {"path": "/workspace/r.bin"},
                            headers={"Range": "bytes=2-5"}, raw=True)
    assert st == 206 and b == b"2345" and h["content-range"] == "bytes 2-5/10"
    assert h["content-length"] == "4"


def test_download_range_clamped_and_first_only(server, sandbox):
    server.write_file(sandbox, "/workspace/r.bin", b"0123456789")
    st, h, b = server.execd(sandbox, "GET", "/files/download", {"path": "/workspace/r.bin"},
                            headers={"Range": "bytes=20-30, 8-100, 0-1"}, raw=True)
    assert st == 206 and b == b"89" and h["content-range"] == "bytes 8-9/10"


def test_download_suffix_range(server, sandbox):
    server.write_file(sandbox, "/workspace/r.bin", b"0123456789")
    st, h, b = server.execd(sandbox, "GET", "/files/download", {"path": "/workspace/r.bin"},
                            headers={"Range": "bytes=-3"}, raw=True)
    assert st == 206 and b == b"789" and h["content-range"] == "bytes 7-9/10"


def test_download_range_at_eof_416(server, sandbox):
    server.write_file(sandbox, "/workspace/r.bin", b"0123456789")
    st, h, b = server.execd(sandbox, "GET", "/files/download", {"path": "/workspace/r.bin"},
                            headers={"Range": "bytes=10-"}, raw=True)
    assert st == 416 and h["content-range"] == "bytes */10"


def test_download_range_empty_file_416(server, sandbox):
    server.write_file(sandbox, "/workspace/empty", b"")
    st, h, b = server.execd(sandbox, "GET", "/files/download", {"path": "/workspace/empty"},
                            headers={"Range": "bytes=0-"}, raw=True)
    assert st == 416 and h["content-range"] == "bytes */0"


def test_download_malformed_range_416(server, sandbox):
    server.write_file(sandbox, "/workspace/r.bin", b"0123456789" * 10)
    url, eh = server.endpoint(sandbox)
    try:
        st, h, b = http_request(url, "GET", "/files/download?path=/workspace/r.bin", headers={"Range": "bytes=5-2"}, raw=True)
    except Exception as e:  # the body is short of its Content-Length
        st = getattr(e, "status", None)
        import http.client
        assert isinstance(e, http.client.IncompleteRead)
        return
    assert st == 416


def test_download_missing_404_and_no_path_400(server, sandbox):
    st, _, b = server.execd(sandbox, "GET", "/files/download", {"path": "/workspace/none"})
    assert st == 404 and b["code"] == "FILE_NOT_FOUND"
    st, _, b = server.execd(sandbox, "GET", "/files/download")
    assert st == 400 and b == {"code": "MISSING_QUERY", "message": "missing query parameter 'path'"}


# ---------------------------------------------------------------- files: info

def test_info_several_paths_keyed_as_sent(server, sandbox):
    server.write_file(sandbox, "/workspace/i.txt", b"abc", mode=640)
    st, _, b = server.execd(sandbox, "GET", "/files/info", {"path": ["/workspace/i.txt", "/workspace/../workspace/"]})
    assert st == 200
    assert set(b) == {"/workspace/i.txt", "/workspace/../workspace/"}
    f = b["/workspace/i.txt"]
    assert f["type"] == "file" and f["size"] == 3 and f["mode"] == 640
    assert f["owner"] == "root" and f["group"] == "root" and f["path"] == "/workspace/i.txt"
    assert set(f) == {"path", "type", "size", "modified_at", "created_at", "owner", "group", "mode"}
    assert b["/workspace/../workspace/"]["path"] == "/workspace"
    assert b["/workspace/../workspace/"]["type"] == "directory"


def test_info_all_or_nothing_404(server, sandbox):
    server.write_file(sandbox, "/workspace/i.txt", b"abc")
    st, _, b = server.execd(sandbox, "GET", "/files/info", {"path": ["/workspace/i.txt", "/workspace/missing"]})
    assert st == 404 and b["code"] == "FILE_NOT_FOUND"
    assert "/workspace/missing" in b["message"]


def test_info_no_path_empty_object(server, sandbox):
    st, _, b = server.execd(sandbox, "GET", "/files/info")
    assert st == 200 and b == {}


def test_info_symlink_not_followed(server, sandbox):
    server.run(sandbox, "ln -s /workspace/target-name /workspace/lnk")
    f = server.stat(sandbox, "/workspace/lnk")
    assert f["type"] == "symlink" and f["size"] == len("/workspace/target-name")


def test_info_mode_encoding(server, sandbox):
    server.write_file(sandbox, "/workspace/m", b"x")
    for mode, want in ((0o755, 755), (0o7, 7), (0o4755, 755), (0, 0)):
        code, _, _ = server.run(sandbox, "chmod %o /workspace/m" % mode)
        assert code == 0
        assert server.stat(sandbox, "/workspace/m")["mode"] == want


def test_info_created_at_is_ctime(server, sandbox):
    server.write_file(sandbox, "/workspace/c", b"x")
    code, out, _ = server.run(sandbox, "touch -d '2001-01-01 00:00:00 UTC' /workspace/c; stat -c %Z /workspace/c")
    f = server.stat(sandbox, "/workspace/c")
    assert f["modified_at"] == "2001-01-01T00:00:00Z"
    assert f["created_at"].startswith(time.strftime("%Y-%m-%dT%H:%M", time.gmtime(int(out.strip()))))


def test_info_other_type_fifo(server, sandbox):
    server.run(sandbox, "mkfifo /workspace/ff")
    assert server.stat(sandbox, "/workspace/ff")["type"] == "other"


def test_home_variable_expanded(server, sandbox):
    server.write_file(sandbox, "/root/h.txt", b"home")
    st, _, b = server.execd(sandbox, "GET", "/files/info", {"path": "$HOME/h.txt"})
    assert st == 200 and b["$HOME/h.txt"]["path"] == "/root/h.txt"
    st, _, b = server.execd(sandbox, "GET", "/files/info", {"path": "~/h.txt"})
    assert st == 200 and b["~/h.txt"]["path"] == "/root/h.txt"


def test_undefined_variable_500(server, sandbox):
    st, _, b = server.execd(sandbox, "GET", "/files/info", {"path": "/workspace/$FOO/x"})
    assert st == 500 and b["code"] == "RUNTIME_ERROR"
    assert "path references undefined environment variables: FOO" in b["message"]


def test_special_variables_eaten(server, sandbox):
    server.write_file(sandbox, "/workspace/ab", b"x")
    st, _, b = server.execd(sandbox, "GET", "/files/info", {"path": "/workspace/a$1b"})
    assert st == 200 and b["/workspace/a$1b"]["path"] == "/workspace/ab"


def test_relative_path_against_root(server, sandbox):
    st, _, b = server.execd(sandbox, "GET", "/files/info", {"path": "workspace"})
    assert st == 200 and b["workspace"]["path"] == "/workspace"


# ---------------------------------------------------------------- files: delete

def test_delete_missing_is_silent(server, sandbox):
    st, h, b = server.execd(sandbox, "DELETE", "/files", {"path": "/workspace/never"})
    assert st == 200 and b == b"" and "content-type" not in h
    st, _, _ = server.execd(sandbox, "DELETE", "/files")
    assert st == 200


def test_delete_file(server, sandbox):
    server.write_file(sandbox, "/workspace/del", b"x")
    st, _, _ = server.execd(sandbox, "DELETE", "/files", {"path": "/workspace/del"})
    assert st == 200 and server.stat(sandbox, "/workspace/del") is None


def test_delete_directory_500(server, sandbox):
    server.execd(sandbox, "POST", "/directories", body={"/workspace/dd": {}})
    st, _, b = server.execd(sandbox, "DELETE", "/files", {"path": "/workspace/dd"})
    assert st == 500 and b == {"code": "RUNTIME_ERROR",
                               "message": "error removing file /workspace/dd. path is a directory: /workspace/dd"}


def test_delete_dangling_symlink_kept(server, sandbox):
    server.run(sandbox, "ln -s /nowhere /workspace/dang")
    st, _, _ = server.execd(sandbox, "DELETE", "/files", {"path": "/workspace/dang"})
    assert st == 200 and server.stat(sandbox, "/workspace/dang")["type"] == "symlink"


# ---------------------------------------------------------------- files: mv

def test_mv_creates_parents(server, sandbox):
    server.write_file(sandbox, "/workspace/mv1", b"x")
    st, _, b = server.execd(sandbox, "POST", "/files/mv", body=[{"src": "/workspace/mv1", "dest": "/workspace/n/e/w/mv1"}])
    assert st == 200
    assert server.read_file(sandbox, "/workspace/n/e/w/mv1") == b"x"
    assert server.stat(sandbox, "/workspace/n/e")["mode"] == 755


def test_mv_dest_exists_500(server, sandbox):
    server.write_file(sandbox, "/workspace/a1", b"a")
    server.write_file(sandbox, "/workspace/b1", b"b")
    st, _, b = server.execd(sandbox, "POST", "/files/mv", body=[{"src": "/workspace/a1", "dest": "/workspace/b1"}])
    assert st == 500 and b["code"] == "RUNTIME_ERROR"
    assert "destination path already exists: /workspace/b1" in b["message"]


def test_mv_src_missing_404(server, sandbox):
    st, _, b = server.execd(sandbox, "POST", "/files/mv", body=[{"src": "/workspace/zz", "dest": "/workspace/yy"}])
    assert st == 404 and b["code"] == "FILE_NOT_FOUND"


def test_mv_bad_json_400(server, sandbox):
    st, _, b = server.execd(sandbox, "POST", "/files/mv", body=b"{", headers={"Content-Type": "application/json"})
    assert st == 400 and b["code"] == "INVALID_REQUEST_BODY"


# ---------------------------------------------------------------- files: permissions, mkdir, rmdir

def test_permissions_mode_and_chown_root_when_owner_absent(server, sandbox):
    server.write_file(sandbox, "/workspace/p", b"x")
    server.run(sandbox, "chown nobody:nogroup /workspace/p")
    assert server.stat(sandbox, "/workspace/p")["owner"] == "nobody"
    st, _, _ = server.execd(sandbox, "POST", "/files/permissions", body={"/workspace/p": {"mode": 600}})
    assert st == 200
    f = server.stat(sandbox, "/workspace/p")
    assert f["mode"] == 600 and f["owner"] == "root" and f["group"] == "root"


def test_permissions_owner_by_name(server, sandbox):
    server.write_file(sandbox, "/workspace/p2", b"x")
    st, _, _ = server.execd(sandbox, "POST", "/files/permissions",
                            body={"/workspace/p2": {"owner": "nobody", "group": "nogroup", "mode": 0}})
    f = server.stat(sandbox, "/workspace/p2")
    assert st == 200 and f["owner"] == "nobody" and f["group"] == "nogroup" and f["mode"] == 755


def test_permissions_missing_file_500(server, sandbox):
    st, _, b = server.execd(sandbox, "POST", "/files/permissions", body={"/workspace/nope": {"mode": 644}})
    assert st == 500 and b["code"] == "RUNTIME_ERROR"


def test_permissions_bad_digit_500(server, sandbox):
    server.write_file(sandbox, "/workspace/p3", b"x")
    st, _, b = server.execd(sandbox, "POST", "/files/permissions", body={"/workspace/p3": {"mode": 789}})
    assert st == 500 and "invalid syntax" in b["message"]


def test_permissions_wrong_type_400(server, sandbox):
    st, _, b = server.execd(sandbox, "POST", "/files/permissions", body={"/workspace/p3": {"mode": "755"}})
    assert st == 400 and b["code"] == "INVALID_REQUEST_BODY"


def test_mkdir_p_and_existing(server, sandbox):
    st, _, _ = server.execd(sandbox, "POST", "/directories", body={"/workspace/x/y/z": {"mode": 700}})
    assert st == 200
    assert server.stat(sandbox, "/workspace/x/y/z")["mode"] == 700
    assert server.stat(sandbox, "/workspace/x/y")["mode"] == 755
    st, _, _ = server.execd(sandbox, "POST", "/directories", body={"/workspace/x/y/z": {"mode": 700}})
    assert st == 200


def test_mkdir_over_file_500(server, sandbox):
    server.write_file(sandbox, "/workspace/f", b"x")
    st, _, b = server.execd(sandbox, "POST", "/directories", body={"/workspace/f/sub": {}})
    assert st == 500 and "not a directory" in b["message"]


def test_rmdir_is_rm_rf(server, sandbox):
    server.write_file(sandbox, "/workspace/t/a/b/c.txt", b"x")
    server.write_file(sandbox, "/workspace/plain", b"x")
    st, _, _ = server.execd(sandbox, "DELETE", "/directories",
                            {"path": ["/workspace/t", "/workspace/plain", "/workspace/missing"]})
    assert st == 200
    assert server.stat(sandbox, "/workspace/t") is None and server.stat(sandbox, "/workspace/plain") is None


def test_rmdir_symlink_not_followed(server, sandbox):
    server.write_file(sandbox, "/workspace/keep/k.txt", b"x")
    server.run(sandbox, "ln -s /workspace/keep /workspace/lk")
    st, _, _ = server.execd(sandbox, "DELETE", "/directories", {"path": "/workspace/lk"})
    assert st == 200
    assert server.stat(sandbox, "/workspace/lk") is None
    assert server.read_file(sandbox, "/workspace/keep/k.txt") == b"x"


# ---------------------------------------------------------------- files: list

def test_list_depth_sort_and_symlinks(server, sandbox):
    for p in ("/workspace/L/b/x", "/workspace/L/a", "/workspace/L/.h", "/workspace/L/b/y/z"):
        server.write_file(sandbox, p, b"")
    server.run(sandbox, "ln -s /workspace/L/b /workspace/L/c")
    st, _, b = server.execd(sandbox, "GET", "/directories/list", {"path": "/workspace/L"})
    assert st == 200
    assert [(e["path"], e["type"]) for e in b] == [("/workspace/L/.h", "file"), ("/workspace/L/a", "file"),
                                                   ("/workspace/L/b", "directory"), ("/workspace/L/c", "symlink")]
    st, _, b = server.execd(sandbox, "GET", "/directories/list", {"path": "/workspace/L", "depth": "2"})
    assert [e["path"] for e in b] == ["/workspace/L/.h", "/workspace/L/a", "/workspace/L/b", "/workspace/L/b/x",
                                      "/workspace/L/b/y", "/workspace/L/c"]
    st, _, b = server.execd(sandbox, "GET", "/directories/list", {"path": "/workspace/L", "depth": "0"})
    assert st == 200 and b == []


def test_list_errors(server, sandbox):
    server.write_file(sandbox, "/workspace/F", b"")
    server.run(sandbox, "ln -s /workspace /workspace/S")
    st, _, b = server.execd(sandbox, "GET", "/directories/list", {"path": "/workspace/F"})
    assert st == 400 and b == {"code": "INVALID_REQUEST_BODY", "message": "path is not a directory: /workspace/F"}
    st, _, b = server.execd(sandbox, "GET", "/directories/list", {"path": "/workspace/S"})
    assert st == 400 and b["message"] == "path is a symbolic link, refusing to traverse: /workspace/S"
    st, _, b = server.execd(sandbox, "GET", "/directories/list", {"path": "/workspace/none"})
    assert st == 404 and b["code"] == "FILE_NOT_FOUND"
    st, _, b = server.execd(sandbox, "GET", "/directories/list", {"path": "/workspace", "depth": "-1"})
    assert st == 400 and b["code"] == "INVALID_REQUEST_BODY"
    st, _, b = server.execd(sandbox, "GET", "/directories/list")
    assert st == 400 and b["code"] == "MISSING_QUERY"


def test_list_root_shows_sandbox_view(server, sandbox):
    st, _, b = server.execd(sandbox, "GET", "/directories/list", {"path": "/"})
    names = {e["path"]: e["type"] for e in b}
    assert names["/workspace"] == "directory" and names["/bin"] == "symlink" and names["/usr"] == "directory"
    assert "/work" not in names


# ---------------------------------------------------------------- files: search / replace

def test_search_base_name_glob(server, sandbox):
    for p in ("/workspace/s/a.py", "/workspace/s/d/b.py", "/workspace/s/d/c.txt"):
        server.write_file(sandbox, p, b"")
    st, _, b = server.execd(sandbox, "GET", "/files/search", {"path": "/workspace/s", "pattern": "*.py"})
    assert st == 200 and [e["path"] for e in b] == ["/workspace/s/a.py", "/workspace/s/d/b.py"]
    st, _, b = server.execd(sandbox, "GET", "/files/search", {"path": "/workspace/s"})
    assert len(b) == 3
    st, _, b = server.execd(sandbox, "GET", "/files/search", {"pattern": "*"})
    assert st == 400 and b["code"] == "MISSING_QUERY"
    st, _, b = server.execd(sandbox, "GET", "/files/search", {"path": "/workspace/nope"})
    assert st == 404


def test_replace_verbose(server, sandbox):
    server.write_file(sandbox, "/workspace/r.txt", b"aaa bbb aaa", mode=600)
    st, _, b = server.execd(sandbox, "POST", "/files/replace", {"verbose": "true"},
                            body={"/workspace/r.txt": {"old": "aaa", "new": "c"}})
    assert st == 200 and b == {"/workspace/r.txt": {"replacedCount": 2}}
    assert server.read_file(sandbox, "/workspace/r.txt") == b"c bbb c"
    assert server.stat(sandbox, "/workspace/r.txt")["mode"] == 600
    st, _, b = server.execd(sandbox, "POST", "/files/replace", body={"/workspace/r.txt": {"old": "", "new": "c"}})
    assert st == 400 and b["message"] == "old content must not be empty"


# ---------------------------------------------------------------- files: upload

def test_upload_several_files_one_request(server, sandbox):
    st, h, b = upload(server, sandbox, [meta("/workspace/u/1.txt"), filepart(b"one"),
                                        meta("/workspace/u/2.txt", mode=600), filepart(b"two")])
    assert st == 200 and b == b""
    assert server.read_file(sandbox, "/workspace/u/1.txt") == b"one"
    assert server.read_file(sandbox, "/workspace/u/2.txt") == b"two"
    assert server.stat(sandbox, "/workspace/u/1.txt")["mode"] == 755
    assert server.stat(sandbox, "/workspace/u/2.txt")["mode"] == 600


def test_upload_pairs_by_order_not_interleaving(server, sandbox):
    st, _, _ = upload(server, sandbox, [meta("/workspace/o1"), meta("/workspace/o2"), filepart(b"A"), filepart(b"B")])
    assert st == 200
    assert server.read_file(sandbox, "/workspace/o1") == b"A" and server.read_file(sandbox, "/workspace/o2") == b"B"


def test_upload_filenameless_parts_invisible(server, sandbox):
    st, _, b = upload(server, sandbox, [("metadata", None, "application/json", b'{"path":"/workspace/q"}'), filepart(b"x")])
    assert st == 400 and b == {"code": "INVALID_FILE_METADATA", "message": "metadata file is missing"}


def test_upload_errors(server, sandbox):
    st, _, b = upload(server, sandbox, [meta("/workspace/q")])
    assert st == 400 and b == {"code": "INVALID_FILE_CONTENT", "message": "file is missing"}
    st, _, b = upload(server, sandbox, [meta("/workspace/q"), meta("/workspace/r"), filepart(b"x")])
    assert st == 400 and b == {"code": "INVALID_FILE", "message": "metadata and file count mismatch: 2 vs 1"}
    st, _, b = upload(server, sandbox, [("metadata", "m", None, b"{bad"), filepart(b"x")])
    assert st == 400 and b["code"] == "INVALID_FILE_METADATA"
    st, _, b = upload(server, sandbox, [("metadata", "m", None, b'{"path":""}'), filepart(b"x")])
    assert st == 400 and b == {"code": "INVALID_FILE_METADATA", "message": "metadata path is empty"}
    st, _, b = server.execd(sandbox, "POST", "/files/upload", body=b"plain", headers={"Content-Type": "text/plain"})
    assert st == 400 and b == {"code": "INVALID_FILE", "message": "multipart form is empty"}


def test_upload_truncated_body(server, sandbox):
    body, ctype = multipart_body([meta("/workspace/trunc"), filepart(b"x" * 1000)])
    st, _, b = server.execd(sandbox, "POST", "/files/upload", body=body[:-30], headers={"Content-Type": ctype})
    assert st == 400 and b["code"] == "INVALID_FILE"
    assert server.stat(sandbox, "/workspace/trunc") is None


def test_upload_into_directory_500(server, sandbox):
    server.execd(sandbox, "POST", "/directories", body={"/workspace/isdir": {}})
    st, _, b = upload(server, sandbox, [meta("/workspace/isdir"), filepart(b"x")])
    assert st == 500 and "is a directory" in b["message"]


def test_upload_chunked_request(server, sandbox):
    body, ctype = multipart_body([meta("/workspace/chunked"), filepart(b"z" * 300000)])
    url, eh = server.endpoint(sandbox)
    u = urllib.parse.urlsplit(url)
    import http.client
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.putrequest("POST", u.path + "/files/upload")
    c.putheader("Content-Type", ctype)
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    for i in range(0, len(body), 65536):
        piece = body[i:i + 65536]
        c.send(b"%x\r\n%s\r\n" % (len(piece), piece))
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    assert r.status == 200
    r.read()
    c.close()
    assert server.read_file(sandbox, "/workspace/chunked") == b"z" * 300000


def test_upload_overwrite_truncates_in_place_keeps_mode(server, sandbox):
    server.write_file(sandbox, "/workspace/ow", b"long content here", mode=640)
    server.write_file(sandbox, "/workspace/ow", b"short")
    assert server.read_file(sandbox, "/workspace/ow") == b"short"
    assert server.stat(sandbox, "/workspace/ow")["mode"] == 640


def test_upload_read_only_path_500(server, sandbox):
    st, _, b = upload(server, sandbox, [meta("/opt/osb-test-file"), filepart(b"x")])
    assert st == 500 and b["message"].endswith("read-only file system")
    assert not os.path.exists("/opt/osb-test-file")
    st, _, b = upload(server, sandbox, [meta("/osb-test-file"), filepart(b"x")])
    assert st == 500 and b["message"].endswith("read-only file system")


# ---------------------------------------------------------------- security

def test_symlink_escape_upload_stays_in_sandbox(server, sandbox, tmp_path):
    host = tmp_path / "host-secret"
    host.write_bytes(b"host")
    server.run(sandbox, "ln -s %s /workspace/evil; ln -s /root /workspace/evil2" % host)
    st, _, b = upload(server, sandbox, [meta("/workspace/evil"), filepart(b"pwned")])
    # the target's parent does not exist in the sandbox: open fails as in a container
    assert st == 500 and b["message"].endswith("no such file or directory")
    assert host.read_bytes() == b"host"
    server.run(sandbox, "mkdir -p %s" % host.parent)
    st, _, b = upload(server, sandbox, [meta("/workspace/evil"), filepart(b"pwned")])
    assert st == 200 and host.read_bytes() == b"host"
    # the link pointed into the sandbox's own namespace: the file landed there
    assert server.read_file(sandbox, str(host)) == b"pwned"
    st, _, _ = upload(server, sandbox, [meta("/workspace/evil2/x"), filepart(b"in-root")])
    assert st == 200 and server.read_file(sandbox, "/root/x") == b"in-root"


def test_dotdot_cannot_escape(server, sandbox):
    st, _, b = upload(server, sandbox, [meta("/workspace/../../../../opt/osb-escape"), filepart(b"x")])
    assert st == 500 and "read-only file system" in b["message"]
    assert not os.path.exists("/opt/osb-escape")
    # the sandbox's /etc is its own: the file lands there, not in the host's
    st, _, b = upload(server, sandbox, [meta("/workspace/../../../../etc/osb-escape"), filepart(b"x")])
    assert st == 200 and server.read_file(sandbox, "/etc/osb-escape") == b"x"
    assert not os.path.exists("/etc/osb-escape")
    st, _, b = server.execd(sandbox, "GET", "/files/info", {"path": "/workspace/../../.."})
    assert b["/workspace/../../.."]["path"] == "/"


def test_escape_through_links_for_every_mutation(server, sandbox, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "f").write_bytes(b"keep")
    os.chmod(victim / "f", 0o644)
    server.run(sandbox, "ln -s %s /workspace/v; ln -s ../../../../%s /workspace/rel" % (victim, victim))
    for lnk in ("/workspace/v", "/workspace/rel"):
        server.execd(sandbox, "DELETE", "/files", {"path": lnk + "/f"})
        server.execd(sandbox, "DELETE", "/directories", {"path": lnk + "/f"})
        server.execd(sandbox, "POST", "/files/permissions", body={lnk + "/f": {"mode": 777, "owner": "nobody"}})
        server.execd(sandbox, "POST", "/directories", body={lnk + "/newdir": {}})
        server.execd(sandbox, "POST", "/files/mv", body=[{"src": lnk + "/f", "dest": "/workspace/stolen"}])
        server.execd(sandbox, "POST", "/files/replace", body={lnk + "/f": {"old": "keep", "new": "gone"}})
        upload(server, sandbox, [meta(lnk + "/f"), filepart(b"pwned")])
    assert sorted(os.listdir(victim)) == ["f"]
    assert (victim / "f").read_bytes() == b"keep"
    assert os.stat(victim / "f").st_mode & 0o777 == 0o644 and os.stat(victim / "f").st_uid == 0


def test_commands_cannot_write_host(server, sandbox):
    code, _, err = server.run(sandbox, "echo x > /opt/osb-cmd-escape")
    assert code != 0 and "Read-only file system" in err
    assert not os.path.exists("/opt/osb-cmd-escape")
    code, _, err = server.run(sandbox, "echo x > /etc/osb-cmd-escape && echo y >> /etc/hostname")
    assert code == 0, err
    assert not os.path.exists("/etc/osb-cmd-escape")
    assert server.read_file(sandbox, "/etc/hostname").endswith(b"y\n")
    with open("/etc/hostname", "rb") as f:
        assert not f.read().endswith(b"y\n")


def test_file_api_and_commands_share_files(server, sandbox):
    server.write_file(sandbox, "/workspace/x.py", b"print(6*7)\n")
    code, out, _ = server.run(sandbox, "python3 /workspace/x.py")
    assert code == 0 and out == "42\n"
    server.run(sandbox, "echo made-by-cmd > /tmp/t.txt")
    assert server.read_file(sandbox, "/tmp/t.txt") == b"made-by-cmd\n"


# ---------------------------------------------------------------- the sandbox's own /usr, /etc, /var

def server_mounts(s):
    """The mount points of the server's own mount namespace."""
    with open("/proc/%d/mountinfo" % s.proc.pid) as f:
        return [line.split()[4] for line in f]


def sandbox_base(s, sid):
    st, info = s.admin("GET", "/_admin/sandboxes/" + sid)
    assert st == 200, info
    return info["base"]


HOST_FILES = ("/usr/local/bin/osb-hello", "/etc/osb-x", "/var/lib/osb-y")


def write_system_files(s, sid):
    code, out, err = s.run(sid, "printf '#!/bin/sh\\necho hello\\n' > /usr/local/bin/osb-hello && "
                                "chmod 755 /usr/local/bin/osb-hello && echo x > /etc/osb-x && echo y > /var/lib/osb-y")
    assert code == 0, (out, err)


def assert_system_files(s, sid):
    code, out, err = s.run(sid, "osb-hello; cat /etc/osb-x /var/lib/osb-y")
    assert (code, out) == (0, "hello\nx\ny\n"), err
    assert s.read_file(sid, "/usr/local/bin/osb-hello") == b"#!/bin/sh\necho hello\n"
    assert s.read_file(sid, "/etc/osb-x") == b"x\n"
    assert s.stat(sid, "/usr/local/bin/osb-hello")["mode"] == 755
    for p in HOST_FILES:
        assert not os.path.exists(p), p


def test_system_dirs_are_the_sandboxs_own(server, sandbox):
    write_system_files(server, sandbox)
    assert_system_files(server, sandbox)
    # the file API writes there too, and commands see it
    server.write_file(sandbox, "/usr/local/bin/osb-hello", b"#!/bin/sh\necho via-api\n", mode=755)
    assert server.run(sandbox, "osb-hello")[1] == "via-api\n"
    assert not os.path.exists("/usr/local/bin/osb-hello")
    # what the host has shows through, and changing it changes only the sandbox's copy
    code, out, _ = server.run(sandbox, "grep -c . /etc/passwd >/dev/null && echo extra >> /etc/passwd && tail -1 /etc/passwd")
    assert (code, out) == (0, "extra\n")
    with open("/etc/passwd") as f:
        assert not f.read().endswith("extra\n")
    # /var/tmp stays a directory of the sandbox's own, empty at first
    assert server.run(sandbox, "ls -A /var/tmp")[1] == ""
    base = sandbox_base(server, sandbox)
    assert os.path.isfile(os.path.join(base, "sys", "usr", "upper", "local", "bin", "osb-hello"))
    assert os.path.join(base, "sys", "usr", "merged") in server_mounts(server)


def test_system_dirs_not_shared_between_sandboxes(server, sandbox):
    write_system_files(server, sandbox)
    other = server.create_sandbox()
    try:
        code, out, _ = server.run(other, "ls /usr/local/bin/osb-hello /etc/osb-x /var/lib/osb-y 2>&1")
        assert code != 0 and out.count("No such file") == 3
        assert server.stat(other, "/etc/osb-x") is None
    finally:
        server.delete_sandbox(other)


def test_system_dirs_survive_restart_and_pause_delete_unmounts(make_server):
    s = make_server()
    sid = s.create_sandbox()
    write_system_files(s, sid)
    s.request("POST", "/v1/sandboxes/%s/pause" % sid)
    s.request("POST", "/v1/sandboxes/%s/resume" % sid)
    assert_system_files(s, sid)
    s.restart()
    assert_system_files(s, sid)
    s.kill()  # a killed server leaves no mount behind: its namespace dies with it
    s.restart()
    assert_system_files(s, sid)
    base = sandbox_base(s, sid)
    merged = [os.path.join(base, "sys", d, "merged") for d in ("usr", "etc", "var")]
    assert set(merged) <= set(server_mounts(s))
    assert s.delete_sandbox(sid) == 204
    assert not set(merged) & set(server_mounts(s))
    assert not os.path.exists(base)
    wait_until(lambda: not os.listdir(os.path.join(s.data_dir, "trash")), 10, "the deleted sandbox's data to go")


def test_server_mounts_stay_in_its_namespace(server, sandbox):
    base = sandbox_base(server, sandbox)
    assert os.path.join(base, "sys", "etc", "merged") in server_mounts(server)
    with open("/proc/self/mountinfo") as f:
        assert base not in f.read()


def test_apt_get_install_in_a_sandbox(server, sandbox):
    assert not os.path.exists("/usr/games/sl"), "the host has sl installed: pick another package"
    cmd = "apt-get install -y --no-install-recommends sl 2>&1"
    code, out, _ = server.run(sandbox, cmd, timeout=300)
    if code != 0:
        code, out, _ = server.run(sandbox, "apt-get update 2>&1 && " + cmd, timeout=300)
    assert code == 0, "apt-get install sl failed in the sandbox (needs deb.debian.org):\n" + out[-3000:]
    code, out, err = server.run(sandbox, "ls /usr/games/sl && dpkg -s sl | grep '^Status'")
    assert (code, out) == (0, "/usr/games/sl\nStatus: install ok installed\n"), err
    assert not os.path.exists("/usr/games/sl")


def test_npm_install_global_in_a_sandbox(server, sandbox):
    if not os.path.exists("/usr/bin/npm"):
        pytest.fail("npm is not installed on this machine")
    assert not os.path.exists("/usr/bin/json"), "the host has the json CLI: pick another package"
    code, out, err = server.run(sandbox, "npm install -g json 2>&1", timeout=300)
    assert code == 0, "npm install -g json failed in the sandbox (needs registry.npmjs.org):\n" + out[-3000:]
    code, out, err = server.run(sandbox, "echo '{\"a\": 42}' | json a")
    assert (code, out) == (0, "42\n"), err
    assert not os.path.exists("/usr/bin/json") and not os.path.exists("/usr/lib/node_modules/json")


# ---------------------------------------------------------------- commands

def test_command_framing_and_exit_code(server, sandbox):
    evs, raw = events(server, sandbox, "/command", {"command": "echo hi; echo err >&2; exit 3"})
    assert raw.startswith(b'{"type":"init"')
    assert b"\n\n" in raw and b"data:" not in raw
    assert evs[0]["type"] == "init" and len(evs[0]["text"]) == 32
    assert evs[1]["type"] == "ping" and evs[1]["text"] == "pong"
    kinds = [(e["type"], e.get("text")) for e in evs if e["type"] in ("stdout", "stderr")]
    assert sorted(kinds) == [("stderr", "err"), ("stdout", "hi")]
    assert evs[-1]["type"] == "error"
    assert evs[-1]["error"] == {"ename": "CommandExecError", "evalue": "3", "traceback": ["exit status 3"]}
    assert not any(e["type"] == "execution_complete" for e in evs)


def test_command_success_and_line_splitting(server, sandbox):
    evs, _ = events(server, sandbox, "/command", {"command": "printf 'a\\n\\nb\\rc\\r\\nlast'"})
    assert [e["text"] for e in evs if e["type"] == "stdout"] == ["a", "\n", "b", "c", "last"]
    assert evs[-1]["type"] == "execution_complete"


def test_command_grace_second(server, sandbox):
    t0 = time.monotonic()
    events(server, sandbox, "/command", {"command": "true"})
    assert 0.9 < time.monotonic() - t0 < 3


def test_command_env_and_cwd(server, sandbox):
    evs, _ = events(server, sandbox, "/command", {"command": "echo $FOO $HOME; pwd", "cwd": "/tmp", "envs": {"FOO": "bar"}})
    assert [e["text"] for e in evs if e["type"] == "stdout"] == ["bar /root", "/tmp"]


def test_command_default_cwd_is_root(server, sandbox):
    assert server.run(sandbox, "pwd")[1] == "/\n"


def test_command_cwd_errors(server, sandbox):
    st, _, b = server.execd(sandbox, "POST", "/command", body={"command": "true", "cwd": "/nope"})
    assert st == 400 and b["message"] == "working directory does not exist: /nope"
    server.write_file(sandbox, "/workspace/file", b"")
    st, _, b = server.execd(sandbox, "POST", "/command", body={"command": "true", "cwd": "/workspace/file"})
    assert st == 400 and "is not a directory" in b["message"]


def test_command_validation(server, sandbox):
    st, _, b = server.execd(sandbox, "POST", "/command", body={"command": ""})
    assert st == 400 and b["code"] == "INVALID_REQUEST_BODY"
    st, _, b = server.execd(sandbox, "POST", "/command", body={"command": "true", "gid": 5})
    assert st == 400 and "uid is required when gid is provided" in b["message"]
    st, _, b = server.execd(sandbox, "POST", "/command", body=b"{nope", headers={"Content-Type": "application/json"})
    assert st == 400 and b["code"] == "INVALID_REQUEST_BODY"


def test_command_uid(server, sandbox):
    evs, _ = events(server, sandbox, "/command", {"command": "id -u; id -g", "uid": 65534})
    assert [e["text"] for e in evs if e["type"] == "stdout"] == ["65534", "65534"]


def test_command_timeout_kills(server, sandbox):
    evs, _ = events(server, sandbox, "/command", {"command": "sleep 30", "timeout": 500})
    assert evs[-1]["type"] == "error" and evs[-1]["error"]["evalue"] == "-1"
    assert evs[-1]["error"]["traceback"] == ["signal: killed"]


def test_background_status_and_logs(server, sandbox):
    evs, _ = events(server, sandbox, "/command", {"command": "printf 'abc'; sleep 0.5; echo def; echo err >&2", "background": True})
    assert [e["type"] for e in evs][:2] == ["init", "ping"] and evs[-1]["type"] == "execution_complete"
    cid = evs[0]["text"]

    def finished():
        st, _, s = server.execd(sandbox, "GET", "/command/status/" + cid)
        return st == 200 and not s["running"] and s

    s = wait_until(finished, 10, "the background command to finish", step=0.1)
    assert s["exit_code"] == 0 and s["content"].startswith("printf") and "error" not in s
    st, h, body = server.execd(sandbox, "GET", "/command/%s/logs" % cid, raw=True)
    assert st == 200 and body == b"abcdef\nerr\n"
    assert h["execd-commands-tail-cursor"] == "11"
    assert h["content-type"] == "text/plain; charset=utf-8"
    st, h, body = server.execd(sandbox, "GET", "/command/%s/logs" % cid, {"cursor": 3}, raw=True)
    assert body == b"def\nerr\n" and h["execd-commands-tail-cursor"] == "11"
    st, h, body = server.execd(sandbox, "GET", "/command/%s/logs" % cid, {"cursor": 99}, raw=True)
    assert body == b"" and h["execd-commands-tail-cursor"] == "99"
    assert server.read_file(sandbox, "/tmp/%s.output" % cid) == b"abcdef\nerr\n"


def test_status_and_logs_errors(server, sandbox):
    st, _, b = server.execd(sandbox, "GET", "/command/status/nope")
    assert st == 404 and b == {"code": "INVALID_REQUEST_BODY", "message": "command not found: nope"}
    st, _, b = server.execd(sandbox, "GET", "/command/nope/logs")
    assert st == 400 and b["message"] == "command not found: nope"
    evs, _ = events(server, sandbox, "/command", {"command": "true"})
    st, _, b = server.execd(sandbox, "GET", "/command/%s/logs" % evs[0]["text"])
    assert st == 400 and b["message"] == "command %s is not running in background" % evs[0]["text"]


def test_interrupt_background(server, sandbox):
    evs, _ = events(server, sandbox, "/command", {"command": "sleep 60", "background": True})
    cid = evs[0]["text"]
    time.sleep(0.2)
    st, _, _ = server.execd(sandbox, "DELETE", "/command", {"id": cid})
    assert st == 200
    st, _, s = server.execd(sandbox, "GET", "/command/status/" + cid)
    assert s["running"] is False and s["exit_code"] == -1 and s["error"] == "signal: terminated"
    st, _, b = server.execd(sandbox, "DELETE", "/command", {"id": cid})
    assert st == 500 and "is not running" in b["message"]
    st, _, b = server.execd(sandbox, "DELETE", "/command", {"id": "unknown"})
    assert st == 500
    st, _, b = server.execd(sandbox, "DELETE", "/command")
    assert st == 400 and b["code"] == "MISSING_QUERY"


def test_foreground_survives_client_disconnect(server, sandbox):
    url, _ = server.endpoint(sandbox)
    u = urllib.parse.urlsplit(url)
    s = socket.create_connection((u.hostname, u.port))
    body = json.dumps({"command": "sleep 0.5; echo done > /workspace/after-disconnect"}).encode()
    s.sendall(b"POST %s/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (u.path.encode(), len(body), body))
    s.recv(100)
    s.close()
    # (half a second, stretched by a busy machine)
    wait_until(lambda: server.execd(sandbox, "GET", "/files/info",
                                    {"path": "/workspace/after-disconnect"})[0] == 200,
               10, "the command to end after its client left")
    assert server.read_file(sandbox, "/workspace/after-disconnect") == b"done\n"


# ---------------------------------------------------------------- sessions

def test_session_keeps_exports_and_cwd(server, sandbox):
    st, _, b = server.execd(sandbox, "POST", "/session", body={"cwd": "/workspace/sess"})
    assert st == 200 and len(b["session_id"]) == 36
    sid = b["session_id"]
    assert server.stat(sandbox, "/workspace/sess")["type"] == "directory"
    evs, _ = events(server, sandbox, "/session/%s/run" % sid, {"command": "export A=1; B=2; cd /tmp; echo x; echo; echo y >&2"})
    assert evs[0] == {"type": "init", "text": sid, "timestamp": evs[0]["timestamp"]}
    assert [e["text"] for e in evs if e["type"] == "stdout"] in (["x", "y"], ["y", "x"])
    assert evs[-1]["type"] == "execution_complete"
    evs, _ = events(server, sandbox, "/session/%s/run" % sid, {"command": "echo A=$A B=$B; pwd; false"})
    assert [e["text"] for e in evs if e["type"] == "stdout"] == ["A=1 B=", "/tmp"]
    assert evs[-1]["error"] == {"ename": "CommandExecError", "evalue": "1", "traceback": ["exit status 1"]}
    st, _, _ = server.execd(sandbox, "DELETE", "/session/" + sid)
    assert st == 200
    st, _, b = server.execd(sandbox, "DELETE", "/session/" + sid)
    assert st == 404 and b == {"code": "CONTEXT_NOT_FOUND", "message": "session %s not found" % sid}


def test_session_unknown_500(server, sandbox):
    st, _, b = server.execd(sandbox, "POST", "/session/nope/run", body={"command": "true"})
    assert st == 500 and b == {"code": "RUNTIME_ERROR", "message": "error running in session. context not found"}


def test_session_timeout(server, sandbox):
    sid = server.execd(sandbox, "POST", "/session")[2]["session_id"]
    st, _, raw = server.execd(sandbox, "POST", "/session/%s/run" % sid, body={"command": "sleep 10", "timeout": 300}, raw=True)
    assert st == 200
    assert raw.rstrip().endswith(b'{"code":"RUNTIME_ERROR","message":"error running in session. timeout after 300ms"}')


# ---------------------------------------------------------------- code contexts

def test_code_python_state_result_error(server, sandbox):
    st, _, ctx = server.execd(sandbox, "POST", "/code/context", body={"language": "python", "cwd": "/workspace/nb"})
    assert st == 200 and ctx["language"] == "python" and len(ctx["id"]) == 32
    run = {"context": {"id": ctx["id"], "language": "python"}}
    evs, _ = events(server, sandbox, "/code", dict(run, code="x = 40\nprint('hello')\nx + 2"))
    types = [e["type"] for e in evs]
    assert types[0] == "init" and evs[0]["text"] == ctx["id"]
    assert "".join(e["text"] for e in evs if e["type"] == "stdout") == "hello\n"
    assert [e["results"] for e in evs if e["type"] == "result"] == [{"text": "42"}]
    assert types[-1] == "execution_complete"
    assert [e["execution_count"] for e in evs if e["type"] == "execution_count"] == [1]
    evs, _ = events(server, sandbox, "/code", dict(run, code="import os; print(os.getcwd(), x)\n1/0"))
    assert "".join(e["text"] for e in evs if e["type"] == "stdout") == "/workspace/nb 40\n"
    err = [e for e in evs if e["type"] == "error"][0]["error"]
    assert err["ename"] == "ZeroDivisionError" and err["evalue"] == "division by zero"
    assert err["traceback"][-1] == "ZeroDivisionError: division by zero"
    assert evs[-1]["type"] == "error"
    st, _, lst = server.execd(sandbox, "GET", "/code/contexts", {"language": "python"})
    assert {"id": ctx["id"], "language": "python"} in lst
    st, _, _ = server.execd(sandbox, "DELETE", "/code/contexts/" + ctx["id"])
    assert st == 200
    st, _, b = server.execd(sandbox, "GET", "/code/contexts/" + ctx["id"])
    assert st == 404 and b["code"] == "CONTEXT_NOT_FOUND"


def test_code_bash_state(server, sandbox):
    st, _, ctx = server.execd(sandbox, "POST", "/code/context", body={"language": "bash"})
    run = {"context": {"id": ctx["id"], "language": "bash"}}
    events(server, sandbox, "/code", dict(run, code="V=7; f() { echo f$1; }; cd /tmp"))
    evs, _ = events(server, sandbox, "/code", dict(run, code="echo $V; f 1; pwd"))
    assert "".join(e["text"] for e in evs if e["type"] == "stdout") == "7\nf1\n/tmp\n"
    assert evs[-1]["type"] == "execution_complete"


def test_code_javascript_state(server, sandbox):
    st, _, ctx = server.execd(sandbox, "POST", "/code/context", body={"language": "javascript"})
    assert st == 200
    run = {"context": {"id": ctx["id"], "language": "javascript"}}
    events(server, sandbox, "/code", dict(run, code="var n = 5; console.log('hi')"))
    evs, _ = events(server, sandbox, "/code", dict(run, code="n * 2"))
    assert [e["results"] for e in evs if e["type"] == "result"] == [{"text": "10"}]


def test_code_default_context_and_command_language(server, sandbox):
    evs, _ = events(server, sandbox, "/code", {"context": {"language": "python"}, "code": "y = 3"})
    evs, _ = events(server, sandbox, "/code", {"context": {"language": "python"}, "code": "y"})
    assert [e["results"] for e in evs if e["type"] == "result"] == [{"text": "3"}]
    evs, _ = events(server, sandbox, "/code", {"code": "echo as-command"})
    assert [e["text"] for e in evs if e["type"] == "stdout"] == ["as-command"]


def test_code_errors(server, sandbox):
    st, _, b = server.execd(sandbox, "POST", "/code", body={"context": {"id": "nope", "language": "python"}, "code": "1"})
    assert st == 500 and "context not found" in b["message"]
    st, _, b = server.execd(sandbox, "POST", "/code/context", body={"language": "java"})
    assert st == 500 and b["code"] == "RUNTIME_ERROR"
    st, _, b = server.execd(sandbox, "DELETE", "/code/contexts")
    assert st == 400 and b["code"] == "MISSING_QUERY"


def test_code_interrupt(server, sandbox):
    st, _, ctx = server.execd(sandbox, "POST", "/code/context", body={"language": "python"})
    result = {}

    def run():
        result["evs"], _ = events(server, sandbox, "/code", {"context": {"id": ctx["id"], "language": "python"},
                                                             "code": "import time\ntime.sleep(30)"})
    t = threading.Thread(target=run)
    t.start()
    time.sleep(1)
    st, _, _ = server.execd(sandbox, "DELETE", "/code", {"id": ctx["id"]})
    assert st == 200
    t.join(10)
    assert not t.is_alive()
    assert [e["error"]["ename"] for e in result["evs"] if e["type"] == "error"] == ["KeyboardInterrupt"]


# ---------------------------------------------------------------- egress

def egress(server, sid, method, body=None, auth=True):
    url, headers = server.endpoint(sid, 18080)
    return http_request(url, method, "/policy", body, headers if auth else {})


def test_egress_get_patch_delete(server):
    sid = server.create_sandbox(networkPolicy={"defaultAction": "deny", "egress": [{"action": "allow", "target": "pypi.org"}]})
    try:
        url, headers = server.endpoint(sid, 18080)
        assert url.endswith("/proxy/18080") and list(headers) == ["OPENSANDBOX-EGRESS-AUTH"]
        st, _, b = egress(server, sid, "GET")
        assert st == 200 and b == {"status": "ok", "mode": "enforcing", "enforcementMode": "dns",
                                   "policy": {"egress": [{"action": "allow", "target": "pypi.org"}], "defaultAction": "deny"}}
        st, _, b = egress(server, sid, "PATCH", [{"action": "deny", "target": "a.com"}, {"action": "allow", "target": "A.com"},
                                                 {"action": "DENY", "target": "PyPI.org"}])
        assert st == 200 and b == {"status": "ok", "mode": "enforcing", "enforcementMode": "dns"}
        st, _, b = egress(server, sid, "GET")
        assert b["policy"]["egress"] == [{"action": "deny", "target": "a.com"}, {"action": "deny", "target": "PyPI.org"}]
        st, _, b = egress(server, sid, "DELETE", ["A.COM"])
        assert st == 200 and "reason" not in b
        st, _, b = egress(server, sid, "DELETE", ["nothing.example"])
        assert b["reason"] == "no matching targets found"
        st, _, b = egress(server, sid, "POST", b"")
        assert b["reason"] == "policy reset to default deny-all" and b["mode"] == "deny_all"
    finally:
        server.delete_sandbox(sid)


def test_egress_errors_text_plain(server):
    sid = server.create_sandbox(networkPolicy={"defaultAction": "allow"})
    try:
        st, h, b = egress(server, sid, "PATCH", b"[]")
        assert st == 400 and h["content-type"].startswith("text/plain") and b.endswith(b"\n")
        st, h, b = egress(server, sid, "PATCH", b"{bad")
        assert st == 400 and h["content-type"].startswith("text/plain")
        st, h, b = egress(server, sid, "PATCH", [{"action": "maybe", "target": "x.com"}])
        assert st == 400
        st, h, b = egress(server, sid, "GET", auth=False)
        assert st == 401 and b == b"unauthorized\n"
        st, _, b = egress(server, sid, "GET")
        assert b["mode"] == "allow_all"
    finally:
        server.delete_sandbox(sid)


def test_egress_absent_without_policy(server, sandbox):
    st, _, b = egress(server, sandbox, "GET")
    assert st == 502 and b == b"Bad Gateway"


# ---------------------------------------------------------------- paused sandbox

def test_paused_requests_hang_until_resume(server, sandbox):
    server.request("POST", "/v1/sandboxes/%s/pause" % sandbox)
    url, _ = server.endpoint(sandbox)
    with pytest.raises(socket.timeout):
        http_request(url, "GET", "/ping", timeout=1)
    result = {}

    def call():
        result["st"] = http_request(url, "GET", "/ping", timeout=20)[0]
    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.5)
    assert "st" not in result
    server.request("POST", "/v1/sandboxes/%s/resume" % sandbox)
    t.join(10)
    assert result["st"] == 200


def test_pause_freezes_processes(server, sandbox):
    evs, _ = events(server, sandbox, "/command", {"command": "while true; do date +%s%N >> /tmp/tick; sleep 0.05; done",
                                                  "background": True})
    time.sleep(0.3)
    server.request("POST", "/v1/sandboxes/%s/pause" % sandbox)
    st, info = server.admin("GET", "/_admin/sandboxes/" + sandbox)
    tick = os.path.join(info["rootfs"], "tmp", "tick")
    n1 = len(open(tick).read().split())
    time.sleep(0.5)
    n2 = len(open(tick).read().split())
    server.request("POST", "/v1/sandboxes/%s/resume" % sandbox)
    time.sleep(0.5)
    n3 = len(open(tick).read().split())
    assert n2 - n1 <= 1 and n3 > n2


# ---------------------------------------------------------------- faults and stats

def test_fault_next_n(server, sandbox):
    server.set_faults(next=2, kinds=["503"], path="/ping$")
    try:
        assert server.execd(sandbox, "GET", "/ping")[0] == 503
        assert server.execd(sandbox, "GET", "/ping")[0] == 503
        assert server.execd(sandbox, "GET", "/ping")[0] == 200
    finally:
        server.clear_faults()


def test_fault_500_body_and_reset(server, sandbox):
    server.set_faults(next=1, kinds=["500"], path="/files/info")
    try:
        st, _, b = server.execd(sandbox, "GET", "/files/info", {"path": "/"})
        assert st == 500 and b == {"code": "RUNTIME_ERROR", "message": "injected fault"}
        server.set_faults(next=1, kinds=["reset"], path="/files/info")
        with pytest.raises(OSError) as ei:
            server.execd(sandbox, "GET", "/files/info", {"path": "/"})
        assert ei.value.errno == errno.ECONNRESET
    finally:
        server.clear_faults()


def test_fault_reset_after_performs_request(server, sandbox):
    server.set_faults(next=1, kinds=["reset_after"], path="/files/upload", method="POST")
    try:
        with pytest.raises(OSError) as ei:
            server.write_file(sandbox, "/workspace/ra.txt", b"landed")
        assert ei.value.errno == errno.ECONNRESET
    finally:
        server.clear_faults()
    assert server.read_file(sandbox, "/workspace/ra.txt") == b"landed"


def test_fault_reset_before_effect(server, sandbox):
    server.set_faults(next=1, kinds=["reset"], path="/files/upload")
    try:
        with pytest.raises(OSError) as ei:
            server.write_file(sandbox, "/workspace/rb.txt", b"x")
        assert ei.value.errno == errno.ECONNRESET
    finally:
        server.clear_faults()
    assert server.stat(sandbox, "/workspace/rb.txt") is None


def test_fault_rate_and_lifecycle_scope(make_server):
    s = make_server(extra_args=["--fault-seed", "1"])
    s.set_faults(rate=0.5, kinds=["502"], scope="lifecycle", path="^/v1/sandboxes$", method="GET")
    codes = [s.request("GET", "/v1/sandboxes")[0] for _ in range(40)]
    assert set(codes) == {200, 502} and 8 <= codes.count(502) <= 32
    assert s.request("GET", "/health")[0] == 200


def test_fault_cli_rate(make_server):
    s = make_server(extra_args=["--fault-rate", "1", "--fault-kinds", "504"])
    st, _, b = s.request("POST", "/v1/sandboxes", {"image": {"uri": "x"}, "entrypoint": ["a"], "resourceLimits": {}})
    assert st == 202
    assert s.execd(b["id"], "GET", "/ping")[0] == 504
    s.clear_faults()
    assert s.execd(b["id"], "GET", "/ping")[0] == 200


def test_stats_counts_by_route_template(server, sandbox):
    server.reset_stats()
    server.execd(sandbox, "GET", "/files/info", {"path": "/"})
    server.execd(sandbox, "GET", "/files/info", {"path": "/"})
    server.request("GET", "/v1/sandboxes/" + sandbox)
    st = server.stats()
    assert st["total"]["GET /files/info"] == 2
    assert st["sandboxes"][sandbox]["GET /files/info"] == 2
    assert st["total"]["GET /v1/sandboxes/{sandboxId}"] == 1


# ---------------------------------------------------------------- persistence

def test_kill9_restart_keeps_everything(make_server):
    s = make_server()
    a = s.create_sandbox(metadata={"name": "keep"})
    b = s.create_sandbox()
    s.write_file(a, "/workspace/persist.txt", b"still here")
    url_a = s.execd_url(a)
    s.request("POST", "/v1/sandboxes/%s/pause" % b)
    s.kill()
    s.restart()
    st, _, g = s.request("GET", "/v1/sandboxes/" + a)
    assert st == 200 and g["metadata"] == {"name": "keep"} and g["status"]["state"] == "Running"
    st, _, g = s.request("GET", "/v1/sandboxes/" + b)
    assert g["status"]["state"] == "Paused"
    assert s.execd_url(a) == url_a
    assert s.read_file(a, "/workspace/persist.txt") == b"still here"


def test_restart_drops_expired(make_server):
    s = make_server(extra_args=["--min-timeout", "1"])
    sid = s.create_sandbox(timeout=2)
    s.kill()
    time.sleep(2.2)
    s.restart()
    assert s.request("GET", "/v1/sandboxes/" + sid)[0] == 404


# ---------------------------------------------------------------- robustness

def test_malformed_requests_do_not_kill_server(server, sandbox):
    url, _ = server.endpoint(sandbox)
    u = urllib.parse.urlsplit(url)
    for payload in (b"GARBAGE\r\n\r\n", b"POST /command HTTP/1.1\r\nContent-Length: 99999\r\n\r\n{",
                    b"POST /command HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                    b"GET /files/info?path=%ff%fe HTTP/1.1\r\n\r\n"):
        s = socket.create_connection((u.hostname, u.port), timeout=5)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        try:
            s.recv(4096)
        except OSError:
            pass
        s.close()
    st, _, b = server.execd(sandbox, "POST", "/files/permissions", body=b"[1,2]", headers={"Content-Type": "application/json"})
    assert st == 400
    st, _, b = server.request("POST", "/v1/sandboxes", b"\xff\xfe", headers={"Content-Type": "application/json"})
    assert st == 422
    st, _, b = server.request("PATCH", "/v1/sandboxes/%s/metadata" % sandbox, [1])
    assert st == 422
    assert server.execd(sandbox, "GET", "/ping")[0] == 200
    assert server.request("GET", "/health")[0] == 200


def test_huge_json_body_rejected(server, sandbox):
    url, _ = server.endpoint(sandbox)
    u = urllib.parse.urlsplit(url)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(b"POST %s/files/mv HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (u.path.encode(), 100 << 20))
    chunk = b"[" + b" " * (1 << 20)
    try:
        for _ in range(80):
            s.sendall(chunk)
            chunk = b" " * (1 << 20)
        data = s.recv(4096)
        assert data.startswith(b"HTTP/1.1 400")
    except (ConnectionError, OSError):
        pass
    s.close()
    assert server.execd(sandbox, "GET", "/ping")[0] == 200


# ---------------------------------------------------------------- TLS, proxying, delay

def test_tls_everywhere(make_server, tmp_path):
    import subprocess
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    s = make_server(extra_args=["--tls-cert", str(cert), "--tls-key", str(key)])
    assert s.url.startswith("https://")
    sid = s.create_sandbox()
    assert s.execd_url(sid).startswith("https://")
    s.write_file(sid, "/workspace/tls.txt", b"secure" * 1000)
    assert s.read_file(sid, "/workspace/tls.txt") == b"secure" * 1000
    assert s.run(sid, "echo tls")[1] == "tls\n"
    st, _, b = s.request("GET", "/v1/sandboxes/%s/endpoints/44772?use_server_proxy=true" % sid)
    assert http_request("https://" + b["endpoint"], "GET", "/ping")[0] == 200


def test_execd_proxy_to_other_port(server, sandbox):
    from osbtest import free_port
    port = free_port()
    server.write_file(sandbox, "/workspace/www/index.html", b"served-from-sandbox")
    server.execd(sandbox, "POST", "/command", raw=True,
                 body={"command": "python3 -m http.server %d --bind 127.0.0.1" % port, "cwd": "/workspace/www", "background": True})
    url = server.execd_url(sandbox).rsplit("/proxy/", 1)[0]

    def served():
        r = http_request(url, "GET", "/proxy/%d/index.html" % port)
        return r[0] == 200 and r

    _, _, b = wait_until(served, 10, "the sandbox's web server through the proxy", step=0.1)
    assert b == b"served-from-sandbox"


def test_fault_delay(server, sandbox):
    server.set_faults(next=1, kinds=["delay"], delay_ms=700, path="/ping$")
    try:
        t0 = time.monotonic()
        assert server.execd(sandbox, "GET", "/ping")[0] == 200
        assert time.monotonic() - t0 >= 0.65
    finally:
        server.clear_faults()


def test_verbose_logs_requests(make_server):
    s = make_server(extra_args=["--verbose"])
    s.request("GET", "/health")
    time.sleep(0.2)
    assert "GET /health" in s.stderr_text()


@pytest.mark.slow
def test_large_upload_download_roundtrip(server, sandbox, tmp_path):
    import hashlib
    import subprocess
    src = tmp_path / "big"
    with open(src, "wb") as f:
        for i in range(256):
            f.write(hashlib.sha256(b"%d" % i).digest() * 32768)
    url, _ = server.endpoint(sandbox)
    for _ in range(2):  # new file, then overwrite in place
        r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-F",
                            'metadata={"path":"/workspace/big"};filename=metadata;type=application/json',
                            "-F", "file=@%s" % src, url + "/files/upload"], capture_output=True, text=True)
        assert r.stdout == "200", r.stderr
    out = tmp_path / "back"
    r = subprocess.run(["curl", "-sS", "-o", str(out), "-w", "%{http_code}", url + "/files/download?path=/workspace/big"],
                       capture_output=True, text=True)
    assert r.stdout == "200"
    assert out.stat().st_size == 256 << 20
    try:
        assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(src.read_bytes()).digest()
    finally:
        src.unlink()
        out.unlink()

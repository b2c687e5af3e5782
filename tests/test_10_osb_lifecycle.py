"""`osb create|list|info|pause|resume|renew|kill|endpoint` against the local
server: what osb sends is checked on the server's side, what it prints on
its own."""

import calendar
import json
import os
import subprocess
import time
import uuid

import pytest

from osbhelp import W, Osb, egress_policy, sandbox_record
from osbtest import execd_routes, http_request

IMG = ["--image", "python:3.11", "--entrypoint", "tail", "--entrypoint", "-f", "--entrypoint", "/dev/null"]


def utc(s):
    """"2026-06-12T09:30:01Z" or with fractions -> Unix seconds."""
    return calendar.timegm(time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S"))


def get(server, sid):
    st, _, b = server.request("GET", "/v1/sandboxes/" + sid)
    assert st == 200, (st, b)
    return b


def create(osbc, cleanup, *args):
    res = osbc.run("create", *args)
    cleanup.extend(res.lines())
    assert res.rc == 0 and res.err == "" and len(res.lines()) == 1, res.describe()
    return res.lines()[0]


def info(osbc, sid):
    """`osb info` as a dict (metadata.K keys kept apart)."""
    out = {}
    for line in osbc.ok("info", sid).lines():
        k, _, v = line.partition(": ")
        out[k] = v
    return out


def label():
    return "t" + uuid.uuid4().hex[:12]


# ---------------------------------------------------------------- create

def test_create_prints_the_id_of_a_running_sandbox(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, *IMG)
    b = get(server, sid)
    assert b["status"]["state"] == "Running"
    assert b["image"] == {"uri": "python:3.11"}
    assert b["entrypoint"] == ["tail", "-f", "/dev/null"]
    st, _, _ = server.execd(sid, "GET", "/ping")
    assert st == 200


def test_create_defaults(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes)
    b = get(server, sid)
    assert b["image"] == {"uri": "opensandbox/code-interpreter:latest"}
    assert b["entrypoint"] == ["tail", "-f", "/dev/null"]
    assert utc(b["expiresAt"]) - utc(b["createdAt"]) in (599, 600, 601)
    assert sandbox_record(server, sid)["resourceLimits"] == {}


def test_create_entrypoint_keeps_each_argument(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, "--image", "python:3.11", "--entrypoint", "sh",
                 "--entrypoint", "-c", "--entrypoint", "sleep 1000; echo 'a b'")
    assert get(server, sid)["entrypoint"] == ["sh", "-c", "sleep 1000; echo 'a b'"]


def test_create_timeout_seconds(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, *IMG, "--timeout", "900")
    b = get(server, sid)
    assert utc(b["expiresAt"]) - utc(b["createdAt"]) in (899, 900, 901)


def test_create_timeout_none_never_expires(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, *IMG, "--timeout", "none")
    assert "expiresAt" not in get(server, sid)
    assert sandbox_record(server, sid)["timeout"] is None
    assert info(osbc, sid)["expires"] == "never"


def test_create_env_reaches_commands(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, *IMG, "--env", "GREETING=hello world", "--env", "EMPTY=",
                 "--env", "EQ=a=b")
    assert sandbox_record(server, sid)["env"] == {"GREETING": "hello world", "EMPTY": "", "EQ": "a=b"}
    code, out, _ = server.run(sid, 'printf "%s|%s|%s\\n" "$GREETING" "${EMPTY-unset}" "$EQ"')
    assert (code, out) == (0, "hello world||a=b\n")


def test_create_metadata(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, *IMG, "--metadata", "name=proj", "--metadata", "team=a.b-c_d")
    assert get(server, sid)["metadata"] == {"name": "proj", "team": "a.b-c_d"}
    i = info(osbc, sid)
    assert i["metadata.name"] == "proj" and i["metadata.team"] == "a.b-c_d"


def test_create_network_policy(server, osbc, cleanup_sandboxes, workdir):
    pol = {"defaultAction": "deny", "egress": [{"action": "allow", "target": "pypi.org"}]}
    path = os.path.join(workdir, "policy.json")
    with open(path, "w") as f:
        json.dump(pol, f)
    sid = create(osbc, cleanup_sandboxes, *IMG, "--network-policy", path)
    assert sandbox_record(server, sid)["networkPolicy"] == pol
    st, b = egress_policy(server, sid)
    assert st == 200 and b["policy"] == {"egress": [{"action": "allow", "target": "pypi.org"}],
                                         "defaultAction": "deny"}


def test_create_resource_limits(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, *IMG, "--cpu", "500m", "--memory", "256Mi")
    assert sandbox_record(server, sid)["resourceLimits"] == {"cpu": "500m", "memory": "256Mi"}


def test_create_rejected_by_the_server(osbc):
    # the server's own rule (timeout >= 60), its 422 turned into one line
    res = osbc.fails("create", *IMG, "--timeout", "30")
    assert "HTTP 422" in res.err and "timeout" in res.err, res.describe()


def test_create_bad_network_policy_file(osbc, workdir):
    missing = os.path.join(workdir, "nope.json")
    res = osbc.fails("create", *IMG, "--network-policy", missing)
    assert res.err == "osb: %s: No such file or directory\n" % missing
    bad = os.path.join(workdir, "bad.json")
    with open(bad, "w") as f:
        f.write("[1, 2]")
    res = osbc.fails("create", *IMG, "--network-policy", bad)
    assert "not a JSON object" in res.err, res.describe()


@pytest.mark.parametrize("args, msg", [
    (["--timeout", "soon"], "bad --timeout soon"),
    (["--timeout", "0"], "bad --timeout 0"),
    (["--env", "NOEQUALS"], "bad --env NOEQUALS (KEY=VALUE)"),
    (["--metadata", "=v"], "bad --metadata =v (KEY=VALUE)"),
    (["extra"], "create takes no arguments"),
])
def test_create_bad_arguments(osbc, args, msg):
    res = osbc.fails("create", *args, rc=2)
    assert res.err == "osb: %s (osb --help for usage)\n" % msg


def test_create_waits_through_pending(make_server):
    srv = make_server(extra_args=["--pending-seconds", "2"])
    o = Osb(srv)
    res = o.ok("create", *IMG)
    sid = res.out.strip()
    # the server keeps it Pending (execd refusing) for 2 s: osb returned
    # only once it was Running and execd answered
    assert get(srv, sid)["status"]["state"] == "Running"
    st, _, _ = srv.execd(sid, "GET", "/ping")
    assert st == 200
    assert res.seconds >= 1.5, res.describe()


def test_create_no_wait_returns_while_pending(make_server):
    srv = make_server(extra_args=["--pending-seconds", "30"])
    o = Osb(srv)
    sid = o.ok("create", "--no-wait", *IMG).out.strip()
    assert get(srv, sid)["status"]["state"] == "Pending"
    rows = o.ok("list", "--state", "Pending").lines()
    assert [r.split("\t")[:2] for r in rows] == [[sid, "Pending"]]


# ---------------------------------------------------------------- list

@pytest.fixture
def three(server, osbc, cleanup_sandboxes):
    """Three sandboxes labelled run=<unique>; the first two also kind=a."""
    run = label()
    ids = [create(osbc, cleanup_sandboxes, *IMG, "--metadata", "run=" + run, "--metadata",
                  "kind=" + ("a" if i < 2 else "b")) for i in range(3)]
    return run, ids


def list_ids(osbc, *args):
    res = osbc.run("list", *args)
    assert res.rc == 0, res.describe()
    return [line.split("\t")[0] for line in res.lines()], res


def test_list_by_metadata(osbc, three):
    run, ids = three
    got, _ = list_ids(osbc, "--metadata", "run=" + run)
    # newest first
    assert got == ids[::-1]


def test_list_metadata_filters_all_match(osbc, three):
    run, ids = three
    got, _ = list_ids(osbc, "--metadata", "run=" + run, "--metadata", "kind=a")
    assert sorted(got) == sorted(ids[:2])
    got, _ = list_ids(osbc, "--metadata", "run=" + run, "--metadata", "kind=zzz")
    assert got == []


def test_list_rows(osbc, three):
    run, ids = three
    res = osbc.ok("list", "--metadata", "run=" + run, "--metadata", "kind=b")
    (row,) = res.lines()
    sid, state, created, expires, md = row.split("\t")
    assert (sid, state) == (ids[2], "Running")
    assert utc(expires) - utc(created) in (599, 600, 601)
    assert sorted(md.split(",")) == ["kind=b", "run=" + run]


def test_list_by_state(server, osbc, three):
    run, ids = three
    osbc.ok("pause", ids[1])
    got, _ = list_ids(osbc, "--metadata", "run=" + run, "--state", "Paused")
    assert got == [ids[1]]
    got, _ = list_ids(osbc, "--metadata", "run=" + run, "--state", "running")
    assert sorted(got) == sorted([ids[0], ids[2]])
    got, _ = list_ids(osbc, "--metadata", "run=" + run, "--state", "Running", "--state", "Paused")
    assert sorted(got) == sorted(ids)


def test_list_pages(osbc, three):
    run, ids = three
    p1, res = list_ids(osbc, "--metadata", "run=" + run, "--page-size", "2")
    assert res.err == "osb: page 1 of 2; --page 2 for more\n"
    p2, res = list_ids(osbc, "--metadata", "run=" + run, "--page-size", "2", "--page", "2")
    assert res.err == ""
    assert p1 == ids[::-1][:2] and p2 == ids[::-1][2:]


@pytest.mark.parametrize("args", [["--page", "0"], ["--page-size", "x"], ["--state"]])
def test_list_bad_arguments(osbc, args):
    res = osbc.run("list", *args)
    assert res.rc == 2 and res.out == "", res.describe()


# ---------------------------------------------------------------- info

def test_info(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, *IMG, "--metadata", "name=x1")
    b = get(server, sid)
    i = info(osbc, sid)
    assert i["id"] == sid and i["state"] == "Running" and i["image"] == "python:3.11"
    assert i["reason"] == b["status"]["reason"] and i["message"] == b["status"]["message"]
    assert i["entrypoint"] == "tail -f /dev/null"
    assert utc(i["created"]) == utc(b["createdAt"]) and utc(i["expires"]) == utc(b["expiresAt"])
    assert i["metadata.name"] == "x1"


def test_info_of_the_sandbox_in_the_environment(osb, sandbox):
    assert osb.ok("info").lines()[0] == "id: " + sandbox


# ---------------------------------------------------------------- pause, resume

def test_pause_and_resume(server, osb, sandbox):
    osb.ok("pause")
    assert get(server, sandbox)["status"]["state"] == "Paused"
    osb.ok("resume", sandbox)
    assert get(server, sandbox)["status"]["state"] == "Running"
    # execd answers again
    assert osb.ok("ls", "/").lines().count("workspace") == 1


def test_pause_twice_is_409(server, osb, sandbox):
    osb.ok("pause")
    res = osb.fails("pause")
    assert "HTTP 409 DOCKER::SANDBOX_NOT_RUNNING" in res.err and "/pause" in res.err, res.describe()
    assert get(server, sandbox)["status"]["state"] == "Paused"


def test_resume_running_is_409(osb):
    res = osb.fails("resume")
    assert "HTTP 409 DOCKER::SANDBOX_NOT_PAUSED" in res.err, res.describe()


# ---------------------------------------------------------------- renew

def test_renew(server, osb, sandbox):
    before = time.time()
    res = osb.ok("renew", "1200")
    after = time.time()
    (line,) = res.lines()
    assert line.startswith("expires: ")
    got = utc(line[len("expires: "):])
    stored = utc(get(server, sandbox)["expiresAt"])
    assert got == stored
    assert int(before) + 1200 - 1 <= stored <= after + 1200 + 1


def test_renew_with_id_argument(server, osbc, sandbox):
    osbc.ok("renew", sandbox, "3600")
    assert abs(utc(get(server, sandbox)["expiresAt"]) - (time.time() + 3600)) < 5


def test_renew_without_ttl_is_409(osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, *IMG, "--timeout", "none")
    res = osbc.fails("renew", sid, "600")
    assert "HTTP 409" in res.err and "renew-expiration" in res.err, res.describe()


@pytest.mark.parametrize("args", [["0"], ["-5"], ["soon"], []])
def test_renew_bad_arguments(osb, args):
    res = osb.run("renew", *args)
    assert res.rc == 2 and res.out == "", res.describe()


# ---------------------------------------------------------------- kill

def test_kill(server, osbc, cleanup_sandboxes):
    sid = create(osbc, cleanup_sandboxes, *IMG)
    osbc.ok("kill", sid)
    st, _, b = server.request("GET", "/v1/sandboxes/" + sid)
    assert st == 404
    res = osbc.fails("kill", sid)
    assert "HTTP 404 DOCKER::SANDBOX_NOT_FOUND" in res.err, res.describe()


# ---------------------------------------------------------------- endpoint

def test_endpoint_execd(server, osb, sandbox):
    url, hdrs = server.endpoint(sandbox)
    res = osb.ok("endpoint", "44772")
    assert res.lines() == [url] + ["%s: %s" % kv for kv in hdrs.items()]


def test_endpoint_egress_has_its_auth_header(server, osbc):
    pol = {"defaultAction": "allow"}
    sid = server.create_sandbox(networkPolicy=pol)
    try:
        url, hdrs = server.endpoint(sid, 18080)
        res = Osb(server, sid).ok("endpoint", "18080")
        assert res.lines()[0] == url
        assert res.lines()[1:] == ["OPENSANDBOX-EGRESS-AUTH: " + hdrs["OPENSANDBOX-EGRESS-AUTH"]]
    finally:
        server.delete_sandbox(sid)


@pytest.mark.parametrize("port", ["0", "65536", "http", ""])
def test_endpoint_bad_port(osb, port):
    res = osb.run("endpoint", port)
    assert res.rc == 2, res.describe()


# ---------------------------------------------------------------- connection options

def test_server_proxy_mode(server, osb, sandbox):
    server.write_file(sandbox, "/workspace/p.txt", b"through the proxy\n")
    server.reset_stats()
    res = osb.ok("--server-proxy", "get", "/workspace/p.txt", "-")
    assert res.out == "through the proxy\n"
    # the download went through the lifecycle server's proxy route
    stats = server.stats()["total"]
    assert any("/proxy/{port}" in k for k in stats), stats


def test_key_from_a_file(server, workdir):
    path = os.path.join(workdir, "key")
    with open(path, "w") as f:
        f.write("  %s  \n# comment\n" % server.api_key)
    o = Osb(server, api_key="")
    o.ok("--api-key-file", path, "list", "--page-size", "1")


def test_key_file_empty(server, workdir):
    path = os.path.join(workdir, "key")
    open(path, "w").close()
    res = Osb(server).fails("--api-key-file", path, "list")
    assert res.err == "osb: API key file %s is empty\n" % path


def test_seed_adapter_environment_names(server, sandbox):
    # OPENSANDBOX_DOMAIN / OPENSANDBOX_API_KEY, as the Mastra adapter reads
    o = Osb(server, sandbox, api_key="", env={"OPEN_SANDBOX_DOMAIN": "", "OPENSANDBOX_DOMAIN": server.url,
                                              "OPENSANDBOX_API_KEY": server.api_key})
    assert o.ok("info").lines()[0] == "id: " + sandbox


def test_domain_flag_beats_environment(server, sandbox):
    o = Osb(server, sandbox, env={"OPEN_SANDBOX_DOMAIN": "127.0.0.1:1"})
    assert o.ok("--domain", "%s:%d" % (server.host, server.port), "info").lines()[0] == "id: " + sandbox


@pytest.fixture
def tls_server(make_server, workdir):
    cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    s = make_server(extra_args=["--tls-cert", cert, "--tls-key", key])
    assert s.url.startswith("https://")
    return s, s.create_sandbox(), cert


def test_tls_with_a_ca_file(tls_server):
    s, sid, cert = tls_server
    o = Osb(s, sid)
    o.ok("--cacert", cert, "put", "-", W + "/t.txt", stdin=b"over tls\n")
    assert o.ok("--cacert", cert, "get", W + "/t.txt", "-").out == "over tls\n"
    assert o.ok("--cacert", cert, "exec", "--", "cat " + W + "/t.txt").out == "over tls\n"


def test_tls_insecure(tls_server):
    s, sid, _ = tls_server
    assert Osb(s, sid).ok("--insecure", "info").lines()[0] == "id: " + sid


def test_tls_untrusted_certificate(tls_server):
    s, sid, _ = tls_server
    res = Osb(s, sid).fails("--retries", "0", "info")
    assert res.err.startswith("osb: %s: GET %s/v1/sandboxes/%s: " % (sid, s.url, sid)), res.describe()
    assert "certificate" in res.err, res.describe()


def test_execd_access_token_from_the_endpoint(make_server):
    s = make_server(extra_args=["--secure-access"])
    sid = s.create_sandbox()
    url, hdrs = s.endpoint(sid)
    assert "X-EXECD-ACCESS-TOKEN" in hdrs
    # execd refuses a request without it...
    assert http_request(url, "GET", "/ping")[0] == 401
    # ...and osb sends it on every execd call
    o = Osb(s, sid)
    o.ok("put", "-", W + "/tok", stdin=b"ok\n")
    assert o.ok("get", W + "/tok", "-").out == "ok\n"
    assert o.ok("exec", "--", "echo fine").out == "fine\n"


def test_host_endpoint_style(make_server):
    s = make_server(extra_args=["--endpoint-style", "host"])
    sid = s.create_sandbox()
    assert "/proxy/" not in s.execd_url(sid)
    o = Osb(s, sid)
    o.ok("mkdir", W + "/h")
    assert o.ok("ls", W).lines() == ["h"]


# ---------------------------------------------------------------- health, metrics

def test_sandbox_health(server, osbc, sandbox):
    server.reset_stats()
    res = osbc.run("sandbox", "health", sandbox)
    assert (res.rc, res.out, res.err) == (0, "sandbox %s is healthy\n" % sandbox, ""), res.describe()
    assert execd_routes(server, sandbox) == {"GET /ping": 1}
    d = json.loads(osbc.ok("sandbox", "health", sandbox, "-o", "json").out)
    assert d == {"sandbox_id": sandbox, "healthy": True, "state": "Running", "error": None}
    assert osbc.ok("sandbox", "health", sandbox, "-q").out == ""


def test_a_paused_sandbox_is_unhealthy_at_once(server, osbc, sandbox):
    osbc.ok("sandbox", "pause", sandbox)
    server.reset_stats()
    res = osbc.run("sandbox", "health", sandbox)
    assert (res.rc, res.out) == (1, ""), res.describe()
    assert res.err == "osb: sandbox %s is unhealthy: it is Paused, not Running\n" % sandbox
    assert execd_routes(server, sandbox) == {}  # execd is not asked
    res = osbc.run("sandbox", "health", sandbox, "-o", "json")
    assert res.rc == 1 and json.loads(res.out)["healthy"] is False, res.describe()


def test_health_of_no_sandbox_is_an_error(osbc):
    res = osbc.run("sandbox", "health", "no-such-sandbox")
    assert res.rc == 1 and res.out == "" and "no-such-sandbox" in res.err and "404" in res.err, res.describe()


def test_sandbox_metrics(server, osbc, sandbox):
    server.reset_stats()
    t0 = time.time()
    d = json.loads(osbc.ok("sandbox", "metrics", sandbox, "-o", "json").out)
    assert execd_routes(server, sandbox) == {"GET /metrics": 1}
    # the official SDKs' names for execd's numbers
    assert set(d) == {"cpu_count", "cpu_used_percentage", "memory_total_in_mib", "memory_used_in_mib",
                      "timestamp"}
    assert d["cpu_count"] >= 1 and 0 <= d["cpu_used_percentage"] <= 100
    assert 0 < d["memory_used_in_mib"] <= d["memory_total_in_mib"]
    assert abs(d["timestamp"] / 1000 - t0) < 60
    rows = osbc.ok("sandbox", "metrics", sandbox, "-o", "table").lines()
    assert rows[0].split() == ["KEY", "VALUE"] and rows[1].split()[0] == "cpu_count"
    raw = osbc.ok("sandbox", "metrics", sandbox).lines()
    assert [l.split(": ")[0] for l in raw] == ["cpu_count", "cpu_used_percentage", "memory_total_in_mib",
                                               "memory_used_in_mib", "timestamp"]

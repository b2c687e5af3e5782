#!/usr/bin/env python3
"""A local OpenSandbox-compatible server for the osbfs tests.

Serves the lifecycle API (under /v1 and at /), one execd listener per
sandbox (the "execd host port", as Docker bridge networking gives), the
egress sidecar's policy API behind execd's /proxy/18080/, a server proxy,
and /_admin/ for fault injection and statistics.  Behaviour follows
docs/SERVER.md (its §13 lists where it differs).  Standard library only;
commands run under bubblewrap (/usr/bin/bwrap).  Prints "ready
http://HOST:PORT" once it accepts connections.  See tests/server/osblocal/
for the modules.

/_admin (no API key): POST /_admin/faults sets a fault rule, DELETE clears
it (osblocal/faults.py); GET /_admin/stats and POST /_admin/stats/reset count
requests; POST /_admin/sandboxes/ID/state forces a state, .../expire ends a
sandbox, GET /_admin/sandboxes/ID describes it; POST
/_admin/sandboxes/ID/listing {"path": DIR, "names_hex": [HEX, ...]} makes the
next /directories/list of DIR also hold those names, byte for byte (an empty
name, ".", "..", invalid UTF-8: what a hostile sandbox could answer).
GET /_admin/snapshots shows the snapshot switches, POST sets them
({"supported", "hold", "fail"}: osblocal/snapshots.py).

Egress policy is stored and reported, not enforced.  Command, session and
code-context records live in memory: a restart forgets them (as an execd
restart does); sandboxes, their files, metadata and state, and snapshots
persist in --data-dir.
"""

import argparse
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from osblocal.app import App  # noqa: E402
from osblocal.sandboxfs import private_mount_namespace  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True, help="main (lifecycle) port; 0 picks a free one")
    p.add_argument("--data-dir", required=True, help="directory holding sandbox records and files")
    p.add_argument("--api-key", default=None, help="require this OPEN-SANDBOX-API-KEY (default: no auth)")
    p.add_argument("--host", default="127.0.0.1", help="address for every listener (default 127.0.0.1)")
    p.add_argument("--pending-seconds", type=float, default=0.0,
                   help="new sandboxes stay Pending this long (execd refuses connections meanwhile); "
                        "0 = Docker behaviour, Running at once")
    p.add_argument("--min-timeout", type=int, default=60, help="smallest accepted timeout (422 below; default 60)")
    p.add_argument("--max-timeout", type=int, default=None, help="largest accepted timeout (400 above)")
    p.add_argument("--fault-rate", type=float, default=0.0,
                   help="fraction of execd requests that fail (see --fault-kinds)")
    p.add_argument("--fault-kinds", default="reset,500,502,503",
                   help="comma list of reset,reset_after,500,502,503,504,delay (default reset,500,502,503)")
    p.add_argument("--fault-delay-ms", type=int, default=0, help="delay of the 'delay' fault kind")
    p.add_argument("--fault-seed", type=int, default=None, help="seed for the fault RNG")
    p.add_argument("--tls-cert", default=None, help="PEM certificate: serve every listener over TLS")
    p.add_argument("--tls-key", default=None, help="PEM private key for --tls-cert")
    p.add_argument("--secure-access", action="store_true",
                   help="give every sandbox a random execd token, returned as X-EXECD-ACCESS-TOKEN in the "
                        "endpoint headers for port 44772 and enforced by its execd")
    p.add_argument("--endpoint-style", choices=("bridge", "host"), default="bridge",
                   help="bridge: 44772 -> HOST:HP/proxy/44772 (default); host: 44772 -> HOST:HP")
    p.add_argument("--new-execd-ports", action="store_true",
                   help="at start, every sandbox's execd listens on a new port, never the one it had (as a "
                        "restarted Docker host maps ports anew): the endpoints the lifecycle API gives change")
    p.add_argument("--no-snapshots", action="store_true",
                   help="answer as a runtime without snapshots (Docker): creating one is 501 "
                        "SNAPSHOT::NOT_IMPLEMENTED, a sandbox from one 400 SANDBOX::API_NOT_SUPPORTED "
                        "(also switched by POST /_admin/snapshots {\"supported\": false})")
    p.add_argument("--verbose", action="store_true", help="log one line per request to stderr")
    a = p.parse_args(argv)
    if bool(a.tls_cert) != bool(a.tls_key):
        p.error("--tls-cert and --tls-key go together")
    if not 0 <= a.fault_rate <= 1:
        p.error("--fault-rate must be between 0 and 1")
    return a


def main(argv=None):
    args = parse_args(argv)
    os.umask(0o022)
    private_mount_namespace()  # before any thread starts
    app = App(args)

    def on_term(signum, frame):
        app.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    app.load()
    try:
        app.serve()
    finally:
        app.shutdown()


if __name__ == "__main__":
    main()

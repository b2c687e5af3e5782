"""Everyday recipes (summarise a CSV, make a chart, run TypeScript, clone
a repository and run its tests, start a long job and check on it later),
done only through the mount: files written and read there, commands run
as jobs through .osb/ (README.md, "Running commands: the control tree").

Needs in the sandbox (the local server shows the host's /usr): python3
with matplotlib (Debian python3-matplotlib), git, node and tsc (npm
install -g typescript@5).
"""

import csv
import io
import os

from jobhelp import job_file, osb, read, read_bytes, start, start_named, status, wait, write
from osbtest import wait_until


def run_ok(m, cmd, timeout=300):
    """Runs @cmd as a job; its stdout (fails with its stderr otherwise)."""
    jid = start(m, cmd)
    line = wait(m, jid, timeout)
    assert line == "exited 0", "%r: %s\nstdout:\n%s\nstderr:\n%s" % (
        cmd, line, job_file(m, jid, "stdout"), job_file(m, jid, "stderr"))
    return job_file(m, jid, "stdout")


SALES = [("region", "month", "units", "price")] + [
    (r, mo, str(10 + (i * 7) % 23), "%.2f" % (2.5 + (i % 5)))
    for i, (r, mo) in enumerate((r, mo) for r in ("north", "south", "east")
                                for mo in ("jan", "feb", "mar", "apr"))]

SUMMARY = """import csv
from collections import defaultdict
units = defaultdict(int)
revenue = defaultdict(float)
with open("sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        units[row["region"]] += int(row["units"])
        revenue[row["region"]] += int(row["units"]) * float(row["price"])
for region in sorted(units):
    print("%s,%d,%.2f" % (region, units[region], revenue[region]))
"""


def test_recipe_summarise_a_csv(mount):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(SALES)
    with open(mount.p("sales.csv"), "w") as f:
        f.write(buf.getvalue())
    with open(mount.p("summary.py"), "w") as f:
        f.write(SUMMARY)
    units, revenue = {}, {}
    for region, _, u, p in SALES[1:]:
        units[region] = units.get(region, 0) + int(u)
        revenue[region] = revenue.get(region, 0.0) + int(u) * float(p)
    want = "".join("%s,%d,%.2f\n" % (r, units[r], revenue[r]) for r in sorted(units))
    assert run_ok(mount, "python3 summary.py > summary.csv && cat summary.csv") == want
    assert read(mount.p("summary.csv")) == want


CHART = """import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.bar(["Mon", "Tue", "Wed"], [12, 19, 7])
plt.savefig("chart.png")
"""


def test_recipe_make_a_chart(mount):
    with open(mount.p("chart.py"), "w") as f:
        f.write(CHART)
    jid = start(mount, "python3 chart.py")
    line = wait(mount, jid)
    assert line == "exited 0", (
        "the chart script failed (matplotlib in the sandbox? Debian package "
        "python3-matplotlib): %s\n%s" % (line, job_file(mount, jid, "stderr")))
    png = read_bytes(mount.p("chart.png"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(png) > 5000
    assert png[12:16] == b"IHDR"


def test_recipe_run_typescript(mount):
    with open(mount.p("hello.ts"), "w") as f:
        f.write("const n: number = 6 * 7;\nconsole.log(n);\n")
    jid = start(mount, "command -v tsc >/dev/null || { echo 'no tsc in the sandbox: install it "
                       "with npm install -g typescript@5' >&2; exit 127; }\n"
                       "tsc hello.ts && node hello.js\n")
    line = wait(mount, jid)
    assert line == "exited 0", "%s\n%s" % (line, job_file(mount, jid, "stderr"))
    assert job_file(mount, jid, "stdout") == "42\n"
    assert "console.log(n)" in read(mount.p("hello.js"))


SLUG = '''import re


def slugify(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
'''

TESTS = '''import time
import unittest

from slug import slugify


class SlugTest(unittest.TestCase):
'''
TESTS += "".join('''
    def test_%d(self):
        time.sleep(0.5)
        self.assertEqual(slugify("Hello, World %d!"), "hello-world-%d")
''' % (i, i, i) for i in range(8))


def test_recipe_clone_a_repository_and_run_its_tests(mount):
    os.makedirs(mount.p("origin"))
    with open(mount.p("origin", "slug.py"), "w") as f:
        f.write(SLUG)
    with open(mount.p("origin", "test_slug.py"), "w") as f:
        f.write(TESTS)
    run_ok(mount, "cd origin && git init -q && git add . && "
                  "git -c user.name=t -c user.email=t@example.com commit -qm first")
    run_ok(mount, "git clone -q origin repo")
    assert sorted(os.listdir(mount.p("repo"))) == [".git", "slug.py", "test_slug.py"]
    # the tests run as a job whose output is read while it runs
    jid = start(mount, "cd repo && python3 -u -m unittest -v 2>&1")
    partial = []  # output read while the job still ran

    def ended():
        out = job_file(mount, jid, "stdout")
        if status(mount, jid) != "running":
            return True
        partial.append(out)
        return False

    wait_until(ended, 120, "the test job to end", step=0.3)
    assert wait(mount, jid) == "exited 0"
    out = job_file(mount, jid, "stdout")
    assert "Ran 8 tests" in out and out.rstrip().endswith("OK")
    assert any("test_1 " in p and "test_7 " not in p for p in partial), partial


def test_recipe_start_a_long_job_and_check_on_it_later(make_mount, server, make_sandbox):
    sid = make_sandbox()
    m1 = make_mount(sandbox_id=sid)
    start_named(m1, "train", "for i in $(seq 1 8); do echo epoch $i; sleep 0.5; done")
    assert status(m1, "train") == "running"
    m1.stop()
    # a later turn, maybe on another machine: a fresh mount polls it
    m2 = make_mount(sandbox_id=sid)
    seen = []

    def ended():
        seen.append(status(m2, "train"))
        return seen[-1] != "running"

    wait_until(ended, 60, "the job to end", step=0.5)
    assert seen[-1] == "exited 0" and "running" in seen
    assert job_file(m2, "train", "stdout") == "".join("epoch %d\n" % i for i in range(1, 9))
    assert job_file(m2, "train", "exit_code") == "0\n"


def test_recipe_install_output_streams_to_a_reader(mount):
    # a command whose output streams (an install, say): read the output as
    # it grows, before the job ends
    jid = start(mount, "for i in 1 2 3 4 5; do echo step $i; sleep 0.4; done")

    def some_output():
        got = job_file(mount, jid, "stdout")
        return ("step 2" in got or status(mount, jid) != "running") and got

    got = wait_until(some_output, 30, "the second step's output", step=0.1)
    assert "step 5" not in got
    assert wait(mount, jid) == "exited 0"
    write(osb(mount, "ctl"), "invalidate")
    assert job_file(mount, jid, "stdout").count("step") == 5

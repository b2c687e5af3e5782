// Fidelity test: drive tests/server/opensandbox_local.py with the official
// OpenSandbox TypeScript SDK (@alibaba-group/opensandbox).  Every step is
// asserted; the first failure exits non-zero with a message naming the step.
//
// usage: node fidelity.mjs DOMAIN API_KEY      (DOMAIN = 127.0.0.1:PORT)
import { ConnectionConfig, Sandbox, SandboxManager } from "@alibaba-group/opensandbox";
import { createExecdClient } from "@alibaba-group/opensandbox/internal";

const [domain, apiKey] = process.argv.slice(2);
if (!domain) {
  console.error("usage: node fidelity.mjs 127.0.0.1:PORT API_KEY");
  process.exit(2);
}

let step = "setup";
function log(msg) { console.log(`ok   ${msg}`); }
function fail(msg) { throw new Error(`${step}: ${msg}`); }
function eq(got, want, what) {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  if (g !== w) fail(`${what}: got ${g}, want ${w}`);
}
function truthy(v, what) { if (!v) fail(`${what}: got ${JSON.stringify(v)}`); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const connectionConfig = new ConnectionConfig({ domain, protocol: "http", apiKey, requestTimeoutSeconds: 30 });

  step = "create";
  const sbx = await Sandbox.create({
    connectionConfig,
    image: "python:3.11",
    timeoutSeconds: 600,
    metadata: { suite: "fidelity" },
    networkPolicy: { defaultAction: "deny", egress: [{ action: "allow", target: "pypi.org" }] },
    readyTimeoutSeconds: 30,
  });
  truthy(sbx.id, "sandbox id");
  log(`create ${sbx.id}`);
  try {
    step = "getInfo";
    const info = await sbx.getInfo();
    eq(info.status.state, "Running", "state");
    eq(info.metadata, { suite: "fidelity" }, "metadata");
    truthy(info.expiresAt, "expiresAt");
    log("getInfo");

    step = "isHealthy";
    eq(await sbx.isHealthy(), true, "healthy");
    log("isHealthy");

    step = "list";
    const lst = await sbx.sandboxes.listSandboxes({ metadata: { suite: "fidelity" } });
    truthy(lst.items.some((s) => s.id === sbx.id), "listed by metadata");
    log("listSandboxes with metadata filter");

    step = "writeFiles";
    await sbx.files.writeFiles([
      { path: "/workspace/fid/a.txt", data: "hello fidelity\n", mode: 644 },
      { path: "/workspace/fid/b.bin", data: new Uint8Array([0, 1, 2, 255]) },
    ]);
    log("writeFiles (two files, one request)");

    step = "readFile";
    eq(await sbx.files.readFile("/workspace/fid/a.txt"), "hello fidelity\n", "text content");
    eq(Array.from(await sbx.files.readBytes("/workspace/fid/b.bin")), [0, 1, 2, 255], "bytes content");
    eq(await sbx.files.readFile("/workspace/fid/a.txt", { range: "bytes=6-13" }), "fidelity", "range read");
    log("readFile / readBytes / range");

    step = "snapshots";
    const mgr = SandboxManager.create({ connectionConfig });
    const snap = await mgr.createSnapshot(sbx.id, { name: "fid-snap" });
    eq([snap.sandboxId, snap.name, snap.status.state], [sbx.id, "fid-snap", "Creating"], "created snapshot");
    truthy(snap.createdAt instanceof Date, "createdAt is a Date");
    let sinfo;
    for (let i = 0; i < 300; i++) {
      sinfo = await mgr.getSnapshot(snap.id);
      if (sinfo.status.state !== "Creating") break;
      await sleep(100);
    }
    eq(sinfo.status.state, "Ready", "snapshot state");
    truthy(sinfo.status.lastTransitionAt instanceof Date, "lastTransitionAt is a Date");
    const slist = await mgr.listSnapshots({ sandboxId: sbx.id, states: ["Ready"], name: "fid-snap" });
    eq(slist.items.map((s) => s.id), [snap.id], "listSnapshots by sandbox, state and name");
    eq(slist.pagination.totalItems, 1, "totalItems");
    const fork = await Sandbox.create({ connectionConfig, snapshotId: snap.id, timeoutSeconds: 600, readyTimeoutSeconds: 30 });
    try {
      eq(await fork.files.readFile("/workspace/fid/a.txt"), "hello fidelity\n", "restored file");
      eq((await fork.getInfo()).snapshotId, snap.id, "getInfo snapshotId");
    } finally {
      await fork.kill();
      await fork.close();
    }
    await mgr.deleteSnapshot(snap.id);
    eq(await mgr.getSnapshot(snap.id).catch((e) => e.constructor.name), "SandboxApiException", "deleted snapshot");
    await mgr.close();
    log("createSnapshot / getSnapshot / listSnapshots / Sandbox.create from it / deleteSnapshot");

    step = "getFileInfo";
    const fi = await sbx.files.getFileInfo(["/workspace/fid/a.txt"]);
    const a = fi["/workspace/fid/a.txt"];
    truthy(a, "info entry");
    eq(a.size, 15, "size");
    eq(a.mode, 644, "mode");
    log("getFileInfo");

    step = "listDirectory";
    const entries = await sbx.files.listDirectory({ path: "/workspace/fid" });
    eq(entries.map((e) => e.path).sort(), ["/workspace/fid/a.txt", "/workspace/fid/b.bin"], "listing");
    log("listDirectory");

    step = "search";
    const found = await sbx.files.search({ path: "/workspace", pattern: "*.txt" });
    eq(found.map((e) => e.path), ["/workspace/fid/a.txt"], "search");
    log("search");

    step = "moveFiles";
    await sbx.files.moveFiles([{ src: "/workspace/fid/a.txt", dest: "/workspace/fid/moved/a.txt" }]);
    eq(await sbx.files.readFile("/workspace/fid/moved/a.txt"), "hello fidelity\n", "moved content");
    log("moveFiles");

    step = "replaceContents";
    await sbx.files.replaceContents([{ path: "/workspace/fid/moved/a.txt", oldContent: "hello", newContent: "bye" }]);
    eq(await sbx.files.readFile("/workspace/fid/moved/a.txt"), "bye fidelity\n", "replaced content");
    log("replaceContents");

    step = "deleteFiles";
    await sbx.files.deleteFiles(["/workspace/fid/b.bin"]);
    const after = await sbx.files.listDirectory({ path: "/workspace/fid" });
    eq(after.map((e) => e.path), ["/workspace/fid/moved"], "after delete");
    await sbx.files.deleteDirectories(["/workspace/fid"]);
    log("deleteFiles / deleteDirectories");

    step = "foreground command";
    const out = [];
    const exec = await sbx.commands.run("echo line1; echo line2; echo oops >&2; cat /workspace/../etc/hostname >/dev/null; exit 0", {},
      { onStdout: (m) => { out.push(m.text); } });
    eq(out, ["line1", "line2"], "streamed stdout");
    eq(exec.logs.stderr.map((m) => m.text), ["oops"], "stderr");
    eq(exec.exitCode, 0, "exit code");
    truthy(exec.id, "command id");
    truthy(exec.complete, "execution_complete");
    log("foreground command, streamed output, exit 0");

    step = "failing command";
    const bad = await sbx.commands.run("echo before; exit 7");
    eq(bad.exitCode, 7, "exit code");
    eq(bad.error && bad.error.name, "CommandExecError", "error name");
    eq(bad.error && bad.error.value, "7", "error value");
    log("failing command exit 7");

    step = "cwd and envs";
    const cw = await sbx.commands.run("pwd; echo $X", { workingDirectory: "/tmp", envs: { X: "y" } });
    eq(cw.logs.stdout.map((m) => m.text), ["/tmp", "y"], "cwd/env output");
    log("workingDirectory / envs");

    step = "background command";
    const bg = await sbx.commands.run("for i in 1 2 3; do echo tick$i; sleep 0.2; done", { background: true });
    truthy(bg.id, "background id");
    let st;
    for (let i = 0; i < 100; i++) {
      st = await sbx.commands.getCommandStatus(bg.id);
      if (!st.running) break;
      await sleep(100);
    }
    eq(st.running, false, "finished");
    eq(st.exitCode, 0, "background exit code");
    const logs = await sbx.commands.getBackgroundCommandLogs(bg.id);
    eq(logs.content, "tick1\ntick2\ntick3\n", "background logs");
    eq(logs.cursor, 18, "tail cursor (bytes)");
    const more = await sbx.commands.getBackgroundCommandLogs(bg.id, 12);
    eq(more.content, "tick3\n", "logs from byte cursor");
    log("background command, status, logs with cursor");

    step = "interrupt";
    const long = await sbx.commands.run("sleep 60", { background: true });
    await sleep(200);
    await sbx.commands.interrupt(long.id);
    const ist = await sbx.commands.getCommandStatus(long.id);
    eq(ist.running, false, "interrupted");
    log("interrupt");

    step = "session";
    const sess = await sbx.commands.createSession({ workingDirectory: "/workspace" });
    truthy(sess, "session id");
    await sbx.commands.runInSession(sess, "export K=v; cd /tmp");
    const sr = await sbx.commands.runInSession(sess, "echo $K; pwd");
    eq(sr.logs.stdout.map((m) => m.text), ["v", "/tmp"], "session state");
    await sbx.commands.deleteSession(sess);
    log("bash session");

    step = "code contexts";
    // The SDK has no code-interpreter service; its generated execd client
    // (the one its adapters use) speaks the code API's routes.
    const ep = await sbx.getEndpoint(44772);
    const execd = createExecdClient({ baseUrl: `http://${ep.endpoint}`, headers: ep.headers ?? {} });
    const made = await execd.POST("/code/context", { body: { language: "python", cwd: "/workspace" } });
    eq(made.response.status, 200, "create context status");
    truthy(/^[0-9a-f]{32}$/.test(made.data.id), `context id ${made.data.id}`);
    eq(made.data.language, "python", "context language");
    const runCode = async (id, code) => {
      const r = await execd.POST("/code", {
        body: { context: { id, language: "python" }, code },
        parseAs: "text",
      });
      eq(r.response.status, 200, "run status");
      return r.data.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
    };
    await runCode(made.data.id, "x = 41");
    let evs = await runCode(made.data.id, "print('hi')\nx + 1");
    eq(evs[0].type, "init", "first event");
    eq(evs[0].text, made.data.id, "init names the context");
    eq(evs.filter((e) => e.type === "stdout").map((e) => e.text).join(""), "hi\n", "stdout");
    eq(evs.find((e) => e.type === "result").results, { text: "42" }, "result bundle");
    eq(evs[evs.length - 1].type, "execution_complete", "terminal event");
    evs = await runCode(made.data.id, "1/0");
    const err = evs.find((e) => e.type === "error");
    eq(err.error.ename, "ZeroDivisionError", "error name");
    truthy(!evs.some((e) => e.type === "execution_complete"), "no execution_complete after an error");
    const listed = await execd.GET("/code/contexts", { params: { query: { language: "python" } } });
    truthy(listed.data.some((c) => c.id === made.data.id), "context listed");
    const nojava = await execd.POST("/code/context", { body: { language: "java" } });
    eq(nojava.response.status, 500, "a language without a kernel");
    eq(nojava.error.code, "RUNTIME_ERROR", "its error code");
    const del = await execd.DELETE("/code/contexts/{context_id}", { params: { path: { context_id: made.data.id } } });
    eq(del.response.status, 200, "delete context");
    const delAgain = await execd.DELETE("/code/contexts/{context_id}", { params: { path: { context_id: made.data.id } } });
    eq(delAgain.response.status, 404, "delete again");
    eq(delAgain.error.code, "CONTEXT_NOT_FOUND", "its error code");
    log("code contexts: create, run with state, result bundle, error, list, no kernel, delete");

    step = "egress";
    const pol = await sbx.getEgressPolicy();
    eq(pol.defaultAction, "deny", "defaultAction");
    eq(pol.egress, [{ action: "allow", target: "pypi.org" }], "rules");
    await sbx.patchEgressRules([{ action: "allow", target: "example.com" }]);
    const pol2 = await sbx.getEgressPolicy();
    eq(pol2.egress.map((r) => r.target), ["example.com", "pypi.org"], "patched rules");
    await sbx.deleteEgressRules(["pypi.org"]);
    eq((await sbx.getEgressPolicy()).egress.map((r) => r.target), ["example.com"], "deleted rule");
    log("egress get / patch / delete");

    step = "patchMetadata";
    const pm = await sbx.patchMetadata({ extra: "1" });
    eq(pm.metadata, { suite: "fidelity", extra: "1" }, "patched metadata");
    log("patchMetadata");

    step = "pause";
    await sbx.pause();
    eq((await sbx.getInfo()).status.state, "Paused", "paused state");
    log("pause");

    step = "resume";
    const resumed = await sbx.resume();
    eq((await sbx.getInfo()).status.state, "Running", "running state");
    eq(await (resumed ?? sbx).isHealthy(), true, "healthy after resume");
    log("resume");

    step = "renew";
    const before = Date.parse((await sbx.getInfo()).expiresAt);
    const rn = await sbx.renew(3600);
    const after2 = Date.parse(rn.expiresAt);
    truthy(after2 > before + 1000 * 1000, `expiresAt moved forward (${rn.expiresAt})`);
    eq(Date.parse((await sbx.getInfo()).expiresAt), after2, "getInfo expiresAt after renew");
    log("renew");

    step = "connect";
    const again = await Sandbox.connect({ connectionConfig, sandboxId: sbx.id });
    eq(await again.files.readFile("/workspace/fid2.txt").catch((e) => e.constructor.name), "SandboxApiException", "missing file error");
    log("connect + missing file raises");
  } finally {
    step = "kill";
    await sbx.kill();
    let gone = false;
    try {
      await sbx.getInfo();
    } catch (e) {
      gone = true;
    }
    truthy(gone, "getInfo after kill fails");
    log("kill");
    await sbx.close();
  }
}

main().then(() => {
  console.log("ALL FIDELITY CHECKS PASSED");
}).catch((e) => {
  console.error(`FAIL ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});

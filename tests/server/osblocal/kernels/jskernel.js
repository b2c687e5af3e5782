// JavaScript "kernel" for execd code contexts: run inside the sandbox as
// `node -e <this source>`.  Requests are JSON lines on fd OSB_KFD_IN,
// events JSON lines on fd OSB_KFD_OUT; console output goes to fds 1/2.
(function () {
const fs = require("fs"), vm = require("vm"), util = require("util");
const IN = Number(process.env.OSB_KFD_IN), OUT = Number(process.env.OSB_KFD_OUT);
delete process.env.OSB_KFD_IN; delete process.env.OSB_KFD_OUT;
globalThis.require = require;
let __osbN = 0, buf = "";
function emit(d) { fs.writeSync(OUT, JSON.stringify(d) + "\n"); }
async function run(code) {
  __osbN += 1;
  emit({type: "execution_count", n: __osbN});
  try {
    let v = vm.runInThisContext(code, {filename: "<cell-" + __osbN + ">"});
    if (v && typeof v.then === "function") v = await v;
    if (v !== undefined) emit({type: "result", text: util.inspect(v)});
    emit({type: "done", ok: true});
  } catch (e) {
    const err = (e instanceof Error) ? e : new Error(String(e));
    emit({type: "error", ename: err.name || "Error", evalue: err.message || String(e),
          traceback: String(err.stack || err).split("\n")});
    emit({type: "done", ok: false});
  }
}
let queue = Promise.resolve();
const stream = fs.createReadStream(null, {fd: IN, encoding: "utf8"});
stream.on("data", (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, i); buf = buf.slice(i + 1);
    let req; try { req = JSON.parse(line); } catch (e) { continue; }
    queue = queue.then(() => run(req.code || ""));
  }
});
stream.on("end", () => process.exit(0));
})();

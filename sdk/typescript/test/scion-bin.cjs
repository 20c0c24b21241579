// Which `scion` binary the tests and examples run, as the README says: SCION_BIN, else
// `scion` on PATH, else this workspace's own build (debug, then release). Sets SCION_BIN
// for the test kit, and fails with what to do when there is none.
const { existsSync } = require("node:fs");
const path = require("node:path");

function onPath(name) {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (dir && existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return undefined;
}

function resolveScion() {
  if (process.env.SCION_BIN) return process.env.SCION_BIN;
  const workspace = path.join(__dirname, "..", "..", "..", "target");
  return (
    onPath("scion") ??
    [path.join(workspace, "debug", "scion"), path.join(workspace, "release", "scion")].find((p) => existsSync(p))
  );
}

const SCION = resolveScion();
if (!SCION || !existsSync(SCION)) {
  throw new Error(
    `no scion binary: ${SCION ? `nothing at SCION_BIN=${SCION}` : "none on PATH and none built in this workspace"}; put scion on PATH (the README's first command builds it), or set SCION_BIN`,
  );
}
process.env.SCION_BIN = SCION;
module.exports = { SCION };

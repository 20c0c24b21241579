// The CommonJS build loads and works like the ESM one.
const assert = require("node:assert/strict");
const { ScionClient, ScionError, BranchNotFoundError } = require("../dist/cjs/index.js");
const { startDaemon } = require("../dist/cjs/testkit.js");

(async () => {
  require("./scion-bin.cjs");
  const d = await startDaemon();
  try {
    assert.ok(d.client instanceof ScionClient);
    await assert.rejects(d.client.branch("x@y"), (e) => e instanceof BranchNotFoundError || e instanceof ScionError);
    assert.deepEqual(await d.client.databases(), []);
    console.log("cjs: 1 passed, 0 failed");
  } finally {
    await d.stop();
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});

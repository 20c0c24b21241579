// Build, type-check and run every suite (node:test, vitest, CommonJS), then print one line
// in the workspace's summary format: "test result: ok|FAILED. N passed; M failed; 0 ignored ... (typescript; T todo)".
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

let passed = 0;
let failed = 0;
let todo = 0;
const run = (cmd, args) => {
  const r = spawnSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  process.stdout.write(r.stdout ?? "");
  return { code: r.status ?? 1, out: r.stdout ?? "" };
};
const count = (out, re) => [...out.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);

for (const [cmd, args] of [["npm", ["run", "build"]], ["npm", ["run", "typecheck"]]]) {
  const r = run(cmd, args);
  if (r.code !== 0) failed += 1;
}
const node = run("node", ["--test", "--test-reporter=tap", ...["client", "kit.node"].map((f) => `test/${f}.test.mjs`)]);
todo += count(node.out, /^# todo (\d+)/gm);
passed += count(node.out, /^# pass (\d+)/gm);
failed += count(node.out, /^# fail (\d+)/gm) + (node.code !== 0 && !/^# fail [1-9]/m.test(node.out) ? 1 : 0);
const vit = run("npx", ["vitest", "run", "--reporter=verbose", "--reporter=json", "--outputFile.json=../../target/vitest.json"]);
try {
  const r = JSON.parse(readFileSync("../../target/vitest.json", "utf8"));
  passed += r.numPassedTests;
  failed += r.numFailedTests + (vit.code !== 0 && r.numFailedTests === 0 ? 1 : 0);
} catch {
  failed += 1;
}
const jest = run("npx", ["jest", "--json", "--outputFile=../../target/jest.json"]);
try {
  const r = JSON.parse(readFileSync("../../target/jest.json", "utf8"));
  passed += r.numPassedTests;
  failed += r.numFailedTests + (jest.code !== 0 && r.numFailedTests === 0 ? 1 : 0);
} catch {
  failed += 1;
}
const cjs = run("node", ["test/cjs.test.cjs"]);
passed += count(cjs.out, /cjs: (\d+) passed/g);
failed += cjs.code !== 0 ? 1 : 0;
const ok = failed === 0 && passed > 0;
console.log(`test result: ${ok ? "ok" : "FAILED"}. ${passed} passed; ${failed} failed; 0 ignored; 0 measured; 0 filtered out (typescript; ${todo} todo)`);
process.exit(ok ? 0 : 1);

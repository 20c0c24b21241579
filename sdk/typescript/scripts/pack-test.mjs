// The package as a user gets it: `npm pack`, the tarball installed into a fresh project
// (target/ts-pack/project, outside this package), and the test kit's own suites run there
// under node:test, vitest and jest, importing `@scion-db/client/...` from node_modules.
// Run after `npm run build`; prints one line in the workspace's summary format.
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

const here = path.resolve(import.meta.dirname, "..");
const root = path.resolve(here, "..", "..", "target", "ts-pack");
const project = path.join(root, "project");
const pkg = JSON.parse(readFileSync(path.join(here, "package.json"), "utf8"));
const dev = pkg.devDependencies;

const run = (cmd, args, cwd) => {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  return { code: r.status ?? 1, out: r.stdout ?? "" };
};
const must = (r, what) => {
  if (r.code !== 0) {
    process.stdout.write(r.out);
    console.log(`test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out (typescript tarball: ${what})`);
    process.exit(1);
  }
  return r;
};

rmSync(root, { recursive: true, force: true });
mkdirSync(path.join(project, "test"), { recursive: true });
const packed = must(run("npm", ["pack", "--silent", "--pack-destination", root], here), "npm pack");
const tarball = packed.out.trim().split("\n").pop();
console.log(`npm pack: ${tarball} (${readdirSync(root).length - 1} file)`);

writeFileSync(
  path.join(project, "package.json"),
  JSON.stringify(
    {
      name: "scion-tarball-check",
      private: true,
      type: "module",
      dependencies: { "@scion-db/client": `file:../${tarball}` },
      devDependencies: Object.fromEntries(
        ["better-sqlite3", "jest", "vitest", "vite"].map((d) => [d, dev[d]]),
      ),
      allowScripts: pkg.allowScripts,
      jest: { testMatch: ["**/test/*.jest.test.cjs"], testTimeout: 60000 },
    },
    null,
    2,
  ),
);
// The kit's suites, with their imports pointed at the installed package.
const rewrite = (text) =>
  text
    .replace(/"\.\.\/dist\/(?:esm|cjs)\/([a-z-]+)\.js"/g, '"@scion-db/client/$1"')
    .replace(/"\.\.\/src\/([a-z-]+)\.js"/g, '"@scion-db/client/$1"');
for (const f of ["kit.node.test.mjs", "kit.vitest.test.ts", "kit.jest.test.cjs", "helpers.mjs", "scion-bin.cjs"]) {
  const text = rewrite(readFileSync(path.join(here, "test", f), "utf8"));
  if (/\.\.\/(dist|src)\//.test(text)) throw new Error(`${f} still imports from the source tree`);
  writeFileSync(path.join(project, "test", f), text);
}
writeFileSync(
  path.join(project, "vitest.config.mjs"),
  'export default { test: { include: ["test/*.vitest.test.ts"], testTimeout: 60000, hookTimeout: 60000 } };\n',
);
must(run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], project), "npm install");

let passed = 0;
let failed = 0;
let todo = 0;
const count = (out, re) => [...out.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
const node = run("node", ["--test", "--test-reporter=tap", "test/kit.node.test.mjs"], project);
process.stdout.write(node.out.split("\n").filter((l) => /^# (pass|fail)/.test(l)).map((l) => `node:test ${l}\n`).join(""));
todo += count(node.out, /^# todo (\d+)/gm);
passed += count(node.out, /^# pass (\d+)/gm);
failed += count(node.out, /^# fail (\d+)/gm) + (node.code !== 0 && !/^# fail [1-9]/m.test(node.out) ? 1 : 0);
for (const [name, args, file] of [
  ["vitest", ["vitest", "run", "--reporter=json", "--outputFile.json=../vitest.json"], "vitest.json"],
  ["jest", ["jest", "--json", "--outputFile=../jest.json"], "jest.json"],
]) {
  const r = run("npx", args, project);
  try {
    const j = JSON.parse(readFileSync(path.join(root, file), "utf8"));
    console.log(`${name}: ${j.numPassedTests} passed, ${j.numFailedTests} failed`);
    passed += j.numPassedTests;
    failed += j.numFailedTests + (r.code !== 0 && j.numFailedTests === 0 ? 1 : 0);
  } catch {
    process.stdout.write(r.out);
    failed += 1;
  }
}
const ok = failed === 0 && passed > 0;
console.log(
  `test result: ${ok ? "ok" : "FAILED"}. ${passed} passed; ${failed} failed; 0 ignored; 0 measured; 0 filtered out (typescript tarball; ${todo} todo)`,
);
process.exit(ok ? 0 : 1);

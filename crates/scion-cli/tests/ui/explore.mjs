// Drives the branch explorer in Debian's Chromium with playwright-core: loads the URL
// `scion ui` printed, waits for the tree, and prints what it drew as JSON (nodes, edges,
// render time, every request to another origin), saving a screenshot.
//
//   node explore.mjs URL SCREENSHOT.png [SEARCH]
import { createRequire } from "node:module";
import { execFileSync } from "node:child_process";

// playwright-core lives where ./scripts/test installed it (NODE_PATH), not beside this file.
const require = createRequire(`${process.env.NODE_PATH}/`);
const { chromium } = require("playwright-core");

const [url, shot, term] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.SCION_CHROMIUM || "/usr/bin/chromium",
  args: [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const origin = new URL(url).origin;
  const foreign = [];
  page.on("request", (r) => {
    if (!r.url().startsWith(origin) && !r.url().startsWith("data:")) foreign.push(r.url());
  });
  const failures = [];
  page.on("pageerror", (e) => failures.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(() => document.body.dataset.ready === "1" || document.body.dataset.ready === "error", null, { timeout: 60000 });
  const extract = () => page.evaluate(() => ({
    ready: document.body.dataset.ready,
    error: document.getElementById("error").textContent,
    renderMs: Number(document.body.dataset.renderMs),
    address: location.href,
    nodes: [...document.querySelectorAll("#nodes .node")].map((g) => g.dataset.branch),
    edges: [...document.querySelectorAll("#edges .edge")].map((e) => ({
      from: e.dataset.from, to: e.dataset.to, kind: e.classList.contains("merge") ? "merge" : "fork",
    })),
  }));
  let drawn = await extract();
  // Search marks the branches whose names hold the term and fades the rest.
  if (term) {
    await page.fill("#search", term);
    drawn.searchHits = await page.evaluate(() => document.querySelectorAll(".node.hit").length);
    drawn.searchFaded = await page.evaluate(() => document.querySelectorAll(".node.dim").length);
    await page.fill("#search", "");
  }
  // Live: a command run outside the page (SCION_UI_LIVE, a JSON argv) makes the branch
  // SCION_UI_EXPECT, which must appear without a reload.
  if (process.env.SCION_UI_LIVE) {
    const [cmd, ...args] = JSON.parse(process.env.SCION_UI_LIVE);
    const before = Date.now();
    execFileSync(cmd, args, { stdio: "ignore" });
    const want = process.env.SCION_UI_EXPECT;
    await page.waitForSelector(`#nodes .node[data-branch="${want}"]`, { timeout: 30000 });
    const liveMs = Date.now() - before;
    const reloaded = await page.evaluate(() => performance.getEntriesByType("navigation").length !== 1);
    drawn = { ...drawn, ...(await extract()), liveMs, reloaded, liveNodes: 0 };
    drawn.liveNodes = drawn.nodes.length;
  }
  // Steps on the page (SCION_UI_STEPS, JSON): open a branch's page, use one of its
  // actions (answering its prompt), wait for a branch to appear.
  drawn.steps = [];
  let panelDrawsAtAct = 0;
  for (const step of JSON.parse(process.env.SCION_UI_STEPS || "[]")) {
    if (step.open) {
      await page.click(`#nodes .node[data-branch="${step.open}"] rect`);
      await page.waitForSelector(`#panel.shown[data-branch="${step.open}"]`, { timeout: 30000 });
      drawn.steps.push(await page.evaluate(() => ({
        panel: document.querySelector("#panel h2").textContent,
        history: [...document.querySelectorAll("#history tr")].map((r) => r.dataset.op),
        checkpoints: [...document.querySelectorAll("#checkpoints tr td:first-child")].map((t) => t.textContent),
        actions: [...document.querySelectorAll("#panel [data-action]")].map((b) => b.dataset.action),
      })));
    } else if (step.act) {
      panelDrawsAtAct = await page.evaluate(() => Number(document.getElementById("panel").dataset.draws || 0));
      page.once("dialog", (d) => d.accept(step.answer));
      await page.click(`#panel button[data-action="${step.act}"]`);
      await page.waitForSelector(`#said[data-action="${step.act}"]`, { timeout: 30000 });
      drawn.steps.push(await page.evaluate(() => {
        const said = document.getElementById("said");
        return {
          said: said.textContent,
          bad: said.classList.contains("bad"),
          conflicts: [...new Set([...document.querySelectorAll("#diff tr[data-conflict]")].map((r) => r.dataset.conflict))],
        };
      }));
    } else if (step.sql) {
      const before = await page.evaluate(() => Number(document.getElementById("sql-out").dataset.ran || 0));
      await page.fill("#sql", step.sql);
      await page.click("#sql-go");
      await page.waitForFunction((n) => Number(document.getElementById("sql-out").dataset.ran || 0) > n, before, { timeout: 30000 });
      drawn.steps.push(await page.evaluate(() => ({
        columns: [...document.querySelectorAll("#sql-out th")].map((t) => t.textContent),
        rows: [...document.querySelectorAll("#sql-out tr")].slice(1).map((r) => [...r.children].map((c) => c.textContent)),
        error: (document.querySelector("#sql-out .bad") || {}).textContent || null,
      })));
    } else if (step.diff) {
      await page.fill("#diff-from", step.diff);
      await page.click("#diff-go");
      await page.waitForSelector("#diff[data-shown]", { timeout: 30000 });
      drawn.steps.push(await page.evaluate(() => ({
        shown: document.getElementById("diff").dataset.shown,
        tables: [...document.querySelectorAll("#diff h4")].map((h) => h.textContent),
        changedCells: [...document.querySelectorAll("#diff td.changed")].map((td) => td.dataset.column),
        added: document.querySelectorAll("#diff tr.added").length,
        removed: document.querySelectorAll("#diff tr.removed").length,
      })));
    } else if (step.unfold) {
      const before = await page.evaluate(() => document.querySelectorAll("#nodes .node").length);
      const hidden = await page.evaluate(() => document.querySelectorAll("#nodes .node.folded").length);
      await page.click("#nodes .node.folded rect");
      await page.waitForFunction((n) => document.querySelectorAll("#nodes .node").length > n, before, { timeout: 30000 });
      drawn.steps.push({ before, foldedBefore: hidden, after: await page.evaluate(() => document.querySelectorAll("#nodes .node").length) });
    } else if (step.expect) {
      await page.waitForSelector(`#nodes .node[data-branch="${step.expect}"]`, { timeout: 30000 });
      // The tree changed, so the open panel is drawn again: what the last action said
      // must still be there afterwards.
      await page.waitForFunction((n) => Number(document.getElementById("panel").dataset.draws || 0) > n, panelDrawsAtAct, { timeout: 30000 });
      drawn.steps.push({ appeared: step.expect, said: await page.evaluate(() => (document.getElementById("said") || {}).textContent) });
    }
  }
  await page.screenshot({ path: shot, fullPage: false });
  drawn.foreign = foreign;
  drawn.pageErrors = failures;
  console.log(JSON.stringify(drawn));
} finally {
  await browser.close();
}

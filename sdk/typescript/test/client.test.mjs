// The client against a real `scion serve`: every method, error mapping, abort, events.
import "./helpers.mjs";
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { ScionClient, ScionError, BranchNotFoundError, ProtectedError, BranchExistsError, InvalidNameError, RemoteNotFoundError, ERROR_CODES } from "../dist/esm/index.js";
import { execFileSync } from "node:child_process";
import { SCION } from "./helpers.mjs";
import { startDaemon, seed } from "../dist/esm/testkit.js";

let daemon;
before(async () => {
  daemon = await startDaemon({ args: ["--flush-every", "200ms"] });
  await seed(daemon, {
    db: "shop",
    build: (path) => {
      const db = new Database(path);
      db.exec("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, qty INTEGER)");
      const ins = db.prepare("INSERT INTO items(name, qty) VALUES (?, ?)");
      for (let i = 1; i <= 20; i++) ins.run(`item-${i}`, i);
      db.close();
    },
  });
});
after(async () => daemon?.stop());

test("databases, branches, fork, checkout, checkpoint, diff, rollback, promote, touch, protect, export, destroy, gc", async () => {
  const c = daemon.client;
  assert.deepEqual(await c.databases(), ["shop"]);
  assert.equal((await c.health()).trim(), "ok");
  assert.ok((await c.status()).databases);
  await c.createDatabase("empty");
  const f = await c.fork("shop", "try", { ttl: "1h" });
  assert.equal(f.branch, "shop@try");
  assert.equal((await c.branch("shop@try")).ttl_secs, 3600);
  assert.equal((await c.branches("shop")).length, 2);
  const { path } = await c.checkout("shop@try");
  const db = new Database(path);
  db.exec("DELETE FROM items WHERE id <= 3");
  db.close();
  // Before the checkpoint, `working` reads the checkout's changes.
  const wip = await c.diff("shop@main", "shop@try", { working: true });
  assert.equal(wip.tables[0].removed, 3);
  assert.deepEqual(wip.working_files, ["shop@try"]);
  await c.checkpoint("shop@try", "trimmed");
  assert.equal((await c.checkpoints("shop@try"))[0].name, "trimmed");
  const d = await c.diff("shop@main", "shop@try", { rows: true, limit: 2 });
  assert.equal(d.tables[0].removed, 3);
  const released = await c.releaseCheckout("shop@try");
  assert.ok(released.files_removed >= 1);
  assert.deepEqual(released.remaining, []);
  const ro = await c.checkout("shop@try", { readOnly: true, checkpoint: "trimmed" });
  assert.match(ro.path, /trimmed/);
  const rb = await c.rollback("shop@try", "fork");
  const h = await c.history("shop@try", { limit: 5 });
  assert.equal(h.entries[0].op, "rollback");
  assert.equal(h.entries[0].seq, rb.history_entry);
  await c.undo("shop@try");
  assert.equal((await c.history("shop@try")).entries[0].op, "undo");
  await c.restore("shop@try", { to: rb.history_entry });
  await assert.rejects(c.undo("shop@main"), ProtectedError);
  await assert.rejects(c.rollback("shop@main", "init"), ProtectedError);
  await c.touch("shop@try", { ttl: "2h" });
  await c.protect("shop@try", true);
  await assert.rejects(c.destroy("shop@try"), ProtectedError);
  await c.protect("shop@try", false);
  await assert.rejects(c.promote("shop@try", { onto: "main" }), (e) => e instanceof ProtectedError && e.hint?.includes("force"));
  await c.promote("shop@try", { onto: "main", force: true });
  const out = `${daemon.store}/../out.db`;
  await c.export("shop@main", out);
  const exported = new Database(out, { readonly: true });
  assert.equal(exported.prepare("SELECT count(*) n FROM items").get().n, 20);
  exported.close();
  await c.destroy("shop@try");
  await c.gc();
});

test("merge: two forks into one branch, a conflict reported, then resolved", async () => {
  const c = daemon.client;
  await c.fork("shop", "m-dst");
  await c.fork("shop@m-dst", "m-a");
  await c.fork("shop@m-dst", "m-b");
  for (const [ref, sql] of [
    ["shop@m-a", "UPDATE items SET qty = 100 WHERE id = 5"],
    ["shop@m-b", "UPDATE items SET qty = 200 WHERE id = 5; UPDATE items SET name = 'b' WHERE id = 6"],
  ]) {
    const { path } = await c.checkout(ref);
    const db = new Database(path);
    db.exec(sql);
    db.close();
    await c.checkpoint(ref, "done");
  }
  assert.equal((await c.merge("shop@m-dst", "m-a")).outcome, "fast_forward");
  const dry = await c.merge("shop@m-dst", "shop@m-b", { dryRun: true });
  assert.equal(dry.outcome, "conflicts");
  assert.equal(dry.conflicts[0].id, "items:5:qty");
  const done = await c.merge("shop@m-dst", "m-b", { resolutions: { "items:5:qty": "theirs" } });
  assert.equal(done.outcome, "merged");
  assert.equal((await c.history("shop@m-dst", { limit: 1 })).entries[0].op, "merge");
  await assert.rejects(c.merge("shop@main", "m-b"), ProtectedError);
});

test("merge: rows both forks appended are kept with renumber", async () => {
  const c = daemon.client;
  await c.fork("shop", "r-dst");
  let last = 0;
  for (const ref of ["shop@r-a", "shop@r-b"]) {
    await c.fork("shop@r-dst", ref.split("@")[1]);
    const { path } = await c.checkout(ref);
    const db = new Database(path);
    db.prepare("INSERT INTO items(name, qty) VALUES (?, 1)").run(ref);
    last = db.prepare("SELECT max(id) n FROM items").get().n;
    db.close();
    await c.checkpoint(ref, "appended");
  }
  assert.equal((await c.merge("shop@r-dst", "r-a")).outcome, "fast_forward");
  assert.equal((await c.merge("shop@r-dst", "r-b", { dryRun: true })).conflicts[0].kind, "insert/insert");
  const done = await c.merge("shop@r-dst", "r-b", { renumber: true });
  assert.equal(done.outcome, "merged");
  assert.deepEqual(done.renumbered, [{ table: "items", column: "id", from: last, to: last + 1 }]);
});

test("remotes: push to another store, pull a commit made there", async () => {
  const c = daemon.client;
  const other = `${daemon.store}/../other-store`;
  execFileSync(SCION, ["--store", other, "init"]);
  assert.equal((await c.addRemote("origin", other)).remote, "origin");
  assert.deepEqual((await c.remotes()).map((r) => r.remote), ["origin"]);
  await c.fork("shop", "travel");
  const pushed = await c.push("shop@travel", "origin");
  assert.equal(pushed.outcome, "created");
  assert.equal(pushed.tracking, "shop@origin~travel");
  assert.equal((await c.push("shop@travel", "origin")).outcome, "up_to_date");
  execFileSync(SCION, ["--store", other, "sql", "shop@travel", "UPDATE items SET qty = 0 WHERE id = 1"]);
  const pulled = await c.pull("shop@travel", "origin");
  assert.equal(pulled.outcome, "fast_forward");
  assert.equal(pulled.transfer.objects_sent, 1);
  await assert.rejects(c.push("shop@travel", "nowhere"), RemoteNotFoundError);
  await c.removeRemote("origin");
});

test("errors are typed by code, with the daemon's hint", async () => {
  const c = daemon.client;
  await assert.rejects(c.branch("shop@nope"), (e) => e instanceof BranchNotFoundError && e instanceof ScionError && e.status === 404 && e.code === "branch_not_found" && e.exitCode === 3);
  await assert.rejects(c.fork("shop", "Bad Name"), InvalidNameError);
  await c.fork("shop", "dup");
  await assert.rejects(c.fork("shop", "dup"), BranchExistsError);
  assert.ok(ERROR_CODES.includes("lease_held"));
  const nowhere = new ScionClient({ socketPath: "/nonexistent/scion.sock" });
  await assert.rejects(nowhere.databases(), (e) => e.code === "daemon_unreachable" && e.retryable);
});

test("an idempotency key makes a retry answer the same", async () => {
  const c = daemon.client;
  const a = await c.fork("shop", "once", { idempotencyKey: "k-1" });
  const b = await c.fork("shop", "once", { idempotencyKey: "k-1" });
  assert.deepEqual(a, b);
});

test("every call takes an AbortSignal", async () => {
  const c = daemon.client;
  const ctl = new AbortController();
  ctl.abort();
  await assert.rejects(c.databases({ signal: ctl.signal }), (e) => e.name === "AbortError");
});

test("sessions: open, write, flush, close; disposal closes", async () => {
  const c = daemon.client;
  // Node 20 has Symbol.asyncDispose but not the `await using` syntax (TypeScript lowers
  // it; the vitest suite uses it): dispose by hand here.
  const s = await c.openSession({ db: "shop", branch: "live", forkFrom: "main", ttl: "1h" });
  {
    const db = new Database(s.path);
    db.exec("INSERT INTO items(name, qty) VALUES ('live', 1)");
    db.close();
    const r = await s.flush({ checkpoint: "one", meta: { by: "ts" } });
    assert.equal(r.committed, true);
    assert.equal(r.checkpoint, "shop@live@one");
    assert.equal((await s.info()).state, "open");
    assert.equal((await c.sessions()).length, 1);
    await s[Symbol.asyncDispose]();
  }
  assert.equal((await c.sessions()).length, 0, "disposed at the end of the block");
});

test("events: replay from an id, then live, and reconnect after the stream ends", async () => {
  const c = daemon.client;
  const ctl = new AbortController();
  const seen = [];
  const done = (async () => {
    for await (const e of c.events({ since: 0, signal: ctl.signal })) {
      seen.push(e);
      if (e.kind === "destroyed" && e.data.branch === "shop@ev") ctl.abort();
    }
  })();
  await c.fork("shop", "ev");
  await c.destroy("shop@ev");
  await done;
  const ids = seen.map((e) => e.id);
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
  assert.ok(seen.some((e) => e.kind === "forked" && e.data.branch === "shop@ev"));
  assert.ok(seen.some((e) => e.kind === "session_opened"), "replayed from 0");
});

test("events: a stream cut by a daemon restart resumes where it stopped", async (t) => {
  const { mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const dir = mkdtempSync(`${tmpdir()}/scion-events-`);
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // The same store and socket across two daemons, one after the other.
  const opts = { store: `${dir}/store`, socket: `${dir}/run/s.sock` };
  const { spawnSync } = await import("node:child_process");
  spawnSync(process.env.SCION_BIN, ["init"], { env: { ...process.env, SCION_STORE: opts.store } });
  const d1 = await startDaemon(opts);
  await d1.client.createDatabase("ev");
  const ctl = new AbortController();
  const got = [];
  const follower = (async () => {
    for await (const e of new ScionClient({ socketPath: opts.socket }).events({ since: 0, signal: ctl.signal, retryMs: 50 })) {
      got.push(`${e.kind}:${e.data.branch ?? e.data.db ?? ""}`);
      if (e.kind === "forked" && e.data.branch === "ev@after") ctl.abort();
    }
  })();
  await d1.client.fork("ev", "before");
  await new Promise((r) => setTimeout(r, 200));
  await d1.stop();
  const d2 = await startDaemon(opts);
  await d2.client.fork("ev", "after");
  await follower;
  await d2.stop();
  assert.deepEqual(got.filter((g) => g.startsWith("forked")), ["forked:ev@before", "forked:ev@after"]);
});

test("TCP with a bearer token, and without one", async (t) => {
  const { mkdtempSync, rmSync, writeFileSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const net = await import("node:net");
  const dir = mkdtempSync(`${tmpdir()}/scion-tcp-`);
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(`${dir}/token`, "s3cret-token\n");
  const port = await new Promise((resolve) => {
    const srv = net.createServer().listen(0, "127.0.0.1", () => {
      const p = srv.address().port;
      srv.close(() => resolve(p));
    });
  });
  const d = await startDaemon({ args: ["--listen", `127.0.0.1:${port}`, "--token-file", `${dir}/token`] });
  try {
    const url = `http://127.0.0.1:${port}`;
    assert.deepEqual(await new ScionClient({ url, token: "s3cret-token" }).databases(), []);
    await assert.rejects(new ScionClient({ url, token: "wrong" }).databases(), (e) => e.code === "unauthorized" && e.status === 401);
    await assert.rejects(new ScionClient({ url }).databases(), (e) => e.code === "unauthorized");
  } finally {
    await d.stop();
  }
});

// The test kit under vitest: the same guarantees as under node:test.
import "./helpers.mjs";
import { expect, it } from "vitest";
import Database from "better-sqlite3";
import { useScion } from "../src/vitest.js";

const scion = useScion({
  db: "app",
  build: (path) => {
    const db = new Database(path);
    db.exec("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('seeded')");
    db.close();
  },
});

const branches: string[] = [];

it("writes to its own fork", () => {
  branches.push(scion.db.branch);
  const db = new Database(scion.db.path);
  db.exec("INSERT INTO notes(body) VALUES ('from test 1')");
  expect((db.prepare("SELECT count(*) n FROM notes").get() as { n: number }).n).toBe(2);
  db.close();
});

it("sees only the seed in the next test", () => {
  branches.push(scion.db.branch);
  const db = new Database(scion.db.path);
  expect((db.prepare("SELECT count(*) n FROM notes").get() as { n: number }).n).toBe(1);
  db.close();
});

it.fails("throws (on purpose: its fork must still be removed)", () => {
  branches.push(scion.db.branch);
  throw new Error("boom");
});

it("finds every earlier fork gone", async () => {
  const names = (await scion.daemon.client.branches("app")).map((b) => `app@${b.branch}`);
  for (const b of branches) expect(names).not.toContain(b);
  expect(names).toContain(scion.db.branch);
});

it("closes a session at the end of an `await using` block", async () => {
  const c = scion.daemon.client;
  {
    await using s = await c.openSession({ db: "app", branch: "scoped", forkFrom: "main", ephemeral: true });
    expect((await c.sessions()).some((x) => x.id === s.id)).toBe(true);
  }
  const open = await c.sessions();
  expect(open.some((x) => x.branch === "app@scoped")).toBe(false);
});

// The test kit under jest (CommonJS build): isolation between tests, cleanup after a throw.
require("./scion-bin.cjs");
const Database = require("better-sqlite3");
const { useScion } = require("../dist/cjs/jest.js");

const scion = useScion({
  db: "app",
  build: (path) => {
    const db = new Database(path);
    db.exec("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('seeded')");
    db.close();
  },
});

const branches = [];

test("writes to its own fork", () => {
  branches.push(scion.db.branch);
  const db = new Database(scion.db.path);
  db.exec("INSERT INTO notes(body) VALUES ('from test 1')");
  expect(db.prepare("SELECT count(*) n FROM notes").get().n).toBe(2);
  db.close();
});

test.failing("throws (on purpose: its fork must still be removed)", () => {
  branches.push(scion.db.branch);
  throw new Error("boom");
});

test("sees only the seed, and every earlier fork is gone", async () => {
  const db = new Database(scion.db.path);
  expect(db.prepare("SELECT count(*) n FROM notes").get().n).toBe(1);
  db.close();
  const names = (await scion.daemon.client.branches("app")).map((b) => `app@${b.branch}`);
  for (const b of branches) expect(names).not.toContain(b);
});

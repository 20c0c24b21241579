// An example suite: each test gets its own fork of a seeded orders database, runs a
// migration or a query against it with better-sqlite3, and never sees another test's writes.
import "../test/helpers.mjs";
import { describe, expect, it } from "vitest";
import Database from "better-sqlite3";
import { useScion } from "../src/vitest.js";

const scion = useScion({
  db: "orders",
  build: (path) => {
    const db = new Database(path);
    db.exec(`CREATE TABLE orders(id INTEGER PRIMARY KEY, customer TEXT, total REAL, status TEXT);`);
    const add = db.prepare("INSERT INTO orders(customer, total, status) VALUES (?, ?, ?)");
    for (let i = 1; i <= 100; i++) add.run(`c${i % 7}`, i * 1.5, i % 3 ? "paid" : "open");
    db.close();
  },
});

describe("orders", () => {
  it("a migration adds a column without losing rows", () => {
    const db = new Database(scion.db.path);
    db.exec("ALTER TABLE orders ADD COLUMN currency TEXT NOT NULL DEFAULT 'EUR'");
    expect((db.prepare("SELECT count(*) n FROM orders WHERE currency = 'EUR'").get() as { n: number }).n).toBe(100);
    db.close();
  });

  it("cancelling open orders touches only those", () => {
    const db = new Database(scion.db.path);
    const r = db.prepare("UPDATE orders SET status = 'cancelled' WHERE status = 'open'").run();
    expect(r.changes).toBe(33);
    db.close();
  });

  it("still sees the seed: no column, no cancellation", () => {
    const db = new Database(scion.db.path);
    const cols = db.prepare("PRAGMA table_info(orders)").all() as { name: string }[];
    expect(cols.map((c) => c.name)).not.toContain("currency");
    expect((db.prepare("SELECT count(*) n FROM orders WHERE status = 'cancelled'").get() as { n: number }).n).toBe(0);
    db.close();
  });
});

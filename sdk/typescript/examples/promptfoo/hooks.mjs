// promptfoo extension hooks: one daemon for the eval run, a fresh fork of the seeded
// database for every test case (its path in the test's vars as `db_path`), removed after.
// In promptfooconfig.yaml:  extensions: ["file://hooks.mjs:hooks"]
import { freshDb, seed, startDaemon } from "@scion-db/client/testkit";

let daemon;
const forks = new Map();

export async function hooks(name, context) {
  if (name === "beforeAll") {
    daemon = await startDaemon();
    await seed(daemon, { db: "app", fromFile: process.env.SEED_DB ?? "seed.db" });
  } else if (name === "beforeEach") {
    const db = await freshDb(daemon, "app");
    forks.set(context.test, db);
    context.test.vars = { ...context.test.vars, db_path: db.path };
    return context;
  } else if (name === "afterEach") {
    await forks.get(context.test)?.release();
    forks.delete(context.test);
  } else if (name === "afterAll") {
    await daemon?.stop();
  }
}

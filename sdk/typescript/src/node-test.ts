// node:test adapter: `const scion = useScion({ db: "shop", seed: ... })` at the top of a test
// file starts a daemon before the tests, seeds once, gives each test a fresh fork
// (`scion.db.path`), and cleans up after each test, also when it throws.

import { after, afterEach, before, beforeEach } from "node:test";
import { FreshDb, freshDb, seed, SeedOptions, startDaemon, Daemon, DaemonOptions } from "./testkit.js";

export interface Scion {
  readonly daemon: Daemon;
  readonly db: FreshDb;
}

export function useScion(opts: SeedOptions & { daemon?: DaemonOptions }): Scion {
  let daemon: Daemon | undefined;
  let db: FreshDb | undefined;
  before(async () => {
    daemon = await startDaemon(opts.daemon);
    await seed(daemon, opts);
  });
  beforeEach(async () => {
    db = await freshDb(daemon!, opts.db);
  });
  afterEach(async () => {
    await db?.release();
    db = undefined;
  });
  after(async () => {
    await daemon?.stop();
  });
  return {
    get daemon() {
      if (!daemon) throw new Error("the daemon starts in the suite's before hook");
      return daemon;
    },
    get db() {
      if (!db) throw new Error("a fresh database exists only inside a test");
      return db;
    },
  };
}

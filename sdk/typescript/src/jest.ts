// jest adapter: the same as the node:test and vitest ones, on jest's global hooks.

import { FreshDb, freshDb, seed, SeedOptions, startDaemon, Daemon, DaemonOptions } from "./testkit.js";

type Hook = (fn: () => Promise<void>, timeout?: number) => void;
declare const beforeAll: Hook, afterAll: Hook, beforeEach: Hook, afterEach: Hook;

export interface Scion {
  readonly daemon: Daemon;
  readonly db: FreshDb;
}

export function useScion(opts: SeedOptions & { daemon?: DaemonOptions }): Scion {
  let daemon: Daemon | undefined;
  let db: FreshDb | undefined;
  beforeAll(async () => {
    daemon = await startDaemon(opts.daemon);
    await seed(daemon, opts);
  }, 60_000);
  beforeEach(async () => {
    db = await freshDb(daemon!, opts.db);
  });
  afterEach(async () => {
    await db?.release();
    db = undefined;
  });
  afterAll(async () => {
    await daemon?.stop();
  });
  return {
    get daemon() {
      if (!daemon) throw new Error("the daemon starts in the suite's beforeAll hook");
      return daemon;
    },
    get db() {
      if (!db) throw new Error("a fresh database exists only inside a test");
      return db;
    },
  };
}

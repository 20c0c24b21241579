// What the node:test, vitest and jest adapters share: the suite's hooks, given by each.

import { FreshDb, freshDb, seed, SeedOptions, startDaemon, Daemon, DaemonOptions } from "./testkit.js";

type Hook = (fn: () => Promise<void>) => unknown;

export interface Hooks {
  beforeAll: Hook;
  afterAll: Hook;
  beforeEach: Hook;
  afterEach: Hook;
}

export interface Scion {
  readonly daemon: Daemon;
  readonly db: FreshDb;
}

export type UseScionOptions = SeedOptions & { daemon?: DaemonOptions };

/** Start a daemon before the suite and seed once; a fresh fork per test, released after it. */
export function useScionWith(hooks: Hooks, opts: UseScionOptions): Scion {
  let daemon: Daemon | undefined;
  let db: FreshDb | undefined;
  hooks.beforeAll(async () => {
    daemon = await startDaemon(opts.daemon);
    await seed(daemon, opts);
  });
  hooks.beforeEach(async () => {
    db = await freshDb(daemon!, opts.db);
  });
  hooks.afterEach(async () => {
    await db?.release();
    db = undefined;
  });
  hooks.afterAll(async () => {
    await daemon?.stop();
  });
  return {
    get daemon() {
      if (!daemon) throw new Error("the daemon starts in the suite's before-all hook");
      return daemon;
    },
    get db() {
      if (!db) throw new Error("a fresh database exists only inside a test");
      return db;
    },
  };
}

// jest adapter: the same as the node:test one, on jest's global hooks.

import { Scion, UseScionOptions, useScionWith } from "./adapter.js";

export type { Scion, UseScionOptions } from "./adapter.js";

type Hook = (fn: () => Promise<void>, timeout?: number) => void;
declare const beforeAll: Hook, afterAll: Hook, beforeEach: Hook, afterEach: Hook;

export function useScion(opts: UseScionOptions): Scion {
  // Starting a daemon and seeding can take longer than jest's default 5 s.
  const slow = (hook: Hook) => (fn: () => Promise<void>) => hook(fn, 60_000);
  return useScionWith(
    { beforeAll: slow(beforeAll), afterAll: slow(afterAll), beforeEach: slow(beforeEach), afterEach: slow(afterEach) },
    opts,
  );
}

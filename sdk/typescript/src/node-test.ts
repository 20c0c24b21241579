// node:test adapter: `const scion = useScion({ db: "shop", build })` at the top of a test file
// starts a daemon before the tests, seeds once, gives each test a fresh fork
// (`scion.db.path`), and cleans up after each test, also when it throws.

import { after, afterEach, before, beforeEach } from "node:test";
import { Scion, UseScionOptions, useScionWith } from "./adapter.js";

export type { Scion, UseScionOptions } from "./adapter.js";

export function useScion(opts: UseScionOptions): Scion {
  return useScionWith({ beforeAll: before, afterAll: after, beforeEach, afterEach }, opts);
}

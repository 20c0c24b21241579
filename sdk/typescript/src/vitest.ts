// vitest adapter: the same as the node:test one, on vitest's hooks.

import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { Scion, UseScionOptions, useScionWith } from "./adapter.js";

export type { Scion, UseScionOptions } from "./adapter.js";

export function useScion(opts: UseScionOptions): Scion {
  return useScionWith({ beforeAll, afterAll, beforeEach, afterEach }, opts);
}

// The scion binary the tests run: SCION_BIN, else `scion` on PATH, else the workspace's
// build (see scion-bin.cjs).
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
export const SCION = require("./scion-bin.cjs").SCION;

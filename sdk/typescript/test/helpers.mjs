// The scion binary the tests run: SCION_BIN, else the workspace's debug build.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const built = fileURLToPath(new URL("../../../target/debug/scion", import.meta.url));
export const SCION = process.env.SCION_BIN ?? built;
if (!existsSync(SCION)) {
  throw new Error(`no scion binary at ${SCION}: build it with cargo build -p scion-cli, or set SCION_BIN`);
}
process.env.SCION_BIN = SCION;

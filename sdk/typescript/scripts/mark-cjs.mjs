// dist/cjs holds CommonJS under a "type": "module" package: mark the folder as such.
import { writeFileSync } from "node:fs";
writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');

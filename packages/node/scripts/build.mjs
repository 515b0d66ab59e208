// Builds dist/esm and dist/cjs from src with plain tsc, and type-checks the
// usage the tests compile against (test/types), without emitting it.
import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";

function tsc(project) {
  const run = spawnSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", project], { stdio: "inherit" });
  if (run.status !== 0) {
    console.error(`tsc -p ${project} failed`);
    process.exit(1);
  }
}

rmSync("dist", { recursive: true, force: true });
tsc("tsconfig.json");
tsc("tsconfig.cjs.json");
// The package is "type": "module"; the CommonJS build says so of itself.
writeFileSync("dist/cjs/package.json", '{ "type": "commonjs" }\n');
tsc("test/types/tsconfig.json");

// Vitest global setup of this package: the tests run src/, but the scripts load from dist/lua, where the
// build flattens src/lua's includes (scripts/copy-lua.mjs). Running that step first makes them this tree's
// scripts, edited since the last build or not.

import { fileURLToPath } from "node:url";
import { describeRun, runCommand } from "@once/support";

export default async function buildLua(): Promise<void> {
  const packageDir = fileURLToPath(new URL("..", import.meta.url));
  const run = await runCommand(process.execPath, ["../../scripts/copy-lua.mjs"], { cwd: packageDir });
  if (run.code !== 0) throw new Error(`the build of the Lua scripts failed:\n${describeRun(run)}`);
}

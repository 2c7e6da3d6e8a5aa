import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url));

it("charges once although the orchestrator timed out and retried, and replays the second call", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [main], {
    env: process.env,
    timeout: 30_000,
  });
  expect(stdout).toContain("charges at the provider: 1");
  const ids = [...stdout.matchAll(/chargeId: '(ch_[^']+)'/g)].map((m) => m[1]);
  expect(ids).toHaveLength(2);
  expect(ids[0]).toBe(ids[1]);
  expect(stdout).toMatch(/replayed: false[\s\S]*replayed: true/);
});

// The once command as this repository's README says to run it: `pnpm once …` at the root (which builds the
// CLI first) and `pnpm exec once …` (the root links the CLI's bin). The installed `npx once …` is in
// pack-install.test.ts.

import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  describeRun,
  type RedisServerHandle,
  randomPrefix,
  runCommand,
  startRedisServer,
  stopAllRedisServers,
} from "@once/support";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

let redis: RedisServerHandle;

beforeAll(async () => {
  // A Redis once's doctor has nothing against, so a clean bill of health is exit 0.
  redis = await startRedisServer({ appendonly: true, appendfsync: "always" });
});

afterAll(async () => {
  await stopAllRedisServers();
});

describe("the once command from the repository root", () => {
  it.each([
    ["pnpm once", ["once"]],
    ["pnpm exec once", ["exec", "once"]],
  ])("%s doctor checks the Redis it is given", async (_label, pnpmArgs) => {
    const doctor = await runCommand("pnpm", [...pnpmArgs, "doctor", "--redis-url", redis.url], {
      cwd: repoRoot,
      timeoutMs: 120_000,
    });
    expect(doctor.code, describeRun(doctor)).toBe(0);
    expect(doctor.stdout).toContain(`once doctor: ${redis.url} (standalone)`);
    expect(doctor.stdout).toContain("RedisStore.create would start on this Redis");
  });

  it("pnpm once … --json prints only the JSON on stdout", async () => {
    const list = await runCommand(
      "pnpm",
      ["once", "list", "--json", "--redis-url", redis.url, "--prefix", randomPrefix("root-cli")],
      { cwd: repoRoot, timeoutMs: 120_000 },
    );
    expect(list.code, describeRun(list)).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject({ records: [] });
  });
});

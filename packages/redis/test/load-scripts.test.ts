// Two builds of @once/redis can share one ioredis client (two versions in one process). Each is a module
// copy with its own module scope, so what one registered on a client must be visible to the other.

import { redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it, vi } from "vitest";
import { RedisScriptError } from "../src/index.js";
import { loadScripts } from "../src/load-scripts.js";

/**
 * A second copy of the module, as a second build in node_modules would be. `edit` changes the Lua it reads:
 * a build whose scripts differ from this one's.
 */
async function anotherBuild(edit: (lua: string) => string = (lua) => lua) {
  vi.resetModules();
  vi.doMock("node:fs/promises", async (importOriginal) => {
    const fs = await importOriginal<typeof import("node:fs/promises")>();
    return {
      ...fs,
      readFile: async (file: URL, encoding: "utf8") => edit(await fs.readFile(file, encoding)),
    };
  });
  try {
    const copy = await import("../src/load-scripts.js");
    expect(copy.loadScripts).not.toBe(loadScripts);
    return copy;
  } finally {
    vi.doUnmock("node:fs/promises");
  }
}

const clients: Redis[] = [];

afterEach(() => {
  for (const redis of clients.splice(0)) redis.disconnect();
});

function client(): Redis {
  const redis = new Redis(redisUrl());
  clients.push(redis);
  return redis;
}

describe("loadScripts", () => {
  it("lets two builds with the same scripts share one client, each able to run them", async () => {
    const redis = client();
    const other = await anotherBuild();
    const run = await loadScripts(redis);
    const runFromOther = await other.loadScripts(redis);
    const key = `once-test:${Math.random().toString(16).slice(2)}:absent`;
    expect(await run("get", key, [])).toEqual([-2, []]);
    expect(await runFromOther("get", key, [])).toEqual([-2, []]);
  });

  it("refuses a client where another build registered other Lua under the same versioned name", async () => {
    const redis = client();
    const other = await anotherBuild((lua) => `${lua}\n-- another build`);
    await other.loadScripts(redis);
    const error = await loadScripts(redis).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisScriptError);
    expect((error as Error).message).toContain("a different script under that name");
  });
});

// Two builds of @once/redis can share one ioredis client (two versions in one process), each a module copy
// with its own module scope; scripts run by digest, so each runs its own Lua, and a flushed cache is refilled.

import { redisUrl, startRedisServer } from "@once/support";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it, onTestFinished, vi } from "vitest";
import { scriptDigests } from "../src/index.js";
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

function client(url = redisUrl()): Redis {
  const redis = new Redis(url);
  clients.push(redis);
  return redis;
}

describe("loadScripts", () => {
  const absent = () => `once-test:${Math.random().toString(16).slice(2)}:absent`;

  it("lets two builds with different scripts share one client, each running its own Lua", async () => {
    const redis = client();
    const other = await anotherBuild((lua) => lua.replace("return {-2, {}}", "return {-7, {}}"));
    const mine = await loadScripts(redis);
    const theirs = await other.loadScripts(redis);
    const key = absent();
    expect(await mine.run("get", key, [])).toEqual([-2, []]);
    expect(await theirs.run("get", key, [])).toEqual([-7, []]);
    expect(await mine.run("get", key, [])).toEqual([-2, []]);
  });

  it("runs a script the server's cache has lost (SCRIPT FLUSH, a restart) with EVAL, which caches it again", async () => {
    // A server of its own: a flush of a shared server's cache would be felt by its other clients.
    const server = await startRedisServer();
    onTestFinished(() => server.stop());
    const redis = client(server.url);
    const { run, runConfirmed } = await loadScripts(redis);
    const [get] = (await scriptDigests()).filter((digest) => digest.name === "get");
    const cached = async () => ((await redis.script("EXISTS", get?.sha1 ?? "")) as number[])[0];
    await redis.script("FLUSH");
    expect(await cached()).toBe(0);
    expect(await run("get", absent(), [])).toEqual([-2, []]);
    expect(await cached()).toBe(1);

    await redis.script("FLUSH");
    const confirmed = await runConfirmed("get", absent(), [], { replicas: 0, timeoutMs: 100, fsync: false });
    expect(confirmed).toEqual({ reply: [-2, []], acknowledged: 0 });
    expect(await cached()).toBe(1);
  });
});

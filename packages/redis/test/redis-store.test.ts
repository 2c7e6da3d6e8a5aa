import { randomBytes } from "node:crypto";
import { type ClaimRequest, StoreUnavailableError } from "@once/core";
import {
  cleanupPrefix,
  clusterNodes,
  type RedisServerHandle,
  randomPrefix,
  redisUrl,
  startRedisServer,
  stopAllRedisServers,
} from "@once/support";
import { Cluster, Redis, type RedisOptions } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { describeStoreConformance } from "../../../test/support/store-conformance.js";
import { RedisScriptError, RedisStore, scanRecords } from "../src/index.js";

// Long enough that a record outlives any test, short enough that a crashed run leaves nothing for long.
const RETENTION_MS = 10 * 60 * 1000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function request(key: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { key, fingerprint: "fp", tool: "charge_card", phase: "prepare", leaseMs: 10_000, ...overrides };
}

function randomKey(): string {
  return randomBytes(32).toString("hex");
}

describe("RedisStore on a standalone Redis", () => {
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(redisUrl());
  });

  afterAll(async () => {
    await redis.quit();
  });

  describeStoreConformance("RedisStore (standalone)", async ({ retentionMs = RETENTION_MS }) => {
    const prefix = randomPrefix("conformance");
    const store = await RedisStore.create({ redis, prefix, retentionMs });
    return {
      store,
      retentionMs,
      teardown: async () => {
        await cleanupPrefix(redis, prefix);
      },
    };
  });

  describe("record layout", () => {
    const prefix = randomPrefix("layout");
    afterAll(async () => {
      await cleanupPrefix(redis, prefix);
    });

    it("keeps one hash at <prefix><key> with the documented fields, expiring after the retention", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      const key = randomKey();
      const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      const claim = await store.claim(request(key, { trace }));
      if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
      expect(claim.token).toMatch(/^1\.[0-9a-f]{16}$/);

      expect(await redis.type(prefix + key)).toBe("hash");
      const fields = await redis.hgetall(prefix + key);
      expect(Object.keys(fields).sort()).toEqual(
        [
          "claims",
          "created_at",
          "fence",
          "fp",
          "lease_until",
          "owner",
          "phase",
          "state",
          "tool",
          "trace",
          "updated_at",
        ].sort(),
      );
      expect(fields).toMatchObject({
        state: "claimed",
        phase: "prepare",
        fence: "1",
        owner: claim.token,
        fp: "fp",
      });
      expect(Number(fields.lease_until)).toBe(claim.leaseUntil);
      const ttl = await redis.pttl(prefix + key);
      expect(ttl).toBeGreaterThan(55_000);
      expect(ttl).toBeLessThanOrEqual(60_000);

      await store.beginEffect(key, claim.token);
      await store.markUnknown(key, claim.token, { name: "Error", message: "timeout" });
      await store.resolve(key, {
        decision: { as: "applied", result: '{"id":1}' },
        by: "ops",
        why: "checked",
      });
      const resolved = await redis.hgetall(prefix + key);
      expect(resolved).toMatchObject({ state: "done", result: '{"id":1}', res_as: "applied", res_by: "ops" });
      expect(resolved).toMatchObject({ res_why: "checked", res_at: resolved.updated_at, fence: "2" });
      expect(resolved.owner).toBeUndefined();
      expect(resolved.lease_until).toBeUndefined();
      expect(resolved.error).toBeUndefined();
    });

    it("keeps a result of 65 to 128 bytes in two parts of at most 64 bytes, cut between characters: the record stays a listpack", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      const cases: [result: string, parts: number][] = [
        [JSON.stringify({ id: "ch_1", pad: "x".repeat(80) }), 2],
        ["1".repeat(128), 2],
        ["2".repeat(64), 1],
        // A cut that must back up over a four-byte character (at 62), and over a three-byte one (at 63).
        [`é${"😀".repeat(30)}`, 2],
        ["€".repeat(40), 2],
        // Backing up to a character would leave more than 64 bytes for the second part: kept whole.
        [`a${"😀".repeat(31)}bbb`, 1],
        ["3".repeat(129), 1],
      ];
      for (const [result, count] of cases) {
        const key = randomKey();
        const claim = await store.claim(request(key, { phase: "effect" }));
        if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
        expect(await store.complete(key, claim.token, result)).toMatchObject({ outcome: "ok" });
        const fields = await redis.hgetallBuffer(prefix + key);
        const parts = Object.keys(fields).filter((f) => /^result\d*$/.test(f));
        expect(parts).toHaveLength(count);
        expect(fields.phase).toBeUndefined();
        const small = Buffer.byteLength(result) <= 64 || count === 2;
        expect(await redis.object("ENCODING", prefix + key)).toBe(small ? "listpack" : "hashtable");
        for (const part of parts) {
          if (count === 2) expect(fields[part]?.length).toBeLessThanOrEqual(64);
          // Each part is whole UTF-8 on its own: a reader that decodes the parts one by one loses nothing.
          expect(Buffer.from(fields[part]?.toString("utf8") ?? "", "utf8")).toEqual(fields[part]);
        }
        expect(await store.claim(request(key, { phase: "effect" }))).toMatchObject({
          outcome: "replay",
          result,
        });
        expect((await store.get(key))?.result).toBe(result);
        const scanned: string[] = [];
        for await (const record of scanRecords(redis, { prefix }))
          if (record.key === key) scanned.push(record.result ?? "");
        expect(scanned).toEqual([result]);
      }
    });

    it("replays and reads a record written whole by an earlier version (one result field over 64 bytes)", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      const key = randomKey();
      const result = JSON.stringify({ id: "ch_1", pad: "z".repeat(200) });
      await redis.hset(prefix + key, {
        fp: "fp",
        tool: "charge_card",
        fence: 1,
        claims: 1,
        created_at: 1,
        state: "done",
        phase: "effect",
        updated_at: 2,
        result,
      });
      await redis.pexpire(prefix + key, 60_000);
      expect(await store.claim(request(key))).toMatchObject({ outcome: "replay", result, fence: 1 });
      expect((await store.get(key))?.result).toBe(result);
    });

    it("takes time from the Redis server's clock, not the client's", async () => {
      const store = await RedisStore.create({ redis, prefix });
      const key = randomKey();
      const [seconds, micros] = await redis.time();
      const serverNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      const claim = await store.claim(request(key, { leaseMs: 5_000 }));
      if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
      expect(claim.leaseUntil - 5_000).toBeGreaterThanOrEqual(serverNow);
      expect(claim.leaseUntil - 5_000).toBeLessThan(serverNow + 1_000);
    });

    it("surfaces a script error as a bug (RedisScriptError), never as unavailability", async () => {
      const store = await RedisStore.create({ redis, prefix });
      const key = randomKey();
      await redis.hset(prefix + key, { state: "bogus", fp: "fp", tool: "charge_card", fence: "1" });
      const error = await store.claim(request(key)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedisScriptError);
      expect((error as RedisScriptError).code).toBe("ONCE_REDIS_SCRIPT");
      expect((error as Error).message).toContain("bogus");
      expect((error as Error).cause).toBeDefined();
    });

    it("rejects a lease that is not a positive integer before talking to Redis", async () => {
      const store = await RedisStore.create({ redis, prefix, checks: false });
      await expect(store.claim(request(randomKey(), { leaseMs: 1.5 }))).rejects.toBeInstanceOf(RangeError);
      await expect(store.heartbeat(randomKey(), "1.a", 0)).rejects.toBeInstanceOf(RangeError);
    });
  });
});

describe("RedisStore on a Redis Cluster", () => {
  let cluster: Cluster;

  beforeAll(() => {
    cluster = new Cluster(clusterNodes());
  });

  afterAll(async () => {
    await cluster.quit();
  });

  describeStoreConformance("RedisStore (cluster)", async ({ retentionMs = RETENTION_MS }) => {
    const prefix = randomPrefix("cluster");
    const store = await RedisStore.create({ redis: cluster, prefix, retentionMs });
    return {
      store,
      retentionMs,
      teardown: async () => {
        await cleanupPrefix(cluster, prefix);
      },
    };
  });

  it("spreads records over the masters (no hash tag) and checks every master at start", async () => {
    const prefix = randomPrefix("spread");
    try {
      const store = await RedisStore.create({ redis: cluster, prefix });
      expect(store.report?.cluster).toBe(true);
      expect(store.report?.nodes).toHaveLength(3);
      const keys = Array.from({ length: 30 }, randomKey);
      for (const key of keys) expect((await store.claim(request(key))).outcome).toBe("acquired");
      const perMaster = await Promise.all(
        cluster.nodes("master").map(async (node) => (await node.keys(`${prefix}*`)).length),
      );
      expect(perMaster.reduce((a, b) => a + b, 0)).toBe(30);
      expect(perMaster.filter((n) => n > 0).length).toBeGreaterThan(1);
    } finally {
      await cleanupPrefix(cluster, prefix);
    }
  });
});

/**
 * Counts the commands one client sends, with MONITOR on a server nobody else uses. Commands a script runs
 * show up with source "lua" and are not round trips; markers from a third connection delimit each count.
 */
class CommandCounter {
  readonly #events: { source: string; args: string[] }[] = [];
  #monitor: Redis | undefined;
  #marker: Redis | undefined;

  static async start(server: RedisServerHandle): Promise<CommandCounter> {
    const counter = new CommandCounter();
    counter.#marker = new Redis(server.url);
    counter.#monitor = await counter.#marker.monitor();
    counter.#monitor.on("monitor", (_time: string, args: string[], source: string) => {
      counter.#events.push({ source, args: args.map(String) });
    });
    return counter;
  }

  /** The commands `client` sent to Redis while `action` ran (names, lower case). */
  async count(client: Redis, action: () => Promise<unknown>): Promise<string[]> {
    const address = /addr=(\S+)/.exec(String(await client.client("INFO")))?.[1];
    if (!address) throw new Error("CLIENT INFO gave no addr");
    const from = await this.#mark();
    await action();
    const to = await this.#mark();
    return this.#events
      .slice(from, to)
      .filter((event) => event.source === address)
      .map((event) => (event.args[0] ?? "").toLowerCase());
  }

  async stop(): Promise<void> {
    this.#monitor?.disconnect();
    await this.#marker?.quit();
  }

  /** Sends a marker and waits until MONITOR shows it; returns its index. */
  async #mark(): Promise<number> {
    const marker = `once-marker-${randomBytes(4).toString("hex")}`;
    await this.#marker?.echo(marker);
    for (let waited = 0; waited < 5_000; waited += 10) {
      const index = this.#events.findIndex((event) => event.args[1] === marker);
      if (index >= 0) return index;
      await sleep(10);
    }
    throw new Error(`MONITOR never showed ${marker}`);
  }
}

describe("round trips", () => {
  let server: RedisServerHandle;
  let redis: Redis;
  let counter: CommandCounter;

  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
    counter = await CommandCounter.start(server);
  });

  afterAll(async () => {
    await counter.stop();
    await redis.quit();
    await stopAllRedisServers();
  });

  it("costs exactly one command per claim, complete and replay: EVALSHA, and EVAL the first time a server lacks a script", async () => {
    const store = await RedisStore.create({ redis, prefix: "once:" });
    const key = randomKey();
    let token = "";

    expect(
      await counter.count(redis, async () => {
        const claim = await store.claim(request(key));
        if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
        token = claim.token;
      }),
    ).toEqual(["evalsha", "eval"]);
    expect(await counter.count(redis, () => store.heartbeat(key, token, 10_000))).toEqual([
      "evalsha",
      "eval",
    ]);
    expect(await counter.count(redis, () => store.beginEffect(key, token))).toEqual(["evalsha", "eval"]);
    expect(await counter.count(redis, () => store.complete(key, token, '{"id":"ch_1"}'))).toEqual([
      "evalsha",
      "eval",
    ]);
    expect(await counter.count(redis, () => store.claim(request(key)))).toEqual(["evalsha"]);
    expect(await counter.count(redis, () => store.get(key))).toEqual(["evalsha", "eval"]);

    // Every script is now in this server's cache: from here on, one EVALSHA each.
    const next = randomKey();
    let nextToken = "";
    expect(
      await counter.count(redis, async () => {
        const claim = await store.claim(request(next));
        if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
        nextToken = claim.token;
      }),
    ).toEqual(["evalsha"]);
    expect(await counter.count(redis, () => store.claim(request(next)))).toEqual(["evalsha"]);
    expect(await counter.count(redis, () => store.complete(next, nextToken, "1"))).toEqual(["evalsha"]);
    expect(await counter.count(redis, () => store.claim(request(next)))).toEqual(["evalsha"]);
    expect(await counter.count(redis, () => store.get(next))).toEqual(["evalsha"]);
  });

  it("stays at one command per call from a second store on the same client", async () => {
    const store = await RedisStore.create({ redis, prefix: "once-b:", checks: false });
    const key = randomKey();
    expect(await counter.count(redis, () => store.claim(request(key)))).toEqual(["evalsha"]);
    expect(await counter.count(redis, () => store.claim(request(key)))).toEqual(["evalsha"]);
  });

  it("recovers from a flushed script cache with EVAL (the only case with a second round trip)", async () => {
    const store = await RedisStore.create({ redis, prefix: "once-c:", checks: false });
    const key = randomKey();
    await store.claim(request(key));
    await redis.script("FLUSH");
    expect(await counter.count(redis, () => store.claim(request(key)))).toEqual(["evalsha", "eval"]);
    expect(await counter.count(redis, () => store.claim(request(key)))).toEqual(["evalsha"]);
  });
});

describe("an unreachable Redis fails closed with StoreUnavailableError", () => {
  let server: RedisServerHandle;
  const clients: Redis[] = [];

  beforeAll(async () => {
    server = await startRedisServer();
  });

  afterEach(() => {
    for (const client of clients.splice(0)) client.disconnect();
  });

  afterAll(async () => {
    await stopAllRedisServers();
  });

  function client(options: RedisOptions = {}): Redis {
    const created = new Redis(server.url, options);
    created.on("error", () => {}); // connection errors are expected here; the store reports them
    clients.push(created);
    return created;
  }

  it("with ioredis' defaults (offline queue, 20 retries): within the store's timeout, and recovers", async () => {
    const redis = client();
    const store = await RedisStore.create({ redis, prefix: "once:", timeoutMs: 1_000 });
    const key = randomKey();
    expect((await store.claim(request(key))).outcome).toBe("acquired");

    await server.kill("SIGKILL");
    const started = Date.now();
    const error = await store.claim(request(randomKey())).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as StoreUnavailableError).code).toBe("ONCE_STORE_UNAVAILABLE");
    expect((error as Error).message).toContain("claim");
    expect((error as Error).cause).toBeInstanceOf(Error);
    expect(Date.now() - started).toBeLessThan(3_000);

    await expect(store.get(key)).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.heartbeat(key, "1.x", 1_000)).rejects.toBeInstanceOf(StoreUnavailableError);

    await server.restart();
    await waitFor(async () => (await store.claim(request(randomKey())).catch(() => undefined)) !== undefined);
  });

  it("with a fail-fast client (no offline queue): at once, the connection error chained as cause", async () => {
    const redis = client({ enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    const store = await RedisStore.create({ redis, prefix: "once:" });
    await server.kill("SIGKILL");
    try {
      await waitFor(async () => redis.status !== "ready");
      const started = Date.now();
      const error = await store.claim(request(randomKey())).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(String((error as Error).cause)).toMatch(/writeable|closed|ECONNREFUSED/i);
      expect(Date.now() - started).toBeLessThan(500);
    } finally {
      await server.restart();
    }
  });

  it("at start: create() against a server that is not there", async () => {
    await server.kill("SIGKILL");
    try {
      const redis = client({ lazyConnect: true });
      const started = Date.now();
      const error = await RedisStore.create({ redis, prefix: "once:", timeoutMs: 500 }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toContain("start-up checks");
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      await server.restart();
    }
  });
});

async function waitFor(predicate: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(50);
  }
}

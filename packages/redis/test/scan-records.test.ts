import { randomBytes } from "node:crypto";
import type { ClaimRequest, OnceRecord, RecordState } from "@once/core";
import { cleanupPrefix, clusterNodes, randomPrefix, redisUrl } from "@once/support";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisOperatorStore, RedisStore, scanRecordBatches, scanRecords } from "../src/index.js";

const RETENTION_MS = 10 * 60 * 1000;

function randomKey(): string {
  return randomBytes(32).toString("hex");
}

function request(key: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { key, fingerprint: "fp", tool: "charge_card", phase: "effect", leaseMs: 60_000, ...overrides };
}

/** One record per state, each made by the store's own transitions; keys by state. */
async function seedEveryState(store: RedisStore): Promise<Map<string, RecordState>> {
  const made = new Map<string, RecordState>();
  const owner = async (key: string, phase: "prepare" | "effect" = "effect") => {
    const claim = await store.claim(request(key, { phase }));
    if (!("token" in claim)) throw new Error(`claim gave ${claim.outcome}`);
    return claim.token;
  };
  let key = randomKey();
  await owner(key, "prepare");
  made.set(key, "claimed");
  key = randomKey();
  await store.release(key, await owner(key, "prepare"));
  made.set(key, "released");
  key = randomKey();
  await store.complete(key, await owner(key), '{"ok":true}');
  made.set(key, "done");
  key = randomKey();
  await store.failTerminal(key, await owner(key), { name: "CardDeclined", message: "declined" });
  made.set(key, "failed");
  key = randomKey();
  await store.markUnknown(key, await owner(key), { name: "TimeoutError", message: "timeout" });
  made.set(key, "unknown");
  key = randomKey();
  await store.markUnknown(key, await owner(key));
  await owner(key);
  made.set(key, "reconciling");
  return made;
}

async function collect<T = OnceRecord>(iterable: AsyncIterable<T>): Promise<T[]> {
  const records: T[] = [];
  for await (const record of iterable) records.push(record);
  return records;
}

for (const topology of ["standalone", "cluster"] as const) {
  describe(`scanRecords on ${topology === "standalone" ? "a standalone Redis" : "a Redis Cluster"}`, () => {
    let redis: Redis | Cluster;
    const prefixes: string[] = [];

    beforeAll(async () => {
      redis = topology === "standalone" ? new Redis(redisUrl()) : new Cluster(clusterNodes());
      if (topology === "cluster") await new Promise((resolve) => (redis as Cluster).once("ready", resolve));
    });

    afterAll(async () => {
      for (const prefix of prefixes) await cleanupPrefix(redis, prefix);
      await redis.quit();
    });

    async function freshStore(label: string, prefix = randomPrefix(label)): Promise<RedisStore> {
      prefixes.push(prefix);
      return RedisStore.create({ redis, prefix, retentionMs: RETENTION_MS });
    }

    it("yields every record under the prefix, read exactly as store.get reads it", async () => {
      const store = await freshStore("scan-states");
      const made = await seedEveryState(store);
      const other = await freshStore("scan-other");
      await seedEveryState(other);

      const records = await collect(scanRecords(redis, { prefix: store.prefix }));
      expect(new Map(records.map((r) => [r.key, r.state]))).toEqual(made);
      for (const record of records) {
        const viaGet = await store.get(record.key);
        expect({ ...record, ttlMs: undefined }).toEqual({ ...viaGet, ttlMs: undefined });
        expect(record.ttlMs).toBeGreaterThan(RETENTION_MS - 60_000);
      }
    });

    it("pages with the cursor through more keys than one batch, on every master", async () => {
      const store = await freshStore("scan-many");
      const keys = new Set<string>();
      for (let i = 0; i < 300; i++) {
        const key = randomKey();
        keys.add(key);
        await store.claim(request(key));
      }
      const records = await collect(scanRecords(redis, { prefix: store.prefix, batchSize: 20 }));
      expect(new Set(records.map((r) => r.key))).toEqual(keys);
      if (redis.isCluster) {
        // The keys spread over the slots, so each master held some of them.
        const masters = (redis as Cluster).nodes("master");
        expect(masters.length).toBeGreaterThan(1);
        for (const master of masters) {
          const [, some] = await master.scan("0", "MATCH", `${store.prefix}*`, "COUNT", 1000);
          expect(some.length).toBeGreaterThan(0);
        }
      }
    });

    it("goes on from a batch's cursor in a later scan, every record once, across the masters", async () => {
      const store = await freshStore("scan-resume");
      const keys = new Set<string>();
      for (let i = 0; i < 120; i++) {
        const key = randomKey();
        keys.add(key);
        await store.claim(request(key));
      }
      const seen: string[] = [];
      let cursor: string | undefined;
      let scans = 0;
      // Each scan reads one batch and stops, as one page of the console does; the next starts from its cursor.
      do {
        const batches = scanRecordBatches(redis, {
          prefix: store.prefix,
          batchSize: 10,
          ...(cursor === undefined ? {} : { cursor }),
        });
        const first = await batches.next();
        await batches.return(undefined);
        if (first.done) break;
        seen.push(...first.value.records.map((r) => r.key));
        cursor = first.value.cursor;
        scans++;
      } while (cursor !== undefined);
      expect(scans).toBeGreaterThan(2);
      expect(new Set(seen)).toEqual(keys);
      await expect(
        collect(scanRecordBatches(redis, { prefix: store.prefix, cursor: "nope" })),
      ).rejects.toThrow(RangeError);
    });

    it("RedisOperatorStore: pages by filter, counts by state and tool, resolves only what is unknown", async () => {
      const store = await freshStore("operator");
      const made = await seedEveryState(store);
      const operator = new RedisOperatorStore({ redis, prefix: store.prefix });
      const unknown = [...made].find(([, state]) => state === "unknown")?.[0] ?? "";
      const done = [...made].find(([, state]) => state === "done")?.[0] ?? "";

      const page = await operator.list({ states: ["unknown", "done"], limit: 100 });
      expect(page.cursor).toBeUndefined();
      expect(page.records.map((r) => r.key).sort()).toEqual([unknown, done].sort());
      expect((await operator.list({ tools: ["another_tool"], limit: 100 })).records).toEqual([]);
      expect((await operator.list({ olderThanMs: 60_000, limit: 100 })).records).toEqual([]);

      const counts = await operator.count();
      expect(counts).toMatchObject({ records: 6, sampled: false, skipped: 0, expiredLeases: 0 });
      expect(counts.byTool).toEqual({
        charge_card: {
          claimed: 1,
          reconciling: 1,
          released: 1,
          done: 1,
          failed: 1,
          unknown: 1,
          awaiting_approval: 0,
          approved: 0,
          cancelled: 0,
        },
      });
      expect((await operator.count({ sample: 2 })).sampled).toBe(true);

      const request_ = { decision: { as: "not_applied" } as const, by: "ops", why: "checked" };
      expect(await operator.resolve(done, request_)).toMatchObject({
        outcome: "refused",
        reason: "the record is done, not unknown; only an unknown record can be resolved",
      });
      expect(await operator.resolve(unknown, { ...request_, expectFence: 7 })).toMatchObject({
        outcome: "refused",
        reason: "the record moved on (fence 1, 7 seen)",
      });
      const resolved = await operator.resolve(unknown, request_);
      expect(resolved).toMatchObject({ outcome: "resolved", fence: 2, record: { state: "released" } });
      // The retention the record was written with, not a default.
      expect(resolved.record?.ttlMs).toBeLessThanOrEqual(RETENTION_MS + 1_000);
      expect(resolved.record?.ttlMs).toBeGreaterThan(RETENTION_MS - 60_000);
    });

    it("skips keys under the prefix that are not once records, and says which", async () => {
      const store = await freshStore("scan-skip");
      const made = await seedEveryState(store);
      await redis.set(`${store.prefix}a-string`, "x");
      await redis.hset(`${store.prefix}a-hash`, "colour", "blue");
      const skipped: string[] = [];
      const records = await collect(
        scanRecords(redis, { prefix: store.prefix, onSkipped: (key) => skipped.push(key) }),
      );
      expect(records).toHaveLength(made.size);
      expect(skipped.sort()).toEqual([`${store.prefix}a-hash`, `${store.prefix}a-string`]);
    });

    it("passes over tasks' entries: not records, not skipped, not examined; cancel and task through the operator store", async () => {
      const store = await freshStore("scan-tasks");
      const task = { namespace: "ops", taskId: `order-${randomKey().slice(0, 8)}` };
      const keys = [randomKey(), randomKey(), randomKey()];
      const effect = await store.claim(request(keys[0] ?? "", { task: { ...task, stepId: "charge" } }));
      await store.claim(request(keys[1] ?? "", { phase: "prepare", task: { ...task, stepId: "email" } }));
      const unrelated = keys[2] ?? "";
      await store.claim(request(unrelated));
      const skipped: string[] = [];
      const records = await collect(
        scanRecords(redis, { prefix: store.prefix, onSkipped: (key) => skipped.push(key) }),
      );
      expect(records.map((r) => r.key).sort()).toEqual([...keys].sort());
      expect(skipped).toEqual([]);

      const operator = new RedisOperatorStore({ redis, prefix: store.prefix });
      const page = await operator.list({ limit: 100 });
      expect(page).toMatchObject({ examined: 3, skipped: 0 });
      expect((await operator.count()).records).toBe(3);

      expect((await operator.task(task)).records.map((r) => [r.key, r.task?.stepId])).toEqual([
        [keys[0], "charge"],
        [keys[1], "email"],
      ]);
      await expect(operator.cancel(task, { by: " ", why: "no one" })).rejects.toMatchObject({
        code: "ONCE_CANCEL_REFUSED",
      });
      const cancel = await operator.cancel(task, { by: "ops@example.com", why: "order withdrawn" });
      expect(cancel).toMatchObject({ outcome: "cancelled", stopped: [keys[1]], running: [keys[0]] });
      if (effect.outcome !== "acquired") throw new Error(`expected acquired, got ${effect.outcome}`);
      expect(await store.heartbeat(keys[0] ?? "", effect.token, 60_000)).toMatchObject({
        cancelRequested: true,
      });
      const read = await operator.task(task);
      expect(read.cancellation).toEqual(cancel.cancellation);
      expect(read.records.map((r) => r.state)).toEqual(["claimed", "cancelled"]);
      // The cancel kept the retention the records were written with, not the operator's default (24 h). The
      // operator finds it from a record's time left and the store's clock, read one after the other: the gap
      // between the two reads (a few ms, more on a loaded machine) can add to it, never take from it.
      expect(read.records[1]?.ttlMs).toBeLessThanOrEqual(RETENTION_MS + 1_000);
      expect(read.records[1]?.ttlMs).toBeGreaterThan(RETENTION_MS - 60_000);
      expect((await operator.count()).byTool.charge_card).toMatchObject({ claimed: 2, cancelled: 1 });
      expect(await operator.cancel(task, { by: "someone", why: "again" })).toMatchObject({
        outcome: "already_cancelled",
        cancellation: cancel.cancellation,
      });
    });

    it("passes over processes' liveness entries: not records, not skipped, not examined", async () => {
      const store = await freshStore("scan-liveness");
      const id = randomKey().slice(0, 16);
      expect(await store.openLiveness(id, 60_000)).toBe(true);
      const key = randomKey();
      await store.claim(request(key, { liveness: id }));
      const skipped: string[] = [];
      const records = await collect(
        scanRecords(redis, { prefix: store.prefix, onSkipped: (found) => skipped.push(found) }),
      );
      expect(records.map((r) => [r.key, r.liveness])).toEqual([[key, id]]);
      expect(skipped).toEqual([]);
      const operator = new RedisOperatorStore({ redis, prefix: store.prefix });
      expect(await operator.list({ limit: 100 })).toMatchObject({ examined: 1, skipped: 0 });
    });

    it("stops when the loop does, and takes glob characters in the prefix literally", async () => {
      const base = randomPrefix("scan-glob");
      const store = await freshStore("", `${base}*[x]?:`);
      await seedEveryState(store);
      // Matched by the prefix read as a glob (`*` anything, `[x]` an x, `?` any one character).
      const lookalike = await freshStore("", `${base}zzzxQ:`);
      await seedEveryState(lookalike);
      let seen = 0;
      for await (const _ of scanRecords(redis, { prefix: store.prefix, batchSize: 1 })) {
        seen++;
        if (seen === 2) break;
      }
      expect(seen).toBe(2);
      const all = await collect(scanRecords(redis, { prefix: store.prefix }));
      expect(all).toHaveLength(6);
    });

    it("refuses an empty prefix and a bad batch size", async () => {
      await expect(collect(scanRecords(redis, { prefix: "" }))).rejects.toThrow(RangeError);
      await expect(collect(scanRecords(redis, { prefix: "x:", batchSize: 0 }))).rejects.toThrow(RangeError);
    });
  });
}

describe("scriptDigests", () => {
  it("names the SHA1 Redis caches each script under", async () => {
    const { scriptDigests } = await import("../src/index.js");
    const digests = await scriptDigests();
    expect(digests.map((d) => d.name)).toContain("claim");
    expect(digests.every((d) => /^[0-9a-f]{40}$/.test(d.sha1))).toBe(true);
    const redis = new Redis(redisUrl());
    try {
      const store = await RedisStore.create({ redis, prefix: randomPrefix("digests") });
      await store.get(randomKey());
      const get = digests.find((d) => d.name === "get");
      expect(await redis.script("EXISTS", get?.sha1 ?? "")).toEqual([1]);
    } finally {
      await redis.quit();
    }
  });
});

import { randomBytes } from "node:crypto";
import { type ClaimRequest, deriveTaskKey, type OnceRecord, StoreUnavailableError } from "@once/core";
import { describeStoreConformance } from "@once/core/testing";
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
import * as vitest from "vitest";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  RECORD_LAYOUT,
  RedisOperatorStore,
  RedisScriptError,
  RedisStore,
  scanRecords,
  scriptDigests,
} from "../src/index.js";
import { storedRecord, writeLaterRecord } from "./support/stored-record.js";

// Long enough that a record outlives any test, short enough that a crashed run leaves nothing for long.
const RETENTION_MS = 10 * 60 * 1000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function request(key: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { key, fingerprint: "fp", tool: "charge_card", phase: "prepare", leaseMs: 10_000, ...overrides };
}

/** A record without its time left, which moves between two reads of it. */
function withoutTtl(record: OnceRecord | undefined): Omit<OnceRecord, "ttlMs"> | undefined {
  if (record === undefined) return undefined;
  const { ttlMs: _, ...rest } = record;
  return rest;
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

  describeStoreConformance(
    vitest,
    "RedisStore (standalone)",
    async ({ retentionMs = RETENTION_MS, keepTaskIdentity }) => {
      const prefix = randomPrefix("conformance");
      const store = await RedisStore.create({
        redis,
        prefix,
        retentionMs,
        ...(keepTaskIdentity === undefined ? {} : { keepTaskIdentity }),
      });
      return {
        store,
        retentionMs,
        teardown: async () => {
          await cleanupPrefix(redis, prefix);
        },
      };
    },
  );

  describe("liveness: a claimant's stale observation of an owner's entry", () => {
    const prefix = randomPrefix("stale-live");
    afterAll(async () => {
      await cleanupPrefix(redis, prefix);
    });

    /** The claim script run as the store's second step would run it: "entry `gone` seen gone at fence `at`". */
    async function claimSaying(key: string, gone: string, at: number): Promise<unknown> {
      const sha = (await scriptDigests()).find((script) => script.name === "claim")?.sha1 ?? "";
      return redis.evalsha(
        sha,
        1,
        prefix + key,
        "\u0000fp", // the fingerprint "fp" in the record's form of it (lua/includes/record.lua)
        "charge_card",
        "prepare",
        10_000,
        RETENTION_MS,
        randomBytes(8).toString("hex"),
        "",
        "",
        "",
        "",
        "",
        gone,
        at,
      );
    }

    it("takes over only while the record still names the entry at the fence seen: a later owner is never taken over", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: RETENTION_MS });
      const key = randomBytes(32).toString("hex");
      const [first, second] = [randomBytes(8).toString("hex"), randomBytes(8).toString("hex")];
      expect(await store.openLiveness(first, 10_000)).toBe(true);
      expect(await store.openLiveness(second, 10_000)).toBe(true);
      const owner = await store.claim(request(key, { liveness: first }));
      if (owner.outcome !== "acquired") throw new Error(`expected acquired, got ${owner.outcome}`);
      // A claimant read the record (fence 1, entry `first`) and then `first` gone; before its second step, the
      // owner settled and another owner, alive, was granted the key.
      await store.endLiveness(first);
      expect((await store.release(key, owner.token)).outcome).toBe("ok");
      const later = await store.claim(request(key, { liveness: second }));
      expect(later).toMatchObject({ outcome: "acquired", fence: 2 });
      // The stale observation names a former owner: answered in flight, nothing granted.
      const stale = (await claimSaying(key, first, 1)) as unknown[];
      expect(stale.slice(0, 3)).toEqual([6, 2, "claimed"]);
      expect(stale[4]).toBe(second);
      // The right entry at the wrong fence, and a wrong entry at the right fence, grant nothing either.
      expect(((await claimSaying(key, second, 1)) as unknown[])[0]).toBe(6);
      expect(((await claimSaying(key, first, 2)) as unknown[])[0]).toBe(6);
      expect(await store.get(key)).toMatchObject({ state: "claimed", fence: 2, liveness: second });
    });
  });

  describe("record layout", () => {
    const prefix = randomPrefix("layout");
    afterAll(async () => {
      await cleanupPrefix(redis, prefix);
    });

    it("a claim naming its task keeps its identity; the task's entry files it; a cancel writes its fields", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      const task = { namespace: "shop", taskId: `order-${randomKey().slice(0, 8)}` };
      const entry = `${prefix}task:${deriveTaskKey(task)}`;
      const [first, second, plain] = [randomKey(), randomKey(), randomKey()];
      expect((await store.claim(request(first, { task: { ...task, stepId: "charge" } }))).outcome).toBe(
        "acquired",
      );
      expect((await store.claim(request(second, { task: { ...task, stepId: "email" } }))).outcome).toBe(
        "acquired",
      );
      expect((await store.claim(request(plain))).outcome).toBe("acquired");
      expect(await storedRecord(redis, prefix + first)).toMatchObject({
        layout: 6,
        fields: { ns: "shop", task_id: task.taskId, step_id: "charge" },
      });
      // A record whose claim named no task keeps no identity.
      const untouched = await storedRecord(redis, prefix + plain);
      expect(untouched?.fields.ns).toBeUndefined();
      expect(untouched?.fields.step_id).toBeUndefined();
      expect(await redis.hgetall(entry)).toEqual({
        ns: "shop",
        task_id: task.taskId,
        seq: "2",
        [`c:${first}`]: "1",
        [`c:${second}`]: "2",
      });
      const entryTtl = await redis.pttl(entry);
      expect(entryTtl).toBeGreaterThan(55_000);
      expect(entryTtl).toBeLessThanOrEqual(60_000);

      const cancel = await store.cancelTask(task, { by: "ops", why: "withdrawn" });
      expect(cancel.stopped).toEqual([first, second]);
      const cancelled = (await storedRecord(redis, prefix + first))?.fields;
      expect(cancelled).toMatchObject({
        state: "cancelled",
        fence: 2,
        cancel_by: "ops",
        cancel_why: "withdrawn",
        cancel_at: cancel.cancellation.at,
      });
      expect(cancelled?.owner).toBeUndefined();
      expect(cancelled?.lease_until).toBeUndefined();
      expect(await redis.hgetall(entry)).toMatchObject({
        cancel_by: "ops",
        cancel_why: "withdrawn",
        cancel_at: String(cancel.cancellation.at),
      });
    });

    it("keepTaskIdentity false: neither the records nor the task's entry hold a namespace, task id or step id", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000, keepTaskIdentity: false });
      const task = { namespace: "default", taskId: `order-${randomKey().slice(0, 8)}` };
      const key = randomKey();
      expect((await store.claim(request(key, { task: { ...task, stepId: "charge" } }))).outcome).toBe(
        "acquired",
      );
      const fields = (await storedRecord(redis, prefix + key))?.fields ?? {};
      for (const field of ["ns", "task_id", "step_id"]) expect(fields[field]).toBeUndefined();
      const entry = `${prefix}task:${deriveTaskKey(task)}`;
      expect(await redis.hgetall(entry)).toEqual({ seq: "1", [`c:${key}`]: "1" });
      await store.cancelTask(task, { by: "ops", why: "" });
      const after = await redis.hgetall(entry);
      expect(Object.keys(after).sort()).toEqual(
        [`c:${key}`, "cancel_at", "cancel_by", "cancel_why", "seq"].sort(),
      );
      expect((await storedRecord(redis, prefix + key))?.fields.state).toBe("cancelled");
    });

    it("keeps one string at <prefix><key> in layout 6 with the documented fields, expiring after the retention", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      const key = randomKey();
      const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      const fingerprint = "ab".repeat(32);
      const claim = await store.claim(request(key, { trace, fingerprint }));
      if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
      expect(claim.token).toMatch(/^1\.[0-9a-f]{16}$/);

      expect(await redis.type(prefix + key)).toBe("string");
      const stored = await storedRecord(redis, prefix + key);
      expect(stored?.layout).toBe(6);
      expect(Object.keys(stored?.fields ?? {}).sort()).toEqual(
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
      expect(stored?.fields).toMatchObject({
        state: "claimed",
        phase: "prepare",
        fence: 1,
        owner: claim.token,
        lease_until: claim.leaseUntil,
        // A hex fingerprint as its kind byte (1) and its 32 bytes; the traceparent as its id, span and flags.
        fp: `01${fingerprint}`,
        trace: "0af7651916cd43dd8448eb211c80319cb7ad6b716920333101",
      });
      expect(await store.get(key)).toMatchObject({ fingerprint, trace, state: "claimed" });
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
      const resolved = (await storedRecord(redis, prefix + key))?.fields ?? {};
      expect(resolved).toMatchObject({ state: "done", result: '{"id":1}', res_as: "applied", res_by: "ops" });
      expect(resolved).toMatchObject({ res_why: "checked", res_at: resolved.updated_at, fence: 2 });
      for (const field of ["owner", "lease_until", "error", "phase", "live"])
        expect(resolved[field]).toBeUndefined();
    });

    it("keeps any other fingerprint as its text, and a traceparent of another form not at all", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      for (const fingerprint of ["fp", "x".repeat(32), "AB".repeat(32), "ü"]) {
        const key = randomKey();
        const claim = await store.claim(request(key, { fingerprint, trace: "01-not-a-traceparent" }));
        if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
        expect(await store.get(key)).toMatchObject({ fingerprint });
        expect((await store.get(key))?.trace).toBeUndefined();
        expect((await storedRecord(redis, prefix + key))?.fields.fp).toBe(
          `00${Buffer.from(fingerprint).toString("hex")}`,
        );
        // The same text claims as the same call; any other is another call's.
        expect((await store.claim(request(key, { fingerprint }))).outcome).toBe("in_flight");
        expect((await store.claim(request(key, { fingerprint: `${fingerprint}!` }))).outcome).toBe(
          "conflict",
        );
      }
    });

    it("a done record with a 100-byte result, its task's identity and a traceparent fits in 400 bytes", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      const key = randomKey();
      const task = { namespace: "bench", taskId: "task-0123456789a", stepId: "step-0000000001" };
      const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      const claim = await store.claim(
        request(key, { phase: "effect", task, trace, fingerprint: "cd".repeat(32) }),
      );
      if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
      const result = JSON.stringify({ id: "ch_1", pad: "x".repeat(100 - 22) });
      expect(Buffer.byteLength(result)).toBe(100);
      await store.complete(key, claim.token, result);
      // MEMORY USAGE counts the value's allocation, the key's and the keyspace's entry.
      expect(Number(await redis.memory("USAGE", prefix + key, "SAMPLES", 0))).toBeLessThanOrEqual(400);
      expect(await store.claim(request(key, { fingerprint: "cd".repeat(32) }))).toMatchObject({
        outcome: "replay",
        result,
        trace,
      });
    });

    it("keeps a result whole, whatever its size and characters: replayed, read and scanned as it was given", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      const results = [
        JSON.stringify({ id: "ch_1", pad: "x".repeat(80) }),
        "1".repeat(128),
        `é${"😀".repeat(30)}`,
        "€".repeat(40),
        "3".repeat(70_000),
        "",
      ];
      for (const result of results) {
        const key = randomKey();
        const claim = await store.claim(request(key, { phase: "effect" }));
        if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
        expect(await store.complete(key, claim.token, result)).toMatchObject({ outcome: "ok" });
        expect((await storedRecord(redis, prefix + key))?.fields.phase).toBeUndefined();
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

    it("reads a hash of layout 5 as it is, and the first transition that changes it writes it in layout 6", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      const fingerprint = "ef".repeat(32);
      const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      const result = JSON.stringify({ id: "ch_1", pad: "z".repeat(80) });
      const task = { namespace: "shop", taskId: "order-5", stepId: "charge" };
      // Written by a build of layout 5: a done record of a task, its result in two parts, a claimed one with
      // its owner's liveness entry.
      const done = randomKey();
      await redis.hset(prefix + done, {
        fp: fingerprint,
        tool: "charge_card",
        fence: 1,
        claims: 1,
        created_at: 1,
        state: "done",
        updated_at: 2,
        trace,
        result: result.slice(0, 60),
        result2: result.slice(60),
        ns: task.namespace,
        task_id: task.taskId,
        step_id: task.stepId,
        layout: 5,
      });
      await redis.pexpire(prefix + done, 30_000);
      const claimed = randomKey();
      await redis.hset(prefix + claimed, {
        fp: fingerprint,
        tool: "charge_card",
        fence: 3,
        claims: 2,
        created_at: 1,
        state: "claimed",
        phase: "effect",
        owner: "3.abcdef0123456789",
        lease_until: Date.now() + 60_000,
        live: "process-1",
        updated_at: 2,
      });
      await redis.pexpire(prefix + claimed, 30_000);

      expect(await store.get(done)).toMatchObject({
        state: "done",
        result,
        trace,
        fingerprint,
        task,
        fence: 1,
      });
      expect(await store.claim(request(done, { fingerprint }))).toMatchObject({
        outcome: "replay",
        result,
        trace,
      });
      expect((await store.claim(request(done, { fingerprint: "other" }))).outcome).toBe("conflict");
      // Read only: still the hash it was.
      expect(await redis.type(prefix + done)).toBe("hash");

      expect(await store.get(claimed)).toMatchObject({ state: "claimed", liveness: "process-1", fence: 3 });
      expect(await store.heartbeat(claimed, "3.abcdef0123456789", 10_000)).toMatchObject({ outcome: "ok" });
      const rewritten = await storedRecord(redis, prefix + claimed);
      expect(rewritten).toMatchObject({
        layout: 6,
        fields: { state: "claimed", fence: 3, claims: 2, fp: `01${fingerprint}`, live: "process-1" },
      });
      expect(await redis.pttl(prefix + claimed)).toBeGreaterThan(55_000);
      expect(await store.complete(claimed, "3.abcdef0123456789", result)).toMatchObject({ outcome: "ok" });
      expect(await store.claim(request(claimed, { fingerprint }))).toMatchObject({
        outcome: "replay",
        result,
      });
      // Filed under one task, the hash and the string are read in one script, each as get reads it.
      await redis.hset(`${prefix}task:${deriveTaskKey(task)}`, `c:${done}`, 1, `c:${claimed}`, 2);
      const read = await store.readTask(task);
      expect(read.records.map(withoutTtl)).toEqual(
        [await store.get(done), await store.get(claimed)].map(withoutTtl),
      );
      expect(await redis.type(prefix + done)).toBe("hash");
    });

    it("a task's read unpacks its records in Node, and names a filed string that is no record", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      const task = { namespace: "default", taskId: `packed-${randomKey().slice(0, 8)}` };
      const keys: string[] = [];
      for (const [n, result] of ["{}", JSON.stringify({ pad: "é".repeat(200) })].entries()) {
        const key = randomKey();
        keys.push(key);
        const claim = await store.claim(
          request(key, {
            task: { ...task, stepId: String(n) },
            trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
          }),
        );
        if (claim.outcome !== "acquired") throw new Error(claim.outcome);
        if (n === 0) await store.complete(key, claim.token, result);
      }
      const read = await store.readTask(task);
      expect(read.records.map(withoutTtl)).toEqual(
        (await Promise.all(keys.map((key) => store.get(key)))).map(withoutTtl),
      );
      expect(read.records.map((r) => r.state)).toEqual(["done", "claimed"]);

      const stray = randomKey();
      await redis.set(prefix + stray, "not a record", "PX", 60_000);
      await redis.hset(`${prefix}task:${deriveTaskKey(task)}`, `c:${stray}`, 3);
      await expect(store.readTask(task)).rejects.toMatchObject({
        name: "RedisScriptError",
        message: expect.stringContaining(`record ${stray} is not a MessagePack array`),
      });
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

    it("refuses a record of a newer layout wherever it is read: RecordLayoutError naming both numbers, nothing changed", async () => {
      const own = randomPrefix("newer-layout");
      const store = await RedisStore.create({ redis, prefix: own, retentionMs: 60_000 });
      const operator = new RedisOperatorStore({ redis, prefix: own });
      const newer = RECORD_LAYOUT + 1;
      try {
        // A later build's record, in this layout's form (a string that starts with its layout), and as a hash
        // in each state it may leave one in, with the fields this build knows and the layout field.
        for (const state of ["string", "done", "failed", "unknown", "released", "claimed", "reconciling"]) {
          const key = randomKey();
          if (state === "string") await writeLaterRecord(redis, own + key, newer);
          else
            await redis.hset(own + key, {
              fp: "fp",
              tool: "charge_card",
              fence: 1,
              claims: 1,
              created_at: 1,
              updated_at: 2,
              state,
              phase: "effect",
              lease_until: 1,
              result: '{"id":1}',
              error: '{"name":"Error","message":"declined"}',
              layout: newer,
            });
          await redis.pexpire(own + key, 60_000);
          const before = await redis.dumpBuffer(own + key);
          const refused = {
            name: "RecordLayoutError",
            code: "ONCE_RECORD_LAYOUT",
            key,
            layout: newer,
            knownLayout: RECORD_LAYOUT,
            message: `@once/redis record ${key} was written by layout ${newer}, this reader knows up to ${RECORD_LAYOUT}: upgrade it; nothing was read or run`,
          };
          await expect(store.claim(request(key)), state).rejects.toMatchObject(refused);
          await expect(store.get(key), state).rejects.toMatchObject(refused);
          await expect(operator.get(key), state).rejects.toMatchObject(refused);
          // Filed under a task: the task's read (one script over the entry and its records) refuses it too.
          const task = { taskId: `newer-layout-${state}` };
          await redis.hset(`${own}task:${deriveTaskKey(task)}`, `c:${key}`, 1);
          await expect(store.readTask(task), state).rejects.toMatchObject(refused);
          const decision = { as: "applied", result: '{"id":2}' } as const;
          await expect(store.resolve(key, { decision, by: "ops", why: "checked" })).rejects.toMatchObject(
            refused,
          );
          expect(await redis.dumpBuffer(own + key), state).toEqual(before);
        }
        // A list or a count fails rather than leave the records out unseen.
        const scan = async () => {
          for await (const _ of scanRecords(redis, { prefix: own }));
        };
        await expect(scan()).rejects.toMatchObject({
          code: "ONCE_RECORD_LAYOUT",
          knownLayout: RECORD_LAYOUT,
        });
        await expect(operator.list({ limit: 10 })).rejects.toMatchObject({ code: "ONCE_RECORD_LAYOUT" });
        await expect(operator.count()).rejects.toMatchObject({ code: "ONCE_RECORD_LAYOUT" });
      } finally {
        await cleanupPrefix(redis, own);
      }
    });

    it("reads a hash that names its layout (up to 5), and one that names none, as it always did", async () => {
      const store = await RedisStore.create({ redis, prefix, retentionMs: 60_000 });
      for (const layout of [{ layout: 5 }, { layout: 4 }, {}]) {
        const key = randomKey();
        await redis.hset(prefix + key, {
          fp: "fp",
          tool: "charge_card",
          fence: 1,
          claims: 1,
          created_at: 1,
          updated_at: 2,
          state: "done",
          result: '{"id":1}',
          ...layout,
        });
        await redis.pexpire(prefix + key, 60_000);
        expect(await store.claim(request(key))).toMatchObject({ outcome: "replay", result: '{"id":1}' });
        expect(await store.get(key)).toMatchObject({ state: "done", result: '{"id":1}' });
      }
    });

    it("surfaces a layout that is not a number as a bug (RedisScriptError)", async () => {
      const store = await RedisStore.create({ redis, prefix });
      const key = randomKey();
      await redis.hset(prefix + key, {
        state: "done",
        fp: "fp",
        tool: "charge_card",
        fence: "1",
        layout: "x",
      });
      await expect(store.claim(request(key))).rejects.toThrow(/ONCE_CORRUPT record .* has layout x/);
      await expect(store.get(key)).rejects.toThrow(/ONCE_CORRUPT record .* has layout x/);
      await expect(store.get(key)).rejects.toBeInstanceOf(RedisScriptError);
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

  describeStoreConformance(
    vitest,
    "RedisStore (cluster)",
    async ({ retentionMs = RETENTION_MS, keepTaskIdentity }) => {
      const prefix = randomPrefix("cluster");
      const store = await RedisStore.create({
        redis: cluster,
        prefix,
        retentionMs,
        ...(keepTaskIdentity === undefined ? {} : { keepTaskIdentity }),
      });
      return {
        store,
        retentionMs,
        teardown: async () => {
          await cleanupPrefix(cluster, prefix);
        },
      };
    },
  );

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

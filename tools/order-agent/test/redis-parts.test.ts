import { randomBytes } from "node:crypto";
import {
  deriveKey,
  fingerprint,
  isApprovalStore,
  isLivenessStore,
  isTaskStore,
  isTransactionalStore,
  MemoryStore,
} from "@once/core";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CountingStore, keyLayout, RedisCounters, RedisOrderBook } from "../src/index.js";

let redis: Redis;
const layout = keyLayout(`once-test:order-agent:${randomBytes(4).toString("hex")}:`);

beforeAll(() => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await cleanupPrefix(redis, layout.root);
  await redis.quit();
});

describe("keyLayout", () => {
  it("puts every part under the root and refuses glob characters", () => {
    expect(keyLayout("r:")).toEqual({
      root: "r:",
      store: "r:once:",
      bull: "r:bull",
      orders: "r:order:",
      journal: "r:journal:",
      stats: "r:stats",
    });
    expect(() => keyLayout("a*")).toThrow(/glob/);
  });
});

describe("RedisOrderBook", () => {
  it("creates once, reads, and sets the status of existing orders only", async () => {
    const orders = new RedisOrderBook({ redis, prefix: layout.orders });
    const order = {
      orderId: "o-1",
      status: "pending" as const,
      amount: 990,
      currency: "eur",
      email: "a@example.com",
    };
    expect(await orders.create(order)).toBe(true);
    expect(await orders.create({ ...order, amount: 1 })).toBe(false);
    expect(await orders.get("o-1")).toEqual(order);
    expect(await orders.setStatus("o-1", "paid")).toEqual({ ...order, status: "paid" });
    expect(await orders.setStatus("missing", "paid")).toBeUndefined();
    expect(await orders.get("missing")).toBeUndefined();
  });
});

describe("CountingStore", () => {
  it("counts claim outcomes, finished look-ups and reconcile resolutions in Redis", async () => {
    const counters = new RedisCounters(redis, layout.stats);
    const store = CountingStore.wrap(new MemoryStore(), counters);
    const key = deriveKey({ taskId: "t", stepId: "s" });
    const request = {
      key,
      fingerprint: fingerprint("x", {}),
      tool: "x",
      phase: "effect" as const,
      leaseMs: 10_000,
    };
    const first = await store.claim(request);
    if (first.outcome !== "acquired") throw new Error(first.outcome);
    expect((await store.claim(request)).outcome).toBe("in_flight");
    expect(await store.get(key)).toMatchObject({ state: "claimed" });
    await store.complete(key, first.token, "1");
    expect((await store.claim(request)).outcome).toBe("replay");
    expect(await store.get(key)).toMatchObject({ state: "done" });
    expect(await store.complete(key, "0.stale", "2")).toEqual({ outcome: "lost" });
    expect(await counters.read()).toEqual({
      "claim.acquired": 1,
      "claim.in_flight": 1,
      "claim.replay": 1,
      "get.done": 1,
      "lost.complete": 1,
    });
    expect(store.retentionMs).toBe(new MemoryStore().retentionMs);
  });

  it("keeps every capability of the store it counts: liveness entries, tasks, approvals", async () => {
    const redisStore = await RedisStore.create({ redis, prefix: layout.store });
    const capabilities = [isLivenessStore, isTaskStore, isApprovalStore, isTransactionalStore];
    for (const inner of [new MemoryStore(), redisStore]) {
      const counted = CountingStore.wrap(inner, new RedisCounters(redis, layout.stats));
      expect(capabilities.map((is) => is(counted))).toEqual(capabilities.map((is) => is(inner)));
    }
    const counted = CountingStore.wrap(redisStore, new RedisCounters(redis, layout.stats));
    if (!isLivenessStore(counted)) throw new Error("no liveness through the wrapper");
    expect(await counted.openLiveness("counted-process", 5_000)).toBe(true);
    expect(await redis.pttl(`${layout.store}live:counted-process`)).toBeGreaterThan(0);
    await counted.endLiveness("counted-process");
  });
});

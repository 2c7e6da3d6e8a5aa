// A reproduction, on a real Redis and the real HTTP provider, of a duplicate the chaos suite found: a worker
// whose process stalls (SIGSTOP, a long GC, a starved CPU) *after Redis granted its claim and before it read
// the answer* wakes up believing in a lease that ran out while it slept. Meanwhile another worker claimed the
// key (the lease had expired in the effect phase), reconciled (nothing at the provider yet) and charged.
//
// The stall is played here by a store whose `claim` answers `stallMs` late: exactly what a process frozen
// between Redis' reply reaching its socket and its event loop reading it sees. Before the fix the stalled
// worker went straight on to `run` (its lease only started counting when it read the answer) and charged a
// second time; now it re-confirms a lease it cannot vouch for before the effect, finds it lost, and runs
// nothing.

import { createCallProcessor, jobIdForKey } from "@once/bullmq";
import { deriveKey, LeaseLostError, type OnceStore } from "@once/core";
import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import type { Job } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chaosTools } from "./chaos-tools.js";
import { stallingStore } from "./stalling-store.js";

const LEASE_MS = 600;

describe("a worker stalled between its claim and the effect (found by the chaos suite)", () => {
  let redis: Redis;
  let store: RedisStore;
  let payments: PaymentsServer;
  const prefix = randomPrefix("stale-claim");

  beforeAll(async () => {
    redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    store = await RedisStore.create({ redis, prefix });
    payments = await startPaymentsServer({ latency: { fixedMs: 5 } });
  });

  afterAll(async () => {
    await payments?.close();
    await cleanupPrefix(redis, prefix).catch(() => {});
    redis?.disconnect();
  });

  function jobFor(taskId: string, stepId: string, input: unknown): Job {
    const key = deriveKey({ taskId, stepId });
    const data = { v: 1, tool: "charge_card", namespace: "default", taskId, stepId, input };
    // The processor reads these fields only; BullMQ itself is not what this reproduction is about.
    return { id: jobIdForKey(key), data, attemptsMade: 0, queueName: "stale-claim" } as unknown as Job;
  }

  function processor(s: OnceStore) {
    const tools = chaosTools({ paymentsUrl: payments.url, leaseMs: LEASE_MS });
    return createCallProcessor({ store: s, tools: tools.all, leaseMs: LEASE_MS });
  }

  it("the stalled worker does not charge after another worker took the key over", async () => {
    const orderId = `order-stale-${Date.now()}`;
    const input = { orderId, amount: 500, currency: "usd" };
    const stalled = processor(stallingStore(store, { claimMs: LEASE_MS + 400 }));
    const healthy = processor(store);

    const first = stalled(jobFor("task-stale", "step-1", input)).then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    // The first claim was granted at once; let its lease run out while that worker "sleeps".
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS + 100));
    const second = await healthy(jobFor("task-stale", "step-1", input));
    expect(second.outcome).toBe("executed");

    const settled = await first;
    expect(settled.ok).toBe(false);
    expect(settled.ok ? undefined : settled.error).toBeInstanceOf(LeaseLostError);

    const charges = payments.ledger().charges;
    expect(charges.byOrder[orderId]).toBe(1);
    const record = await store.get(deriveKey({ taskId: "task-stale", stepId: "step-1" }));
    expect(record).toMatchObject({ state: "done", fence: 2 });
  });

  it("a worker that was merely slow, with nobody taking over, re-confirms its lease and charges once", async () => {
    const orderId = `order-slow-${Date.now()}`;
    const input = { orderId, amount: 700, currency: "usd" };
    const slow = processor(stallingStore(store, { claimMs: LEASE_MS + 200 }));

    const outcome = await slow(jobFor("task-slow", "step-1", input));
    expect(outcome.outcome).toBe("executed");
    expect(payments.ledger().charges.byOrder[orderId]).toBe(1);
    const record = await store.get(deriveKey({ taskId: "task-slow", stepId: "step-1" }));
    expect(record).toMatchObject({ state: "done", fence: 1 });
  });
});

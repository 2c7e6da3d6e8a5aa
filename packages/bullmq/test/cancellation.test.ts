// Jobs of a cancelled task (docs/cancellation.md): the worker's claim is refused and the job fails
// unrecoverably, the dispatcher answers TaskCancelledError (from the record, before enqueueing, once the
// record says so), and a job whose effect is running when the cancel comes sees its signal abort. On the
// memory store and on Redis, the worker in this process; worker processes are in test/scenarios/cancellation
// at the repository's root.

import {
  type CancelRequest,
  defineTool,
  deriveKey,
  MemoryStore,
  OutcomeUnknownError,
  TaskCancelledError,
  type TaskStore,
} from "@once/core";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Dispatcher, jobIdForKey, OnceWorker } from "../src/index.js";

const BY: CancelRequest = { by: "ops@example.com", why: "the order was withdrawn" };
const LEASE_MS = 600;

/** What the outside world saw, per order, and the hooks a test holds the tool at. */
const charged = new Map<string, number>();
let preparing: PromiseWithResolvers<void>;
let prepareMayEnd: Promise<void>;
let running: PromiseWithResolvers<AbortSignal>;

const charge = defineTool({
  name: "charge",
  kind: "effect",
  input: z.object({ orderId: z.string(), hold: z.enum(["none", "prepare", "run"]) }),
  output: z.object({ chargeId: z.string() }),
  leaseMs: LEASE_MS,
  prepare: async (input) => {
    if (input.hold !== "prepare") return;
    preparing.resolve();
    await prepareMayEnd;
  },
  run: async (input, ctx) => {
    charged.set(input.orderId, (charged.get(input.orderId) ?? 0) + 1);
    if (input.hold === "run") {
      running.resolve(ctx.signal);
      // A request in flight until the signal aborts it.
      await new Promise((_resolve, reject) => {
        ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true });
      });
    }
    return { chargeId: `ch_${input.orderId}` };
  },
  reconcile: async (input) =>
    charged.has(input.orderId)
      ? { applied: true, result: { chargeId: `ch_${input.orderId}` } }
      : { applied: false },
});

const jobOptions = { attempts: 3, backoff: { type: "fixed" as const, delay: 50 } };

/** The stores that know tasks, each made fresh for a test (Redis: under the test's own prefix). */
const STORES: Record<string, (redis: Redis, prefix: string) => Promise<TaskStore>> = {
  MemoryStore: async () => new MemoryStore(),
  RedisStore: (redis, prefix) => RedisStore.create({ redis, prefix: `${prefix}store:` }),
};

/** A real queue on Redis, a worker in this process and a dispatcher, both on one store. */
interface Setup {
  redis: Redis;
  workerRedis: Redis;
  prefix: string;
  store: TaskStore;
  queue: Queue;
  worker: OnceWorker;
  dispatcher: Dispatcher;
}

let setup: Setup;

describe.each(Object.keys(STORES))("on a %s", (storeName) => {
  beforeEach(async () => {
    charged.clear();
    preparing = Promise.withResolvers<void>();
    prepareMayEnd = Promise.resolve();
    running = Promise.withResolvers<AbortSignal>();
    const redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const workerRedis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const prefix = randomPrefix("bullmq-cancel");
    const store = await (STORES[storeName] as (typeof STORES)[string])(redis, prefix);
    const queue = new Queue(`cancel-${process.pid}`, { connection: redis, prefix });
    const worker = await OnceWorker.create({
      queueName: queue.name,
      connection: workerRedis,
      store,
      tools: [charge],
      jobRetry: jobOptions,
      workerOptions: { prefix, lockDuration: 5_000, stalledInterval: 5_000 },
    });
    const dispatcher = await Dispatcher.create({
      queue,
      store,
      tools: [charge],
      timeoutMs: 10_000,
      retries: 0,
      jobOptions,
    });
    setup = { redis, workerRedis, prefix, store, queue, worker, dispatcher };
  });

  afterEach(async () => {
    const { redis, workerRedis, prefix, queue, worker, dispatcher } = setup;
    await dispatcher.close();
    await worker.close(true);
    await queue.obliterate({ force: true });
    await queue.close();
    await cleanupPrefix(redis, prefix);
    redis.disconnect();
    workerRedis.disconnect();
  });

  describe("a job of a cancelled task", () => {
    it("fails unrecoverably, nothing of the tool runs, and the dispatcher answers TaskCancelledError", async () => {
      const { dispatcher: d, store, queue } = setup;
      await store.cancelTask({ taskId: "task-c1" }, BY);
      const refusal = await d
        .call(charge, { orderId: "o1", hold: "none" }, { taskId: "task-c1", stepId: "charge" })
        .catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(TaskCancelledError);
      expect(refusal).toMatchObject({ taskId: "task-c1", ...BY });
      const job = await queue.getJob(jobIdForKey(deriveKey({ taskId: "task-c1", stepId: "charge" })));
      expect(await job?.getState()).toBe("failed");
      // One attempt of three: unrecoverable, not retried.
      expect(job?.attemptsMade).toBe(1);
      expect(job?.failedReason).toMatch(/^TaskCancelledError: /);
      expect(charged.get("o1")).toBeUndefined();
    });

    it("stopped while preparing: the dispatcher answers TaskCancelledError, and later calls from the record without a job", async () => {
      const { dispatcher: d, store, queue } = setup;
      const step = { taskId: "task-c2", stepId: "charge" };
      const key = deriveKey(step);
      const mayEnd = Promise.withResolvers<void>();
      prepareMayEnd = mayEnd.promise;
      const first = d.call(charge, { orderId: "o2", hold: "prepare" }, step).catch((e: unknown) => e);
      await preparing.promise;
      expect((await store.cancelTask({ taskId: "task-c2" }, BY)).stopped).toEqual([key]);
      mayEnd.resolve();
      expect(await first).toBeInstanceOf(TaskCancelledError);
      expect(await store.get(key)).toMatchObject({ state: "cancelled", cancellation: BY });
      const job = await queue.getJob(jobIdForKey(key));
      const before = { attempts: job?.attemptsStarted, processedOn: job?.processedOn };

      const again = await d.call(charge, { orderId: "o2", hold: "none" }, step).catch((e: unknown) => e);
      expect(again).toBeInstanceOf(TaskCancelledError);
      expect(again).toMatchObject({ key, ...BY });
      // The failed job was not run again: the record answered.
      const after = await queue.getJob(jobIdForKey(key));
      expect({ attempts: after?.attemptsStarted, processedOn: after?.processedOn }).toEqual(before);
      expect(await after?.getState()).toBe("failed");
      expect(charged.get("o2")).toBeUndefined();
    });

    it("running when the cancel comes: its signal aborts with TaskCancelledError, and the job ends unknown, not retried", async () => {
      const { dispatcher: d, store, queue } = setup;
      const step = { taskId: "task-c3", stepId: "charge" };
      const key = deriveKey(step);
      const call = d.call(charge, { orderId: "o3", hold: "run" }, step).catch((e: unknown) => e);
      const signal = await running.promise;
      const cancelledAt = performance.now();
      expect((await store.cancelTask({ taskId: "task-c3" }, BY)).running).toEqual([key]);
      const aborted = await new Promise<number>((resolve) => {
        if (signal.aborted) resolve(performance.now());
        signal.addEventListener("abort", () => resolve(performance.now()), { once: true });
      });
      expect(aborted - cancelledAt).toBeLessThan(LEASE_MS / 3 + 250);
      expect(signal.reason).toBeInstanceOf(TaskCancelledError);
      const outcome = await call;
      expect(outcome).toBeInstanceOf(OutcomeUnknownError);
      expect(await store.get(key)).toMatchObject({ state: "unknown", cancellation: BY });
      const job = await queue.getJob(jobIdForKey(key));
      expect(job?.attemptsMade).toBe(1);
      expect(charged.get("o3")).toBe(1);
    });
  });
});

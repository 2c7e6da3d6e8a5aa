// A cancelled task stops its calls at every point the flow meets the store (docs/cancellation.md): the claim
// (refused, nothing of the tool runs), a write lost to the cancel (a call still preparing), and the heartbeat of
// an effect already running (its ctx.signal aborts, and the call settles as usual). On the memory store and on
// Redis; the same calls across processes are in test/scenarios/cancellation.test.ts at the repository's root.

import {
  type CancelRequest,
  defineTool,
  deriveKey,
  MemoryStore,
  OutcomeUnknownError,
  TaskCancelledError,
  type TaskStore,
} from "@once/core";
import { PaymentsClient, type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, pollUntil, randomPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { fetchWithKey, InProcess } from "../src/index.js";

let payments: PaymentsServer;
let provider: PaymentsClient;
let redis: Redis;
const prefix = randomPrefix("engine-cancel");

beforeAll(async () => {
  payments = await startPaymentsServer({ latency: { fixedMs: 5 } });
  provider = new PaymentsClient(payments.url);
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
});

afterAll(async () => {
  await payments.close();
  await cleanupPrefix(redis, prefix);
  redis.disconnect();
});

/** The stores that know tasks; each test gets a fresh one (Redis: under this file's prefix, task ids differ). */
const STORES: Record<string, () => Promise<TaskStore>> = {
  MemoryStore: async () => new MemoryStore(),
  RedisStore: () => RedisStore.create({ redis, prefix }),
};

const LEASE_MS = 600;
const BY: CancelRequest = { by: "ops@example.com", why: "customer withdrew the order" };
const chargeInput = z.object({
  orderId: z.string(),
  amount: z.number().int().positive(),
  latencyMs: z.number(),
});
const chargeOutput = z.object({ chargeId: z.string() });

/** What a tool saw of its own run: how often it started, and when and why its signal aborted. */
interface Seen {
  runs: number;
  prepares: number;
  started?: () => void;
  abortedAt?: number;
  abortReason?: unknown;
}

/** A charge at the real provider, which holds its answer `latencyMs` (the charge is made on arrival). */
function chargeTool(seen: Seen, options: { prepare?: (signal: AbortSignal) => Promise<void> } = {}) {
  return defineTool({
    name: "charge_customer",
    kind: "effect",
    input: chargeInput,
    output: chargeOutput,
    leaseMs: LEASE_MS,
    ...(options.prepare
      ? {
          prepare: async (_input: unknown, ctx: { signal: AbortSignal }) => {
            seen.prepares += 1;
            await options.prepare?.(ctx.signal);
          },
        }
      : {}),
    run: async (input, ctx) => {
      seen.runs += 1;
      ctx.signal.addEventListener("abort", () => {
        seen.abortedAt = performance.now();
        seen.abortReason = ctx.signal.reason;
      });
      const response = fetchWithKey(ctx)(`${payments.url}/charges`, {
        method: "POST",
        headers: { "X-Latency-Ms": String(input.latencyMs) },
        body: JSON.stringify({
          orderId: input.orderId,
          amount: input.amount,
          currency: "eur",
          metadata: { once_key: ctx.key },
        }),
      });
      seen.started?.();
      const res = await response;
      return { chargeId: ((await res.json()) as { id: string }).id };
    },
    reconcile: async (_input, ctx) => {
      const [found] = await provider.findCharges({ metadata: { once_key: ctx.key } });
      return found ? { applied: true, result: { chargeId: found.id } } : { applied: false };
    },
  });
}

/** The charges the provider made for an order. */
async function chargesFor(orderId: string): Promise<number> {
  return (await provider.findCharges({ orderId })).length;
}

let orders = 0;
const nextOrder = () => `order-cancel-${process.pid}-${++orders}`;

describe.each(Object.keys(STORES))("InProcess on a %s", (storeName) => {
  const makeStore = STORES[storeName] as () => Promise<TaskStore>;

  it("files each claim under its task: the task's records name the call", async () => {
    const store = await makeStore();
    const seen: Seen = { runs: 0, prepares: 0 };
    const charge = chargeTool(seen);
    const runner = new InProcess({ store, tools: [charge] });
    const orderId = nextOrder();
    await runner.call(
      charge,
      { orderId, amount: 100, latencyMs: 0 },
      { taskId: `task-filed-${storeName}`, stepId: "charge" },
    );
    const task = await store.readTask({ taskId: `task-filed-${storeName}` });
    expect(task.records.map((r) => [r.state, r.task])).toEqual([
      ["done", { namespace: "default", taskId: `task-filed-${storeName}`, stepId: "charge" }],
    ]);
  });

  it("a call of a cancelled task is refused with TaskCancelledError: nothing of the tool runs, no retry", async () => {
    const store = await makeStore();
    const seen: Seen = { runs: 0, prepares: 0 };
    const charge = chargeTool(seen, { prepare: async () => undefined });
    const runner = new InProcess({ store, tools: [charge], attempts: 5, backoffMs: 2_000 });
    await store.cancelTask({ taskId: `task-refused-${storeName}` }, BY);
    const orderId = nextOrder();
    const startedAt = performance.now();
    const refusal = await runner
      .call(
        charge,
        { orderId, amount: 100, latencyMs: 0 },
        { taskId: `task-refused-${storeName}`, stepId: "charge" },
      )
      .catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(TaskCancelledError);
    expect(refusal).toMatchObject({
      code: "ONCE_TASK_CANCELLED",
      taskId: `task-refused-${storeName}`,
      ...BY,
    });
    // Not retried: one more attempt would have waited its 2 s backoff first.
    expect(performance.now() - startedAt).toBeLessThan(1_000);
    expect({ runs: seen.runs, prepares: seen.prepares }).toEqual({ runs: 0, prepares: 0 });
    expect(await chargesFor(orderId)).toBe(0);
    // Every later call of the step is answered the same.
    await expect(
      runner.call(
        charge,
        { orderId, amount: 100, latencyMs: 0 },
        { taskId: `task-refused-${storeName}`, stepId: "charge" },
      ),
    ).rejects.toBeInstanceOf(TaskCancelledError);
  });

  it("an effect running when its task is cancelled sees ctx.signal abort within one heartbeat, with a TaskCancelledError", async () => {
    const store = await makeStore();
    const started = Promise.withResolvers<void>();
    const seen: Seen = { runs: 0, prepares: 0, started: () => started.resolve() };
    const charge = chargeTool(seen);
    const runner = new InProcess({ store, tools: [charge], attempts: 3, backoffMs: 10 });
    const orderId = nextOrder();
    const step = { taskId: `task-running-${storeName}`, stepId: "charge" };
    const call = runner
      .call(charge, { orderId, amount: 100, latencyMs: 10_000 }, step)
      .catch((e: unknown) => e);
    await started.promise;
    expect(
      await pollUntil(async () => (await chargesFor(orderId)) === 1, { timeoutMs: 5_000, intervalMs: 10 }),
    ).toBe(true);
    const cancelledAt = performance.now();
    const cancel = await store.cancelTask({ taskId: `task-running-${storeName}` }, BY);
    expect(cancel).toMatchObject({ outcome: "cancelled", stopped: [], running: [deriveKey(step)] });
    const outcome = await call;
    expect(seen.abortReason).toBeInstanceOf(TaskCancelledError);
    expect(seen.abortReason).toMatchObject({ taskId: `task-running-${storeName}`, ...BY });
    // A heartbeat every third of the lease: the abort comes at the next one (and the store's read after it).
    expect((seen.abortedAt as number) - cancelledAt).toBeLessThan(LEASE_MS / 3 + 250);
    // The charge may have happened (it had): the call settles as usual, as unknown, and is not retried — every
    // retry of a cancelled task is refused.
    expect(outcome).toBeInstanceOf(OutcomeUnknownError);
    expect((outcome as Error).message).toContain("stopped by its task's cancel");
    expect(seen.runs).toBe(1);
    const record = await store.get(deriveKey(step));
    expect(record).toMatchObject({ state: "unknown", cancellation: BY });
    expect(await chargesFor(orderId)).toBe(1);
  });

  it("an effect that finishes despite the abort is stored as done: the cancel came after it began", async () => {
    const store = await makeStore();
    const started = Promise.withResolvers<void>();
    const seen: Seen = { runs: 0, prepares: 0, started: () => started.resolve() };
    // This tool does not pass its signal on: its request runs to the end.
    const stubborn = defineTool({
      name: "charge_customer",
      kind: "effect",
      input: chargeInput,
      output: chargeOutput,
      leaseMs: LEASE_MS,
      run: async (input, ctx) => {
        seen.runs += 1;
        started.resolve();
        const res = await fetch(`${payments.url}/charges`, {
          method: "POST",
          headers: { "X-Latency-Ms": String(input.latencyMs), "Idempotency-Key": ctx.key },
          body: JSON.stringify({ orderId: input.orderId, amount: input.amount, currency: "eur" }),
        });
        seen.abortReason = ctx.signal.reason;
        return { chargeId: ((await res.json()) as { id: string }).id };
      },
    });
    const runner = new InProcess({ store, tools: [stubborn] });
    const orderId = nextOrder();
    const step = { taskId: `task-stubborn-${storeName}`, stepId: "charge" };
    const call = runner.call(stubborn, { orderId, amount: 100, latencyMs: LEASE_MS * 2 }, step);
    await started.promise;
    await store.cancelTask({ taskId: `task-stubborn-${storeName}` }, BY);
    const done = await call;
    expect(seen.abortReason).toBeInstanceOf(TaskCancelledError);
    expect(done.outcome).toBe("executed");
    expect(await store.get(deriveKey(step))).toMatchObject({ state: "done", cancellation: BY });
    expect(await chargesFor(orderId)).toBe(1);
  });

  it("a call still preparing when its task is cancelled never begins its effect: TaskCancelledError", async () => {
    const store = await makeStore();
    const preparing = Promise.withResolvers<void>();
    const cancelled = Promise.withResolvers<void>();
    let prepareSignal: AbortSignal | undefined;
    const seen: Seen = { runs: 0, prepares: 0 };
    const charge = chargeTool(seen, {
      prepare: async (signal) => {
        prepareSignal = signal;
        preparing.resolve();
        await cancelled.promise;
      },
    });
    const runner = new InProcess({ store, tools: [charge], attempts: 3, backoffMs: 10 });
    const orderId = nextOrder();
    const step = { taskId: `task-preparing-${storeName}`, stepId: "charge" };
    const call = runner.call(charge, { orderId, amount: 100, latencyMs: 0 }, step).catch((e: unknown) => e);
    await preparing.promise;
    const cancel = await store.cancelTask({ taskId: `task-preparing-${storeName}` }, BY);
    expect(cancel.stopped).toEqual([deriveKey(step)]);
    // The next heartbeat is lost to the cancel: prepare's signal says why.
    expect(await pollUntil(() => prepareSignal?.aborted === true, { timeoutMs: 5_000, intervalMs: 10 })).toBe(
      true,
    );
    expect(prepareSignal?.reason).toBeInstanceOf(TaskCancelledError);
    cancelled.resolve();
    const outcome = await call;
    expect(outcome).toBeInstanceOf(TaskCancelledError);
    expect(outcome).toMatchObject({ key: deriveKey(step), ...BY });
    expect({ runs: seen.runs, prepares: seen.prepares }).toEqual({ runs: 0, prepares: 1 });
    expect(await store.get(deriveKey(step))).toMatchObject({ state: "cancelled", cancellation: BY });
    expect(await chargesFor(orderId)).toBe(0);
  });
});

describe("InProcess on a store that knows no tasks", () => {
  it("a store that knows no tasks is not given one, and a call runs as before", async () => {
    const memory = new MemoryStore();
    // The contract without its task methods: an older or outside store.
    const plain = {
      retentionMs: memory.retentionMs,
      claim: (request: Parameters<MemoryStore["claim"]>[0]) => {
        expect(request.task).toBeUndefined();
        return memory.claim(request);
      },
      beginEffect: memory.beginEffect.bind(memory),
      complete: memory.complete.bind(memory),
      failTerminal: memory.failTerminal.bind(memory),
      release: memory.release.bind(memory),
      markUnknown: memory.markUnknown.bind(memory),
      heartbeat: memory.heartbeat.bind(memory),
      resolveApplied: memory.resolveApplied.bind(memory),
      resolveNotApplied: memory.resolveNotApplied.bind(memory),
      giveUp: memory.giveUp.bind(memory),
      resolve: memory.resolve.bind(memory),
      get: memory.get.bind(memory),
    };
    const seen: Seen = { runs: 0, prepares: 0 };
    const charge = chargeTool(seen);
    const runner = new InProcess({ store: plain, tools: [charge] });
    const done = await runner.call(
      charge,
      { orderId: nextOrder(), amount: 100, latencyMs: 0 },
      { taskId: "task-plain", stepId: "charge" },
    );
    expect(done.outcome).toBe("executed");
    expect((await memory.readTask({ taskId: "task-plain" })).records).toEqual([]);
  });
});

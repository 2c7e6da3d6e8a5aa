// A cancelled task's AI SDK loop (docs/cancellation.md): the turns and tool calls name the task, so once the
// task is cancelled the loop stops before its next model call with TaskCancelledError, none of its effects
// runs, and a resumed loop of the task replays nothing. The model is the AI SDK's own mock
// (MockLanguageModelV4, scripted as the order agent); the provider is the payments stand-in over HTTP.

import {
  type CancelRequest,
  deriveKey,
  MemoryStore,
  type OnceStore,
  TaskCancelledError,
  type TaskStore,
} from "@once/core";
import { hookedOrderAgentTools, MemoryOrderBook, orderAgentModel, pendingOrder } from "@once/order-agent";
import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { generateText, stepCountIs } from "ai";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onceTask } from "../src/index.js";

const BY: CancelRequest = { by: "ops@example.com", why: "the customer called it off" };
const PROMPT = "Settle the order: read it, charge it, email the receipt, mark it paid.";

let payments: PaymentsServer;
const orders = new MemoryOrderBook();

beforeAll(async () => {
  payments = await startPaymentsServer({ latency: { fixedMs: 5 } });
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
});

afterAll(async () => {
  await payments.close();
  await cleanupPrefix(redis, prefix);
  redis.disconnect();
});

let serial = 0;
async function newOrder(): Promise<string> {
  const orderId = `order-cancel-${process.pid}-${++serial}`;
  await orders.create(pendingOrder(orderId));
  return orderId;
}

const ledger = (orderId: string) => ({
  charges: payments.ledger().charges.byOrder[orderId] ?? 0,
  emails: payments.ledger().emails.byOrder[orderId] ?? 0,
});

/** One run of the loop as a user writes it; `answering` is told each turn the model answers. */
async function runAgent(
  store: OnceStore,
  taskId: string,
  orderId: string,
  options: { answering?: (turn: number) => Promise<void> | void; afterRead?: () => Promise<void> } = {},
) {
  const agent = orderAgentModel(orderId, options.answering ? { answering: options.answering } : {});
  const tools = hookedOrderAgentTools(
    payments.url,
    orders,
    options.afterRead ? { afterRead: options.afterRead } : {},
  );
  const task = onceTask({ taskId, store, tools: tools.all });
  const run = generateText({
    model: task.model(agent.model),
    tools: task.tools,
    stopWhen: stepCountIs(10),
    prompt: PROMPT,
  }).then(
    (result) => ({ result }),
    (error: unknown) => ({ error }),
  );
  const outcome: { result?: unknown; error?: unknown } = await run;
  return { ...outcome, modelCalls: agent.calls() };
}

let redis: Redis;
const prefix = randomPrefix("ai-cancel");

const STORES: Record<string, () => Promise<TaskStore>> = {
  MemoryStore: async () => new MemoryStore(),
  RedisStore: () => RedisStore.create({ redis, prefix }),
};

describe.each(Object.keys(STORES))("onceTask on a %s", (storeName) => {
  const makeStore = STORES[storeName] as () => Promise<TaskStore>;

  it("a task cancelled between turns asks the model nothing more: TaskCancelledError, no effect", async () => {
    const store = await makeStore();
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    // Turn 0 reads the order; the cancel comes while its answer is on the way, before turn 1 is asked.
    const { error, modelCalls } = await runAgent(store, taskId, orderId, {
      afterRead: async () => {
        await store.cancelTask({ taskId }, BY);
      },
    });
    expect(error).toBeInstanceOf(TaskCancelledError);
    expect(error).toMatchObject({ taskId, ...BY });
    expect(modelCalls).toBe(1);
    expect(ledger(orderId)).toEqual({ charges: 0, emails: 0 });
    expect((await orders.get(orderId))?.status).toBe("pending");
  });

  it("cancelled while the model answers: that turn's calls are refused, and no further turn is asked", async () => {
    const store = await makeStore();
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const { error, modelCalls } = await runAgent(store, taskId, orderId, {
      answering: async (turn) => {
        // Turn 1 is the one that charges.
        if (turn === 1) await store.cancelTask({ taskId }, BY);
      },
    });
    expect(error).toBeInstanceOf(TaskCancelledError);
    expect(modelCalls).toBe(2);
    expect(ledger(orderId)).toEqual({ charges: 0, emails: 0 });
    const task = await store.readTask({ taskId });
    expect(task.cancellation).toMatchObject(BY);
    // The turn that was being asked is recorded (the model answered); the charge it made never ran.
    expect(task.records.map((r) => [r.task?.stepId, r.state])).toEqual([
      ["turn-0", "done"],
      [expect.stringMatching(/^turn-0\//), "done"],
      ["turn-1", "done"],
    ]);
  });

  it("a cancelled task resumed replays nothing and asks nothing: TaskCancelledError at its first turn", async () => {
    const store = await makeStore();
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const first = await runAgent(store, taskId, orderId, {
      answering: async (turn) => {
        if (turn === 2) await store.cancelTask({ taskId }, BY);
      },
    });
    expect(first.error).toBeInstanceOf(TaskCancelledError);
    // Turn 1 charged and emailed; turn 2 was answered as the cancel came, and its call never ran.
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    expect((await orders.get(orderId))?.status).toBe("pending");
    const resumed = await runAgent(store, taskId, orderId);
    expect(resumed.error).toBeInstanceOf(TaskCancelledError);
    expect(resumed.error).toMatchObject({ key: deriveKey({ taskId, stepId: "turn-0" }), ...BY });
    expect(resumed.modelCalls).toBe(0);
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });
});

// AgentTask on its own, as a hand-written agent loop uses it (no framework): a turn is recorded before its
// calls run, a resumed task gets the recorded turn back instead of asking again, and its calls run once.

import { defineTool, IdempotencyConflictError, InvalidKeyPartError, InvalidToolError } from "@once/core";
import { PaymentsClient, type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AgentTask,
  RecordedTurnMismatchError,
  type TurnToolCall,
  UnrecordedToolCallError,
} from "../src/index.js";

const prefix = randomPrefix("agent");
let redis: Redis;
let store: RedisStore;
let payments: PaymentsServer;
beforeAll(async () => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  store = await RedisStore.create({ redis, prefix });
  payments = await startPaymentsServer({ latency: "none" });
});
afterAll(async () => {
  await payments.close();
  await cleanupPrefix(redis, prefix);
  redis.disconnect();
});

function charge() {
  return defineTool({
    name: "charge",
    kind: "effect",
    input: z.object({ orderId: z.string(), amount: z.number().int().positive() }),
    output: z.object({ chargeId: z.string() }),
    run: async (input, ctx) => {
      const made = await new PaymentsClient(payments.url).charge(
        { ...input, currency: "eur", metadata: { once_key: ctx.key } },
        { signal: ctx.signal },
      );
      return { chargeId: made.id };
    },
  });
}

/** A response of the loop's own model: the calls it chose, another amount and new ids each time it is asked. */
interface Response {
  calls: TurnToolCall[];
}
const callsOf = (response: Response) => response.calls;
let asked = 0;
function ask(orderId: string, toolName = "charge"): () => Promise<Response> {
  return async () => {
    asked++;
    const amount = 1_000 + Math.floor(Math.random() * 9_000);
    return { calls: [{ toolCallId: `call_${Math.random()}`, toolName, input: { orderId, amount } }] };
  };
}

let serial = 0;
const newOrder = () => `order-${process.pid}-${++serial}`;
const request = { provider: "scripted", modelId: "order-agent", prompt: "Charge the order." };

/** One run of a hand-written loop: one turn, then each of its calls. */
async function runLoop(taskId: string, orderId: string, tools = [charge()]) {
  const task = new AgentTask({ taskId, store, tools });
  const response = await task.turn(request, ask(orderId), callsOf);
  const results = [];
  for (const call of response.calls)
    results.push(await task.call(call.toolName, call.toolCallId, call.input));
  return { response, results };
}

describe("AgentTask", () => {
  it("records a turn before its calls run; a resumed task replays the turn and the call: one model call, one charge", async () => {
    const orderId = newOrder();
    const before = asked;
    const first = await runLoop(`task-${orderId}`, orderId);
    const resumed = await runLoop(`task-${orderId}`, orderId);
    expect(asked - before).toBe(1);
    expect(resumed).toEqual(first);
    expect(payments.ledger().charges.byOrder[orderId]).toBe(1);
  });

  it("a turn asked with another request is a conflict naming the turn, and nothing is asked", async () => {
    const orderId = newOrder();
    const taskId = `task-${orderId}`;
    await runLoop(taskId, orderId);
    const before = asked;
    const task = new AgentTask({ taskId, store, tools: [charge()] });
    const changed = task.turn({ ...request, prompt: "Refund the order." }, ask(orderId), callsOf);
    await expect(changed).rejects.toThrow(IdempotencyConflictError);
    await expect(changed).rejects.toThrow(`turn 0 of task "${taskId}"`);
    expect(asked).toBe(before);
  });

  it("a recorded call to a tool that is gone: RecordedTurnMismatchError naming the turn and the tool, nothing run", async () => {
    const orderId = newOrder();
    const taskId = `task-${orderId}`;
    await new AgentTask({ taskId, store, tools: [charge()] }).turn(request, ask(orderId), callsOf);
    const refund = defineTool({
      name: "refund",
      kind: "effect",
      input: z.object({ orderId: z.string() }),
      output: z.object({}),
      run: () => ({}),
    });
    const resumed = new AgentTask({ taskId, store, tools: [refund] }).turn(request, ask(orderId), callsOf);
    await expect(resumed).rejects.toThrow(RecordedTurnMismatchError);
    await expect(resumed).rejects.toThrow(/turn 0 of task "task-order-.*" called charge, which is not among/);
    expect(payments.ledger().charges.byOrder[orderId]).toBeUndefined();
  });

  it("a call the tools refused when the turn was recorded replays as it was (the loop's to answer), not as a mismatch", async () => {
    const orderId = newOrder();
    const taskId = `task-${orderId}`;
    const hallucinated = ask(orderId, "no_such_tool");
    const first = await new AgentTask({ taskId, store, tools: [charge()] }).turn(
      request,
      hallucinated,
      callsOf,
    );
    const again = await new AgentTask({ taskId, store, tools: [charge()] }).turn(
      request,
      hallucinated,
      callsOf,
    );
    expect(again).toEqual(first);
  });

  it("a call no recorded turn made is refused, and nothing runs", async () => {
    const orderId = newOrder();
    const task = new AgentTask({ taskId: `task-${orderId}`, store, tools: [charge()] });
    await expect(task.call("charge", "call_made_up", { orderId, amount: 100 })).rejects.toThrow(
      UnrecordedToolCallError,
    );
    expect(payments.ledger().charges.byOrder[orderId]).toBeUndefined();
  });

  it("a named step (task.step) may not take a model turn's step name: InvalidKeyPartError, nothing runs", async () => {
    const orderId = newOrder();
    const task = new AgentTask({ taskId: `task-${orderId}`, store, tools: [charge()] });
    const input = { orderId, amount: 1_200 };
    await expect(task.step("charge", "turn-0", input)).rejects.toThrow(InvalidKeyPartError);
    await expect(task.step("charge", "turn-2/call_1", input)).rejects.toThrow(
      /invalid stepId: "turn-2\/call_1" is the name of a model turn's step/,
    );
    expect(payments.ledger().charges.byOrder[orderId]).toBeUndefined();
  });

  it("refuses a taskId with a control character, and a tool without a kind", () => {
    expect(() => new AgentTask({ taskId: "task\n7", store, tools: [] })).toThrow(InvalidKeyPartError);
    const notOnce = { name: "charge", input: z.object({}) };
    expect(() => new AgentTask({ taskId: "task-7", store, tools: [notOnce as never] })).toThrow(
      /"charge": is not a once tool: declare it with defineTool and a kind/,
    );
    expect(() => new AgentTask({ taskId: "task-7", store, tools: [notOnce as never] })).toThrow(
      InvalidToolError,
    );
  });
});

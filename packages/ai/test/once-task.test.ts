import { Dispatcher, OnceWorker } from "@once/bullmq";
import {
  defineTool,
  IdempotencyConflictError,
  InvalidKeyPartError,
  InvalidToolError,
  ResultTooLargeError,
} from "@once/core";
import { hookedOrderAgentTools, MemoryOrderBook, orderAgentModel, pendingOrder } from "@once/order-agent";
import { redisUrl } from "@once/support";
import { generateText, stepCountIs, streamText, ToolLoopAgent, tool } from "ai";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { onceTask, RecordedTurnMismatchError, UnsettledToolCallError } from "../src/index.js";
import { payments, store, useAgentWorld } from "./agent-world.js";

useAgentWorld("ai");

const orders = new MemoryOrderBook();
let serial = 0;
/** A new pending order in the book the tools read. */
async function newOrder(): Promise<string> {
  const orderId = `order-${process.pid}-${++serial}`;
  await orders.create(pendingOrder(orderId));
  return orderId;
}
const PROMPT = "Settle the order: read it, charge it, email the receipt, mark it paid.";

/** One run of the agent loop as a user writes it, through the task's model and tools. */
async function runAgent(
  taskId: string,
  orderId: string,
  tools = hookedOrderAgentTools(payments.url, orders),
  system?: string,
) {
  const agent = orderAgentModel(orderId);
  const task = onceTask({ taskId, store, tools: tools.all });
  const result = await generateText({
    model: task.model(agent.model),
    tools: task.tools,
    stopWhen: stepCountIs(10),
    ...(system === undefined ? {} : { system }),
    prompt: PROMPT,
  });
  return { result, modelCalls: agent.calls() };
}

const ledger = (orderId: string) => ({
  charges: payments.ledger().charges.byOrder[orderId] ?? 0,
  emails: payments.ledger().emails.byOrder[orderId] ?? 0,
});

describe("onceTask with generateText", () => {
  it("an effect call that ended with no stored outcome stops the loop before the model hears of it: UnsettledToolCallError", async () => {
    const orderId = await newOrder();
    const tools = hookedOrderAgentTools(payments.url, orders);
    const lost = defineTool({
      ...tools.chargeCustomer,
      run: () => {
        throw new Error("the provider hung up mid-charge");
      },
      reconcile: undefined,
      classifyError: () => "unknown",
    });
    const withLost = { ...tools, all: tools.all.map((t) => (t.name === lost.name ? lost : t)) };
    const agent = orderAgentModel(orderId);
    const task = onceTask({ taskId: `task-${orderId}`, store, tools: withLost.all });
    const run = generateText({
      model: task.model(agent.model),
      tools: task.tools,
      stopWhen: stepCountIs(10),
      prompt: PROMPT,
    });
    await expect(run).rejects.toThrow(UnsettledToolCallError);
    await expect(run).rejects.toThrow(
      /^turn 2 of task "task-order-.*" was not asked: charge_customer \(call_/,
    );
    // Turns 0 and 1 were asked; the model never heard that the charge failed, so it could not charge again.
    expect(agent.calls()).toBe(2);
    expect(ledger(orderId).charges).toBe(0);
  });

  it("a tool call that failed for good reads the same on resume: the next turn's prompt is the recorded one", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const tools = hookedOrderAgentTools(payments.url, orders);
    const declined = defineTool({
      ...tools.chargeCustomer,
      run: () => {
        throw new Error("card declined");
      },
      classifyError: () => "terminal",
    });
    const withDecline = { ...tools, all: tools.all.map((t) => (t.name === declined.name ? declined : t)) };
    const first = await runAgent(taskId, orderId, withDecline);
    const errors = first.result.steps.flatMap((step) =>
      step.content.filter((part) => part.type === "tool-error"),
    );
    expect(errors.map((e) => String(e.error))).toEqual([expect.stringContaining("card declined")]);
    const resumed = await runAgent(taskId, orderId, withDecline);
    expect(resumed.modelCalls).toBe(0);
    expect(resumed.result.response.messages).toEqual(first.result.response.messages);
  });

  it("runs the loop: 4 turns, one charge and one email", async () => {
    const orderId = await newOrder();
    const { result, modelCalls } = await runAgent(`task-${orderId}`, orderId);
    expect(result.steps).toHaveLength(4);
    expect(result.text).toBe(`order ${orderId} is paid`);
    expect(modelCalls).toBe(4);
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    expect((await orders.get(orderId))?.status).toBe("paid");
  });

  it("a resumed task replays every recorded turn: no model call, no effect, the same transcript", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const first = await runAgent(taskId, orderId);
    const again = await runAgent(taskId, orderId);
    expect(again.modelCalls).toBe(0);
    expect(again.result.response.messages).toEqual(first.result.response.messages);
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("two runs of one task at once: one model call per turn, one effect per call", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const [a, b] = await Promise.all([runAgent(taskId, orderId), runAgent(taskId, orderId)]);
    expect(a.modelCalls + b.modelCalls).toBe(4);
    expect(a.result.response.messages).toEqual(b.result.response.messages);
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("a resumed task whose code sends another prompt for a recorded turn: IdempotencyConflictError naming the turn", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    await runAgent(taskId, orderId, hookedOrderAgentTools(payments.url, orders), "You are a careful agent.");
    const changed = runAgent(
      taskId,
      orderId,
      hookedOrderAgentTools(payments.url, orders),
      "You are a hasty agent.",
    );
    await expect(changed).rejects.toThrow(IdempotencyConflictError);
    await expect(changed).rejects.toThrow(/^turn 0 of task "task-order-/);
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });
});

describe("onceTask with effect tools on workers", () => {
  it("dispatches the effect tools through a Dispatcher to a worker: resumed, nothing is asked or charged again", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const queueName = `ai-${orderId}`;
    const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const queue = new Queue(queueName, { connection });
    const workerTools = hookedOrderAgentTools(payments.url, orders);
    const worker = await OnceWorker.create({ queueName, connection, store, tools: workerTools.all });
    try {
      const run = async () => {
        const tools = hookedOrderAgentTools(payments.url, orders);
        const dispatcher = await Dispatcher.create({ queue, store, tools: tools.all });
        try {
          const agent = orderAgentModel(orderId);
          const task = onceTask({ taskId, store, tools: tools.all, dispatcher });
          const result = await generateText({
            model: task.model(agent.model),
            tools: task.tools,
            stopWhen: stepCountIs(10),
            prompt: PROMPT,
          });
          return { text: result.text, modelCalls: agent.calls() };
        } finally {
          await dispatcher.close();
        }
      };
      expect(await run()).toEqual({ text: `order ${orderId} is paid`, modelCalls: 4 });
      // The worker ran both effects: the charge and the email are its jobs, keyed from the recorded turn.
      const jobs = await queue.getJobs(["completed"]);
      expect(jobs.map((job) => job.name).sort()).toEqual(["charge_customer", "send_email"]);
      expect(await run()).toEqual({ text: `order ${orderId} is paid`, modelCalls: 0 });
      expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    } finally {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    }
  });
});

describe("onceTask with ToolLoopAgent", () => {
  it("the agent class runs the same recorded loop: resumed, it asks nothing and charges nothing", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const run = async () => {
      const agent = orderAgentModel(orderId);
      const task = onceTask({ taskId, store, tools: hookedOrderAgentTools(payments.url, orders).all });
      const loop = new ToolLoopAgent({
        model: task.model(agent.model),
        tools: task.tools,
        stopWhen: stepCountIs(10),
      });
      const result = await loop.generate({ prompt: PROMPT });
      return { text: result.text, modelCalls: agent.calls() };
    };
    expect(await run()).toEqual({ text: `order ${orderId} is paid`, modelCalls: 4 });
    expect(await run()).toEqual({ text: `order ${orderId} is paid`, modelCalls: 0 });
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });
});

describe("onceTask with streamText", () => {
  it("records each streamed turn before its tool calls run, and re-emits it on resume", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const run = async () => {
      const agent = orderAgentModel(orderId);
      const task = onceTask({ taskId, store, tools: hookedOrderAgentTools(payments.url, orders).all });
      const result = streamText({
        model: task.model(agent.model),
        tools: task.tools,
        stopWhen: stepCountIs(10),
        prompt: PROMPT,
      });
      return { text: await result.text, steps: (await result.steps).length, modelCalls: agent.calls() };
    };
    const first = await run();
    const again = await run();
    expect(first).toMatchObject({ text: `order ${orderId} is paid`, steps: 4, modelCalls: 4 });
    expect(again).toMatchObject({ text: first.text, steps: 4, modelCalls: 0 });
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });
});

describe("bad input: a named error, nothing dispatched", () => {
  it("an AI SDK tool without a once definition", () => {
    const plain = tool({ inputSchema: z.object({}), execute: async () => ({}) });
    expect(() => onceTask({ taskId: "t", store, tools: [plain as never] })).toThrow(InvalidToolError);
    expect(() => onceTask({ taskId: "t", store, tools: [plain as never] })).toThrow(
      /declare it with defineTool and a kind/,
    );
  });

  it("a taskId with a control character", () => {
    expect(() => onceTask({ taskId: "t\u0007", store, tools: [] })).toThrow(InvalidKeyPartError);
  });

  it("a resumed task without a tool a recorded turn called", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    await runAgent(taskId, orderId);
    const tools = hookedOrderAgentTools(payments.url, orders);
    const without = { ...tools, all: tools.all.filter((t) => t.name !== "send_email") };
    const resumed = runAgent(taskId, orderId, without);
    await expect(resumed).rejects.toThrow(RecordedTurnMismatchError);
    await expect(resumed).rejects.toThrow(
      /turn 1 of task .* called send_email, which is not among the tools given/,
    );
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("a model response larger than the store's limit: refused, not truncated", async () => {
    const orderId = await newOrder();
    const agent = orderAgentModel(orderId);
    const task = onceTask({
      taskId: `task-${orderId}`,
      store,
      tools: hookedOrderAgentTools(payments.url, orders).all,
      maxResultBytes: 200,
    });
    const run = generateText({
      model: task.model(agent.model),
      tools: task.tools,
      prompt: PROMPT,
      maxRetries: 0,
    });
    await expect(run).rejects.toThrow(ResultTooLargeError);
    expect(ledger(orderId)).toEqual({ charges: 0, emails: 0 });
  });
});

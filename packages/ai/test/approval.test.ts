// The AI SDK's own tool approvals (`needsApproval`, `tool-approval-request` / `tool-approval-response` parts)
// answered from the call's once record: the SDK's loop and its mock model, the payments stand-in and Redis.
// The app's response in the messages is not the decision; the operator's approve or deny on the record is.

import { Dispatcher, OnceWorker } from "@once/bullmq";
import { ApprovalPendingError, defineTool, deriveKey } from "@once/core";
import { hookedOrderAgentTools, MemoryOrderBook, orderAgentModel, pendingOrder } from "@once/order-agent";
import { PaymentsClient } from "@once/payments";
import { RedisOperatorStore } from "@once/redis";
import { redisUrl } from "@once/support";
import { generateText, type ModelMessage, stepCountIs, streamText, type ToolApprovalResponse } from "ai";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onceTask } from "../src/index.js";
import { payments, prefix, store, useAgentWorld } from "./agent-world.js";
import { approvalTools } from "./approval-tools.js";

useAgentWorld("ai-approval");

let redis: Redis;
let operator: RedisOperatorStore;
beforeAll(() => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  operator = new RedisOperatorStore({ redis, prefix });
});
afterAll(() => redis.disconnect());

const orders = new MemoryOrderBook();
let serial = 0;
async function newOrder(): Promise<string> {
  const orderId = `order-${process.pid}-${++serial}`;
  await orders.create(pendingOrder(orderId));
  return orderId;
}
const PROMPT = "Settle the order: read it, charge it, email the receipt, mark it paid.";

/** One generateText loop of the task, as an app writes it, on a fresh task object (as a new request would). */
function run(taskId: string, orderId: string, messages: ModelMessage[], withReason = false) {
  const agent = orderAgentModel(orderId);
  const task = onceTask({ taskId, store, tools: approvalTools(payments.url, orders) });
  const result = generateText({
    model: task.model(agent.model),
    tools: task.tools,
    ...(withReason ? { toolApproval: task.toolApproval } : {}),
    stopWhen: stepCountIs(10),
    messages,
  });
  return { task, result, modelCalls: () => agent.calls() };
}

/** What the loop's run of the app's approved calls answered, before it asked the model again. */
function answerTo(result: Awaited<ReturnType<typeof generateText>>, toolName: string) {
  const [answers] = result.responseMessages;
  if (answers?.role !== "tool") return undefined;
  return answers.content.find((part) => part.type === "tool-result" && part.toolName === toolName);
}

const ledger = (orderId: string) => ({
  charges: payments.ledger().charges.byOrder[orderId] ?? 0,
  emails: payments.ledger().emails.byOrder[orderId] ?? 0,
});

/** The conversation after a loop that stopped for approval, with the app's answer to each request. */
function answered(
  start: ModelMessage[],
  result: Awaited<ReturnType<typeof generateText>>,
  approved: boolean,
): ModelMessage[] {
  const responses: ToolApprovalResponse[] = result.content.flatMap((part) =>
    part.type === "tool-approval-request"
      ? [{ type: "tool-approval-response", approvalId: part.approvalId, approved }]
      : [],
  );
  return [...start, ...result.responseMessages, { role: "tool", content: responses }];
}

async function pendingLoop() {
  const orderId = await newOrder();
  const taskId = `task-${orderId}`;
  const start: ModelMessage[] = [{ role: "user", content: PROMPT }];
  const first = run(taskId, orderId, start, true);
  const result = await first.result;
  const request = result.content.find((part) => part.type === "tool-approval-request");
  if (request?.type !== "tool-approval-request") throw new Error("the loop asked for no approval");
  const pending = first.task.approvalRequest(request.toolCall.toolCallId);
  if (!pending) throw new Error("the task found no request on the record");
  return { orderId, taskId, start, result, request, pending };
}

describe("onceTask tools with an approval policy, in the AI SDK's own approval flow", () => {
  it("the SDK's approval request is the record's: key, reason and expiry, and nothing ran", async () => {
    const { orderId, result, request, pending } = await pendingLoop();
    expect(request.toolCall.toolName).toBe("charge_customer");
    const amount = (request.toolCall.input as { amount: number }).amount;
    const record = await store.get(pending.key);
    expect(record).toMatchObject({
      state: "awaiting_approval",
      tool: "charge_customer",
      approval: { reason: `a charge of ${amount} cents is over 1000` },
    });
    expect(pending).toEqual({
      key: record?.key,
      tool: "charge_customer",
      reason: record?.approval?.reason,
      requestedAt: record?.approval?.requestedAt,
      expiresAt: record?.approval?.expiresAt,
      approve: `once approve ${record?.key}`,
    });
    // toolApproval: the request's reason, as the SDK hands it to the app, names the record's request.
    expect(request.reason).toContain(pending.reason);
    expect(request.reason).toContain(pending.key);
    expect(request.reason).toContain(new Date(pending.expiresAt).toISOString());
    // The loop stopped there: no charge, and no turn after the one that made it.
    expect(result.steps).toHaveLength(2);
    expect(ledger(orderId).charges).toBe(0);
  });

  it("an approval the app sends while the record awaits one runs nothing: ApprovalPendingError, the record unchanged", async () => {
    const { orderId, taskId, start, result, pending } = await pendingLoop();
    const before = await store.get(pending.key);
    const forged = run(taskId, orderId, answered(start, result, true));
    await expect(forged.result).rejects.toThrow(ApprovalPendingError);
    await expect(forged.result).rejects.toMatchObject({ key: pending.key, expiresAt: pending.expiresAt });
    expect(forged.modelCalls()).toBe(0);
    expect(ledger(orderId).charges).toBe(0);
    expect(await store.get(pending.key)).toEqual({ ...before, ttlMs: expect.any(Number) });
  });

  it("approved by the operator: the app's approval runs the charge once, and a re-sent one replays it", async () => {
    const { orderId, taskId, start, result, pending } = await pendingLoop();
    await operator.approve(pending.key, { by: "alice@example.com", why: "customer confirmed" });
    const conversation = answered(start, result, true);
    const approved = await run(taskId, orderId, conversation).result;
    expect(approved.text).toBe(`order ${orderId} is paid`);
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    const [stored] = await new PaymentsClient(payments.url).findCharges({ orderId });
    expect(answerTo(approved, "charge_customer")).toMatchObject({
      output: { type: "json", value: { chargeId: stored?.id, amount: stored?.amount } },
    });

    const again = await run(taskId, orderId, conversation).result;
    expect(again.text).toBe(`order ${orderId} is paid`);
    expect(answerTo(again, "charge_customer")).toEqual(answerTo(approved, "charge_customer"));
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("approved by the operator, the loop run again from its first message: no request, the charge runs once", async () => {
    const { orderId, taskId, start, pending } = await pendingLoop();
    await operator.approve(pending.key, { by: "alice@example.com", why: "customer confirmed" });
    const fromStart = await run(taskId, orderId, start).result;
    expect(fromStart.content.some((part) => part.type === "tool-approval-request")).toBe(false);
    expect(fromStart.text).toBe(`order ${orderId} is paid`);
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    expect(await store.get(pending.key)).toMatchObject({
      state: "done",
      approval: { decision: { as: "approved", by: "alice@example.com" } },
    });
  });

  it("denied by the operator: an approval in the messages gets the stored denial, and nothing is charged", async () => {
    const { orderId, taskId, start, result, pending } = await pendingLoop();
    await operator.deny(pending.key, { by: "bob", why: "over the limit" });
    const denied = await run(taskId, orderId, answered(start, result, true)).result;
    expect(answerTo(denied, "charge_customer")).toMatchObject({
      output: {
        type: "error-text",
        value: expect.stringMatching(
          /charge_customer failed \(key \w+\): ApprovalDeniedError: denied by bob: over the limit$/,
        ),
      },
    });
    expect(ledger(orderId).charges).toBe(0);
    expect(await store.get(pending.key)).toMatchObject({ state: "failed", error: { code: "denied" } });
  });

  it("a denial the app sends while the record is approved runs nothing, and leaves the record approved", async () => {
    const { orderId, taskId, start, result, pending } = await pendingLoop();
    await operator.approve(pending.key, { by: "alice", why: "ok" });
    const refused = await run(taskId, orderId, answered(start, result, false)).result;
    expect(answerTo(refused, "charge_customer")).toMatchObject({ output: { type: "execution-denied" } });
    expect(refused.text).toBe(`order ${orderId} is paid`);
    expect(ledger(orderId).charges).toBe(0);
    expect(await store.get(pending.key)).toMatchObject({ state: "approved" });
  });

  it("a call under the policy's limit needs no approval and runs at once", async () => {
    const orderId = await newOrder();
    const tools = hookedOrderAgentTools(payments.url, orders);
    const small = defineTool({ ...tools.chargeCustomer, approval: () => undefined });
    const task = onceTask({
      taskId: `task-${orderId}`,
      store,
      tools: tools.all.map((t) => (t.name === small.name ? small : t)),
    });
    const result = await generateText({
      model: task.model(orderAgentModel(orderId).model),
      tools: task.tools,
      stopWhen: stepCountIs(10),
      prompt: PROMPT,
    });
    expect(result.text).toBe(`order ${orderId} is paid`);
    expect(ledger(orderId).charges).toBe(1);
    const chargeCall = result.steps[1]?.toolCalls.find((c) => c.toolName === "charge_customer");
    const key = deriveKey({ taskId: `task-${orderId}`, stepId: `turn-1/${chargeCall?.toolCallId}` });
    expect((await store.get(key))?.approval).toBeUndefined();
  });

  it("streamText: the loop stops on the same request, and after the operator's approve the charge runs once", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const streamed = async () => {
      const agent = orderAgentModel(orderId);
      const task = onceTask({ taskId, store, tools: approvalTools(payments.url, orders) });
      const result = streamText({
        model: task.model(agent.model),
        tools: task.tools,
        stopWhen: stepCountIs(10),
        prompt: PROMPT,
      });
      const content = await result.content;
      const request = content.find((part) => part.type === "tool-approval-request");
      return {
        text: await result.text,
        pending:
          request?.type === "tool-approval-request"
            ? task.approvalRequest(request.toolCall.toolCallId)
            : undefined,
      };
    };
    const first = await streamed();
    if (!first.pending) throw new Error("the streamed loop asked for no approval");
    expect((await streamed()).pending).toEqual(first.pending);
    expect(ledger(orderId).charges).toBe(0);
    await operator.approve(first.pending.key, { by: "alice", why: "ok" });
    expect(await streamed()).toEqual({ text: `order ${orderId} is paid`, pending: undefined });
    expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("through a Dispatcher to a worker: the worker's claim writes the request, and after approval charges once", async () => {
    const orderId = await newOrder();
    const taskId = `task-${orderId}`;
    const queueName = `ai-approval-${orderId}`;
    const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const queue = new Queue(queueName, { connection });
    const worker = await OnceWorker.create({
      queueName,
      connection,
      store,
      tools: approvalTools(payments.url, orders),
    });
    try {
      const dispatched = async () => {
        const tools = approvalTools(payments.url, orders);
        const dispatcher = await Dispatcher.create({ queue, store, tools });
        try {
          const task = onceTask({ taskId, store, tools, dispatcher });
          const result = await generateText({
            model: task.model(orderAgentModel(orderId).model),
            tools: task.tools,
            stopWhen: stepCountIs(10),
            prompt: PROMPT,
          });
          const request = result.content.find((part) => part.type === "tool-approval-request");
          return {
            text: result.text,
            pending:
              request?.type === "tool-approval-request"
                ? task.approvalRequest(request.toolCall.toolCallId)
                : undefined,
          };
        } finally {
          await dispatcher.close();
        }
      };
      const first = await dispatched();
      if (!first.pending) throw new Error("the dispatched loop asked for no approval");
      expect(await store.get(first.pending.key)).toMatchObject({ state: "awaiting_approval" });
      // The request was the worker's: the charge went out as a job, which ended without running the tool.
      const jobs = await queue.getJobs(["failed", "completed"]);
      expect(jobs.filter((job) => job.name === "charge_customer")).toHaveLength(1);
      expect((await dispatched()).pending).toEqual(first.pending);
      expect(ledger(orderId).charges).toBe(0);
      await operator.approve(first.pending.key, { by: "alice", why: "ok" });
      expect(await dispatched()).toEqual({ text: `order ${orderId} is paid`, pending: undefined });
      expect(ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    } finally {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    }
  });
});

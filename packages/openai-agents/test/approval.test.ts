// The OpenAI Agents SDK's own approval interruptions (`needsApproval`, `result.interruptions`, `state.approve()` /
// `reject()`) answered from the call's once record: the SDK's Runner and a model in its style, the payments
// stand-in and Redis. A run state is the app's, and may be lost in a crash or held by two processes; the
// decision is the record's, approved or denied by the operator.

import { type AnyTool, ApprovalPendingError, defineTool } from "@once/core";
import { PaymentsClient } from "@once/payments";
import { RedisOperatorStore } from "@once/redis";
import { redisUrl } from "@once/support";
import { type Agent, RunState, run, ToolCallError } from "@openai/agents";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onceTask } from "../src/index.js";
import { payments, prefix, store, useAgentWorld } from "./agent-world.js";
import { orderAgent, orderTools, PROMPT } from "./order-agent.js";
import { OrderAgentModel } from "./order-agent-model.js";

useAgentWorld("openai-agents-approval");

let redis: Redis;
let operator: RedisOperatorStore;
beforeAll(() => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  operator = new RedisOperatorStore({ redis, prefix });
});
afterAll(() => redis.disconnect());

let serial = 0;
const newOrder = () => `order-${process.pid}-${++serial}`;

async function ledger(orderId: string) {
  const client = new PaymentsClient(payments.url);
  return {
    charges: (await client.findCharges({ orderId })).length,
    emails: (await client.findEmails({ orderId })).length,
  };
}

/** One process's agent for the task: its own task object, model and tools, the charge needing approval. */
async function agentFor(taskId: string, orderId: string) {
  const { all } = await orderTools(payments.url, orderId);
  const tools: AnyTool[] = all.map((t) =>
    t.name === "charge_customer"
      ? defineTool({
          ...t,
          approval: (input: { amount: number }) => `a charge of ${input.amount} cents`,
        } as never)
      : t,
  );
  const model = new OrderAgentModel(orderId);
  const task = onceTask({ taskId, store, tools });
  return { task, model, agent: orderAgent(task.model(model, "order-agent"), task.tools) };
}

/** A run that stopped on the charge's interruption, and its state as the app saved it. */
async function interrupted() {
  const orderId = newOrder();
  const taskId = `task-${orderId}`;
  const first = await agentFor(taskId, orderId);
  const result = await run(first.agent, PROMPT);
  const [item] = result.interruptions ?? [];
  if (item?.rawItem.type !== "function_call") throw new Error("the run was not interrupted for approval");
  const pending = first.task.approvalRequest(item.rawItem.callId);
  if (!pending) throw new Error("the task found no request on the record");
  return { orderId, taskId, result, item, pending, saved: result.state.toString() };
}

/** The saved state restored in another process (a fresh task), with the app's own decision on it. */
async function restored(taskId: string, orderId: string, saved: string, decide: "approve" | "reject") {
  const process = await agentFor(taskId, orderId);
  const state = await RunState.fromString(process.agent as Agent, saved);
  for (const item of state.getInterruptions()) state[decide](item);
  return { ...process, state };
}

describe("onceTask tools with an approval policy, in the SDK's own interruptions", () => {
  it("the interruption is the record's request: key, reason and expiry, and nothing was charged", async () => {
    const { orderId, item, pending, result } = await interrupted();
    expect(item.name).toBe("charge_customer");
    const record = await store.get(pending.key);
    expect(record).toMatchObject({ state: "awaiting_approval", tool: "charge_customer" });
    expect(pending).toEqual({
      key: record?.key,
      tool: "charge_customer",
      reason: record?.approval?.reason,
      requestedAt: record?.approval?.requestedAt,
      expiresAt: record?.approval?.expiresAt,
      approve: `once approve ${record?.key}`,
    });
    expect(result.interruptions).toHaveLength(1);
    expect((await ledger(orderId)).charges).toBe(0);
  });

  it("approved in a restored run state while the record awaits approval: nothing is charged, ApprovalPendingError", async () => {
    const { orderId, taskId, pending, saved } = await interrupted();
    const before = await store.get(pending.key);
    const other = await restored(taskId, orderId, saved, "approve");
    const failed = await run(other.agent, other.state).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(ToolCallError);
    const cause = (failed as ToolCallError).error;
    expect(cause).toBeInstanceOf(ApprovalPendingError);
    expect(cause).toMatchObject({ key: pending.key, expiresAt: pending.expiresAt });
    expect(other.model.calls()).toBe(0);
    expect((await ledger(orderId)).charges).toBe(0);
    expect(await store.get(pending.key)).toEqual({ ...before, ttlMs: expect.any(Number) });
  });

  it("approved by the operator: two processes holding the same run state, both approving it, charge once", async () => {
    const { orderId, taskId, pending, saved } = await interrupted();
    await operator.approve(pending.key, { by: "alice@example.com", why: "customer confirmed" });
    const holders = await Promise.all([
      restored(taskId, orderId, saved, "approve"),
      restored(taskId, orderId, saved, "approve"),
    ]);
    const results = await Promise.all(holders.map((holder) => run(holder.agent, holder.state)));
    for (const result of results) expect(result.finalOutput).toBe(`order ${orderId} is paid`);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    // Turns 2 and 3 were asked once between the two; the turns the state came from were recorded.
    expect(holders.reduce((sum, holder) => sum + holder.model.calls(), 0)).toBe(2);
    expect(await store.get(pending.key)).toMatchObject({
      state: "done",
      approval: { decision: { as: "approved", by: "alice@example.com" } },
    });
  });

  it("approved by the operator after the run state was lost: the run from the start asks nothing more and charges once", async () => {
    const { orderId, taskId, pending } = await interrupted();
    await operator.approve(pending.key, { by: "alice", why: "ok" });
    const again = await agentFor(taskId, orderId);
    const result = await run(again.agent, PROMPT);
    expect(result.interruptions ?? []).toEqual([]);
    expect(result.finalOutput).toBe(`order ${orderId} is paid`);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    // Turns 0 and 1 were replayed, 2 and 3 asked.
    expect(again.model.calls()).toBe(2);
  });

  it("denied by the operator: a run state approved by the app gets the stored denial, and nothing is charged", async () => {
    const { orderId, taskId, pending, saved } = await interrupted();
    await operator.deny(pending.key, { by: "bob", why: "over the limit" });
    const other = await restored(taskId, orderId, saved, "approve");
    const result = await run(other.agent, other.state);
    const told = result.newItems.find(
      (item) =>
        item.type === "tool_call_output_item" &&
        item.rawItem.type === "function_call_result" &&
        item.rawItem.name === "charge_customer",
    );
    expect(JSON.stringify(told?.rawItem)).toContain(
      "charge_customer failed: ApprovalDeniedError: denied by bob: over the limit",
    );
    expect((await ledger(orderId)).charges).toBe(0);
    expect(await store.get(pending.key)).toMatchObject({ state: "failed", error: { code: "denied" } });
  });

  it("rejected in a run state: nothing is charged, and the record is not denied by it", async () => {
    const { orderId, taskId, pending, saved } = await interrupted();
    const other = await restored(taskId, orderId, saved, "reject");
    const result = await run(other.agent, other.state);
    expect(result.finalOutput).toBe(`order ${orderId} is paid`);
    expect((await ledger(orderId)).charges).toBe(0);
    expect(await store.get(pending.key)).toMatchObject({ state: "awaiting_approval" });
  });

  it("rejected in a run state while the record is approved: nothing is charged, and the record stays approved", async () => {
    const { orderId, taskId, pending, saved } = await interrupted();
    await operator.approve(pending.key, { by: "alice", why: "ok" });
    const other = await restored(taskId, orderId, saved, "reject");
    const result = await run(other.agent, other.state);
    expect(result.finalOutput).toBe(`order ${orderId} is paid`);
    expect((await ledger(orderId)).charges).toBe(0);
    expect(await store.get(pending.key)).toMatchObject({ state: "approved" });
  });
});

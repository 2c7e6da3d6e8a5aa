// Mastra's own Agent, on a Mastra with a PostgresStore (where its suspended runs are kept), with a charge whose
// tool has an approval policy: the run suspends for the tool's approval with the record's request, Mastra's
// `approveToolCallGenerate` decides nothing, and only the operator's decision on the record lets the charge
// run — once, however many resumes — or tells the model no.

import { Mastra } from "@mastra/core";
import { PostgresStore } from "@mastra/pg";
import { MemoryOrderBook, pendingOrder } from "@once/order-agent";
import { PaymentsClient } from "@once/payments";
import { RedisOperatorStore } from "@once/redis";
import { postgresUrl, randomSchema, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onceRun } from "../src/index.js";
import { payments, prefix, store, useAgentWorld } from "./agent-world.js";
import { approvalTools } from "./approval-tools.js";
import { orderAgent, PROMPT, stepsOf } from "./order-agent.js";
import { orderAgentModel } from "./order-agent-model.js";

useAgentWorld("mastra-approval");
const schema = randomSchema("mastra-approval");

let redis: Redis;
let operator: RedisOperatorStore;
let storage: PostgresStore;
beforeAll(async () => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  operator = new RedisOperatorStore({ redis, prefix });
  storage = new PostgresStore({ id: "once-test", connectionString: postgresUrl(), schemaName: schema });
  await storage.init();
});
afterAll(async () => {
  redis.disconnect();
  await storage.close();
  const client = new pg.Client({ connectionString: postgresUrl() });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
});

let serial = 0;
const newOrder = () => `order-${process.pid}-${++serial}`;

async function ledger(orderId: string) {
  const client = new PaymentsClient(payments.url);
  return {
    charges: (await client.findCharges({ orderId })).length,
    emails: (await client.findEmails({ orderId })).length,
  };
}

/** The agent in a fresh "process": a new once run, model and Mastra, on the shared storage and order book. */
function agentFor(orderId: string, orders: MemoryOrderBook) {
  const { model, answers } = orderAgentModel(orderId, { amount: () => 4_200 });
  const run = onceRun({ runId: `run-${orderId}`, store, tools: approvalTools(payments.url, orders) });
  const mastra = new Mastra({
    storage,
    agents: { order: orderAgent(run.model(model), run.tools) },
    logger: false,
  });
  return { agent: mastra.getAgent("order"), run, answers };
}

/** A run suspended on its charge: the record's request, and the call Mastra suspended for. */
async function suspendedRun() {
  const orderId = newOrder();
  const orders = new MemoryOrderBook();
  await orders.create(pendingOrder(orderId));
  const { agent, run, answers } = agentFor(orderId, orders);
  const first = await agent.generate(PROMPT, { runId: run.runId, maxSteps: 10 });
  expect(first.finishReason).toBe("suspended");
  const suspended = first.suspendPayload as { toolCallId: string; toolName: string };
  expect(suspended.toolName).toBe("charge_customer");
  const asked = run.approvalRequest(suspended.toolCallId);
  if (!asked) throw new Error(`no approval request for ${suspended.toolCallId}`);
  expect(answers()).toBe(2);
  return { orderId, orders, agent, run, toolCallId: suspended.toolCallId, asked };
}

/** What the model was told of the charge, in the run's steps. */
function chargeResult(result: {
  steps: { toolResults: { payload: { toolName: string; result?: unknown } }[] }[];
}) {
  return result.steps
    .flatMap((step) => step.toolResults)
    .find((part) => part.payload.toolName === "charge_customer")?.payload.result;
}

/** What the model was told of a tool call, from the steps' content (a result, or an error in words). */
function toldOfCharge(
  result: { steps: { content: { type: string; toolCallId?: string; output?: unknown }[] }[] },
  toolCallId: string,
) {
  return result.steps
    .flatMap((step) => step.content)
    .find((part) => part.type === "tool-result" && part.toolCallId === toolCallId)?.output;
}

describe("onceRun with Mastra's Agent: a charge that needs approval", () => {
  it("suspends with the record's request; Mastra's approveToolCall changes nothing: suspended again, the same request", async () => {
    const { orderId, agent, run, toolCallId, asked } = await suspendedRun();
    const record = await store.get(asked.key);
    expect(record).toMatchObject({ state: "awaiting_approval", approval: { reason: asked.reason } });
    expect(asked).toMatchObject({
      tool: "charge_customer",
      reason: "a charge of 4200 cents is over 1000",
      requestedAt: record?.approval?.requestedAt,
      expiresAt: record?.approval?.expiresAt,
      approve: `once approve ${asked.key}`,
    });
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });

    for (let i = 0; i < 2; i++) {
      const again = await agent.approveToolCallGenerate({ runId: run.runId, toolCallId });
      expect(again.finishReason).toBe("suspended");
      expect(again.suspendPayload).toMatchObject({ toolCallId, toolName: "charge_customer" });
      expect(run.approvalRequest(toolCallId)).toEqual(asked);
    }
    expect(await store.get(asked.key)).toMatchObject({ state: "awaiting_approval", fence: record?.fence });
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });
  });

  it("approved by the operator: two resumes at once, each in a fresh Mastra, charge once and both finish", async () => {
    const { orderId, orders, run, toolCallId, asked } = await suspendedRun();
    await operator.approve(asked.key, { by: "alice@example.com", why: "customer confirmed by phone" });
    const resumers = [agentFor(orderId, orders), agentFor(orderId, orders)];
    const results = await Promise.all(
      resumers.map(({ agent }) => agent.approveToolCallGenerate({ runId: run.runId, toolCallId })),
    );
    for (const result of results) {
      expect(result.finishReason).toBe("stop");
      expect(result.text).toBe(`order ${orderId} is paid`);
      expect(chargeResult(result as never)).toMatchObject({ chargeId: expect.any(String) });
    }
    // Both told the model the same charge: the one the provider made.
    expect(chargeResult(results[0] as never)).toEqual(chargeResult(results[1] as never));
    const client = new PaymentsClient(payments.url);
    const charges = await client.findCharges({ orderId });
    expect(charges.map((c) => c.amount)).toEqual([4_200]);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    // Turns 2 and 3 asked once between the two resumes; the turns before were not asked again.
    expect(resumers.reduce((sum, r) => sum + r.answers(), 0)).toBe(2);
    expect(await store.get(asked.key)).toMatchObject({
      state: "done",
      approval: { decision: { as: "approved", by: "alice@example.com" } },
    });
  });

  it("denied by the operator: Mastra's approval gets the stored denial, told to the model, and nothing is charged", async () => {
    const { orderId, orders, run, toolCallId, asked } = await suspendedRun();
    await operator.deny(asked.key, { by: "bob", why: "over the limit" });
    const { agent } = agentFor(orderId, orders);
    const result = await agent.approveToolCallGenerate({ runId: run.runId, toolCallId });
    expect(result.finishReason).toBe("stop");
    expect(toldOfCharge(result as never, toolCallId)).toEqual({
      type: "error-text",
      value: expect.stringMatching(
        /^charge_customer failed \(key \w+\): ApprovalDeniedError: denied by bob: over the limit$/,
      ),
    });
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });
    expect(await store.get(asked.key)).toMatchObject({ state: "failed", error: { code: "denied" } });
  });

  it("declined in Mastra: nothing runs, and the record still awaits the operator", async () => {
    const { orderId, agent, run, toolCallId, asked } = await suspendedRun();
    const result = await agent.declineToolCallGenerate({ runId: run.runId, toolCallId, reason: "no" });
    // Mastra told the model its own answer, and made no call: the record was not asked, and is not denied.
    expect(result.finishReason).toBe("stop");
    expect(toldOfCharge(result as never, toolCallId)).toEqual({ type: "text", value: "no" });
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });
    expect(await store.get(asked.key)).toMatchObject({ state: "awaiting_approval" });
  });

  it("run again from its first message (Mastra's snapshot not used): the same request while it waits, one charge once approved", async () => {
    const { orderId, orders, toolCallId, asked } = await suspendedRun();
    const again = agentFor(orderId, orders);
    const waiting = await again.agent.generate(PROMPT, { runId: again.run.runId, maxSteps: 10 });
    expect(waiting.finishReason).toBe("suspended");
    expect(waiting.suspendPayload).toMatchObject({ toolCallId });
    expect(again.run.approvalRequest(toolCallId)).toEqual(asked);
    expect(again.answers()).toBe(0);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });

    await operator.approve(asked.key, { by: "alice@example.com", why: "customer confirmed by phone" });
    const fresh = agentFor(orderId, orders);
    const done = await fresh.agent.generate(PROMPT, { runId: fresh.run.runId, maxSteps: 10 });
    expect(done.finishReason).toBe("stop");
    expect(done.text).toBe(`order ${orderId} is paid`);
    expect(stepsOf(done as never)[1]?.map((call) => call.tool)).toEqual(["charge_customer", "send_email"]);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });
});

// A once effect tool with an approval policy in LangGraph's own runtime (a StateGraph with a ToolNode, and
// langchain's createAgent, on a MemorySaver): the graph interrupts with the record's request, a resume decides
// nothing, and only the operator's decision on the record lets the charge run — once — or tells the model no.

import { AIMessage, type BaseMessage, ToolMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { MemoryOrderBook, pendingOrder } from "@once/order-agent";
import { PaymentsClient } from "@once/payments";
import { RedisOperatorStore } from "@once/redis";
import { redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApprovalInterrupt, onceGraph } from "../src/index.js";
import { payments, prefix, store, useAgentWorld } from "./agent-world.js";
import { approvalTools } from "./approval-tools.js";
import { agentGraph, input, reactGraph } from "./graphs.js";
import { OrderAgentChatModel } from "./order-agent-model.js";

useAgentWorld("langgraph-approval");

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

/** The interrupts a run ended on, as the graph's invoke hands them back. */
function interruptsOf(result: unknown): ApprovalInterrupt[] {
  const raised = (result as { __interrupt__?: { value: ApprovalInterrupt }[] }).__interrupt__ ?? [];
  return raised.map((item) => item.value);
}

describe.each([
  ["a StateGraph with LangGraph's ToolNode", reactGraph],
  ["langchain's createAgent", agentGraph],
] as const)("%s: a charge that needs approval", (_name, build) => {
  async function start() {
    const orderId = newOrder();
    const orders = new MemoryOrderBook();
    await orders.create(pendingOrder(orderId));
    const model = new OrderAgentChatModel(orderId, { amount: () => 4_200 });
    const once = onceGraph({ store, tools: approvalTools(payments.url, orders) });
    const graph = build(once.model(model, "order-agent"), once.tools, new MemorySaver());
    const thread = { configurable: { thread_id: `thread-${orderId}` } };
    const first = await graph.invoke(input(), thread);
    const [asked, ...more] = interruptsOf(first);
    if (!asked) throw new Error(`the graph did not interrupt: ${JSON.stringify(first)}`);
    expect(more).toEqual([]);
    return { orderId, graph, thread, model, asked };
  }

  it("interrupts with the record's request; a resume that approves it changes nothing: the same request again", async () => {
    const { orderId, graph, thread, model, asked } = await start();
    const record = await store.get(asked.key);
    expect(record).toMatchObject({ state: "awaiting_approval", approval: { reason: asked.reason } });
    expect(asked).toMatchObject({
      once: "ONCE_APPROVAL_PENDING",
      tool: "charge_customer",
      reason: "a charge of 4200 cents is over 1000",
      requestedAt: record?.approval?.requestedAt,
      expiresAt: record?.approval?.expiresAt,
      approve: `once approve ${asked.key}`,
    });
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });

    for (const resume of [{ approved: true }, "yes", true]) {
      const again = await graph.invoke(new Command({ resume }), thread);
      expect(interruptsOf(again)).toEqual([asked]);
    }
    expect(await store.get(asked.key)).toMatchObject({ state: "awaiting_approval", fence: record?.fence });
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });
    // Turns 0 and 1 asked; nothing after, however often the thread was resumed.
    expect(model.answers()).toBe(2);
  });

  it("approved by the operator: a resume that says no still charges once (the record decides), and resuming again charges nothing more", async () => {
    const { orderId, graph, thread, model, asked } = await start();
    await operator.approve(asked.key, { by: "alice@example.com", why: "customer confirmed by phone" });
    const done = await graph.invoke(new Command({ resume: { approved: false } }), thread);
    expect(interruptsOf(done)).toEqual([]);
    expect((done.messages as BaseMessage[]).at(-1)?.content).toBe(`order ${orderId} is paid`);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    expect(model.answers()).toBe(4);
    expect(await store.get(asked.key)).toMatchObject({
      state: "done",
      approval: { decision: { as: "approved", by: "alice@example.com" } },
    });
    const after = await graph.invoke(new Command({ resume: "again" }), thread);
    expect(interruptsOf(after)).toEqual([]);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("denied by the operator: a resume that approves it tells the model the stored denial, and nothing is charged", async () => {
    const { orderId, graph, thread, asked } = await start();
    await operator.deny(asked.key, { by: "bob", why: "over the limit" });
    const done = await graph.invoke(new Command({ resume: { approved: true } }), thread);
    expect(interruptsOf(done)).toEqual([]);
    const messages = done.messages as BaseMessage[];
    const told = messages.find(
      (m): m is ToolMessage => ToolMessage.isInstance(m) && m.name === "charge_customer",
    );
    expect(String(told?.content)).toMatch(
      /charge_customer failed \(key \w+\): ApprovalDeniedError: denied by bob: over the limit/,
    );
    const charge = messages
      .flatMap((m) => (AIMessage.isInstance(m) ? (m.tool_calls ?? []) : []))
      .find((call) => call.name === "charge_customer");
    expect(told?.tool_call_id).toBe(charge?.id);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });
    expect(await store.get(asked.key)).toMatchObject({ state: "failed", error: { code: "denied" } });
  });

  it("run again from the prompt on a fresh saver (the checkpoint lost): the same request, then one charge once approved", async () => {
    const { orderId, asked } = await start();
    const again = async () => {
      const orders = new MemoryOrderBook();
      await orders.create(pendingOrder(orderId));
      const model = new OrderAgentChatModel(orderId, { amount: () => 4_200 });
      const once = onceGraph({ store, tools: approvalTools(payments.url, orders) });
      const graph = build(once.model(model, "order-agent"), once.tools, new MemorySaver());
      const result = await graph.invoke(input(), { configurable: { thread_id: `thread-${orderId}` } });
      return { result, modelCalls: model.answers() };
    };
    const waiting = await again();
    expect(interruptsOf(waiting.result)).toEqual([asked]);
    expect(waiting.modelCalls).toBe(0);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });

    await operator.approve(asked.key, { by: "alice@example.com", why: "customer confirmed by phone" });
    const done = await again();
    expect(interruptsOf(done.result)).toEqual([]);
    expect((done.result.messages as BaseMessage[]).at(-1)?.content).toBe(`order ${orderId} is paid`);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });
});

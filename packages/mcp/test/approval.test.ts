// An MCP effect tool with an approval policy, called through the MCP SDK's own client: a call that needs a
// person's yes is answered with a pending result naming the record's request, and runs nothing; once the
// operator approved the record, the same call runs once.

import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { PendingApproval } from "@once/agent";
import { defineTool } from "@once/core";
import { RedisOperatorStore } from "@once/redis";
import { redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callOnceTool, ONCE_APPROVAL_META, ONCE_ERROR_META, ONCE_REPLAYED_META } from "../src/index.js";
import { orderTools } from "./tools.js";
import { chargesOf, connect, payments, prefix, store, useMcpWorld } from "./world.js";

useMcpWorld("mcp-approval");

let redis: Redis;
let operator: RedisOperatorStore;
beforeAll(() => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  operator = new RedisOperatorStore({ redis, prefix });
});
afterAll(() => redis.disconnect());

let serial = 0;
const newOrder = () => `order-${process.pid}-${++serial}`;
const textOf = (result: CallToolResult) =>
  result.content.map((part) => (part as { text: string }).text).join();

/** The order tools, the charge needing a person's yes for any amount over 1000. */
function approvalTools() {
  const tools = orderTools(payments.url);
  const chargeCustomer = defineTool({
    ...tools.chargeCustomer,
    approval: (input) => (input.amount > 1_000 ? `a charge of ${input.amount} is over 1000` : undefined),
  });
  return tools.all.map((t) => (t.name === chargeCustomer.name ? chargeCustomer : t));
}

async function pendingCall() {
  const orderId = newOrder();
  const client = await connect(approvalTools());
  const step = { taskId: `task-${orderId}`, stepId: "charge" };
  const call = () => callOnceTool(client, "charge_customer", { orderId, amount: 4_200 }, step);
  const first = await call();
  const pending = first._meta?.[ONCE_APPROVAL_META] as PendingApproval | undefined;
  if (!pending) throw new Error(`no pending result: ${textOf(first)}`);
  return { orderId, client, step, call, first, pending };
}

describe("an MCP effect call that needs approval", () => {
  it("is answered with the record's pending request — key, tool, reason, expiry, how to approve — and runs nothing", async () => {
    const { orderId, first, pending } = await pendingCall();
    const record = await store.get(pending.key);
    expect(record).toMatchObject({ state: "awaiting_approval", tool: "charge_customer" });
    expect(first.isError).toBe(true);
    expect(first._meta?.[ONCE_ERROR_META]).toBe("ONCE_APPROVAL_PENDING");
    expect(pending).toEqual({
      key: record?.key,
      tool: "charge_customer",
      reason: "a charge of 4200 is over 1000",
      requestedAt: record?.approval?.requestedAt,
      expiresAt: record?.approval?.expiresAt,
      approve: `once approve ${record?.key}`,
    });
    const text = textOf(first);
    expect(text).toContain("charge_customer waits for approval: a charge of 4200 is over 1000");
    expect(text).toContain(`once approve ${pending.key}`);
    expect(text).toContain(new Date(pending.expiresAt).toISOString());
    expect(chargesOf(orderId)).toBe(0);
  });

  it("called again while it waits: the same request, not a second one, and still nothing charged", async () => {
    const { orderId, call, pending } = await pendingCall();
    const before = await store.get(pending.key);
    const again = await call();
    expect(again.isError).toBe(true);
    expect(again._meta?.[ONCE_APPROVAL_META]).toEqual(pending);
    expect(await store.get(pending.key)).toMatchObject({ fence: before?.fence, approval: before?.approval });
    expect(chargesOf(orderId)).toBe(0);
  });

  it("approved by the operator: the same call runs once, and is replayed after", async () => {
    const { orderId, call, pending } = await pendingCall();
    await operator.approve(pending.key, { by: "alice@example.com", why: "customer confirmed" });
    const ran = await call();
    expect(ran.isError).toBeUndefined();
    expect(ran.structuredContent).toMatchObject({ amount: 4_200 });
    expect(ran._meta?.[ONCE_REPLAYED_META]).toBe(false);
    const replayed = await call();
    expect(replayed.structuredContent).toEqual(ran.structuredContent);
    expect(replayed._meta?.[ONCE_REPLAYED_META]).toBe(true);
    expect(chargesOf(orderId)).toBe(1);
  });

  it("approved by the operator, called by two clients at once: one charge, the same answer", async () => {
    const { orderId, step, pending } = await pendingCall();
    await operator.approve(pending.key, { by: "alice", why: "ok" });
    const clients = await Promise.all([connect(approvalTools()), connect(approvalTools())]);
    const [a, b] = await Promise.all(
      clients.map((client) => callOnceTool(client, "charge_customer", { orderId, amount: 4_200 }, step)),
    );
    expect(a?.isError).toBeUndefined();
    expect(a?.structuredContent).toEqual(b?.structuredContent);
    expect(chargesOf(orderId)).toBe(1);
  });

  it("denied by the operator: the call gets the denial, replayed on every retry, and nothing is charged", async () => {
    const { orderId, call, pending } = await pendingCall();
    await operator.deny(pending.key, { by: "bob", why: "over the limit" });
    for (const answer of [await call(), await call()]) {
      expect(answer.isError).toBe(true);
      expect(answer._meta?.[ONCE_ERROR_META]).toBe("ONCE_CALL_FAILED");
      expect(textOf(answer)).toBe(
        "charge_customer failed: ApprovalDeniedError: denied by bob: over the limit",
      );
    }
    expect(chargesOf(orderId)).toBe(0);
  });

  it("a call the policy gives no reason for runs at once", async () => {
    const orderId = newOrder();
    const client = await connect(approvalTools());
    const small = await callOnceTool(
      client,
      "charge_customer",
      { orderId, amount: 500 },
      { taskId: `task-${orderId}`, stepId: "charge" },
    );
    expect(small.isError).toBeUndefined();
    expect(chargesOf(orderId)).toBe(1);
  });
});

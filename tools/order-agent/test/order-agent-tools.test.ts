import { randomBytes } from "node:crypto";
import type { EffectContext } from "@once/core";
import { PaymentsClient, PaymentsError, type PaymentsServer, startPaymentsServer } from "@once/payments";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { classifyPaymentsError, MemoryOrderBook, ONCE_KEY_METADATA, orderAgentTools } from "../src/index.js";

let payments: PaymentsServer;

beforeAll(async () => {
  payments = await startPaymentsServer({ latency: "none" });
});
afterAll(async () => {
  await payments.close();
});

function effectContext(key = randomBytes(32).toString("hex")): EffectContext {
  return {
    tool: "t",
    namespace: "default",
    taskId: "task-1",
    stepId: "step-2",
    attempt: 1,
    signal: new AbortController().signal,
    key,
    fence: 1,
    // Run directly, outside a worker: there is no lease to lose.
    assertLease: async () => {},
  };
}

const plainContext = { tool: "t", namespace: "default", attempt: 1, signal: new AbortController().signal };

describe("orderAgentTools", () => {
  it("declares read, write and three effect tools with reconcile hooks", () => {
    const tools = orderAgentTools();
    expect(tools.all.map((tool) => [tool.name, tool.kind, typeof tool.reconcile])).toEqual([
      ["get_order_status", "read", "undefined"],
      ["set_status", "write", "undefined"],
      ["charge_customer", "effect", "function"],
      ["send_email", "effect", "function"],
      ["create_ticket", "effect", "function"],
    ]);
  });

  it("refuses to run declarations made without a provider and an order book", async () => {
    const tools = orderAgentTools();
    await expect(
      tools.chargeCustomer.run({ orderId: "o", amount: 100, currency: "eur" }, effectContext(), undefined),
    ).rejects.toThrow(/a worker runs them/);
  });

  it("reads and writes orders", async () => {
    const orders = new MemoryOrderBook();
    await orders.create({
      orderId: "o-1",
      status: "pending",
      amount: 1200,
      currency: "eur",
      email: "a@example.com",
    });
    const tools = orderAgentTools({ paymentsUrl: payments.url, orders });
    expect(await tools.getOrderStatus.run({ orderId: "o-1" }, plainContext, undefined)).toMatchObject({
      status: "pending",
    });
    expect(await tools.setStatus.run({ orderId: "o-1", status: "paid" }, plainContext, undefined)).toEqual({
      orderId: "o-1",
      status: "paid",
    });
    expect((await orders.get("o-1"))?.status).toBe("paid");
    await expect(tools.getOrderStatus.run({ orderId: "nope" }, plainContext, undefined)).rejects.toThrow(
      /no order/,
    );
  });

  it.each([
    ["charge_customer", "charges", { orderId: "o-2", amount: 700, currency: "eur" }],
    ["send_email", "emails", { orderId: "o-2", to: "a@example.com", subject: "Receipt", body: "thanks" }],
    ["create_ticket", "tickets", { orderId: "o-2", subject: "Help" }],
  ] as const)("%s records the key as provider metadata and reconciles by it", async (name, kind, input) => {
    const tools = orderAgentTools({ paymentsUrl: payments.url, orders: new MemoryOrderBook() });
    const tool = tools.all.find((t) => t.name === name);
    if (!tool?.reconcile) throw new Error(`no reconcile on ${name}`);
    const ctx = effectContext();
    const before = payments.ledger()[kind].total;
    const notYet = await tool.reconcile(input as never, ctx);
    expect(notYet).toEqual({ applied: false });

    const result = await tool.run(input as never, ctx as never, undefined);
    expect(payments.ledger()[kind].total).toBe(before + 1);
    const client = new PaymentsClient(payments.url);
    const found = await client[
      kind === "charges" ? "findCharges" : kind === "emails" ? "findEmails" : "findTickets"
    ]({
      metadata: { [ONCE_KEY_METADATA]: ctx.key },
    });
    expect(found).toHaveLength(1);

    // A reconcile after a lost answer finds the same effect and returns what run returned.
    expect(await tool.reconcile(input as never, ctx)).toEqual({ applied: true, result });
    expect(tool.output.parse(result)).toEqual(result);
  });
});

describe("classifyPaymentsError", () => {
  const client = () => new PaymentsClient(payments.url);
  const order = { amount: 500, currency: "eur", orderId: "o-3" };

  it("a request the provider rejects (4xx) is terminal: nothing happened and repeating cannot help", async () => {
    const error = await client()
      .charge({ ...order, amount: -1 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsError);
    expect(classifyPaymentsError(error)).toBe("terminal");
    expect(classifyPaymentsError(new PaymentsError("declined", { code: "refused", status: 402 }))).toBe(
      "terminal",
    );
  });

  it("a refusal before acting (503) is not_applied; a lost answer is unknown", async () => {
    const refused = await client()
      .charge(order, { headers: { "X-Fail": "before" } })
      .catch((e: unknown) => e);
    expect(classifyPaymentsError(refused)).toBe("not_applied");
    const lost = await client()
      .charge(order, { headers: { "X-Fail": "after" } })
      .catch((e: unknown) => e);
    expect((lost as PaymentsError).code).toBe("connection_lost");
    expect(classifyPaymentsError(lost)).toBe("unknown");
  });

  it("timeouts, rate limits, 5xx and foreign errors may have acted or may act later: unknown or retry", () => {
    expect(classifyPaymentsError(new PaymentsError("aborted", { code: "aborted" }))).toBe("unknown");
    expect(classifyPaymentsError(new PaymentsError("boom", { code: "server_error", status: 500 }))).toBe(
      "unknown",
    );
    expect(classifyPaymentsError(new PaymentsError("slow down", { code: "refused", status: 429 }))).toBe(
      "not_applied",
    );
    expect(classifyPaymentsError(new PaymentsError("refused", { code: "refused" }))).toBe("not_applied");
    expect(classifyPaymentsError(new Error("socket hang up"))).toBe("unknown");
    expect(classifyPaymentsError("nope")).toBe("unknown");
  });
});

import type { EffectContext } from "@once/core";
import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { generateText, stepCountIs, tool } from "ai";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MemoryOrderBook, orderAgentModel, orderAgentTools, orderAgentTurn } from "../src/index.js";

let payments: PaymentsServer;
beforeAll(async () => {
  payments = await startPaymentsServer({ latency: "none" });
});
afterAll(async () => {
  await payments.close();
});

const order = {
  orderId: "o-model-1",
  status: "pending" as const,
  amount: 4_200,
  currency: "eur",
  email: "ada@example.com",
};

/** The order agent's tools as plain AI SDK tools, each call run directly (no once in between). */
async function plainTools() {
  const orders = new MemoryOrderBook();
  await orders.create(order);
  const declared = orderAgentTools({ paymentsUrl: payments.url, orders });
  const context = (toolCallId: string): EffectContext => ({
    tool: "t",
    namespace: "default",
    taskId: "task-1",
    stepId: toolCallId,
    attempt: 1,
    signal: new AbortController().signal,
    key: toolCallId,
    fence: 1,
    assertLease: async () => {},
  });
  const tools = Object.fromEntries(
    declared.all.map((t) => [
      t.name,
      tool({
        inputSchema: t.input,
        execute: (input: unknown, { toolCallId }: { toolCallId: string }) =>
          t.run(input as never, context(toolCallId), undefined),
      } as never),
    ]),
  );
  return { tools, orders };
}

it("settles an order with the order agent's own tools: read, charge and email, set status, answer", async () => {
  const { tools, orders } = await plainTools();
  const agent = orderAgentModel(order.orderId);
  const result = await generateText({
    model: agent.model,
    tools,
    stopWhen: stepCountIs(10),
    prompt: "Settle the order.",
  });
  expect(result.steps.map((step) => step.toolCalls.map((call) => call.toolName).sort())).toEqual([
    ["get_order_status"],
    ["charge_customer", "send_email"],
    ["set_status"],
    [],
  ]);
  expect(result.text).toBe(`order ${order.orderId} is paid`);
  expect(agent.calls()).toBe(4);
  expect((await orders.get(order.orderId))?.status).toBe("paid");
  // The email goes to the customer the read tool returned.
  const emailCall = result.steps[1]?.toolCalls.find((call) => call.toolName === "send_email");
  expect(emailCall?.input).toMatchObject({ to: order.email });
});

it("asked the same prompt again, it answers with another amount and new tool-call ids", async () => {
  const agent = orderAgentModel(order.orderId);
  const prompt = [
    { role: "user" as const, content: [{ type: "text" as const, text: "Settle the order." }] },
    {
      role: "tool" as const,
      content: [
        {
          type: "tool-result" as const,
          toolCallId: "call_read",
          toolName: "get_order_status",
          output: { type: "json" as const, value: order },
        },
      ],
    },
  ];
  expect(orderAgentTurn(prompt)).toBe(1);
  const ask = async () => {
    const { content } = await agent.model.doGenerate({ prompt });
    return content.flatMap((part) => (part.type === "tool-call" ? [part] : []));
  };
  const answers = [await ask(), await ask(), await ask()];
  const ids = answers.flatMap((calls) => calls.map((call) => call.toolCallId));
  expect(new Set(ids).size).toBe(ids.length);
  const amounts = answers.map(
    (calls) => JSON.parse(calls.find((c) => c.toolName === "charge_customer")?.input ?? "{}").amount,
  );
  // Three draws from 9,000 amounts: all equal only by a 1-in-81-million chance.
  expect(new Set(amounts).size).toBeGreaterThan(1);
});

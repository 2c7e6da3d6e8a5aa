// The order agent's once tools (tools/order-agent's, on the payments stand-in, which ignores idempotency keys:
// only once stands between a resumed run and a second charge or email), over an order book of its own, and
// the SDK agent a test runs them with.

import { type AnyTool, defineTool } from "@once/core";
import { MemoryOrderBook, orderAgentTools } from "@once/order-agent";
import { Agent, type Model } from "@openai/agents";

/** Where a test can stop a tool: right after the provider charged, or right before the email is sent. */
export interface AgentToolHooks {
  afterCharge?: () => Promise<void> | void;
  beforeEmail?: () => Promise<void> | void;
}

const INSTRUCTIONS = "You settle orders: read the order, charge it, email the receipt, mark it paid.";
export const PROMPT = "Settle the order.";

/** The order agent's four tools, over an order book holding the one order (4200 cents, pending). */
export async function orderTools(paymentsUrl: string, orderId: string, hooks: AgentToolHooks = {}) {
  const orders = new MemoryOrderBook();
  await orders.create({
    orderId,
    status: "pending",
    amount: 4_200,
    currency: "eur",
    email: "customer@example.com",
  });
  const tools = orderAgentTools({ paymentsUrl, orders });
  const chargeCustomer = hooked(tools.chargeCustomer, { after: hooks.afterCharge });
  const sendEmail = hooked(tools.sendEmail, { before: hooks.beforeEmail });
  return { all: [tools.getOrderStatus, chargeCustomer, sendEmail, tools.setStatus] as AnyTool[] };
}

/** The agent as a user writes it, on the task's model and tools. */
export function orderAgent(model: Model, tools: Agent["tools"], instructions = INSTRUCTIONS): Agent {
  return new Agent({ name: "order agent", instructions, model, tools });
}

function hooked<T extends AnyTool>(tool: T, hooks: { before?: () => unknown; after?: () => unknown }): T {
  return defineTool({
    ...tool,
    run: async (input: unknown, ctx: never, prepared: unknown) => {
      await hooks.before?.();
      const result = await tool.run(input, ctx, prepared);
      await hooks.after?.();
      return result;
    },
  } as never) as T;
}

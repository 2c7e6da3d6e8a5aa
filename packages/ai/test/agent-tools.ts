// The order agent's own tools (@once/order-agent) for the @once/ai tests, against the payments stand-in (a real
// HTTP server that ignores idempotency keys): only once stands between a resumed loop and a second charge or
// email. The effect tools get hooks where a test can stop them.

import { defineTool } from "@once/core";
import { type Order, type OrderBook, orderAgentTools } from "@once/order-agent";

/** Where a test can stop a tool: right after the provider charged, or right before the email is sent. */
export interface AgentToolHooks {
  afterCharge?: () => Promise<void> | void;
  beforeEmail?: () => Promise<void> | void;
}

/** A pending order for the agent to settle. */
export function pendingOrder(orderId: string): Order {
  return { orderId, status: "pending", amount: 4_200, currency: "eur", email: "customer@example.com" };
}

export function agentTools(paymentsUrl: string, orders: OrderBook, hooks: AgentToolHooks = {}) {
  const tools = orderAgentTools({ paymentsUrl, orders });
  const chargeCustomer = defineTool({
    ...tools.chargeCustomer,
    run: async (input, ctx, prepared) => {
      await ctx.assertLease(); // the last look before the request leaves
      const charge = await tools.chargeCustomer.run(input, ctx, prepared);
      await hooks.afterCharge?.();
      return charge;
    },
  });
  const sendEmail = defineTool({
    ...tools.sendEmail,
    run: async (input, ctx, prepared) => {
      await hooks.beforeEmail?.();
      await ctx.assertLease();
      return tools.sendEmail.run(input, ctx, prepared);
    },
  });
  return {
    chargeCustomer,
    sendEmail,
    all: [tools.getOrderStatus, chargeCustomer, sendEmail, tools.setStatus],
  };
}

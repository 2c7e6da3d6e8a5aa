// The order agent's tools with places where a crash test can stop them, for the framework packages' tests
// against the payments stand-in (a real HTTP server that ignores idempotency keys): only once stands between a
// resumed loop and a second charge or email.

import { defineTool } from "@once/core";
import { orderAgentTools } from "./order-agent-tools.js";
import type { Order, OrderBook } from "./order-book.js";

/**
 * Where a test can stop a tool: right after the order was read, right after the provider charged, or right
 * before the email is sent.
 */
export interface OrderAgentToolHooks {
  afterRead?: () => Promise<void> | void;
  afterCharge?: () => Promise<void> | void;
  beforeEmail?: () => Promise<void> | void;
}

/** A pending order for the agent to settle. */
export function pendingOrder(orderId: string): Order {
  return { orderId, status: "pending", amount: 4_200, currency: "eur", email: "customer@example.com" };
}

/**
 * The order agent's tools, running against `paymentsUrl` and `orders`, with the hooks in place. The effect tools
 * look at their lease once more right before the request leaves.
 */
export function hookedOrderAgentTools(
  paymentsUrl: string,
  orders: OrderBook,
  hooks: OrderAgentToolHooks = {},
) {
  const tools = orderAgentTools({ paymentsUrl, orders });
  const { afterRead } = hooks;
  // Without an afterRead hook the read tool is the order agent's own, untouched.
  const getOrderStatus = afterRead
    ? defineTool({
        ...tools.getOrderStatus,
        run: async (input, ctx, prepared) => {
          const order = await tools.getOrderStatus.run(input, ctx, prepared);
          await afterRead();
          return order;
        },
      })
    : tools.getOrderStatus;
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
    all: [getOrderStatus, chargeCustomer, sendEmail, tools.setStatus],
  };
}

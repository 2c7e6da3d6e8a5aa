// The order agent's tools with a charge that needs a person's yes for any amount over 10.00 (the order agent's
// model always charges more): the approval tests' tools, in the test process and in approval-process.ts.

import { type AnyTool, defineTool } from "@once/core";
import type { OrderBook } from "@once/order-agent";
import { hookedOrderAgentTools, type OrderAgentToolHooks } from "@once/order-agent";

export function approvalTools(
  paymentsUrl: string,
  orders: OrderBook,
  hooks: OrderAgentToolHooks = {},
): AnyTool[] {
  const tools = hookedOrderAgentTools(paymentsUrl, orders, hooks);
  const chargeCustomer = defineTool({
    ...tools.chargeCustomer,
    approval: (input) =>
      input.amount > 1_000 ? `a charge of ${input.amount} cents is over 1000` : undefined,
  });
  return tools.all.map((t) => (t.name === chargeCustomer.name ? chargeCustomer : t));
}

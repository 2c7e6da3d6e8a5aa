import type { OrderAgentTools } from "@once/order-agent";
import type { JournalStep } from "./task-journal.js";

/** What the agent wants to do next: a tool and its input. */
export interface PlannedCall {
  tool: string;
  input: unknown;
}

/**
 * The order agent's "planner": decides the next tool call from the task's history, as a model would
 * from its transcript. Read the order → charge → email a receipt → mark it paid; a charge that failed for
 * good (a declined card) opens a ticket and cancels the order. Undefined: the task is finished.
 * A pure function of the journal, so a restarted orchestrator reaches the same decisions.
 */
export function planNextStep(
  tools: OrderAgentTools,
  orderId: string,
  steps: readonly JournalStep[],
): PlannedCall | undefined {
  const find = (tool: string) => steps.find((step) => step.tool === tool);
  const read = find(tools.getOrderStatus.name);
  if (!read) return { tool: tools.getOrderStatus.name, input: { orderId } };
  const order = tools.getOrderStatus.output.parse(read.result);
  const status = find(tools.setStatus.name);
  if (status) return undefined;
  if (order.status !== "pending") return undefined;

  const charge = find(tools.chargeCustomer.name);
  if (!charge) {
    return {
      tool: tools.chargeCustomer.name,
      input: { orderId, amount: order.amount, currency: order.currency },
    };
  }
  if (charge.state === "failed") {
    if (!find(tools.createTicket.name)) {
      return {
        tool: tools.createTicket.name,
        input: { orderId, subject: `Payment failed for order ${orderId} (${charge.error?.name ?? "error"})` },
      };
    }
    return { tool: tools.setStatus.name, input: { orderId, status: "cancelled" } };
  }

  if (!find(tools.sendEmail.name)) {
    const { chargeId } = tools.chargeCustomer.output.parse(charge.result);
    return {
      tool: tools.sendEmail.name,
      input: {
        orderId,
        to: order.email,
        subject: `Receipt for order ${orderId}`,
        body: `We charged ${(order.amount / 100).toFixed(2)} ${order.currency.toUpperCase()} (charge ${chargeId}).`,
      },
    };
  }
  return { tool: tools.setStatus.name, input: { orderId, status: "paid" } };
}

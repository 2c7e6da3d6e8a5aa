import { type AnyTool, defineTool } from "@once/core";
import type { OrderAgentTools } from "@once/order-agent";

/** Charges over this many cents need a person's approval (the order agent's model charges 1000–9999). */
export const APPROVAL_THRESHOLD_CENTS = 3_000;

/**
 * The charge tool's policy: the reason a person must approve, or nothing. The reason names the order and the
 * amount, as a person reading it must see them; the approver reads them from it ({@link readReason}).
 */
export function chargeApproval(input: { orderId: string; amount: number }): string | undefined {
  return input.amount > APPROVAL_THRESHOLD_CENTS
    ? `a charge of ${input.amount} cents for order ${input.orderId} is over ${APPROVAL_THRESHOLD_CENTS}`
    : undefined;
}

/** The order and amount a reason of {@link chargeApproval} names; undefined for any other text. */
export function readReason(reason: string): { orderId: string; amount: number } | undefined {
  const match = /^a charge of (\d+) cents for order (\S+) is over \d+$/.exec(reason);
  return match ? { orderId: match[2] as string, amount: Number(match[1]) } : undefined;
}

/** The order agent's tools, the charge with the approval policy (once's `approval`). */
export function withChargeApproval(tools: OrderAgentTools): AnyTool[] {
  const charge = defineTool({ ...tools.chargeCustomer, approval: (input) => chargeApproval(input) });
  return tools.all.map((t) => (t.name === charge.name ? charge : t));
}

// Order tools for the @once/mcp tests, on the payments stand-in: one of each kind, and an effect that
// always fails terminally (a declined card) to see a stored failure replayed.

import { defineTool, type EffectContext } from "@once/core";
import { PaymentsClient } from "@once/payments";
import { z } from "zod";

export function orderTools(paymentsUrl: string) {
  const payments = new PaymentsClient(paymentsUrl);
  const statuses = new Map<string, string>();
  const metadata = (ctx: EffectContext) => ({ once_key: ctx.key });

  const getOrder = defineTool({
    name: "get_order",
    kind: "read",
    description: "Reads an order.",
    input: z.object({ orderId: z.string().min(1) }),
    output: z.object({ orderId: z.string(), status: z.string(), total: z.number() }),
    run: ({ orderId }) => ({ orderId, status: statuses.get(orderId) ?? "pending", total: 4_200 }),
  });
  const setStatus = defineTool({
    name: "set_status",
    kind: "write",
    description: "Sets an order's status.",
    input: z.object({ orderId: z.string().min(1), status: z.enum(["pending", "paid"]) }),
    output: z.object({ orderId: z.string(), status: z.string() }),
    run: (input) => {
      statuses.set(input.orderId, input.status);
      return input;
    },
  });
  const chargeCustomer = defineTool({
    name: "charge_customer",
    kind: "effect",
    description: "Charges the order's customer.",
    input: z.object({ orderId: z.string().min(1), amount: z.number().int().positive() }),
    output: z.object({ chargeId: z.string(), amount: z.number() }),
    run: async (input, ctx) => {
      await ctx.assertLease();
      const charge = await payments.charge(
        { ...input, currency: "eur", metadata: metadata(ctx) },
        { signal: ctx.signal },
      );
      return { chargeId: charge.id, amount: charge.amount };
    },
    reconcile: async (_input, ctx) => {
      const [found] = await payments.findCharges({ metadata: metadata(ctx) });
      return found
        ? { applied: true, result: { chargeId: found.id, amount: found.amount } }
        : { applied: false };
    },
  });
  let declines = 0;
  const chargeDeclined = defineTool({
    name: "charge_declined",
    kind: "effect",
    description: "A charge the provider always declines.",
    input: z.object({ orderId: z.string().min(1) }),
    output: z.object({ chargeId: z.string() }),
    run: () => {
      declines++;
      throw Object.assign(new Error("card declined"), { name: "CardDeclined" });
    },
    classifyError: () => "terminal",
  });
  return {
    getOrder,
    setStatus,
    chargeCustomer,
    chargeDeclined,
    all: [getOrder, setStatus, chargeCustomer, chargeDeclined],
    statuses,
    declines: () => declines,
  };
}

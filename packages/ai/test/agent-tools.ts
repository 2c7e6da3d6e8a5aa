// The order agent's tools for the @once/ai tests, against the payments stand-in (a real HTTP server that
// ignores idempotency keys): only once stands between a resumed loop and a second charge or email.

import { defineTool, type EffectContext } from "@once/core";
import { PaymentsClient } from "@once/payments";
import { z } from "zod";

/** Where a test can stop a tool: right after the provider charged, or right before the email is sent. */
export interface AgentToolHooks {
  afterCharge?: () => Promise<void> | void;
  beforeEmail?: () => Promise<void> | void;
}

export function agentTools(paymentsUrl: string, hooks: AgentToolHooks = {}) {
  const payments = new PaymentsClient(paymentsUrl);
  const statuses = new Map<string, string>();
  const metadata = (ctx: EffectContext) => ({ once_key: ctx.key });

  const getOrder = defineTool({
    name: "get_order",
    kind: "read",
    description: "Reads an order.",
    input: z.object({ orderId: z.string() }),
    output: z.object({ orderId: z.string(), status: z.string(), total: z.number() }),
    run: (input) => ({
      orderId: input.orderId,
      status: statuses.get(input.orderId) ?? "pending",
      total: 4_200,
    }),
  });
  const chargeCustomer = defineTool({
    name: "charge_customer",
    kind: "effect",
    description: "Charges the order's customer.",
    input: z.object({ orderId: z.string(), amount: z.number().int().positive() }),
    output: z.object({ chargeId: z.string(), amount: z.number() }),
    run: async (input, ctx) => {
      await ctx.assertLease();
      const charge = await payments.charge(
        { orderId: input.orderId, amount: input.amount, currency: "eur", metadata: metadata(ctx) },
        { signal: ctx.signal },
      );
      await hooks.afterCharge?.();
      return { chargeId: charge.id, amount: charge.amount };
    },
    reconcile: async (_input, ctx) => {
      const [found] = await payments.findCharges({ metadata: metadata(ctx) });
      return found
        ? { applied: true, result: { chargeId: found.id, amount: found.amount } }
        : { applied: false };
    },
  });
  const sendEmail = defineTool({
    name: "send_email",
    kind: "effect",
    description: "Emails the customer.",
    input: z.object({ orderId: z.string(), template: z.string() }),
    output: z.object({ emailId: z.string() }),
    run: async (input, ctx) => {
      await hooks.beforeEmail?.();
      await ctx.assertLease();
      const email = await payments.sendEmail(
        {
          orderId: input.orderId,
          to: "customer@example.com",
          subject: input.template,
          metadata: metadata(ctx),
        },
        { signal: ctx.signal },
      );
      return { emailId: email.id };
    },
    reconcile: async (_input, ctx) => {
      const [found] = await payments.findEmails({ metadata: metadata(ctx) });
      return found ? { applied: true, result: { emailId: found.id } } : { applied: false };
    },
  });
  const setStatus = defineTool({
    name: "set_status",
    kind: "write",
    description: "Sets the order's status.",
    input: z.object({ orderId: z.string(), status: z.string() }),
    output: z.object({ orderId: z.string(), status: z.string() }),
    run: (input) => {
      statuses.set(input.orderId, input.status);
      return input;
    },
  });
  return {
    getOrder,
    chargeCustomer,
    sendEmail,
    setStatus,
    all: [getOrder, chargeCustomer, sendEmail, setStatus],
    statuses,
  };
}

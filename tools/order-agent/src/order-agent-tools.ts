import { defineTool, type EffectContext } from "@once/core";
import { PaymentsClient } from "@once/payments";
import { z } from "zod";
import { classifyPaymentsError } from "./classify-payments-error.js";
import { ORDER_STATUSES, type OrderBook, orderSchema } from "./order-book.js";

export interface OrderAgentOptions {
  /** Base URL of the payments provider the effect tools call. */
  paymentsUrl: string;
  /** Where the read and write tools find orders. */
  orders: OrderBook;
}

const orderId = z.string().min(1).max(128);

/** The metadata field every effect carries, so a reconcile hook can ask the provider "did key K happen?". */
export const ONCE_KEY_METADATA = "once_key";

/**
 * The order agent's tools. With options they can run (in a worker); without, they are the declarations an
 * orchestrator dispatches, and running them throws. Every effect sends its key as provider metadata and as
 * `Idempotency-Key`, aborts when its lease is lost, and reconciles by looking the key up at the provider.
 */
export function orderAgentTools(options?: OrderAgentOptions) {
  const payments = options && new PaymentsClient(options.paymentsUrl);

  function runtime(tool: string): { payments: PaymentsClient; orders: OrderBook } {
    if (!options || !payments) {
      throw new Error(
        `${tool} was declared without { paymentsUrl, orders }: these declarations dispatch, a worker runs them`,
      );
    }
    return { payments, orders: options.orders };
  }

  function requestOptions(ctx: EffectContext) {
    return { idempotencyKey: ctx.key, signal: ctx.signal };
  }

  const getOrderStatus = defineTool({
    name: "get_order_status",
    kind: "read",
    description: "Reads an order: its status, amount and the customer's email.",
    input: z.object({ orderId }),
    output: orderSchema,
    async run({ orderId }) {
      const order = await runtime("get_order_status").orders.get(orderId);
      if (!order) throw new Error(`no order ${orderId}`);
      return order;
    },
  });

  const setStatus = defineTool({
    name: "set_status",
    kind: "write",
    description: "Sets an order's status; repeating it lands on the same end state.",
    input: z.object({ orderId, status: z.enum(ORDER_STATUSES) }),
    output: z.object({ orderId, status: z.enum(ORDER_STATUSES) }),
    async run({ orderId, status }) {
      const order = await runtime("set_status").orders.setStatus(orderId, status);
      if (!order) throw new Error(`no order ${orderId}`);
      return { orderId: order.orderId, status: order.status };
    },
  });

  const chargeOutput = z.object({
    chargeId: z.string(),
    orderId,
    amount: z.number().int().positive(),
    currency: z.string(),
  });
  const chargeCustomer = defineTool({
    name: "charge_customer",
    kind: "effect",
    description: "Charges the customer for an order at the payments provider.",
    input: z.object({
      orderId,
      amount: z.number().int().positive(),
      currency: z.string().regex(/^[a-z]{3}$/),
    }),
    output: chargeOutput,
    async run(input, ctx) {
      const charge = await runtime("charge_customer").payments.charge(
        { ...input, metadata: { [ONCE_KEY_METADATA]: ctx.key } },
        requestOptions(ctx),
      );
      return {
        chargeId: charge.id,
        orderId: charge.orderId,
        amount: charge.amount,
        currency: charge.currency,
      };
    },
    async reconcile(_input, ctx) {
      const [charge] = await runtime("charge_customer").payments.findCharges(
        { metadata: { [ONCE_KEY_METADATA]: ctx.key } },
        { signal: ctx.signal },
      );
      if (!charge) return { applied: false };
      return {
        applied: true,
        result: {
          chargeId: charge.id,
          orderId: charge.orderId,
          amount: charge.amount,
          currency: charge.currency,
        },
      };
    },
    classifyError: classifyPaymentsError,
  });

  const sendEmail = defineTool({
    name: "send_email",
    kind: "effect",
    description: "Sends the customer an email about an order.",
    input: z.object({ orderId, to: z.email(), subject: z.string().min(1), body: z.string() }),
    output: z.object({ emailId: z.string(), orderId }),
    async run(input, ctx) {
      const email = await runtime("send_email").payments.sendEmail(
        { ...input, metadata: { [ONCE_KEY_METADATA]: ctx.key } },
        requestOptions(ctx),
      );
      return { emailId: email.id, orderId: email.orderId };
    },
    async reconcile(_input, ctx) {
      const [email] = await runtime("send_email").payments.findEmails(
        { metadata: { [ONCE_KEY_METADATA]: ctx.key } },
        { signal: ctx.signal },
      );
      return email
        ? { applied: true, result: { emailId: email.id, orderId: email.orderId } }
        : { applied: false };
    },
    classifyError: classifyPaymentsError,
  });

  const createTicket = defineTool({
    name: "create_ticket",
    kind: "effect",
    description: "Opens a support ticket about an order.",
    input: z.object({ orderId, subject: z.string().min(1) }),
    output: z.object({ ticketId: z.string(), orderId }),
    async run(input, ctx) {
      const ticket = await runtime("create_ticket").payments.createTicket(
        { ...input, metadata: { [ONCE_KEY_METADATA]: ctx.key } },
        requestOptions(ctx),
      );
      return { ticketId: ticket.id, orderId: ticket.orderId };
    },
    async reconcile(_input, ctx) {
      const [ticket] = await runtime("create_ticket").payments.findTickets(
        { metadata: { [ONCE_KEY_METADATA]: ctx.key } },
        { signal: ctx.signal },
      );
      return ticket
        ? { applied: true, result: { ticketId: ticket.id, orderId: ticket.orderId } }
        : { applied: false };
    },
    classifyError: classifyPaymentsError,
  });

  return {
    getOrderStatus,
    setStatus,
    chargeCustomer,
    sendEmail,
    createTicket,
    /** Every tool, for a worker's or a dispatcher's `tools`. */
    all: [getOrderStatus, setStatus, chargeCustomer, sendEmail, createTicket] as const,
  };
}

/** The tools `orderAgentTools` returns. */
export type OrderAgentTools = ReturnType<typeof orderAgentTools>;

// The chaos workload's three effect tools, against the payments stand-in over HTTP. The provider ignores
// idempotency keys (its default): only once stands between a retry and a second effect. Every request carries
// the key, the owner's fence and the moment the owner last checked its lease in `metadata`, so the ledger
// tells afterwards which owner sent what, and how long it stalled between that check and the provider.
//
// - `charge_card`: no prepare step, a reconcile hook (the provider's search by `metadata.once_key`).
// - `open_ticket`: a prepare step (a look-up), then the effect; the same reconcile hook.
// - `send_receipt`: no reconcile hook: a lost outcome stays `unknown` for an operator.
//
// Two transports, to show what the one window DESIGN.md leaves open is made of:
// - `guarded` (the default): the request is written on an open connection right after a last look at the
//   lease on the local clock ("has this run gone on for longer than the lease that was left when it
//   started?"). A process frozen before that look sends nothing when it thaws.
// - `fetch`: the usual tool — `ctx.signal.throwIfAborted()` and `await ctx.assertLease()` (what
//   `fetchWithKey` does), then `fetch` (through PaymentsClient). A process frozen before that look finds, when
//   it thaws, that more than half its lease has gone by on the monotonic clock, asks the store and sends
//   nothing. The request still leaves some event-loop turns after the look; a process frozen in between sends
//   it when it thaws, however long it slept (chaos/send-window.ts measures the look's effect).

import { defineTool, type EffectContext, type ErrorClass, type ReconcileResult } from "@once/core";
import { type EffectQuery, PaymentsClient, PaymentsError } from "@once/payments";
import { z } from "zod";
import { ProviderCallError, postJson } from "./provider-request.js";

export const CHAOS_TOOL_NAMES = ["charge_card", "open_ticket", "send_receipt"] as const;
export type ChaosToolName = (typeof CHAOS_TOOL_NAMES)[number];
export type ChaosTransport = "guarded" | "fetch";

/** Tools with a reconcile hook: an `unknown` of theirs must never survive the drain. */
export const RECONCILING_TOOLS: ReadonlySet<string> = new Set(["charge_card", "open_ticket"]);

const chaosFlags = {
  /** Sent on the first attempt only: `before` → 503 "refused before acting", `after` → the connection drops after the effect. */
  failFirst: z.enum(["before", "after"]).optional(),
};

export const chargeInput = z.object({
  orderId: z.string().min(1),
  amount: z.number().int().positive(),
  /** The provider refuses anything but three letters: a malformed one is a terminal failure. */
  currency: z.string().min(1),
  ...chaosFlags,
});

export const ticketInput = z.object({
  orderId: z.string().min(1),
  subject: z.string().min(1),
  ...chaosFlags,
});

export const receiptInput = z.object({
  orderId: z.string().min(1),
  to: z.string().min(1),
  subject: z.string().min(1),
  ...chaosFlags,
});

const effectOutput = z.object({ id: z.string(), orderId: z.string() });
export type EffectResult = z.output<typeof effectOutput>;

/** What a worker reports about each request it sends to the provider. */
export interface EffectProbe {
  /** The request was just sent; `checkedAt` is the owner's last look at its lease before it. */
  sending?(ctx: EffectContext, checkedAt: number): void;
  /** The provider answered with the effect's record. */
  applied?(ctx: EffectContext, id: string): void;
  /** A reconcile hook looked the key up. */
  reconciled?(ctx: EffectContext, found: readonly string[]): void;
}

export interface ChaosToolOptions {
  paymentsUrl: string;
  /** Default `guarded`. */
  transport?: ChaosTransport;
  /**
   * The worker's lease. A `run` starts with at least half of it left (once re-confirms a lease with less
   * before the effect); the guarded transport sends nothing once the run has used that half, less a margin.
   */
  leaseMs?: number;
  /** The tool's own deadline for one provider call; past it the outcome is unknown. Default 1,000 ms. */
  providerTimeoutMs?: number;
  probe?: EffectProbe;
}

/** Margin kept between the guard and the half lease a run starts with. */
const GUARD_MARGIN_MS = 100;

/** A run that outlived its lease as far as the local clock can tell: nothing was sent. */
export class StaleLeaseError extends Error {
  override readonly name = "StaleLeaseError";
}

/**
 * Refused before acting (a 503, a refused connection, nothing sent) → not applied. Any other 4xx →
 * terminal. Anything else (a 5xx, a dropped connection, our own deadline after sending) → unknown.
 */
export function classifyPaymentsError(error: unknown): ErrorClass {
  if (error instanceof ProviderCallError) {
    if (error.status === 503) return "not_applied";
    if (error.status !== undefined && error.status >= 400 && error.status < 500) return "terminal";
    return error.sent ? "unknown" : "not_applied";
  }
  if (!(error instanceof PaymentsError)) return "unknown";
  if (error.status !== undefined && error.status >= 400 && error.status < 500) return "terminal";
  if (error.refusedBeforeActing) return "not_applied";
  return "unknown";
}

type EffectPath = "charges" | "tickets" | "emails";

/** The chaos tools, bound to one provider. The orchestrator builds them too; it never runs them. */
export function chaosTools(options: ChaosToolOptions) {
  const payments = new PaymentsClient(options.paymentsUrl);
  const baseUrl = options.paymentsUrl.replace(/\/+$/, "");
  const probe = options.probe ?? {};
  const transport = options.transport ?? "guarded";
  const providerTimeoutMs = options.providerTimeoutMs ?? 1_000;
  const guardMs = (options.leaseMs ?? 30_000) / 2 - GUARD_MARGIN_MS;

  /** One effect request; `fields` is the body without `metadata`. */
  async function send(
    path: EffectPath,
    fields: Record<string, unknown>,
    ctx: EffectContext,
    failFirst: "before" | "after" | undefined,
  ): Promise<EffectResult> {
    const runStartedAt = Date.now();
    const headers: Record<string, string> = {
      "Idempotency-Key": ctx.key,
      "Idempotency-Fence": String(ctx.fence),
    };
    if (failFirst !== undefined && ctx.attempt === 1) headers["X-Fail"] = failFirst;
    const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(providerTimeoutMs)]);
    const metadata = (checkedAt: number) => ({
      once_key: ctx.key,
      once_fence: String(ctx.fence),
      once_checked_at: String(checkedAt),
      once_pid: String(process.pid),
    });

    if (transport === "fetch") {
      // The usual tool: look at the signal and the lease last thing, then fetch.
      ctx.signal.throwIfAborted();
      await ctx.assertLease();
      const checkedAt = Date.now();
      const body = { ...fields, metadata: metadata(checkedAt) };
      const request =
        path === "charges"
          ? payments.charge(body as never, { signal, headers })
          : path === "tickets"
            ? payments.createTicket(body as never, { signal, headers })
            : payments.sendEmail(body as never, { signal, headers });
      setImmediate(() => probe.sending?.(ctx, checkedAt));
      const record = await request;
      probe.applied?.(ctx, record.id);
      return { id: record.id, orderId: record.orderId };
    }

    let checkedAt = 0;
    const { status, json } = await postJson(`${baseUrl}/${path}`, {
      headers,
      signal,
      beforeWrite: () => {
        checkedAt = Date.now();
        const used = checkedAt - runStartedAt;
        if (used >= guardMs) {
          throw new StaleLeaseError(`the run has taken ${used} ms; its lease may have run out`);
        }
      },
      body: () => ({ ...fields, metadata: metadata(checkedAt) }),
      onSent: () => probe.sending?.(ctx, checkedAt),
    });
    if (status < 200 || status >= 300) {
      const message = (json as { error?: unknown } | undefined)?.error;
      throw new ProviderCallError(`provider answered ${status}: ${String(message)}`, true, status);
    }
    const record = json as { id: string; orderId: string };
    probe.applied?.(ctx, record.id);
    return { id: record.id, orderId: record.orderId };
  }

  /** The provider's own records are the truth: an effect carrying this key happened. */
  async function lookUp(
    ctx: EffectContext,
    find: (query: EffectQuery, o: { signal: AbortSignal }) => Promise<{ id: string; orderId: string }[]>,
  ): Promise<ReconcileResult<EffectResult>> {
    const found = await find({ metadata: { once_key: ctx.key } }, { signal: ctx.signal });
    probe.reconciled?.(
      ctx,
      found.map((r) => r.id),
    );
    const first = found[0];
    return first === undefined
      ? { applied: false }
      : { applied: true, result: { id: first.id, orderId: first.orderId } };
  }

  const chargeCard = defineTool({
    name: "charge_card",
    kind: "effect",
    description: "Charges an order; reconciles through the provider's search by metadata.once_key.",
    input: chargeInput,
    output: effectOutput,
    run: (input, ctx) =>
      send(
        "charges",
        { amount: input.amount, currency: input.currency, orderId: input.orderId },
        ctx,
        input.failFirst,
      ),
    reconcile: (_input, ctx) => lookUp(ctx, (q, o) => payments.findCharges(q, o)),
    classifyError: classifyPaymentsError,
  });

  const openTicket = defineTool({
    name: "open_ticket",
    kind: "effect",
    description: "Opens a support ticket after a look-up; reconciles through the provider's search.",
    input: ticketInput,
    output: effectOutput,
    prepare: async (input, ctx) => {
      // The look-up a real tool does before acting: it touches nothing, so a crash here costs a takeover.
      const earlier = await payments.findTickets({ orderId: input.orderId }, { signal: ctx.signal });
      return { earlier: earlier.length };
    },
    run: (input, ctx) =>
      send("tickets", { orderId: input.orderId, subject: input.subject }, ctx, input.failFirst),
    reconcile: (_input, ctx) => lookUp(ctx, (q, o) => payments.findTickets(q, o)),
    classifyError: classifyPaymentsError,
  });

  const sendReceipt = defineTool({
    name: "send_receipt",
    kind: "effect",
    description: "Emails a receipt. No reconcile hook: a lost outcome is left unknown for an operator.",
    input: receiptInput,
    output: effectOutput,
    run: (input, ctx) =>
      send("emails", { to: input.to, subject: input.subject, orderId: input.orderId }, ctx, input.failFirst),
    classifyError: classifyPaymentsError,
  });

  return { chargeCard, openTicket, sendReceipt, all: [chargeCard, openTicket, sendReceipt] as const };
}

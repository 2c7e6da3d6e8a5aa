// One agent process of the authority run: it drives every task of the plan (charge the order, then email a
// receipt) through `InProcess`, as an agent loop resumed after a crash would, until each task has an answer
// that will not change: done, denied, expired or cancelled. Two of them run the same tasks at once, and the
// run SIGKILLs and restarts them, so every call is also resumed and raced. The provider honours no key:
// only once stands between a resume and a second charge.
//
// stdout, one JSON line each: `ready`; `requested` (onApprovalRequested: an approval request was created);
// `end` (a task's answer); `finished` (every task has one).

import { readFileSync } from "node:fs";
import {
  APPROVAL_DENIED,
  APPROVAL_EXPIRED,
  defineTool,
  type EffectContext,
  OnceError,
  ReplayedFailureError,
} from "@once/core";
import { InProcess } from "@once/engine";
import { type EffectQuery, PaymentsClient } from "@once/payments";
import { z } from "zod";
import { APPROVAL_LIMIT, type AuthorityTask } from "./authority-plan.js";
import { authorityStoreLocation, openAuthorityStore } from "./authority-store.js";

/** How a task ended, as an agent saw it. */
export type TaskEnd = "done" | "denied" | "expired" | "cancelled";

const env = z
  .object({
    AUTHORITY_STORE: z.string(),
    AUTHORITY_TASKS: z.string(),
    PAYMENTS_URL: z.string(),
    AGENT_NAME: z.string(),
    APPROVAL_TTL_MS: z.coerce.number().int().positive(),
    LEASE_MS: z.coerce.number().int().positive(),
  })
  .parse(process.env);

const print = (event: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify({ ...event, at: Date.now() })}\n`);
};

const tasks = JSON.parse(readFileSync(env.AUTHORITY_TASKS, "utf8")) as AuthorityTask[];
const { store } = await openAuthorityStore(authorityStoreLocation.parse(JSON.parse(env.AUTHORITY_STORE)));
const payments = new PaymentsClient(env.PAYMENTS_URL);

/** What every request carries, so the provider's ledger says which call sent it and when its run began. */
const metadata = (ctx: EffectContext) => ({
  once_key: ctx.key,
  once_task: ctx.taskId,
  once_started_at: String(Date.now()),
  once_agent: env.AGENT_NAME,
});
const lookUp = async (
  ctx: EffectContext,
  find: (query: EffectQuery, options: { signal: AbortSignal }) => Promise<{ id: string }[]>,
) => {
  const [first] = await find({ metadata: { once_key: ctx.key } }, { signal: ctx.signal });
  return first === undefined
    ? { applied: false as const }
    : { applied: true as const, result: { id: first.id } };
};
const effectOutput = z.object({ id: z.string() });

const charge = defineTool({
  name: "charge_order",
  kind: "effect",
  input: z.object({ orderId: z.string(), amount: z.number().int().positive() }),
  output: effectOutput,
  approval: (input) =>
    input.amount > APPROVAL_LIMIT ? `a charge of ${input.amount} is over ${APPROVAL_LIMIT}` : undefined,
  run: async (input, ctx) => {
    const record = await payments.charge(
      { amount: input.amount, currency: "usd", orderId: input.orderId, metadata: metadata(ctx) },
      { signal: ctx.signal },
    );
    return { id: record.id };
  },
  reconcile: (_input, ctx) => lookUp(ctx, (q, o) => payments.findCharges(q, o)),
});

const receipt = defineTool({
  name: "email_receipt",
  kind: "effect",
  input: z.object({ orderId: z.string() }),
  output: effectOutput,
  run: async (input, ctx) => {
    const email = await payments.sendEmail(
      {
        to: "customer@example.com",
        subject: "Your receipt",
        orderId: input.orderId,
        metadata: metadata(ctx),
      },
      { signal: ctx.signal },
    );
    return { id: email.id };
  },
  reconcile: (_input, ctx) => lookUp(ctx, (q, o) => payments.findEmails(q, o)),
});

const once = new InProcess({
  store,
  tools: [charge, receipt],
  leaseMs: env.LEASE_MS,
  approvalTtlMs: env.APPROVAL_TTL_MS,
  attempts: 3,
  onApprovalRequested: (request) => {
    print({ e: "requested", key: request.key, taskId: request.taskId });
  },
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Drives one task until its answer cannot change; every other answer (pending, in flight, a store error) is asked again. */
async function drive(task: AuthorityTask): Promise<TaskEnd> {
  for (;;) {
    try {
      const identity = { taskId: task.taskId };
      await once.call(
        charge,
        { orderId: task.orderId, amount: task.amount },
        { ...identity, stepId: "charge" },
      );
      await once.call(receipt, { orderId: task.orderId }, { ...identity, stepId: "receipt" });
      return "done";
    } catch (error) {
      if (OnceError.is(error, "ONCE_TASK_CANCELLED")) return "cancelled";
      const stored = error instanceof ReplayedFailureError ? error.stored : undefined;
      if (stored?.code === APPROVAL_DENIED) return "denied";
      if (stored?.code === APPROVAL_EXPIRED) return "expired";
      if (stored !== undefined) throw error;
      await sleep(OnceError.is(error, "ONCE_APPROVAL_PENDING") ? 100 : 200);
    }
  }
}

print({ e: "ready" });
await Promise.all(
  tasks.map(async (task) => {
    const end = await drive(task);
    print({ e: "end", taskId: task.taskId, end });
  }),
);
print({ e: "finished" });
// Stays up (its stdin held by the run) so the run decides when it ends; exits when stdin closes.
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));

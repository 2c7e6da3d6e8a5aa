import {
  CallFailedError,
  defineTool,
  deriveKey,
  fingerprint,
  IdempotencyConflictError,
  InvalidInputError,
  MissingStepIdentityError,
} from "@once/core";
import { PaymentsClient, type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { fetchWithKey, InProcess } from "../src/index.js";

let redis: Redis;
let store: RedisStore;
let payments: PaymentsServer;
const prefix = randomPrefix("in-process");

beforeAll(async () => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  store = await RedisStore.create({ redis, prefix });
  payments = await startPaymentsServer({ latency: { fixedMs: 20 } });
});

afterAll(async () => {
  await payments.close();
  await cleanupPrefix(redis, prefix);
  redis.disconnect();
});

class CardDeclinedError extends Error {
  override readonly name = "CardDeclinedError";
}

const chargeInput = z.object({ orderId: z.string(), amount: z.number().int().positive() });
const chargeOutput = z.object({ chargeId: z.string() });

/** Charges through the provider (which ignores keys): only once stands between a repeat and a second charge. */
function chargeTool(options: { declineAbove?: number } = {}) {
  const client = () => new PaymentsClient(payments.url);
  return defineTool({
    name: "charge_customer",
    kind: "effect",
    input: chargeInput,
    output: chargeOutput,
    run: async (input, ctx) => {
      if (options.declineAbove !== undefined && input.amount > options.declineAbove)
        throw new CardDeclinedError("card declined");
      const res = await fetchWithKey(ctx)(`${payments.url}/charges`, {
        method: "POST",
        body: JSON.stringify({ ...input, currency: "eur", metadata: { once_key: ctx.key } }),
      });
      return { chargeId: ((await res.json()) as { id: string }).id };
    },
    reconcile: async (_input, ctx) => {
      const [found] = await client().findCharges({ metadata: { once_key: ctx.key } });
      return found ? { applied: true, result: { chargeId: found.id } } : { applied: false };
    },
    classifyError: (error) => (error instanceof CardDeclinedError ? "terminal" : "unknown"),
  });
}

const charge = chargeTool();
const lookup = defineTool({
  name: "get_order",
  kind: "read",
  input: z.object({ orderId: z.string() }),
  output: z.object({ orderId: z.string() }),
  run: (input) => ({ orderId: input.orderId }),
});

describe("InProcess", () => {
  it("runs an effect once per step: the second call replays the stored result", async () => {
    const runner = new InProcess({ store, tools: [charge, lookup] });
    const step = { taskId: "t-1", stepId: "charge" };
    const first = await runner.call(charge, { orderId: "o-1", amount: 100 }, step);
    const again = await runner.call(charge, { orderId: "o-1", amount: 100 }, step);
    expect(first).toMatchObject({ replayed: false, outcome: "executed" });
    expect(again).toMatchObject({ replayed: true, outcome: "replay", result: first.result });
    expect(payments.ledger().charges.byOrder["o-1"]).toBe(1);
    expect(await runner.call(lookup, { orderId: "o-1" })).toMatchObject({
      result: { orderId: "o-1" },
      replayed: false,
    });
  });

  it("many callers of one step in two runners: one charge, one caller that ran it, every caller the same result", async () => {
    const runners = [new InProcess({ store, tools: [charge] }), new InProcess({ store, tools: [charge] })];
    const step = { taskId: "t-2", stepId: "charge" };
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        runners[i % 2]?.call(charge, { orderId: "o-2", amount: 200 }, step),
      ),
    );
    expect(answers.filter((a) => a?.replayed === false)).toHaveLength(1);
    expect(new Set(answers.map((a) => a?.result.chargeId)).size).toBe(1);
    expect(payments.ledger().charges.byOrder["o-2"]).toBe(1);
  });

  it("a crash mid-effect is reconciled, not re-fired: the next call finds the charge at the provider", async () => {
    const step = { taskId: "t-3", stepId: "charge" };
    const key = deriveKey(step);
    // An owner that claimed the key, charged, and died before `complete` (its lease then runs out).
    const dead = await store.claim({
      key,
      fingerprint: fingerprintOf({ orderId: "o-3", amount: 300 }),
      tool: charge.name,
      phase: "effect",
      leaseMs: 300,
    });
    expect(dead.outcome).toBe("acquired");
    const charged = await new PaymentsClient(payments.url).charge({
      orderId: "o-3",
      amount: 300,
      currency: "eur",
      metadata: { once_key: key },
    });
    const answer = await new InProcess({ store, tools: [charge] }).call(
      charge,
      { orderId: "o-3", amount: 300 },
      step,
    );
    expect(answer).toMatchObject({
      outcome: "reconciled",
      replayed: false,
      result: { chargeId: charged.id },
    });
    expect(payments.ledger().charges.byOrder["o-3"]).toBe(1);
  });

  it("a terminal failure is stored: the first caller gets CallFailedError, later ones the replayed failure", async () => {
    const declining = chargeTool({ declineAbove: 1_000 });
    const runner = new InProcess({ store, tools: [declining] });
    const step = { taskId: "t-4", stepId: "charge" };
    await expect(runner.call(declining, { orderId: "o-4", amount: 5_000 }, step)).rejects.toBeInstanceOf(
      CallFailedError,
    );
    await expect(runner.call(declining, { orderId: "o-4", amount: 5_000 }, step)).rejects.toMatchObject({
      name: "ReplayedFailureError",
    });
    expect(payments.ledger().charges.byOrder["o-4"]).toBeUndefined();
  });

  it("bad input: named errors, nothing claimed, nothing charged", async () => {
    const runner = new InProcess({ store, tools: [charge] });
    const step = { taskId: "t-5", stepId: "charge" };
    await expect(runner.call(charge, { orderId: "o-5", amount: -1 }, step)).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    await expect(
      runner.call(charge, { orderId: "o-5", amount: 1 }, { taskId: "t-5" } as never),
    ).rejects.toBeInstanceOf(MissingStepIdentityError);
    await runner.call(charge, { orderId: "o-5", amount: 1 }, step);
    await expect(runner.call(charge, { orderId: "o-5", amount: 2 }, step)).rejects.toBeInstanceOf(
      IdempotencyConflictError,
    );
    expect(payments.ledger().charges.byOrder["o-5"]).toBe(1);
  });
});

function fingerprintOf(input: unknown): string {
  return fingerprint("charge_customer", input);
}

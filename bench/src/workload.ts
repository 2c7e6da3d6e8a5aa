import type { CallData } from "@once/bullmq";
import { CALL_VERSION } from "@once/bullmq/internal";
import { type AnyTool, defineTool, fingerprint, type OnceStore, type TaskIdentity } from "@once/core";
import { z } from "zod";

/** The call every contender makes: a charge of about 100 bytes of JSON. */
export const INPUT = {
  orderId: "ord_7f3a9c21",
  amountCents: 4200,
  currency: "EUR",
  customerId: "cus_4b1d7e90c2",
  description: "bench",
} as const;

export const TOOL_NAME = "charge_card";

/** A result whose JSON is exactly `bytes` long (at least 40). */
export function resultOfSize(bytes: number): { id: string; status: string; pad: string } {
  const bare = { id: "ch_3Pq8Zk2eZvKYlo2C", status: "succeeded", pad: "" };
  const pad = bytes - JSON.stringify(bare).length;
  if (pad < 0) throw new RangeError(`a result cannot be shorter than ${JSON.stringify(bare).length} bytes`);
  return { ...bare, pad: "x".repeat(pad) };
}

export const RESULT_100 = resultOfSize(100);

const input = z.object({
  orderId: z.string(),
  amountCents: z.number().int(),
  currency: z.string(),
  customerId: z.string(),
  description: z.string(),
});
const output = z.object({ id: z.string(), status: z.string(), pad: z.string() });

/** The effect of a bench job: nothing, or a wait of `effectMs` (a provider that answers that fast). */
export function benchEffect(effectMs: number): () => Promise<typeof RESULT_100> | typeof RESULT_100 {
  if (effectMs === 0) return () => RESULT_100;
  return () => new Promise((resolve) => setTimeout(() => resolve(RESULT_100), effectMs));
}

/** The no-op effect tool: validated like any tool, touches nothing (or waits `effectMs`), returns `result`. */
export function noopEffectTool(result: z.input<typeof output> = RESULT_100, effectMs = 0): AnyTool {
  const effect = benchEffect(effectMs);
  return defineTool({
    name: TOOL_NAME,
    kind: "effect",
    input,
    output,
    run: async () => {
      await effect();
      return result;
    },
    reconcile: async () => ({ applied: true, result }),
  });
}

/** Job `i` of a bench queue: the bench tool's call for step `i` of `taskId`, as a dispatcher enqueues it. */
export function benchCall(queueName: string, taskId: string, i: number): CallData {
  return {
    v: CALL_VERSION,
    tool: TOOL_NAME,
    kind: "effect",
    callId: `${queueName}-${i}`,
    namespace: "bench",
    taskId,
    stepId: String(i),
    input: INPUT,
  };
}

/**
 * Leaves every key `done` with `resultText`, as a first run of the bench call would (claimed with its
 * fingerprint, then completed), `batch` keys at a time; `trace` is the traceparent a traced worker stores.
 */
export async function settleKeys(
  store: OnceStore,
  keys: readonly string[],
  resultText: string,
  options: { batch?: number; trace?: string; taskOf?: (index: number) => TaskIdentity } = {},
): Promise<void> {
  const { batch = 200, trace, taskOf } = options;
  const print = fingerprint(TOOL_NAME, INPUT);
  for (let i = 0; i < keys.length; i += batch) {
    await Promise.all(
      keys.slice(i, i + batch).map(async (key, j) => {
        const task = taskOf?.(i + j);
        const claim = await store.claim({
          key,
          fingerprint: print,
          tool: TOOL_NAME,
          phase: "effect",
          leaseMs: 30_000,
          ...(trace === undefined ? {} : { trace }),
          ...(task === undefined ? {} : { task }),
        });
        if (claim.outcome !== "acquired") throw new Error(`settling ${key}: ${claim.outcome}`);
        await store.complete(key, claim.token, resultText);
      }),
    );
  }
}

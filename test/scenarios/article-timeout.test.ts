// Scenario 1, the article's failure: charge_customer(order_42), the provider charges at once but answers
// after the orchestrator's timeout. A retry with a fresh key charges twice; once's key (same step across
// retries) charges once and hands the orchestrator that charge's id.

import type { CallResult, Dispatcher } from "@once/bullmq";
import { DispatchTimeoutError } from "@once/bullmq";
import { describe, expect, it } from "vitest";
import type { ChargeResult, ChargeTools } from "../fixtures/tools.js";
import { withScenario } from "./scenario.js";

const ORDER = "order_42";
// The provider records the charge when the request arrives and answers this much later; the orchestrator
// gives up on each wait after ORCHESTRATOR_TIMEOUT_MS. Only their order matters, not their values.
const PROVIDER_LATENCY_MS = 1_500;
const ORCHESTRATOR_TIMEOUT_MS = 400;

/**
 * The article's WRONG orchestrator: it retries on timeout, and mints a new step id per attempt, so every
 * attempt is a new key and nothing can tell the second attempt from a new call.
 */
async function naiveChargeWithRetries(
  dispatcher: Dispatcher,
  tools: ChargeTools,
  taskId: string,
  maxAttempts: number,
): Promise<{ stepIds: string[]; result?: CallResult<ChargeResult> }> {
  const stepIds: string[] = [];
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const stepId = `step-1@${Date.now()}`; // WRONG: a fresh key per attempt
    stepIds.push(stepId);
    try {
      const result = await dispatcher.call(
        tools.chargeCustomer,
        { orderId: ORDER, amount: 4200, providerLatencyMs: PROVIDER_LATENCY_MS },
        { taskId, stepId, timeoutMs: ORCHESTRATOR_TIMEOUT_MS, retries: 0 },
      );
      return { stepIds, result };
    } catch (error) {
      if (!(error instanceof DispatchTimeoutError)) throw error;
      // "Timed out, so it failed": retry. The charge went through anyway.
    }
  }
  return { stepIds };
}

describe("scenario 1: the provider answers after the orchestrator's timeout", () => {
  it("a fresh key per retry (the article's wrong example) charges the order twice", () =>
    withScenario({ label: "article-wrong" }, async (s) => {
      const worker = await s.startWorker({ concurrency: 2 });
      const dispatcher = await s.dispatcher();

      const { stepIds, result } = await naiveChargeWithRetries(dispatcher, s.tools, "task-article", 2);
      expect(result).toBeUndefined(); // both attempts timed out from the orchestrator's point of view
      expect(new Set(stepIds).size).toBe(2);

      // Both jobs run to the end in the background: two keys, two executions, two charges.
      await worker.waitFor(() => worker.all("job-completed").length === 2);
      const charges = s.charges();
      expect(charges.byOrder[ORDER]).toBe(2);
      expect(charges.total).toBe(2);
      expect(charges.duplicates).toBe(1); // the article's double charge, reproduced
      expect(worker.all("run-entered")).toHaveLength(2);
    }));

  it("with once (one step id, the dispatcher retrying) the order is charged once and the caller gets that charge", () =>
    withScenario({ label: "article-once" }, async (s) => {
      const worker = await s.startWorker({ concurrency: 2 });
      const dispatcher = await s.dispatcher();
      const input = { orderId: ORDER, amount: 4200, providerLatencyMs: PROVIDER_LATENCY_MS };
      const step = { taskId: "task-article", stepId: "step-1" };

      // The same step on every retry; retries are a safety net sized far beyond the provider's latency.
      const first = await dispatcher.call(s.tools.chargeCustomer, input, {
        ...step,
        timeoutMs: ORCHESTRATOR_TIMEOUT_MS,
        retries: 50,
      });
      // It did time out and re-enqueue: the re-enqueues were no-ops on the same job id, and that one job
      // executed. (Not `first.replayed`: when the completion lands between a timeout and the dispatcher's
      // look at the record, the answer comes from the record and is flagged as a replay.)
      expect(first.enqueues).toBeGreaterThanOrEqual(2);
      expect((await worker.waitFor("job-completed")).outcome).toBe("executed");

      const [charge] = await s.provider.findCharges({ orderId: ORDER });
      expect(first.result).toEqual({ chargeId: charge?.id, orderId: ORDER, amount: 4200 });
      expect(charge?.metadata.once_key).toBe(s.key(step.taskId, step.stepId));

      // The orchestrator crashes and resumes the task: the same step asked again replays from the store.
      const again = await dispatcher.call(s.tools.chargeCustomer, input, { ...step, timeoutMs: 10_000 });
      expect(again).toMatchObject({ replayed: true, enqueues: 0, result: first.result });

      const charges = s.charges();
      expect(charges.byOrder[ORDER]).toBe(1);
      expect(charges.total).toBe(1);
      expect(charges.duplicates).toBe(0);
      expect(worker.all("run-entered")).toHaveLength(1);
      const record = await s.record(step.taskId, step.stepId);
      expect(record?.state).toBe("done");
      expect(JSON.parse(record?.result ?? "null")).toEqual(first.result);
    }));
});

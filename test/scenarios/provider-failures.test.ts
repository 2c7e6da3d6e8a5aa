// The provider failing the call, and the tool's classifyError deciding what the failure leaves behind
// (the worker flow's step 5): refused before acting → released and retried; the connection broken after
// the charge → unknown, and the retry reconciles instead of charging again; a request the provider refuses
// on its content (a declined card) → terminal, stored and replayed.

import { CallFailedError, ReplayedFailureError } from "@once/core";
import { describe, expect, it } from "vitest";
import { withScenario } from "./scenario.js";

const step = { taskId: "task-provider", stepId: "charge-1" };
const retried = { jobOptions: { attempts: 3, backoff: 20 } };

describe("the provider fails the call; classifyError decides", () => {
  it("refused before acting (503): not applied, released, retried, charged once", () =>
    withScenario({ label: "provider-refused" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher(retried);
      const input = { orderId: "order_p1", amount: 300, providerFailsFirstAttempt: "before" as const };
      const { result } = await dispatcher.call(s.tools.chargeCustomer, input, step);

      const charged = await worker.waitFor("charged");
      expect(result.chargeId).toBe(charged.chargeId);
      // The first owner released the key (nothing happened), so the retry acquired it afresh: fence 2.
      expect(charged.fence).toBe(2);
      expect(worker.all("run-entered").map((e) => e.attempt)).toEqual([1, 2]);
      expect(await s.record(step.taskId, step.stepId)).toMatchObject({ state: "done", fence: 2 });

      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("the connection broken after the charge: unknown, and the retry reconciles instead of charging again", () =>
    withScenario({ label: "provider-broke" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher(retried);
      const input = { orderId: "order_p2", amount: 300, providerFailsFirstAttempt: "after" as const };
      const { result } = await dispatcher.call(s.tools.chargeCustomer, input, step);

      const [charge] = await s.provider.findCharges({ orderId: "order_p2" });
      expect(result.chargeId).toBe(charge?.id);
      expect((await worker.waitFor("reconciled")).found).toEqual([charge?.id]);
      // One run (attempt 1, whose answer was lost); attempt 2 only asked the provider.
      expect(worker.all("run-entered")).toHaveLength(1);
      expect(worker.all("charged")).toHaveLength(0); // the first run never heard back
      expect((await worker.waitFor("job-completed")).outcome).toBe("reconciled");

      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("refused on its content (a 400, like a declined card): terminal, stored, replayed; no charge", () =>
    withScenario({ label: "provider-declined" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher(retried);
      const input = { orderId: "order_p3", amount: 300, currency: "dollars" };
      const error = (await dispatcher
        .call(s.tools.chargeCustomer, input, step)
        .catch((e: unknown) => e)) as CallFailedError;
      expect(error).toBeInstanceOf(CallFailedError);
      expect(error.stored).toMatchObject({ name: "PaymentsError", message: expect.stringMatching(/400/) });
      expect(await s.record(step.taskId, step.stepId)).toMatchObject({ state: "failed", fence: 1 });

      // Not retried by BullMQ (attempts: 3), and not re-run when asked again.
      await expect(dispatcher.call(s.tools.chargeCustomer, input, step)).rejects.toBeInstanceOf(
        ReplayedFailureError,
      );
      expect(worker.all("run-entered")).toHaveLength(1);

      const charges = s.charges();
      expect(charges.total).toBe(0);
      expect(charges.duplicates).toBe(0);
    }));
});

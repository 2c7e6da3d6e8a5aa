// Scenario 6: one (taskId, stepId) used for a different call. The key is the orchestrator's promise that
// this is the same call; a different input under it is a bug upstream (a step id reused for another
// charge), and once refuses it with IdempotencyConflictError wherever it meets it: in the dispatcher that
// is running the first call, in another dispatcher reading the record, and in the worker claiming the key.
// It never charges a second time.

import { IdempotencyConflictError, jobIdForKey } from "@once/core";
import { describe, expect, it } from "vitest";
import { withScenario } from "./scenario.js";

describe("scenario 6: the same step dispatched with a different input", () => {
  it("after the first call finished: IdempotencyConflictError, nothing enqueued, no second charge", () =>
    withScenario({ label: "conflict-after" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-conflict", stepId: "charge-1" };
      const first = await dispatcher.call(s.tools.chargeCustomer, { orderId: "order_6", amount: 1000 }, step);

      const second = dispatcher.call(s.tools.chargeCustomer, { orderId: "order_6", amount: 9999 }, step);
      await expect(second).rejects.toBeInstanceOf(IdempotencyConflictError);
      await expect(second).rejects.toMatchObject({
        key: s.key(step.taskId, step.stepId),
        tool: "charge_customer",
      });

      // The first call's result is untouched, and replays as before.
      const replay = await dispatcher.call(
        s.tools.chargeCustomer,
        { orderId: "order_6", amount: 1000 },
        step,
      );
      expect(replay).toMatchObject({ replayed: true, result: first.result });
      expect(await s.queue.getJobCounts("waiting", "active", "delayed", "completed", "failed")).toEqual({
        waiting: 0,
        active: 0,
        delayed: 0,
        completed: 1,
        failed: 0,
      });
      expect(worker.all("run-entered")).toHaveLength(1);

      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_6).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("while the first call is in flight: both this dispatcher and another one refuse it", () =>
    withScenario({ label: "conflict-during" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher();
      const otherReplica = await s.dispatcher();
      const step = { taskId: "task-conflict", stepId: "charge-1" };
      const input = { orderId: "order_6", amount: 1000, providerLatencyMs: 500 };
      const first = dispatcher.call(s.tools.chargeCustomer, input, step);
      await worker.waitFor("run-entered");

      const changed = { ...input, amount: 1001 };
      await expect(dispatcher.call(s.tools.chargeCustomer, changed, step)).rejects.toBeInstanceOf(
        IdempotencyConflictError,
      );
      await expect(otherReplica.call(s.tools.chargeCustomer, changed, step)).rejects.toBeInstanceOf(
        IdempotencyConflictError,
      );

      const { result } = await first;
      expect(result).toMatchObject({ orderId: "order_6", amount: 1000 });
      expect(worker.all("run-entered")).toHaveLength(1);

      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_6).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("a job carrying another input under a known key: the worker refuses it, unrecoverably, running nothing", () =>
    withScenario({ label: "conflict-worker" }, async (s) => {
      const worker = await s.startWorker();
      // Jobs removed on completion, so BullMQ accepts a new job under the same id afterwards.
      const dispatcher = await s.dispatcher({ jobOptions: { removeOnComplete: true } });
      const step = { taskId: "task-conflict", stepId: "charge-1" };
      await dispatcher.call(s.tools.chargeCustomer, { orderId: "order_6", amount: 1000 }, step);

      // An orchestrator that bypasses the dispatcher's own check (or one of another version) enqueues
      // the same step with another amount.
      const jobId = jobIdForKey(s.key(step.taskId, step.stepId));
      const data = {
        v: 1,
        tool: "charge_customer",
        namespace: "default",
        ...step,
        input: { orderId: "order_6", amount: 5000 },
      };
      await s.queue.add("charge_customer", data, { jobId, attempts: 3 });

      const failed = await worker.waitFor((e) => e.event === "job-failed" && e.jobId === jobId);
      expect(failed.error).toMatchObject({
        name: "UnrecoverableError",
        cause: { name: "IdempotencyConflictError" },
      });
      const job = await s.queue.getJob(jobId);
      expect(job?.failedReason).toMatch(/^IdempotencyConflictError: /);
      expect(job?.attemptsMade).toBe(1); // not retried
      expect(worker.all("run-entered")).toHaveLength(1);

      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_6).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));
});

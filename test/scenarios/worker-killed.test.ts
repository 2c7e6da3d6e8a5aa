// Scenarios 3 and 4: a worker process SIGKILLed at an exact point of the worker flow, and the next worker
// process BullMQ hands the stalled job to.
//   3. Killed after the provider charged, before `complete`: the record is claimed in the effect phase with
//      a dead owner. The next worker reconciles through the provider's lookup (one charge, the caller gets
//      it); without a reconcile hook it gives up: OutcomeUnknownError, the record stays `unknown`.
//   4. Killed during `prepare`: nothing touched the world, so the next worker takes over (fence 2).

import { OutcomeUnknownError } from "@once/core";
import { describe, expect, it } from "vitest";
import { FAST_RECOVERY, withScenario } from "./scenario.js";

describe("scenario 3: a worker SIGKILLed after the provider charged, before complete", () => {
  it("the next worker reconciles through the provider's lookup and returns the real charge", () =>
    withScenario({ label: "killed-after-charge", worker: FAST_RECOVERY }, async (s) => {
      const first = await s.startWorker({ pause: { at: "after-charge", mode: "hang" } }, "first");
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-kill", stepId: "charge-1" };
      const call = dispatcher.call(s.tools.chargeCustomer, { orderId: "order_3a", amount: 1500 }, step);

      const charged = await first.waitFor("charged");
      await first.kill("SIGKILL");
      const second = await s.startWorker({}, "second");

      const { result } = await call;
      expect(result.chargeId).toBe(charged.chargeId);

      // The second worker asked the provider instead of charging again.
      const reconciled = await second.waitFor("reconciled");
      expect(reconciled.found).toEqual([charged.chargeId]);
      expect(second.all("run-entered")).toHaveLength(0);
      const completed = await second.waitFor("job-completed");
      expect(completed.outcome).toBe("reconciled");

      const record = await s.record(step.taskId, step.stepId);
      expect(charged.fence).toBe(1);
      expect(record).toMatchObject({ state: "done", fence: 2 });
      expect(JSON.parse(record?.result ?? "null")).toEqual(result);

      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_3a).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("without a reconcile hook the job fails with OutcomeUnknownError and the record stays unknown", () =>
    withScenario({ label: "killed-no-reconcile", worker: FAST_RECOVERY }, async (s) => {
      const first = await s.startWorker({ pause: { at: "after-charge", mode: "hang" } }, "first");
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-kill", stepId: "charge-1" };
      const call = dispatcher.call(
        s.tools.chargeCustomerNoReconcile,
        { orderId: "order_3b", amount: 1500 },
        step,
      );
      const settled = call.then(
        () => undefined,
        (error: unknown) => error,
      );

      await first.waitFor("charged");
      await first.kill("SIGKILL");
      const second = await s.startWorker({}, "second");

      const error = await settled;
      expect(error).toBeInstanceOf(OutcomeUnknownError);
      expect((error as OutcomeUnknownError).key).toBe(s.key(step.taskId, step.stepId));
      // Said once, in the record's words.
      expect((error as Error).message).toBe(
        `outcome of charge_customer_no_reconcile for key ${s.key(step.taskId, step.stepId)} is unknown: ` +
          "the tool has no reconcile hook",
      );

      // The second worker never re-fired blindly: it gave up and left the key to an operator.
      const failed = await second.waitFor("job-failed");
      expect(String((failed.error as { message: string }).message)).toMatch(/^OutcomeUnknownError: /);
      expect(second.all("run-entered")).toHaveLength(0);

      const record = await s.record(step.taskId, step.stepId);
      expect(record?.state).toBe("unknown");
      expect(record?.result).toBeUndefined();
      expect(record?.fence).toBe(2);

      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_3b).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));
});

describe("scenario 4: a worker SIGKILLed during prepare", () => {
  it("another worker takes the key over (fence 2) and charges once", () =>
    withScenario({ label: "killed-in-prepare", worker: FAST_RECOVERY }, async (s) => {
      const first = await s.startWorker({ pause: { at: "prepare", mode: "hang" } }, "first");
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-kill", stepId: "charge-1" };
      const call = dispatcher.call(s.tools.chargeCustomerPrepared, { orderId: "order_4", amount: 990 }, step);

      const preparing = await first.waitFor("preparing");
      expect(preparing.fence).toBe(1);
      await first.kill("SIGKILL");
      const second = await s.startWorker({}, "second");

      const { result } = await call;
      const charged = await second.waitFor("charged");
      expect(charged.fence).toBe(2);
      expect(result.chargeId).toBe(charged.chargeId);
      // A takeover, not a reconcile: the first owner never left the prepare phase.
      expect(second.all("reconciled")).toHaveLength(0);
      expect(first.all("run-entered")).toHaveLength(0);

      const record = await s.record(step.taskId, step.stepId);
      expect(record).toMatchObject({ state: "done", fence: 2, claims: 2 });
      expect(JSON.parse(record?.result ?? "null")).toEqual(result);

      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_4).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));
});

// Scenario 2, BullMQ's stalled-job re-run: a worker's event loop is blocked (CPU-bound code, a sync call)
// past `lockDuration`. Its lock renewals and once heartbeats stop; BullMQ's stalled check in another worker
// process moves the job back to wait and that worker runs it again. once makes the re-run safe:
//   a. blocked after the provider charged: the re-run reconciles and returns that charge;
//   b. blocked in prepare: the re-run takes the key over and charges; the first worker, unblocked, finds
//      its lease gone before it could begin the effect.
//   c. blocked in run, right before the provider request: unblocked, the code goes straight on to the request
//      before any timer (so any heartbeat) has run, and its signal is not aborted. What stops it is
//      `ctx.assertLease()` (which `fetchWithKey` calls before every request): more than half the lease has gone
//      by on the monotonic clock, so it asks the store, hears `lost`, and sends nothing. A tool that looks only
//      at its signal sends the request (`pnpm --filter @once/test run send-window` measures both).
// The first worker stays blocked until the caller has its result (a gate file, not a duration), then it
// is released and its own completion is refused as lost.

import { describe, expect, it } from "vitest";
import { FAST_RECOVERY, type Scenario, withScenario } from "./scenario.js";

describe("scenario 2: a worker's event loop blocked past lockDuration", () => {
  it("blocked after the charge: the second worker reconciles; one charge, the caller gets its id", () =>
    withScenario({ label: "blocked-after-charge", worker: FAST_RECOVERY }, async (s) => {
      const gate = s.gateFile("blocked");
      const first = await s.startWorker(
        { api: "with-once", pause: { at: "after-charge", mode: "block", gateFile: gate } },
        "blocked",
      );
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-stall", stepId: "charge-1" };
      const call = dispatcher.call(s.tools.chargeCustomer, { orderId: "order_2a", amount: 700 }, step);

      const charged = await first.waitFor("charged");
      const second = await s.startWorker({}, "second");

      const { result } = await call;
      expect(result.chargeId).toBe(charged.chargeId);
      // BullMQ did re-deliver the job: the second worker's stalled check moved it back to wait.
      expect((await second.waitFor("job-stalled")).jobId).toBe(`once-${s.key(step.taskId, step.stepId)}`);
      expect((await second.waitFor("reconciled")).found).toEqual([charged.chargeId]);
      expect(second.all("run-entered")).toHaveLength(0);

      // Unblocked, the first worker carries on to `complete` with its old token: refused as lost.
      s.openGate(gate);
      const threw = await first.waitFor("processor-threw");
      expect(threw.error).toMatchObject({ name: "LeaseLostError" });
      expect(first.all("job-completed")).toHaveLength(0);

      const record = await s.record(step.taskId, step.stepId);
      expect(record).toMatchObject({ state: "done", fence: 2 });
      expect(JSON.parse(record?.result ?? "null")).toEqual(result);

      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_2a).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("blocked in prepare: the second worker takes over and charges; the first never begins the effect", () =>
    withScenario({ label: "blocked-in-prepare", worker: FAST_RECOVERY }, async (s) => {
      const { first, result, step } = await blockedUntilTakenOver(s, "prepare", "order_2b");
      expect(first.all("run-entered")).toHaveLength(0);

      const record = await s.record(step.taskId, step.stepId);
      expect(record).toMatchObject({ state: "done", fence: 2 });
      expect(JSON.parse(record?.result ?? "null")).toEqual(result);
      expect(s.charges()).toMatchObject({ total: 1, byOrder: { order_2b: 1 }, duplicates: 0 });
    }));

  it("blocked right before the provider request: ctx.assertLease() hears lost and nothing is sent", () =>
    withScenario({ label: "blocked-before-send", worker: FAST_RECOVERY }, async (s) => {
      const { first } = await blockedUntilTakenOver(s, "before-charge", "order_2c");
      // Unblocked, it went on with a signal nobody had aborted yet: only the lease check stood in its way.
      expect(first.all("resumed")).toMatchObject([{ aborted: false }]);
      expect(first.all("charged")).toHaveLength(0);
      expect(s.charges()).toMatchObject({ total: 1, byOrder: { order_2c: 1 }, duplicates: 0 });
    }));
});

/**
 * A worker blocked at `at` while charging `orderId` with the prepared tool (its look-up leaves a connection to
 * the provider open, so a request would leave at once); a second worker takes the key over and charges (fence
 * 2); then the first is unblocked and ends its attempt with LeaseLostError.
 */
async function blockedUntilTakenOver(s: Scenario, at: "prepare" | "before-charge", orderId: string) {
  const gate = s.gateFile("blocked");
  const first = await s.startWorker(
    { api: "with-once", pause: { at, mode: "block", gateFile: gate } },
    "blocked",
  );
  const dispatcher = await s.dispatcher();
  const step = { taskId: "task-stall", stepId: "charge-1" };
  const call = dispatcher.call(s.tools.chargeCustomerPrepared, { orderId, amount: 700 }, step);

  await first.waitFor("paused");
  const second = await s.startWorker({}, "second");
  const { result } = await call;
  const charged = await second.waitFor("charged");
  expect(charged.fence).toBe(2);
  expect(result.chargeId).toBe(charged.chargeId);

  s.openGate(gate);
  const threw = await first.waitFor("processor-threw");
  expect(threw.error).toMatchObject({ name: "LeaseLostError" });
  return { first, result, step };
}

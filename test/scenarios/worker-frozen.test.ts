// Scenario 5: a worker frozen with SIGSTOP past its lease (timers, heartbeats and lock renewals all stop),
// another worker process finishes the call, then the frozen one is resumed with SIGCONT. Its writes carry
// its old owner token: the store answers `lost`, the worker reports LeaseLostError and its work is
// discarded; the stored result stays the other worker's.
//
// Where it freezes decides whether the resumed worker could fire the effect a second time:
//   a. in prepare: it has not begun the effect; resumed, `beginEffect` is refused. No second charge.
//   b. after the provider charged: the other worker reconciles and finds that charge; resumed, `complete`
//      is refused. One charge, and it is the one the caller gets.
//   c. in run, before the provider call — DESIGN.md's "one window left". Against a provider that honours
//      neither keys nor fencing tokens, nothing on the store side can stop a request the resumed worker
//      sends before it learns that its lease is gone. What once gives the tool is `ctx.signal`: the first
//      heartbeat after the resume is answered `lost` and aborts it. This test shows the resumed run sees that
//      abort and, looking at its signal before the provider call (as the fixture's tool does), does not
//      charge. It resumes the run only once the abort has been printed.
//      When the stalled code reaches the provider call before that heartbeat is answered, its signal is not
//      aborted yet: event-loop-blocked.test.ts shows `ctx.assertLease()` stopping it there.

import { describe, expect, it } from "vitest";
import { FAST_RECOVERY, withScenario } from "./scenario.js";

describe("scenario 5: a worker frozen with SIGSTOP past its lease, resumed after another finished", () => {
  it("frozen in prepare: its beginEffect is refused as lost; the stored result is the other worker's charge", () =>
    withScenario({ label: "frozen-in-prepare", worker: FAST_RECOVERY }, async (s) => {
      const gate = s.gateFile("frozen");
      const frozen = await s.startWorker(
        { api: "with-once", pause: { at: "prepare", mode: "gate", gateFile: gate } },
        "frozen",
      );
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-freeze", stepId: "charge-1" };
      const call = dispatcher.call(
        s.tools.chargeCustomerPrepared,
        { orderId: "order_5a", amount: 2500 },
        step,
      );

      await frozen.waitFor("paused");
      frozen.freeze();
      const other = await s.startWorker({}, "other");
      const { result } = await call;
      const charged = await other.waitFor("charged");
      expect(charged.fence).toBe(2);
      expect(result.chargeId).toBe(charged.chargeId);

      s.openGate(gate);
      frozen.thaw();
      const threw = await frozen.waitFor("processor-threw");
      expect(threw.error).toMatchObject({ name: "LeaseLostError" });
      // Charges made by the frozen worker: none; it never entered run.
      expect(frozen.all("run-entered")).toHaveLength(0);
      expect(frozen.all("charged")).toHaveLength(0);

      const record = await s.record(step.taskId, step.stepId);
      expect(record).toMatchObject({ state: "done", fence: 2 });
      expect(JSON.parse(record?.result ?? "null").chargeId).toBe(charged.chargeId);

      // Exactly one: the other worker's. The frozen worker was stopped before the effect phase, and a
      // resumed owner must pass `beginEffect` (token-fenced) before run.
      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_5a).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("frozen after the charge: the other worker reconciles it; the resumed complete is refused as lost", () =>
    withScenario({ label: "frozen-after-charge", worker: FAST_RECOVERY }, async (s) => {
      const gate = s.gateFile("frozen");
      const frozen = await s.startWorker(
        { api: "with-once", pause: { at: "after-charge", mode: "gate", gateFile: gate } },
        "frozen",
      );
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-freeze", stepId: "charge-1" };
      const call = dispatcher.call(s.tools.chargeCustomer, { orderId: "order_5b", amount: 2500 }, step);

      const charged = await frozen.waitFor("charged");
      await frozen.waitFor("paused");
      frozen.freeze();
      const other = await s.startWorker({}, "other");
      const { result } = await call;
      expect((await other.waitFor("reconciled")).found).toEqual([charged.chargeId]);
      expect(other.all("run-entered")).toHaveLength(0);
      expect(result.chargeId).toBe(charged.chargeId);

      s.openGate(gate);
      frozen.thaw();
      const threw = await frozen.waitFor("processor-threw");
      expect(threw.error).toMatchObject({ name: "LeaseLostError" });

      const record = await s.record(step.taskId, step.stepId);
      expect(record).toMatchObject({ state: "done", fence: 2 });
      expect(JSON.parse(record?.result ?? "null")).toEqual(result);

      // Exactly one: the frozen worker's own, made before it froze; the other worker found it instead of
      // charging, and the frozen worker, resumed, only tried to store its result.
      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_5b).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("frozen before the provider call (the one window left): the resumed run sees its signal aborted", () =>
    withScenario({ label: "frozen-before-charge", worker: FAST_RECOVERY }, async (s) => {
      const gate = s.gateFile("frozen");
      const frozen = await s.startWorker(
        { api: "with-once", pause: { at: "before-charge", mode: "gate", gateFile: gate } },
        "frozen",
      );
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-freeze", stepId: "charge-1" };
      const call = dispatcher.call(s.tools.chargeCustomer, { orderId: "order_5c", amount: 2500 }, step);

      await frozen.waitFor("paused");
      frozen.freeze();
      const other = await s.startWorker({}, "other");
      const { result } = await call;
      // The other worker asked the provider first (nothing under this key), then charged itself.
      expect((await other.waitFor("reconciled")).found).toEqual([]);
      const charged = await other.waitFor("charged");
      expect(charged.fence).toBe(2);
      expect(result.chargeId).toBe(charged.chargeId);

      frozen.thaw();
      const aborted = await frozen.waitFor("signal-aborted");
      expect(aborted.reason).toMatchObject({ name: "LeaseLostError" });
      s.openGate(gate);
      expect(await frozen.waitFor("resumed")).toMatchObject({ aborted: true });
      const threw = await frozen.waitFor("processor-threw");
      expect(threw.error).toMatchObject({ name: "LeaseLostError" });
      expect(frozen.all("charged")).toHaveLength(0);

      const record = await s.record(step.taskId, step.stepId);
      expect(record).toMatchObject({ state: "done", fence: 2 });
      expect(JSON.parse(record?.result ?? "null").chargeId).toBe(charged.chargeId);

      // Exactly one, the other worker's: the resumed run looked at its aborted signal and stopped.
      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.byOrder.order_5c).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));
});

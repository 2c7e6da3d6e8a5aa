// A task cancelled from one process while its calls run, or are still to come, in others (docs/cancellation.md):
// worker processes given the task's jobs end each one unrecoverably and charge nothing at the provider; a
// worker or an InProcess caller whose charge is in flight when the cancel comes sees ctx.signal abort within
// one heartbeat, and its call ends as the flow settles it (the charge may have happened: unknown, not retried).
// Real Redis, real BullMQ, real worker and caller processes, the payments stand-in over HTTP.

import { type CancelRequest, deriveKey, OutcomeUnknownError, TaskCancelledError } from "@once/core";
import { pollUntil, redisUrl } from "@once/support";
import { describe, expect, it } from "vitest";
import { startInProcessCall } from "../support/processes.js";
import { withScenario } from "./scenario.js";

const BY: CancelRequest = { by: "ops@example.com", why: "the customer withdrew the order" };
/** Heartbeats every third of this: a cancel reaches a running effect within about 330 ms. */
const LEASE_MS = 1_000;
/** What a loaded two-core machine may add to one heartbeat and the store read after it. */
const SLACK_MS = 700;
const jobOptions = { attempts: 3, backoff: { type: "fixed" as const, delay: 100 } };

describe("a cancelled task across processes", () => {
  it("worker processes given its jobs end each one unrecoverably, and the provider is charged nothing", async () => {
    await withScenario({ label: "cancel-jobs" }, async (s) => {
      const workers = [await s.startWorker(), await s.startWorker()];
      const dispatcher = await s.dispatcher({ jobOptions, timeoutMs: 20_000 });
      const taskId = `task-cancel-jobs-${process.pid}`;
      const cancel = await s.store.cancelTask({ taskId }, BY);
      expect(cancel.outcome).toBe("cancelled");
      const steps = ["charge-1", "charge-2", "charge-3", "charge-4"];
      const answers = await Promise.all(
        steps.map((stepId, i) =>
          dispatcher
            .call(s.tools.chargeCustomer, { orderId: `order-cj-${i}`, amount: 1_000 + i }, { taskId, stepId })
            .catch((error: unknown) => error),
        ),
      );
      for (const answer of answers) {
        expect(answer).toBeInstanceOf(TaskCancelledError);
        expect(answer).toMatchObject({ taskId, ...BY });
      }
      for (const stepId of steps) {
        const job = await s.queue.getJob(`once-${s.key(taskId, stepId)}`);
        expect(await job?.getState()).toBe("failed");
        // The first of three attempts was its last: unrecoverable, never retried.
        expect(job?.attemptsMade).toBe(1);
        expect(job?.failedReason).toMatch(/^TaskCancelledError: /);
      }
      expect(s.charges().total).toBe(0);
      for (const worker of workers) expect(worker.all("run-entered")).toEqual([]);
      // Another call of one of its steps: still refused, still nothing charged.
      await expect(
        dispatcher.call(
          s.tools.chargeCustomer,
          { orderId: "order-cj-0", amount: 1_000 },
          { taskId, stepId: "charge-1" },
        ),
      ).rejects.toBeInstanceOf(TaskCancelledError);
      expect(s.charges().total).toBe(0);
    });
  });

  it("a worker process whose charge is in flight sees ctx.signal abort within one heartbeat; the job ends unknown, not retried", async () => {
    await withScenario({ label: "cancel-running-job" }, async (s) => {
      const worker = await s.startWorker({ leaseMs: LEASE_MS });
      const dispatcher = await s.dispatcher({ jobOptions, timeoutMs: 30_000 });
      const taskId = `task-cancel-running-${process.pid}`;
      const step = { taskId, stepId: "charge" };
      const orderId = "order-cancel-running";
      const call = dispatcher
        .call(s.tools.chargeCustomer, { orderId, amount: 2_500, providerLatencyMs: 20_000 }, step)
        .catch((error: unknown) => error);
      await worker.waitFor("run-entered", { timeoutMs: 15_000 });
      // The provider records the charge on arrival and holds its answer: the effect is running.
      expect(await pollUntil(() => s.charges().total === 1, { timeoutMs: 10_000, intervalMs: 10 })).toBe(
        true,
      );
      const cancelledAt = Date.now();
      const cancel = await s.store.cancelTask({ taskId }, BY);
      expect(cancel.running).toEqual([deriveKey(step)]);
      const aborted = await worker.waitFor("signal-aborted", { timeoutMs: 10_000 });
      expect(aborted.reason).toMatchObject({ name: "TaskCancelledError" });
      expect(aborted.at - cancelledAt).toBeLessThan(LEASE_MS / 3 + SLACK_MS);
      const answer = await call;
      expect(answer).toBeInstanceOf(OutcomeUnknownError);
      expect(await s.record(taskId, "charge")).toMatchObject({ state: "unknown", cancellation: BY });
      const job = await s.queue.getJob(`once-${deriveKey(step)}`);
      expect(job?.attemptsMade).toBe(1);
      expect(s.charges().total).toBe(1);
    });
  });

  it("an InProcess caller process whose charge is in flight sees ctx.signal abort within one heartbeat, and is told the outcome is unknown", async () => {
    await withScenario({ label: "cancel-in-process" }, async (s) => {
      const taskId = `task-cancel-in-process-${process.pid}`;
      const step = { taskId, stepId: "charge" };
      const caller = startInProcessCall({
        redisUrl: redisUrl(),
        storePrefix: s.storePrefix,
        paymentsUrl: s.payments.url,
        leaseMs: LEASE_MS,
        step,
        input: { orderId: "order-cancel-ip", amount: 3_100, providerLatencyMs: 20_000 },
      });
      try {
        await caller.waitFor("run-entered", { timeoutMs: 15_000 });
        expect(await pollUntil(() => s.charges().total === 1, { timeoutMs: 10_000, intervalMs: 10 })).toBe(
          true,
        );
        const cancelledAt = Date.now();
        expect((await s.store.cancelTask({ taskId }, BY)).running).toEqual([deriveKey(step)]);
        const aborted = await caller.waitFor("signal-aborted", { timeoutMs: 10_000 });
        expect(aborted.reason).toMatchObject({ name: "TaskCancelledError" });
        expect(aborted.at - cancelledAt).toBeLessThan(LEASE_MS / 3 + SLACK_MS);
        const settled = await caller.waitFor("settled", { timeoutMs: 10_000 });
        expect(settled.error).toMatchObject({ name: "OutcomeUnknownError", code: "ONCE_OUTCOME_UNKNOWN" });
        expect(await s.record(taskId, "charge")).toMatchObject({ state: "unknown", cancellation: BY });
        expect(s.charges().total).toBe(1);
        // Not retried: the caller made one attempt, and the provider saw one charge.
        expect(caller.all("run-entered")).toHaveLength(1);
      } finally {
        await caller.stop();
      }
    });
  });

  it("an InProcess caller process of an already cancelled task is told TaskCancelledError, and nothing is charged", async () => {
    await withScenario({ label: "cancel-in-process-refused" }, async (s) => {
      const taskId = `task-cancel-refused-${process.pid}`;
      await s.store.cancelTask({ taskId }, BY);
      const caller = startInProcessCall({
        redisUrl: redisUrl(),
        storePrefix: s.storePrefix,
        paymentsUrl: s.payments.url,
        leaseMs: LEASE_MS,
        step: { taskId, stepId: "charge" },
        input: { orderId: "order-cancel-refused", amount: 900 },
      });
      try {
        const settled = await caller.waitFor("settled", { timeoutMs: 15_000 });
        expect(settled.error).toMatchObject({ name: "TaskCancelledError", code: "ONCE_TASK_CANCELLED" });
        expect(caller.all("run-entered")).toEqual([]);
        expect(s.charges().total).toBe(0);
      } finally {
        await caller.stop();
      }
    });
  });
});

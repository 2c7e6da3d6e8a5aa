// Scenario 6: one (taskId, stepId) used for a different call. The key is the orchestrator's promise that
// this is the same call; a different input under it is a bug upstream (a step id reused for another
// charge), and once refuses it with IdempotencyConflictError wherever it meets it: in the dispatcher that
// is running the first call, in another dispatcher reading the record, and in the worker claiming the key.
// It never charges a second time.

import { Dispatcher, jobIdForKey } from "@once/bullmq";
import { defineTool, IdempotencyConflictError } from "@once/core";
import { redisUrl } from "@once/support";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { chargeInput, chargeOutput } from "../fixtures/tools.js";
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

  it("while the first call's job is still queued: other dispatchers with another input or tool get a conflict", () =>
    withScenario({ label: "conflict-queued" }, async (s) => {
      // One worker, concurrency 1, held before the charge of another call: the step's job waits in the queue.
      const gate = s.gateFile("busy");
      const worker = await s.startWorker({
        concurrency: 1,
        pause: { at: "before-charge", mode: "gate", gateFile: gate },
      });
      const d1 = await s.dispatcher();
      const busy = d1.call(
        s.tools.chargeCustomer,
        { orderId: "order_busy", amount: 1 },
        { taskId: "task-busy", stepId: "s" },
      );
      await worker.waitFor("before-charge");
      const step = { taskId: "task-conflict", stepId: "charge" };
      const first = d1.call(s.tools.chargeCustomer, { orderId: "order_6", amount: 1000 }, step);
      const jobId = jobIdForKey(s.key(step.taskId, step.stepId));
      while ((await s.queue.getJob(jobId)) === undefined) await new Promise((r) => setTimeout(r, 10));
      expect(await (await s.queue.getJob(jobId))?.getState()).toBe("waiting");
      expect(await s.record(step.taskId, step.stepId)).toBeUndefined();

      // Other orchestrator replicas, on connections of their own.
      const refundCustomer = defineTool({
        name: "refund_customer",
        kind: "effect",
        input: chargeInput,
        output: chargeOutput,
        run: () => {
          throw new Error("never runs: no worker declares it");
        },
      });
      const replicas = [
        new Redis(redisUrl(), { maxRetriesPerRequest: null }),
        new Redis(redisUrl(), { maxRetriesPerRequest: null }),
      ];
      const queues = replicas.map(
        (connection) => new Queue(s.queueName, { connection, prefix: s.queuePrefix }),
      );
      const [d2, d3] = await Promise.all(
        queues.map((queue) =>
          Dispatcher.create({
            queue,
            store: s.store,
            tools: [...s.tools.all, refundCustomer],
            timeoutMs: 30_000,
            retries: 0,
          }),
        ),
      );
      try {
        const others = Promise.allSettled([
          d2?.call(s.tools.chargeCustomer, { orderId: "order_6", amount: 100_000 }, step),
          d3?.call(refundCustomer, { orderId: "order_6", amount: 1000 }, step),
        ]);
        // Both must be answered while the job still waits; the worker is released only then (or after 10 s).
        const answered = await Promise.race([
          others,
          new Promise((r) => setTimeout(r, 10_000, "still waiting")),
        ]);
        s.openGate(gate);
        expect(answered).not.toBe("still waiting");
        const [amountChanged, otherTool] = await others;
        expect(amountChanged).toMatchObject({
          status: "rejected",
          reason: expect.any(IdempotencyConflictError),
        });
        expect(otherTool).toMatchObject({ status: "rejected", reason: expect.any(IdempotencyConflictError) });
        expect(String((otherTool as PromiseRejectedResult).reason.message)).toContain(
          "different tool (charge_customer)",
        );

        // The first call is untouched: it charges its own amount, once.
        const { result } = await first;
        expect(result).toMatchObject({ orderId: "order_6", amount: 1000 });
        await busy;
        const charges = s.charges();
        expect(charges.byOrder.order_6).toBe(1);
        expect(charges.total).toBe(2);
        expect(charges.duplicates).toBe(0);
        expect((await s.provider.findCharges({ orderId: "order_6" })).map((c) => c.amount)).toEqual([1000]);
      } finally {
        s.openGate(gate);
        await Promise.all([d2?.close(), d3?.close()]);
        await Promise.all(queues.map((queue) => queue.close()));
        for (const replica of replicas) replica.disconnect();
      }
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

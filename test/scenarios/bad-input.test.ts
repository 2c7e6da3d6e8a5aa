// Scenario 8: calls once must refuse, each with its named error, and without a charge it should not make.
// Refusals before the effect (unknown tool, invalid input, no step identity, malformed job data, a job id
// that is not its key, an unreachable store) charge nothing. The two refusals about a result (not JSON,
// too large) can only come after `run` produced it, so the one charge has happened by then: what once
// guarantees there is that it is never repeated — the failure is stored and replayed, never re-run.

import { type CallData, Dispatcher, jobIdForKey } from "@once/bullmq";
import {
  CallFailedError,
  defineTool,
  deriveKey,
  InvalidInputError,
  MissingStepIdentityError,
  StoreUnavailableError,
  UnknownToolError,
} from "@once/core";
import { RedisStore } from "@once/redis";
import { startRedisServer } from "@once/support";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { chargeInput, chargeOutput, HUGE_RECEIPT_BYTES } from "../fixtures/tools.js";
import type { WorkerProcess } from "../support/processes.js";
import { type Scenario, withScenario } from "./scenario.js";

const step = { taskId: "task-bad", stepId: "charge-1" };
const validInput = { orderId: "order_8", amount: 1200 };

/** Job data as a dispatcher would enqueue it, with `overrides`. */
function callData(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const data: CallData = { v: 1, tool: "charge_customer", namespace: "default", ...step, input: validInput };
  return { ...data, ...overrides };
}

/**
 * Adds a raw job (as a buggy or hostile producer would) with 3 attempts, and waits until `worker` reports
 * its `attempts`-th failure: 1 for a refusal that must not be retried, 3 for one that may.
 */
async function addRawJobAndWaitForFailure(
  s: Scenario,
  worker: WorkerProcess,
  data: Record<string, unknown>,
  jobId: string,
  attempts = 1,
) {
  await s.queue.add(String(data.tool ?? "raw"), data, { jobId, attempts: 3, backoff: 10 });
  const failed = await worker.waitFor(
    (e) => e.event === "job-failed" && e.jobId === jobId && e.attemptsMade === attempts,
  );
  const job = await s.queue.getJob(jobId);
  return { failed, job, state: await job?.getState() };
}

function expectNoCharges(s: Scenario): void {
  const charges = s.charges();
  expect(charges.total).toBe(0);
  expect(charges.duplicates).toBe(0);
}

async function expectNothingEnqueued(s: Scenario): Promise<void> {
  expect(await s.queue.getJobCounts("waiting", "active", "delayed", "completed", "failed")).toEqual({
    waiting: 0,
    active: 0,
    delayed: 0,
    completed: 0,
    failed: 0,
  });
}

describe("scenario 8: bad calls are refused with named errors", () => {
  it("an unknown tool: the dispatcher refuses it, and a worker refuses a raw job naming one", () =>
    withScenario({ label: "bad-unknown-tool" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher();
      const refund = defineTool({
        name: "refund_customer",
        kind: "effect",
        input: chargeInput,
        output: chargeOutput,
        run: () => ({ chargeId: "never", orderId: "never", amount: 1 }),
      });
      await expect(dispatcher.call(refund, validInput, step)).rejects.toBeInstanceOf(UnknownToolError);
      // Another declaration under a registered name is not the registered tool either.
      const impostor = defineTool({
        ...s.tools.chargeCustomer,
        run: () => ({ chargeId: "x", orderId: "x", amount: 1 }),
      });
      await expect(dispatcher.call(impostor, validInput, step)).rejects.toBeInstanceOf(UnknownToolError);
      await expectNothingEnqueued(s);

      const jobId = jobIdForKey(s.key(step.taskId, step.stepId));
      const { failed, job, state } = await addRawJobAndWaitForFailure(
        s,
        worker,
        callData({ tool: "refund_customer" }),
        jobId,
      );
      expect(failed.error).toMatchObject({ cause: { name: "UnknownToolError" } });
      expect(job?.failedReason).toMatch(/^UnknownToolError: unknown tool "refund_customer"/);
      expect({ state, attemptsMade: job?.attemptsMade }).toEqual({ state: "failed", attemptsMade: 1 });
      expect(await s.record(step.taskId, step.stepId)).toBeUndefined();
      expect(worker.all("run-entered")).toHaveLength(0);
      expectNoCharges(s);
    }));

  it("input failing the tool's schema: InvalidInputError, nothing enqueued", () =>
    withScenario({ label: "bad-input-schema" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher();
      const call = dispatcher.call(s.tools.chargeCustomer, { orderId: "", amount: -5 }, step);
      await expect(call).rejects.toBeInstanceOf(InvalidInputError);
      const error = (await call.catch((e: unknown) => e)) as InvalidInputError;
      expect(error.issues).toEqual([expect.stringMatching(/^orderId: /), expect.stringMatching(/^amount: /)]);
      // The message names paths, never the offending values.
      expect(error.message).not.toContain("-5");

      await expectNothingEnqueued(s);
      expect(await s.record(step.taskId, step.stepId)).toBeUndefined();
      expect(worker.all("run-entered")).toHaveLength(0);
      expectNoCharges(s);
    }));

  it("an effect call without taskId or stepId: a type error, and MissingStepIdentityError at run time", () =>
    withScenario({ label: "bad-no-step" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher();
      await expect(
        // @ts-expect-error charge_customer is an effect tool: its key needs the step's taskId and stepId
        dispatcher.call(s.tools.chargeCustomer, validInput, { taskId: step.taskId }),
      ).rejects.toMatchObject({ name: "MissingStepIdentityError", missing: ["stepId"] });
      await expect(
        // @ts-expect-error leaving the options out does not make an effect call anonymous
        dispatcher.call(s.tools.chargeCustomer, validInput),
      ).rejects.toBeInstanceOf(MissingStepIdentityError);
      await expectNothingEnqueued(s);

      // A raw job without a stepId: the job-data schema lets it through (read tools need none), the worker
      // refuses it before claiming anything.
      const { stepId: _omitted, ...noStep } = callData();
      const { failed, job } = await addRawJobAndWaitForFailure(s, worker, noStep, "once-no-step-identity");
      expect(failed.error).toMatchObject({ cause: { name: "MissingStepIdentityError" } });
      expect(job?.failedReason).toMatch(/^MissingStepIdentityError: /);
      expect(job?.attemptsMade).toBe(1);
      expect(worker.all("run-entered")).toHaveLength(0);
      expectNoCharges(s);
    }));

  it("job data that fails its schema: InvalidJobDataError, not retried", () =>
    withScenario({ label: "bad-job-data" }, async (s) => {
      const worker = await s.startWorker();
      const jobId = jobIdForKey(s.key(step.taskId, step.stepId));
      const { failed, job, state } = await addRawJobAndWaitForFailure(
        s,
        worker,
        // Looks like a once call (v: 1 and a tool), but the namespace is not a string.
        callData({ namespace: 42 }),
        jobId,
      );
      expect(failed.error).toMatchObject({ cause: { name: "InvalidJobDataError" } });
      expect(job?.failedReason).toMatch(/^InvalidJobDataError: job data is not a once call: namespace: /);
      expect({ state, attemptsMade: job?.attemptsMade }).toEqual({ state: "failed", attemptsMade: 1 });
      expect(await s.record(step.taskId, step.stepId)).toBeUndefined();
      expect(worker.all("run-entered")).toHaveLength(0);
      expectNoCharges(s);
    }));

  it("a job whose id is not the key of its own step: KeyMismatchError, no record for either key", () =>
    withScenario({ label: "bad-key-mismatch" }, async (s) => {
      const worker = await s.startWorker();
      // The id of another step's key: a job cannot pick the key it runs under.
      const otherKey = deriveKey({ taskId: "task-other", stepId: "charge-9" });
      const { failed, job } = await addRawJobAndWaitForFailure(s, worker, callData(), jobIdForKey(otherKey));
      expect(failed.error).toMatchObject({ cause: { name: "KeyMismatchError" } });
      expect(job?.failedReason).toMatch(/^KeyMismatchError: /);
      expect(job?.attemptsMade).toBe(1);
      expect(await s.record(step.taskId, step.stepId)).toBeUndefined();
      expect(await s.store.get(otherKey)).toBeUndefined();
      expect(worker.all("run-entered")).toHaveLength(0);
      expectNoCharges(s);
    }));

  it("a result that is not JSON-serialisable: ResultNotSerializableError, stored, replayed, never re-run", () =>
    withScenario({ label: "bad-result-json" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher();
      const call = dispatcher.call(s.tools.chargeCustomerUnserializable, validInput, step);
      const error = (await call.catch((e: unknown) => e)) as CallFailedError;
      expect(error).toBeInstanceOf(CallFailedError);
      expect(error.stored.name).toBe("ResultNotSerializableError");
      const job = await s.queue.getJob(jobIdForKey(s.key(step.taskId, step.stepId)));
      expect(job?.failedReason).toMatch(/^ResultNotSerializableError: .*BigInt/);
      expect(job?.attemptsMade).toBe(1);
      expect(await s.record(step.taskId, step.stepId)).toMatchObject({
        state: "failed",
        error: { name: "ResultNotSerializableError" },
      });

      // Asked again: the stored failure, not a second charge.
      await expect(
        dispatcher.call(s.tools.chargeCustomerUnserializable, validInput, step),
      ).rejects.toMatchObject({
        name: "ReplayedFailureError",
        stored: { name: "ResultNotSerializableError" },
      });
      expect(worker.all("run-entered")).toHaveLength(1);
      // One charge: the effect ran before its result could be judged. Zero duplicates.
      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("a result over maxResultBytes: ResultTooLargeError, stored, replayed, never re-run", () =>
    withScenario({ label: "bad-result-size", worker: { maxResultBytes: 4096 } }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher();
      const error = (await dispatcher
        .call(s.tools.chargeCustomerHuge, validInput, step)
        .catch((e: unknown) => e)) as CallFailedError;
      expect(error).toBeInstanceOf(CallFailedError);
      expect(error.stored.name).toBe("ResultTooLargeError");
      expect(error.stored.message).toMatch(/over the 4096-byte limit/);
      const job = await s.queue.getJob(jobIdForKey(s.key(step.taskId, step.stepId)));
      expect(job?.failedReason).toMatch(/^ResultTooLargeError: /);
      const record = await s.record(step.taskId, step.stepId);
      expect(record).toMatchObject({ state: "failed", error: { name: "ResultTooLargeError" } });
      // The receipt went nowhere: neither into the record nor into the job.
      expect(JSON.stringify(record).length).toBeLessThan(HUGE_RECEIPT_BYTES);
      expect(job?.returnvalue ?? null).toBeNull();

      await expect(dispatcher.call(s.tools.chargeCustomerHuge, validInput, step)).rejects.toMatchObject({
        stored: { name: "ResultTooLargeError" },
      });
      expect(worker.all("run-entered")).toHaveLength(1);
      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.duplicates).toBe(0);
    }));

  it("the store unreachable at claim time (BullMQ's Redis fine): StoreUnavailableError, run never entered", async () => {
    const storeServer = await startRedisServer();
    try {
      await withScenario(
        { label: "bad-store-down", worker: { storeRedisUrl: storeServer.url } },
        async (s) => {
          const worker = await s.startWorker();
          // The orchestrator's view of the same store, for its half of the check below.
          const orchestratorRedis = new Redis(storeServer.url, {
            maxRetriesPerRequest: 1,
            retryStrategy: () => 100,
          });
          orchestratorRedis.on("error", () => {});
          try {
            const downStore = await RedisStore.create({ redis: orchestratorRedis, prefix: s.storePrefix });
            await storeServer.kill("SIGKILL");

            // The worker: BullMQ delivers the job (its own Redis is up), the claim cannot reach the store.
            const jobId = jobIdForKey(s.key(step.taskId, step.stepId));
            const { failed, job, state } = await addRawJobAndWaitForFailure(s, worker, callData(), jobId, 3);
            expect(failed.error).toMatchObject({ name: "StoreUnavailableError" });
            expect(state).toBe("failed");
            expect(job?.failedReason).toMatch(/^dedup store unavailable during claim/);
            // Retryable (the store may come back): every attempt failed closed the same way.
            expect(job?.attemptsMade).toBe(3);
            expect(worker.all("job-failed").map((e) => (e.error as { name: string }).name)).toEqual([
              "StoreUnavailableError",
              "StoreUnavailableError",
              "StoreUnavailableError",
            ]);
            expect(worker.all("run-entered")).toHaveLength(0);

            // The orchestrator side fails closed too: its look-up fails, and nothing is enqueued.
            const downDispatcher = await Dispatcher.create({
              queue: s.queue,
              store: downStore,
              tools: s.tools.all,
            });
            try {
              const otherStep = { taskId: step.taskId, stepId: "charge-2" };
              await expect(
                downDispatcher.call(
                  s.tools.chargeCustomer,
                  { ...validInput, orderId: "order_8b" },
                  otherStep,
                ),
              ).rejects.toBeInstanceOf(StoreUnavailableError);
              expect(
                await s.queue.getJob(jobIdForKey(s.key(otherStep.taskId, otherStep.stepId))),
              ).toBeUndefined();
            } finally {
              await downDispatcher.close();
            }
            expectNoCharges(s);
          } finally {
            orchestratorRedis.disconnect();
          }
        },
      );
    } finally {
      await storeServer.stop();
    }
  });
});

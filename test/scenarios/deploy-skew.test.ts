// Two deploys that disagree about a tool. The orchestrator declares `charge_customer` an effect; a worker
// from an older deploy declares the same name `write`. Were the worker to go by its own declaration, it would
// run the keyed job as a direct call (no claim, no record) and a resumed step would charge again. The job
// says what the orchestrator meant, so the worker refuses it: unrecoverable, nothing charged, an error naming
// both declarations. Job data of a version a worker does not know is refused the same way, also by
// `withOnce` (which must not hand it to the user's own processor).

import { type CallOutcome, createCallProcessor, OnceWorker, withOnce } from "@once/bullmq";
import { defineTool, jobIdForKey } from "@once/core";
import { PaymentsClient } from "@once/payments";
import { redisUrl } from "@once/support";
import { type Job, Worker } from "bullmq";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { chargeInput, chargeOutput } from "../fixtures/tools.js";
import { withScenario } from "./scenario.js";

const STEP = { taskId: "task-skew", stepId: "charge-1" };

describe("deploy skew: the orchestrator and a worker declare one tool differently", () => {
  it("a worker that declares an effect tool `write` refuses the keyed job: 0 charges, also when the step is called again", () =>
    withScenario({ label: "skew-write" }, async (s) => {
      const payments = new PaymentsClient(s.payments.url);
      const olderCharge = defineTool({
        name: "charge_customer",
        kind: "write",
        input: chargeInput,
        output: chargeOutput,
        run: async (input) => {
          const charge = await payments.charge({
            amount: input.amount,
            currency: "usd",
            orderId: input.orderId,
          });
          return { chargeId: charge.id, orderId: charge.orderId, amount: charge.amount };
        },
      });
      const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null });
      const older = await OnceWorker.create({
        queueName: s.queueName,
        connection,
        store: s.store,
        tools: [olderCharge],
        workerOptions: { prefix: s.queuePrefix },
      });
      const failures: Error[] = [];
      older.worker.on("failed", (_job, error) => failures.push(error));
      try {
        // Removed on completion, as many deployments do: a resume then enqueues a fresh job.
        const dispatcher = await s.dispatcher({ jobOptions: { removeOnComplete: true, attempts: 3 } });
        const input = { orderId: "order_skew", amount: 2500 };
        const refused =
          /ToolKindMismatchError: charge_customer: the orchestrator declared it effect, this worker declares it write/;
        await expect(dispatcher.call(s.tools.chargeCustomer, input, STEP)).rejects.toThrow(refused);
        const job = await s.queue.getJob(jobIdForKey(s.key(STEP.taskId, STEP.stepId)));
        expect(job?.attemptsMade).toBe(1); // unrecoverable: not retried
        // The orchestrator resumes and calls the step again: the failed job runs again, and is refused again.
        await expect(dispatcher.call(s.tools.chargeCustomer, input, STEP)).rejects.toThrow(refused);
        expect(failures[0]?.name).toBe("UnrecoverableError");
        expect(s.charges().total).toBe(0);
        expect(await s.record(STEP.taskId, STEP.stepId)).toBeUndefined();
      } finally {
        await older.close(true);
        connection.disconnect();
      }
    }));

  it("a worker that declares an effect tool `write` refuses a keyed job without a kind (older job data) too", () =>
    withScenario({ label: "skew-v1" }, async (s) => {
      const olderCharge = defineTool({
        name: "charge_customer",
        kind: "write",
        input: chargeInput,
        output: chargeOutput,
        run: () => {
          throw new Error("must not run");
        },
      });
      const process = createCallProcessor({ store: s.store, tools: [olderCharge] });
      const jobId = jobIdForKey(s.key(STEP.taskId, STEP.stepId));
      const data = {
        v: 1,
        tool: "charge_customer",
        namespace: "default",
        ...STEP,
        input: { orderId: "o", amount: 1 },
      };
      const job = await s.queue.add("charge_customer", data, { jobId });
      await expect(process(job)).rejects.toMatchObject({
        name: "UnrecoverableError",
        cause: { name: "ToolKindMismatchError", jobKind: undefined, workerKind: "write" },
      });
      await expect(process(job)).rejects.toThrow(/carries an idempotency key, which only effect calls get/);
    }));

  it("job data of a version the worker does not know is refused, and withOnce does not hand it to your processor", () =>
    withScenario({ label: "skew-version" }, async (s) => {
      const plainJobs: string[] = [];
      const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null });
      const outcomes: Array<{ id?: string; failedReason?: string; value?: CallOutcome }> = [];
      const worker = new Worker(
        s.queueName,
        withOnce(
          async (job: Job) => {
            plainJobs.push(String(job.id));
            return { plain: true };
          },
          { store: s.store, tools: s.tools.all },
        ),
        { connection, prefix: s.queuePrefix },
      );
      worker.on("failed", (job) => outcomes.push({ id: job?.id, failedReason: job?.failedReason }));
      worker.on("completed", (job, value) => outcomes.push({ id: job.id, value: value as CallOutcome }));
      try {
        const future = {
          v: 3,
          tool: "charge_customer",
          kind: "effect",
          namespace: "default",
          ...STEP,
          input: {},
        };
        await s.queue.add("charge_customer", future, { jobId: "future-1" });
        await s.queue.add("plain", { hello: "world" }, { jobId: "plain-1" });
        while (outcomes.length < 2) await new Promise((resolve) => setTimeout(resolve, 20));
        expect(outcomes.find((o) => o.id === "future-1")?.failedReason).toMatch(
          /^InvalidJobDataError: .*version 3 is newer than this worker reads \(1 to 2\)/,
        );
        expect(plainJobs).toEqual(["plain-1"]);
        expect(s.charges().total).toBe(0);
      } finally {
        await worker.close(true);
        connection.disconnect();
      }
    }));
});

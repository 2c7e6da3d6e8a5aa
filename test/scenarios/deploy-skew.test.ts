// Two deploys that disagree about a tool, or about how a record is stored. The orchestrator declares `charge_customer` an effect; a worker
// from an older deploy declares the same name `write`. Were the worker to go by its own declaration, it would
// run the keyed job as a direct call (no claim, no record) and a resumed step would charge again. The job
// says what the orchestrator meant, so the worker refuses it: unrecoverable, nothing charged, an error naming
// both declarations. Job data of a version a worker does not know is refused the same way, also by
// `withOnce` (which must not hand it to the user's own processor). A record written by a later build of its
// store, in a layout this build does not know, is refused wherever it is read: RecordLayoutError naming both
// layouts, and no effect runs.

import { type CallOutcome, createCallProcessor, jobIdForKey, OnceWorker, withOnce } from "@once/bullmq";
import { runCli } from "@once/cli";
import { defineTool, deriveKey } from "@once/core";
import { InProcess } from "@once/engine";
import { PaymentsClient, startPaymentsServer } from "@once/payments";
import { RECORD_LAYOUT as POSTGRES_LAYOUT, PostgresStore } from "@once/postgres";
import { RECORD_LAYOUT as REDIS_LAYOUT } from "@once/redis";
import { postgresUrl, randomSchema, redisUrl } from "@once/support";
import { type Job, Worker } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { chargeInput, chargeOutput, chargeTools } from "../fixtures/tools.js";
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

describe("deploy skew: a record written in a layout newer than this build reads", () => {
  const step = { taskId: "task-layout", stepId: "charge-1" };
  const input = { orderId: "order_layout", amount: 2500 };
  const refusal = (written: number, known: number) =>
    `was written by layout ${written}, this reader knows up to ${known}: upgrade it; nothing was read or run`;

  it("on Redis: the worker's flow, the dispatcher and `once inspect` refuse it, and nothing is charged", () =>
    withScenario({ label: "skew-layout" }, async (s) => {
      let runs = 0;
      const tools = chargeTools({ paymentsUrl: s.payments.url, hooks: { runEntered: () => runs++ } });
      const runner = new InProcess({ store: s.store, tools: tools.all, attempts: 1 });
      await runner.call(tools.chargeCustomer, input, step);
      expect([runs, s.charges().total]).toEqual([1, 1]);

      const key = s.key(step.taskId, step.stepId);
      const full = s.storePrefix + key;
      const newer = REDIS_LAYOUT + 1;
      const refused = refusal(newer, REDIS_LAYOUT);
      // A later build's record as it would write it, a string that starts with its layout; and as a hash that
      // names it, released: a reader that took it for its own would charge again.
      const laterRecords = [
        () =>
          s.redis.eval(
            "redis.call('SET', KEYS[1], cmsgpack.pack({tonumber(ARGV[1])}), 'KEEPTTL')",
            1,
            full,
            newer,
          ),
        async () => {
          await s.redis.del(full);
          await s.redis.hset(full, {
            state: "released",
            fence: 2,
            fp: "fp",
            tool: "charge_customer",
            layout: newer,
          });
          await s.redis.pexpire(full, 60_000);
        },
      ];
      for (const writeLater of laterRecords) {
        await writeLater();
        await expect(runner.call(tools.chargeCustomer, input, step)).rejects.toThrow(refused);
        const processJob = createCallProcessor({ store: s.store, tools: tools.all });
        const job = await s.queue.add(
          "charge_customer",
          {
            v: 2,
            tool: "charge_customer",
            kind: "effect",
            callId: "c1",
            namespace: "default",
            ...step,
            input,
          },
          { jobId: jobIdForKey(key) },
        );
        await expect(processJob(job)).rejects.toThrow(refused);
        await job.remove();
        const dispatcher = await s.dispatcher();
        await expect(dispatcher.call(s.tools.chargeCustomer, input, step)).rejects.toThrow(refused);
        expect(await s.queue.getJob(jobIdForKey(key))).toBeUndefined();
      }
      expect([runs, s.charges().total]).toEqual([1, 1]);

      const out: string[] = [];
      const io = {
        stdout: { write: (text: string) => out.push(text) },
        stderr: { write: (text: string) => out.push(text) },
        stdin: process.stdin,
        env: {},
        cwd: process.cwd(),
      };
      const code = await runCli(["inspect", key, "--redis-url", redisUrl(), "--prefix", s.storePrefix], io);
      expect(code).toBe(1);
      expect(out.join("")).toContain(refused);
      // Told as what it is, not as a crash of the command.
      expect(out.join("")).not.toContain("unexpected error");
    }));

  it("on PostgreSQL: a replay refuses it, and nothing is charged", async () => {
    const pool = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
    const schema = randomSchema("skew_layout");
    const payments = await startPaymentsServer({ latency: { fixedMs: 1 } });
    try {
      const store = await PostgresStore.create({ pool, schema });
      let runs = 0;
      const tools = chargeTools({ paymentsUrl: payments.url, hooks: { runEntered: () => runs++ } });
      const runner = new InProcess({ store, tools: tools.all, attempts: 1 });
      await runner.call(tools.chargeCustomer, input, step);
      const newer = POSTGRES_LAYOUT + 1;
      await pool.query(`update "${schema}".records set layout = $1 where key = $2`, [newer, deriveKey(step)]);
      await expect(runner.call(tools.chargeCustomer, input, step)).rejects.toThrow(
        refusal(newer, POSTGRES_LAYOUT),
      );
      await expect(store.get(deriveKey(step))).rejects.toThrow(refusal(newer, POSTGRES_LAYOUT));
      expect([runs, payments.ledger().charges.total]).toEqual([1, 1]);
    } finally {
      await payments.close();
      await pool.query(`drop schema if exists "${schema}" cascade`);
      await pool.end();
    }
  });
});

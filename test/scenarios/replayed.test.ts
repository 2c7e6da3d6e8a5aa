// `replayed` means one thing: this call ran nothing; the result was produced by an earlier call. The call
// whose own enqueue created the job, and whose job executed, is never `replayed`, even when it sees another
// enqueue of the same job id (another replica's call) just before the completion; the replica that joined
// that job is `replayed`. To make the race certain instead of rare, this test process stands still (the
// replica runs under `spawnSync`) while the replica enqueues, the worker completes, and both BullMQ events
// wait unread; the first call then reads the `duplicated` event of a job that has already completed.

import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { jobIdForKey } from "@once/bullmq";
import { redisUrl } from "@once/support";
import { describe, expect, it } from "vitest";
import { REPLICA_CALL_ENV, type ReplicaCallConfig } from "../fixtures/replica-call-config.js";
import { withScenario } from "./scenario.js";

const testRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

describe("replayed: this call ran nothing", () => {
  it("the executing call is not replayed though another replica's enqueue lands just before the completion; the replica is", () =>
    withScenario({ label: "replayed-race" }, async (s) => {
      const gate = s.gateFile("after-charge");
      const worker = await s.startWorker({ pause: { at: "after-charge", mode: "gate", gateFile: gate } });
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-replayed", stepId: "charge-1" };
      const input = { orderId: "order_r", amount: 1200 };
      const jobId = jobIdForKey(s.key(step.taskId, step.stepId));
      const first = dispatcher.call(s.tools.chargeCustomer, input, step);
      await worker.waitFor("charged");

      const replica = spawnSync(process.execPath, ["--import", "tsx", "fixtures/replica-call.ts"], {
        cwd: testRoot,
        encoding: "utf8",
        timeout: 30_000,
        env: {
          ...process.env,
          [REPLICA_CALL_ENV]: JSON.stringify({
            redisUrl: redisUrl(),
            queueName: s.queueName,
            queuePrefix: s.queuePrefix,
            storePrefix: s.storePrefix,
            jobId,
            step,
            input,
            openGateFile: gate,
          } satisfies ReplicaCallConfig),
        },
      });
      expect(replica.status, `${replica.error ?? ""} ${replica.stderr}`).toBe(0);
      const theirs = JSON.parse(replica.stdout.trim().split("\n").at(-1) ?? "null");

      // The worker completed while this process stood still: the job's completion is already recorded.
      expect(await (await s.queue.getJob(jobId))?.getState()).toBe("completed");
      const ours = await first;
      expect(ours).toMatchObject({ replayed: false, enqueues: 1 });
      expect(theirs).toMatchObject({ replayed: true, enqueues: 1, result: ours.result });

      expect(worker.all("run-entered")).toHaveLength(1);
      expect(s.charges()).toMatchObject({ total: 1, duplicates: 0 });
    }));

  it("a second caller joining a call in flight in the same dispatcher is replayed; the first is not", () =>
    withScenario({ label: "replayed-join" }, async (s) => {
      const worker = await s.startWorker();
      const dispatcher = await s.dispatcher();
      const step = { taskId: "task-replayed", stepId: "charge-2" };
      const input = { orderId: "order_j", amount: 800, providerLatencyMs: 300 };
      const first = dispatcher.call(s.tools.chargeCustomer, input, step);
      const joined = dispatcher.call(s.tools.chargeCustomer, input, step);
      const [a, b] = await Promise.all([first, joined]);
      expect(a).toMatchObject({ replayed: false, enqueues: 1 });
      expect(b).toMatchObject({ replayed: true, enqueues: 0, result: a.result });
      expect(worker.all("run-entered")).toHaveLength(1);
      expect(s.charges()).toMatchObject({ total: 1, duplicates: 0 });
    }));
});

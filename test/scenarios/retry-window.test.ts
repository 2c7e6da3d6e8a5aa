// The record must outlive every retry of its job. A store whose retention is shorter than the retry window
// lets a record expire while its job can still be retried: a worker SIGKILLed after the provider charged
// leaves a claimed record, the record expires, the stalled job's next worker finds no record, is `acquired`,
// and charges again. Every worker-side entry point (`OnceWorker.create`, `createCallProcessor`, `withOnce`)
// refuses such a configuration at start, naming every term of the window, and so does the dispatcher; with
// a retention that covers the window the same entry point survives the same kill with one charge.

import { createCallProcessor, Dispatcher, OnceWorker } from "@once/bullmq";
import { defineTool } from "@once/core";
import { RetryWindowError } from "@once/engine";
import { RedisStore } from "@once/redis";
import { describe, expect, it } from "vitest";
import { chargeInput, chargeOutput } from "../fixtures/tools.js";
import { WORKER_APIS } from "../fixtures/worker-config.js";
import { withScenario } from "./scenario.js";

const STEP = { taskId: "task-window", stepId: "charge-1" };

describe("a retention shorter than the retry window", () => {
  it.each(WORKER_APIS)("%s refuses to start, naming every term; nothing is charged", (api) =>
    withScenario({ label: `window-${api}` }, async (s) => {
      const dispatcher = await s.dispatcher();
      // The job, as the Dispatcher adds it, waits for a worker.
      const call = dispatcher.call(s.tools.chargeCustomer, { orderId: "order_w", amount: 700 }, STEP);
      call.catch(() => {}); // settled by the cleanup's close

      // A lock of 2 s (given) and BullMQ's stalled interval (not given to the processor: assumed).
      const start = s.startWorker(
        { api, retentionMs: 1_000, leaseMs: 6_000, lockDurationMs: 2_000, maxStalledCount: 10 },
        "short-retention",
      );
      const refusal = await start.then(
        () => "started",
        (error: Error) => error.message,
      );
      expect(refusal).toContain('"event":"start-failed"');
      expect(refusal).toContain(RetryWindowError.name);
      expect(refusal).toContain("retention 1000 ms is shorter than the worst-case retry window");
      for (const term of ["backoff: 0 ms", "attempts: ", "resumeGap: 0 ms"]) expect(refusal).toContain(term);
      expect(refusal).toContain("lease 6000 (the worker's)");
      expect(refusal).toContain("lockDuration 2000");
      if (api !== "once-worker") {
        // A processor cannot read its Worker's settings: what it was not told, it says it assumed.
        expect(refusal).toContain("stalledInterval 30000 (BullMQ's default, assumed)");
      }

      expect((await s.queue.getJobCounts("waiting")).waiting).toBe(1);
      expect(s.charges().total).toBe(0);
    }),
  );

  it.each(["call-processor", "with-once"] as const)(
    "%s with a retention that covers the window: SIGKILLed after the charge, the next worker reconciles — 1 charge",
    (api) =>
      withScenario({ label: `window-ok-${api}` }, async (s) => {
        const timings = {
          api,
          leaseMs: 1_000,
          lockDurationMs: 1_000,
          stalledIntervalMs: 500,
          maxStalledCount: 10,
        };
        const first = await s.startWorker(
          { ...timings, pause: { at: "after-charge", mode: "hang" } },
          "first",
        );
        const dispatcher = await s.dispatcher();
        const call = dispatcher.call(s.tools.chargeCustomer, { orderId: "order_w", amount: 700 }, STEP);

        const charged = await first.waitFor("charged");
        await first.kill("SIGKILL");
        const second = await s.startWorker(timings, "second");

        const { result } = await call;
        expect(result.chargeId).toBe(charged.chargeId);
        expect((await second.waitFor("reconciled")).found).toEqual([charged.chargeId]);
        expect(second.all("run-entered")).toHaveLength(0);
        expect(s.charges()).toMatchObject({ total: 1, duplicates: 0 });
      }),
  );

  it("the dispatcher counts the tools' own leases, as the workers do: all refuse, each counting its worker's lock", () =>
    withScenario({ label: "window-tool-lease" }, async (s) => {
      // A tool that declares a 10-minute lease; retention 5 minutes.
      const slowCharge = defineTool({
        name: "charge_customer",
        kind: "effect",
        input: chargeInput,
        output: chargeOutput,
        leaseMs: 600_000,
        run: () => {
          throw new Error("never runs: the configuration is refused");
        },
      });
      const store = await RedisStore.create({ redis: s.redis, prefix: s.storePrefix, retentionMs: 300_000 });
      const refusals = await Promise.allSettled([
        OnceWorker.create({ queueName: s.queueName, connection: s.redis, store, tools: [slowCharge] }),
        Dispatcher.create({ queue: s.queue, store, tools: [slowCharge] }),
        (async () => createCallProcessor({ store, tools: [slowCharge] }))(),
      ]);
      const errors = refusals.map((r) =>
        r.status === "rejected" ? (r.reason as RetryWindowError) : r.value,
      );
      for (const error of errors) {
        expect(error).toBeInstanceOf(RetryWindowError);
        expect((error as RetryWindowError).message).toContain("lease 600000 (charge_customer's own)");
      }
      const [worker, dispatcher, processor] = errors as RetryWindowError[];
      // OnceWorker: 1 × (600 s + its 0.25 s stalled check; its 2.5 s lock is shorter than the lease). The
      // processor runs in a BullMQ Worker of BullMQ's defaults unless told: 1 × (600 s + 30 s). The dispatcher
      // assumes those defaults too (the longer window), and adds its 2 re-enqueues × 30 s.
      expect(worker?.worstCaseMs).toBe(600_250);
      expect(processor?.worstCaseMs).toBe(630_000);
      expect(dispatcher?.terms.find((t) => t.name === "attempts")).toEqual(
        processor?.terms.find((t) => t.name === "attempts"),
      );
      expect(dispatcher?.worstCaseMs).toBe(690_000);
    }));
});

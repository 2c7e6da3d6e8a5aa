// Scenario 7: 1,000 concurrent dispatches of 100 distinct steps (10 callers each: ten orchestrator
// replicas, each with its own Dispatcher, so no in-process sharing hides a race) across 4 worker
// processes. Jobs are removed on completion, so a caller that enqueues after the first job finished makes
// a fresh job under the same key, which a worker claims and answers from the store.
// Exactly 100 charges; every caller gets its own step's charge.

import type { CallResult, Dispatcher } from "@once/bullmq";
import { describe, expect, it } from "vitest";
import type { ChargeResult } from "../fixtures/tools.js";
import type { WorkerProcess } from "../support/processes.js";
import { withScenario } from "./scenario.js";

const STEPS = 100;
const CALLERS_PER_STEP = 10;
const WORKERS = 4;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves when `condition` holds; polled, because it spans several processes' event streams. */
async function until(condition: () => boolean, what: string, safetyNetMs = 30_000): Promise<void> {
  const deadline = Date.now() + safetyNetMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`still waiting for ${what} after ${safetyNetMs} ms`);
    await sleep(10);
  }
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

describe("scenario 7: 1,000 concurrent dispatches of 100 steps across 4 worker processes", () => {
  it("charges exactly 100 times and gives every caller its own step's charge", () =>
    withScenario({ label: "many-callers" }, async (s) => {
      const workers: WorkerProcess[] = await Promise.all(
        Array.from({ length: WORKERS }, (_, i) => s.startWorker({ concurrency: 16 }, `worker-${i + 1}`)),
      );
      const replicas: Dispatcher[] = [];
      for (let i = 0; i < CALLERS_PER_STEP; i++) {
        replicas.push(await s.dispatcher({ retries: 1, jobOptions: { removeOnComplete: true } }));
      }
      const taskId = "task-load";
      const stepId = (step: number) => `charge-${step}`;
      const inputOf = (step: number) => ({
        orderId: `order_${step}`,
        amount: 100 + step,
        providerLatencyMs: 10,
      });
      const completedJobs = () => workers.reduce((n, w) => n + w.all("job-completed").length, 0);

      const callers = (first: number, last: number) =>
        shuffle(
          replicas
            .slice(first, last)
            .flatMap((dispatcher, i) =>
              Array.from({ length: STEPS }, (_, step) => ({ dispatcher, caller: first + i, step })),
            ),
        ).map(async ({ dispatcher, caller, step }) => {
          const answer: CallResult<ChargeResult> = await dispatcher.call(
            s.tools.chargeCustomer,
            inputOf(step),
            {
              taskId,
              stepId: stepId(step),
            },
          );
          return { caller, step, answer };
        });

      // Half the callers at once; the other half once half the steps are done, so that they meet every
      // state a key can be in: done (answered from the store), running (joined), not started yet.
      const firstWave = callers(0, CALLERS_PER_STEP / 2);
      await until(() => completedJobs() >= STEPS / 2, "half the steps to complete");
      const secondWave = callers(CALLERS_PER_STEP / 2, CALLERS_PER_STEP);
      const answers = await Promise.all([...firstWave, ...secondWave]);
      expect(answers).toHaveLength(STEPS * CALLERS_PER_STEP);
      // The second wave found at least half the records done: at least 5 × 50 answers came from the store.
      expect(
        answers.filter((a) => a.answer.replayed && a.answer.enqueues === 0).length,
      ).toBeGreaterThanOrEqual((CALLERS_PER_STEP / 2) * (STEPS / 2));

      // Across the four processes, the effect was entered once per step: 100 runs, everything else replays.
      // (A caller can hear of a completion before the worker's own line about it: wait for the lines.)
      for (const worker of workers) {
        await worker.waitFor(
          () =>
            worker.all((e) => e.event === "job-completed" && e.outcome === "executed").length ===
            worker.all("run-entered").length,
        );
      }
      const runs = workers.flatMap((w) => w.all("run-entered"));
      expect(runs).toHaveLength(STEPS);
      expect(new Set(runs.map((r) => r.key)).size).toBe(STEPS);
      if (process.env.ONCE_TEST_VERBOSE) {
        const perWorker = workers.map((w) => `${w.name}: ${w.all("run-entered").length} runs`).join(", ");
        const replayJobs = workers.reduce(
          (n, w) => n + w.all((e) => e.event === "job-completed" && e.outcome === "replay").length,
          0,
        );
        const fromStore = answers.filter((a) => a.answer.enqueues === 0).length;
        process.stderr.write(
          `[many-callers] ${perWorker}; ${replayJobs} jobs answered from the store by a worker; ` +
            `${fromStore} answers read from the store by the dispatcher\n`,
        );
      }

      const charges = s.charges();
      expect(charges.total).toBe(STEPS);
      expect(charges.duplicates).toBe(0);

      const byId = new Map((await s.provider.findCharges()).map((charge) => [charge.id, charge]));
      expect(byId.size).toBe(STEPS);
      for (let step = 0; step < STEPS; step++) {
        const mine = answers.filter((a) => a.step === step);
        expect(mine).toHaveLength(CALLERS_PER_STEP);
        const chargeIds = new Set(mine.map((a) => a.answer.result.chargeId));
        expect(chargeIds.size).toBe(1); // the 10 callers of a step share one charge
        for (const { answer } of mine) {
          expect(answer.result).toMatchObject({ orderId: `order_${step}`, amount: 100 + step });
          expect(answer.key).toBe(s.key(taskId, stepId(step)));
        }
        const charge = byId.get([...chargeIds][0] ?? "");
        expect(charge).toMatchObject({ orderId: `order_${step}`, amount: 100 + step });
        expect(charge?.metadata.once_key).toBe(s.key(taskId, stepId(step)));
        expect(charges.byOrder[`order_${step}`]).toBe(1);
      }
    }));
});

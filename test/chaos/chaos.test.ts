// The short chaos run, inside `pnpm test`: 1,000 effect calls through real worker processes, a real
// orchestrator process and a real Redis, while workers are SIGKILLed and frozen, their Redis connections
// cut, the orchestrator killed and resumed, and Redis killed and restarted on its AOF. The long run is
// `pnpm test:chaos` (chaos/main.ts). CHAOS_SEED=<n> replays a run: the same plan, the same fault schedule.
//
// The `appendfsync always` run must show no duplicate, no lost call, nothing left claimed or reconciling,
// no unknown a reconcile hook could settle. The `everysec` run (shorter here, to stay within CI's budget;
// the long run uses the same profile for both) adds an emulated OS crash of Redis — the AOF's last second
// dropped — and measures what that costs: reported, not failed.

import { afterAll, describe, expect, it } from "vitest";
import { SHORT, SHORT_EVERYSEC, verdict } from "./chaos-profile.js";
import { describeReport, summaryLine } from "./describe-report.js";
import type { ChaosReport } from "./judge-run.js";
import { randomSeed } from "./random.js";
import { runChaos } from "./run-chaos.js";

const seed = process.env.CHAOS_SEED === undefined ? randomSeed() : Number(process.env.CHAOS_SEED);
// One run: ~8 s to start the processes, 40 s of dispatch under faults, the drain, the verdict.
const RUN_TIMEOUT_MS = 150_000;

/** Collects a run's lines and prints them as one block (vitest heads every console.log with its test's name). */
function transcript() {
  const lines: string[] = [];
  return {
    log: (line: string) => lines.push(line),
    print: () => console.log(lines.join("\n")),
  };
}

describe(`chaos, short (seed ${seed}; rerun with CHAOS_SEED=${seed})`, () => {
  let always: ChaosReport | undefined;

  afterAll(() => {
    // The suite's last word: the summary of the run that must hold the guarantees.
    if (always) console.log(summaryLine(always));
  });

  it("appendfsync always: no duplicate, none lost, none stuck, every hooked unknown reconciled", {
    timeout: RUN_TIMEOUT_MS,
  }, async () => {
    const out = transcript();
    try {
      always = await runChaos({
        seed,
        fsync: "always",
        calls: SHORT.calls,
        rate: SHORT.rate,
        faults: { ...SHORT.faults, emulatedCrash: false },
        log: out.log,
      });
      for (const line of describeReport(always)) out.log(line);
      out.log(summaryLine(always));
    } finally {
      out.print();
    }
    expect(verdict(always, SHORT)).toEqual([]);
  });

  it("appendfsync everysec with a Redis SIGKILL and an emulated OS crash: the loss is measured and reported", {
    timeout: RUN_TIMEOUT_MS,
  }, async () => {
    const out = transcript();
    let report: ChaosReport;
    try {
      report = await runChaos({
        seed,
        fsync: "everysec",
        calls: SHORT_EVERYSEC.calls,
        rate: SHORT_EVERYSEC.rate,
        faults: { ...SHORT_EVERYSEC.faults, emulatedCrash: true },
        log: out.log,
      });
      for (const line of describeReport(report)) out.log(line);
      out.log(summaryLine(report));
    } finally {
      out.print();
    }
    // Measured, not asserted: with everysec a crash may lose records, and a lost record may repeat an
    // effect. The harness itself must have run both Redis faults and drained.
    expect(report.redisLosses).toHaveLength(2);
    expect(report.stuck).toBe(0);
  });
});

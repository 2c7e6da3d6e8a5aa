// The short failover runs, inside `pnpm test`: the chaos workload (600 effect calls, workers SIGKILLed and
// frozen, their connections cut, the orchestrator killed and resumed) on a Redis with replicas — behind
// Sentinel, and as a Cluster of three masters with a replica each — while two primaries are SIGKILLed and
// a replica promoted in each one's place, its replicas 500 ms behind. With the workers' store confirming
// every transition on every replica of its primary (`durability.replicas` 2 behind Sentinel, 1 in the
// Cluster), every guarantee must hold: no duplicate, none lost, no acknowledged transition gone after a
// failover. Durability off, and fewer replicas, are `pnpm test:chaos -- --failover sentinel|cluster
// [--replicas N]` (measured and reported, not failed).

import { describe, expect, it } from "vitest";
import { SHORT_FAILOVER, verdict } from "./chaos-profile.js";
import type { ChaosTopology } from "./chaos-redis.js";
import { describeReport, summaryLine } from "./describe-report.js";
import type { ChaosReport } from "./judge-run.js";
import { randomSeed } from "./random.js";
import { runChaos } from "./run-chaos.js";

const seed = process.env.CHAOS_SEED === undefined ? randomSeed() : Number(process.env.CHAOS_SEED);
// ~10 s to start the topology and the processes, 24 s of dispatch under faults, the drain, the verdict.
const RUN_TIMEOUT_MS = 150_000;

describe(`chaos failover, short, durability on every replica (seed ${seed}; rerun with CHAOS_SEED=${seed})`, () => {
  for (const topology of ["sentinel", "cluster"] as const satisfies readonly ChaosTopology[]) {
    it(`${topology}: primaries SIGKILLed and promoted, no duplicate, none lost, no acknowledged transition gone`, {
      timeout: RUN_TIMEOUT_MS,
    }, async () => {
      const lines: string[] = [];
      let report: ChaosReport;
      try {
        report = await runChaos({
          seed,
          topology,
          durabilityReplicas: "all",
          fsync: "everysec",
          calls: SHORT_FAILOVER.calls,
          rate: SHORT_FAILOVER.rate,
          faults: SHORT_FAILOVER.faults,
          log: (line) => lines.push(line),
        });
        lines.push(...describeReport(report), summaryLine(report));
      } finally {
        // One block: vitest heads every console.log with its test's name.
        console.log(lines.join("\n"));
      }
      expect(verdict(report, SHORT_FAILOVER)).toEqual([]);
    });
  }
});

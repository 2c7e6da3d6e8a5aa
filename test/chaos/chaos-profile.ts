import type { FaultPlan } from "./fault-schedule.js";
import type { ChaosReport } from "./judge-run.js";

export interface ChaosProfile {
  calls: number;
  rate: number;
  faults: FaultPlan;
}

/** `pnpm test:chaos`: the figures — 5,000 calls, ≥ 20 worker kills, ≥ 5 freezes, ≥ 10 cuts. */
export const LONG: ChaosProfile = {
  calls: 5_000,
  rate: 25,
  faults: {
    workerKills: 24,
    freezes: 6,
    cuts: 12,
    orchestratorKills: 2,
    redisKills: 1,
    emulatedCrash: false,
    primaryKills: 0,
    replicationLagMs: 0,
  },
};

/** Inside `pnpm test`: the same faults, scaled to 1,000 calls. */
export const SHORT: ChaosProfile = {
  calls: 1_000,
  rate: 25,
  faults: {
    workerKills: 6,
    freezes: 2,
    cuts: 4,
    orchestratorKills: 1,
    redisKills: 1,
    emulatedCrash: false,
    primaryKills: 0,
    replicationLagMs: 0,
  },
};

/** The everysec run inside `pnpm test`: the same faults over 600 calls, to keep the suite under 3 minutes. */
export const SHORT_EVERYSEC: ChaosProfile = { ...SHORT, calls: 600 };

/**
 * A profile's failover form: the same calls and faults, but where it kills the one Redis and restarts it,
 * this SIGKILLs `primaryKills` primaries of a replicated Redis, each failed over to a replica, each with its
 * replicas 500 ms behind when it dies (less than the Sentinels' and the Cluster's 2 s failure detection).
 */
export function withFailovers(profile: ChaosProfile, primaryKills: number): ChaosProfile {
  return {
    ...profile,
    faults: { ...profile.faults, redisKills: 0, emulatedCrash: false, primaryKills, replicationLagMs: 500 },
  };
}

/** `pnpm test:chaos -- --failover sentinel|cluster`: the 5,000 calls, with four primaries failed over. */
export const LONG_FAILOVER = withFailovers(LONG, 4);

/** The failover runs inside `pnpm test`: SHORT_EVERYSEC's 600 calls, with two primaries failed over. */
export const SHORT_FAILOVER = withFailovers(SHORT_EVERYSEC, 2);

/** The share of calls that must time out at least once at the dispatcher. */
export const MIN_TIMED_OUT_SHARE = 0.25;

/**
 * What an `appendfsync always` run, or a failover run with durability, must show; each failure is one line. The fault minimums are the
 * profile's own counts: a fault the harness skipped (no worker running) fails the run rather than
 * silently weakening it.
 */
export function verdict(report: ChaosReport, profile: ChaosProfile): string[] {
  const failures: string[] = [];
  const expect = (ok: boolean, message: string) => {
    if (!ok) failures.push(message);
  };
  if (report.transport === "guarded") {
    expect(report.duplicates === 0, `duplicate effects: ${report.duplicates}`);
  } else {
    // A plain `fetch` tool leaves DESIGN.md's window open: duplicates it explains are reported, not failed.
    const unexplained = report.duplicates - report.windowDuplicates;
    expect(unexplained === 0, `duplicate effects outside the named window: ${unexplained}`);
  }
  expect(report.lost === 0, `lost calls: ${report.lost}`);
  expect(report.stuck === 0, `records left claimed/reconciling/released: ${report.stuck}`);
  expect(
    report.unknownWithHook === 0,
    `unknown records of tools with a reconcile hook: ${report.unknownWithHook}`,
  );
  expect(
    report.resultMismatches.length === 0,
    `results that are not the provider's effect: ${report.resultMismatches.length}`,
  );
  expect(
    report.timedOutShare >= MIN_TIMED_OUT_SHARE,
    `only ${(report.timedOutShare * 100).toFixed(1)}% of calls timed out at least once (want ≥ ${MIN_TIMED_OUT_SHARE * 100}%)`,
  );
  const counts = report.faultCounts;
  const want: [string, number][] = [
    ["kill-worker", profile.faults.workerKills],
    ["freeze-worker", profile.faults.freezes],
    ["cut-connections", profile.faults.cuts],
    ["kill-orchestrator", Math.min(1, profile.faults.orchestratorKills)],
    [report.store === "postgres" ? "restart-postgres" : "kill-redis", profile.faults.redisKills],
    ["kill-primary", profile.faults.primaryKills],
  ];
  for (const [kind, n] of want)
    expect((counts[kind] ?? 0) >= n, `${kind}: ${counts[kind] ?? 0} executed, want ≥ ${n}`);
  for (const loss of report.redisLosses) {
    const setting =
      loss.server === "postgres"
        ? "a restart of the store's PostgreSQL"
        : loss.kind === "kill-primary"
          ? `a failover with durability replicas ${report.durabilityReplicas}`
          : `appendfsync ${report.fsync}: a Redis kill`;
    expect(loss.lostKeys.length === 0, `${setting} lost transitions of ${loss.lostKeys.length} keys`);
  }
  expect(
    report.staleWritesAccepted.length === 0,
    `owner writes accepted after a newer owner was granted: ${report.staleWritesAccepted.join("; ")}`,
  );
  return failures;
}

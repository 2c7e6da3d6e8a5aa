import { Random } from "./random.js";

/** One fault, `at` ms after the orchestrator started. */
export type Fault =
  | { at: number; kind: "kill-worker"; worker: number; restartAfterMs: number }
  | { at: number; kind: "freeze-worker"; worker: number; durationMs: number }
  | { at: number; kind: "cut-connections" }
  | { at: number; kind: "kill-orchestrator"; restartAfterMs: number }
  | {
      at: number;
      kind: "kill-redis";
      /**
       * Emulates an OS crash under `appendfsync everysec`: the AOF loses what was written in its last
       * `dropLastMs` (SIGKILL alone loses nothing Redis had written: the kernel still holds it).
       */
      dropLastMs?: number;
    }
  /**
   * A replicated Redis (Sentinel, Cluster): a primary SIGKILLed and a replica promoted in its place, then
   * the killed one restarted as a replica. `pick` chooses which of a Cluster's masters. With `lagMs`, the
   * primary's replication stalls that long before the kill, and what it held back dies with it: a SIGKILL
   * alone loses nothing a replica was sent (the kernel still delivers it), while a primary that dies with
   * its replicas behind — a slow link, a replica busy — loses what they had not received.
   */
  | { at: number; kind: "kill-primary"; pick: number; lagMs?: number }
  /** Store `postgres`: the store's PostgreSQL server crashes (pg_ctl stop -m immediate) and starts again. */
  | { at: number; kind: "restart-postgres" };

export interface FaultPlan {
  workerKills: number;
  freezes: number;
  cuts: number;
  orchestratorKills: number;
  redisKills: number;
  /** Add one emulated OS crash of Redis (everysec runs). */
  emulatedCrash: boolean;
  /** Primaries SIGKILLed and failed over (replicated runs only). */
  primaryKills: number;
  /** How far behind its replicas each killed primary is (`lagMs` of its kill); 0 for none. */
  replicationLagMs: number;
  /** Where the records are: with `postgres`, the Redis kills are restarts of the store's PostgreSQL instead. */
  store?: "redis" | "postgres";
}

export interface ScheduleOptions extends FaultPlan {
  /** How long the orchestrator dispatches; faults fall within it. */
  durationMs: number;
  workers: number;
  /** Each freeze lasts this long at least: past the lease, past BullMQ's lock and its stalled check. */
  freezeMinMs: number;
  freezeMaxMs: number;
}

/** The faults of a run, from its seed: the same seed gives the same schedule. */
export function makeSchedule(seed: number, options: ScheduleOptions): Fault[] {
  const random = new Random(seed).fork("faults");
  const span = options.durationMs;
  const within = (from: number, to: number) => Math.round(span * (from + (to - from) * random.next()));
  // Spread evenly with jitter, so that no part of the run is spared.
  const spread = (count: number, from: number, to: number) =>
    Array.from({ length: count }, (_, k) => {
      const slot = (to - from) / count;
      return Math.round(span * (from + slot * (k + random.next())));
    });
  const faults: Fault[] = [];
  for (const at of spread(options.workerKills, 0.05, 0.95)) {
    faults.push({
      at,
      kind: "kill-worker",
      worker: random.int(0, options.workers - 1),
      restartAfterMs: random.int(100, 1_500),
    });
  }
  // Freezes go round the workers, so that two never overlap on one process.
  let freezeTarget = random.int(0, options.workers - 1);
  for (const at of spread(options.freezes, 0.05, 0.85)) {
    faults.push({
      at,
      kind: "freeze-worker",
      worker: freezeTarget,
      durationMs: random.int(options.freezeMinMs, options.freezeMaxMs),
    });
    freezeTarget = (freezeTarget + 1) % options.workers;
  }
  for (const at of spread(options.cuts, 0.03, 0.97)) faults.push({ at, kind: "cut-connections" });
  for (const at of spread(options.orchestratorKills, 0.15, 0.85)) {
    faults.push({ at, kind: "kill-orchestrator", restartAfterMs: random.int(200, 2_000) });
  }
  const serverFault = options.store === "postgres" ? "restart-postgres" : "kill-redis";
  for (const at of spread(options.redisKills, 0.3, 0.6)) faults.push({ at, kind: serverFault });
  if (options.emulatedCrash) faults.push({ at: within(0.65, 0.8), kind: "kill-redis", dropLastMs: 1_000 });
  // Drawn last, so that the runs without failovers keep the schedules their seeds always gave.
  for (const at of spread(options.primaryKills, 0.15, 0.85)) {
    const lag = options.replicationLagMs > 0 ? { lagMs: options.replicationLagMs } : {};
    faults.push({ at, kind: "kill-primary", pick: random.int(0, 2), ...lag });
  }
  return faults.sort((a, b) => a.at - b.at);
}

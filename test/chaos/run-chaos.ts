// One chaos run: a Redis of its own (one server with the AOF on, or primaries with replicas behind Sentinel
// or as a Cluster: chaos-redis.ts), TCP proxies the workers reach it through, the payments
// stand-in with heavy-tailed latency (chaos-world.ts), four worker processes and an orchestrator process
// (chaos-fleet.ts) — and a seeded schedule of faults (fault-schedule.ts) thrown at all of them while the
// orchestrator dispatches (fault-driver.ts). Then a drain (drain.ts: no more faults; the orchestrator drives
// every call to an end, the queue empties) and the verdict, read from the provider's ledger and from the
// store (collect-evidence.ts) and judged into the report (judge-run.ts).

import { stopAllChaosChildren } from "./chaos-child.js";
import { CHAOS_TIMING } from "./chaos-config.js";
import { ChaosFleet } from "./chaos-fleet.js";
import { type ChaosTopology, REPLICAS_PER_PRIMARY } from "./chaos-redis.js";
import type { ChaosTransport } from "./chaos-tools.js";
import { type ChaosWorld, startWorld } from "./chaos-world.js";
import { collectEvidence } from "./collect-evidence.js";
import { drain } from "./drain.js";
import { throwFaults } from "./fault-driver.js";
import { type FaultPlan, makeSchedule } from "./fault-schedule.js";
import { type ChaosReport, judgeRun } from "./judge-run.js";

export interface ChaosOptions {
  seed: number;
  /** How the tools call the provider (see chaos-tools.ts). Default `guarded`. */
  transport?: ChaosTransport;
  calls: number;
  /** The standalone server's AOF policy (the replicated topologies run `everysec`). */
  fsync: "always" | "everysec";
  /** Default `standalone`; `sentinel` and `cluster` fail primaries over (`primaryKills` in `faults`). */
  topology?: ChaosTopology;
  /**
   * The workers' RedisStore `durability.replicas`: `all` (every replica of a primary), a number, or 0 for
   * none (the default).
   */
  durabilityReplicas?: number | "all";
  /** Where once's records are: the run's Redis (default), or a PostgreSQL server of the run's own. */
  store?: "redis" | "postgres";
  /** Calls the orchestrator starts per second. */
  rate: number;
  faults: FaultPlan;
  /** How long the drain may take before the run is declared stuck. Default 240 s. */
  drainTimeoutMs?: number;
  log?: (line: string) => void;
}

/** Runs the chaos suite once and returns what it saw; never throws for a finding, only for a broken harness. */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const { seed, calls, fsync, rate } = options;
  const transport = options.transport ?? "guarded";
  const topology = options.topology ?? "standalone";
  const store = options.store ?? "redis";
  if (store === "postgres" && topology !== "standalone")
    throw new Error(
      `store postgres runs on one Redis: a failover (${topology}) measures what a replicated Redis keeps of the records, and they are not on Redis then`,
    );
  const T = CHAOS_TIMING;
  const replicas =
    options.durabilityReplicas === "all" ? REPLICAS_PER_PRIMARY[topology] : (options.durabilityReplicas ?? 0);
  const durability = replicas > 0 ? { replicas, timeoutMs: T.durabilityTimeoutMs } : undefined;
  const dispatchMs = Math.round((calls / rate) * 1_000);
  const schedule = makeSchedule(seed, {
    ...options.faults,
    store,
    durationMs: dispatchMs,
    workers: T.workers,
    freezeMinMs: T.freezeMinMs,
    freezeMaxMs: T.freezeMaxMs,
  });
  const mode =
    topology === "standalone"
      ? `fsync=${fsync}`
      : `failover:${topology} durability=${durability ? `replicas:${durability.replicas}` : "off"}`;
  log(
    `chaos: seed=${seed} calls=${calls} ${store === "postgres" ? "store=postgres " : ""}${mode} transport=${transport} rate=${rate}/s — ${schedule.length} faults over ~${Math.round(dispatchMs / 1000)} s`,
  );

  const started = Date.now();
  let world: ChaosWorld | undefined;
  try {
    world = await startWorld({ seed, topology, fsync, store });
    const fleet = await ChaosFleet.start(world, { seed, calls, rate, transport, durability });
    const t0 = Date.now();
    log(`chaos: ${T.workers} workers and the orchestrator are up; plan written to ${world.planFile}`);

    const faults = await throwFaults(schedule, { world, fleet, calls, t0, log });
    log(`chaos: fault phase over after ${((Date.now() - t0) / 1000).toFixed(1)} s; draining`);
    await drain(world, fleet, options.drainTimeoutMs ?? 240_000);
    const durationMs = Date.now() - t0;
    log(`chaos: drained after ${(durationMs / 1000).toFixed(1)} s`);
    // No worker event may come in while the evidence is read.
    await fleet.stopWorkers();

    const evidence = await collectEvidence(world, fleet);
    const durabilityReplicas = durability?.replicas ?? 0;
    return judgeRun(
      { seed, transport, fsync, topology, store, durabilityReplicas, t0, durationMs },
      evidence,
      faults,
    );
  } finally {
    await stopAllChaosChildren();
    await world?.stop();
    log(`chaos: cleaned up after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
}

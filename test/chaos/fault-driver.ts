// Throws a run's fault schedule (fault-schedule.ts) at its world and fleet while the orchestrator
// dispatches, each fault at its time, and writes down what each one did: the judge reads the freezes and the
// Redis losses back, the report lists every fault.

import { setTimeout as sleep } from "node:timers/promises";
import type { ChaosChild } from "./chaos-child.js";
import { CHAOS_TIMING } from "./chaos-config.js";
import type { ChaosFleet } from "./chaos-fleet.js";
import { readProgress } from "./chaos-plan.js";
import type { RedisKill } from "./chaos-redis.js";
import type { ChaosWorld } from "./chaos-world.js";
import type { Fault } from "./fault-schedule.js";
import { restartPostgres } from "./postgres-loss.js";
import { killRedis, type RedisLoss } from "./redis-loss.js";

export interface ExecutedFault {
  at: number;
  kind: Fault["kind"];
  detail: string;
}

/** One SIGSTOP of a worker: from when to when, and the keys it held (with their fences) when frozen. */
export interface FreezeEpisode {
  from: number;
  to: number;
  inFlight: number;
  held: Map<string, number>;
}

/** What the faults did. */
export interface FaultLog {
  /** Every fault in the order it took effect; one that could not be thrown says "skipped: …". */
  executed: ExecutedFault[];
  redisLosses: RedisLoss[];
  freezes: Map<ChaosChild, FreezeEpisode[]>;
}

export interface FaultTarget {
  world: ChaosWorld;
  fleet: ChaosFleet;
  /** The run's calls, for the note of an orchestrator kill. */
  calls: number;
  /** When the orchestrator came up: each fault's `at` counts from it. */
  t0: number;
  log: (line: string) => void;
}

/** Throws every fault at `t0 + fault.at`; resolves once all are over, restarts included. */
export async function throwFaults(schedule: readonly Fault[], target: FaultTarget): Promise<FaultLog> {
  const driver = new FaultDriver(target);
  await Promise.all(
    schedule.map(async (fault) => {
      await sleep(Math.max(0, target.t0 + fault.at - Date.now()));
      await driver.execute(fault);
    }),
  );
  return driver.done;
}

class FaultDriver {
  readonly done: FaultLog = { executed: [], redisLosses: [], freezes: new Map() };
  readonly #target: FaultTarget;
  // A worker about to be frozen is not killed meanwhile.
  readonly #reserved = new Set<ChaosChild>();
  // Redis kills run one after the other: each must see Redis up before it kills it.
  #redisBusy: Promise<void> = Promise.resolve();

  constructor(target: FaultTarget) {
    this.#target = target;
  }

  async execute(fault: Fault): Promise<void> {
    switch (fault.kind) {
      case "kill-worker":
        return this.#killWorker(fault);
      case "freeze-worker":
        return this.#freezeWorker(fault);
      case "cut-connections": {
        const { world } = this.#target;
        const severed = world.workerProxies.cut();
        if (!world.postgres) return this.#note(fault, `cut ${severed} worker connections to Redis`);
        const toPostgres = world.postgres.workerProxy.cut();
        return this.#note(
          fault,
          `cut ${severed} worker connections to Redis and ${toPostgres} to the store's PostgreSQL`,
        );
      }
      case "kill-orchestrator":
        return this.#killOrchestrator(fault);
      case "kill-redis":
      case "kill-primary": {
        const run = this.#redisBusy.then(() => this.#killRedis(fault));
        this.#redisBusy = run.catch(() => {});
        return run;
      }
      case "restart-postgres": {
        const run = this.#redisBusy.then(() => this.#restartPostgres(fault));
        this.#redisBusy = run.catch(() => {});
        return run;
      }
    }
  }

  async #killWorker(fault: Extract<Fault, { kind: "kill-worker" }>): Promise<void> {
    const { slots } = this.#target.fleet;
    await this.#someWorkerRunning();
    const slot = this.#pickWorker(fault.worker);
    const child = slot === undefined ? undefined : slots[slot];
    if (slot === undefined || !child) return this.#note(fault, "skipped: no running worker");
    slots[slot] = undefined;
    await child.kill("SIGKILL");
    this.#note(fault, `SIGKILL ${child.name} (pid ${child.pid}), restart in ${fault.restartAfterMs} ms`);
    await sleep(fault.restartAfterMs);
    slots[slot] = await this.#target.fleet.startWorker(slot);
  }

  async #freezeWorker(fault: Extract<Fault, { kind: "freeze-worker" }>): Promise<void> {
    const { fleet } = this.#target;
    await this.#someWorkerRunning();
    const slot = this.#pickWorker(fault.worker);
    const child = slot === undefined ? undefined : fleet.slots[slot];
    if (!child) return this.#note(fault, "skipped: no running worker");
    // A freeze is only a test of fencing if the worker holds calls: wait (briefly) for it to hold one.
    this.#reserved.add(child);
    for (let waited = 0; waited < 3_000 && fleet.held(child).size === 0; waited += 10) {
      await sleep(10);
    }
    const held = new Map(fleet.held(child));
    const inFlight = held.size;
    child.freeze();
    this.#reserved.delete(child);
    const from = Date.now();
    this.#note(
      fault,
      `SIGSTOP ${child.name} (pid ${child.pid}) holding ${inFlight} calls, for ${fault.durationMs} ms`,
    );
    await sleep(fault.durationMs);
    child.thaw();
    const episodes = this.done.freezes.get(child) ?? [];
    episodes.push({ from, to: Date.now(), inFlight, held });
    this.done.freezes.set(child, episodes);
  }

  async #killOrchestrator(fault: Extract<Fault, { kind: "kill-orchestrator" }>): Promise<void> {
    const { fleet, world, calls } = this.#target;
    const killed = fleet.orchestrator;
    if (!killed.alive || killed.events.some((e) => e.e === "finished")) {
      return this.#note(fault, "skipped: the orchestrator had finished");
    }
    await killed.kill("SIGKILL");
    const done = readProgress(world.progressFile).size;
    this.#note(
      fault,
      `SIGKILL ${killed.name} (pid ${killed.pid}) with ${done}/${calls} calls settled; restart in ${fault.restartAfterMs} ms`,
    );
    await sleep(fault.restartAfterMs);
    await fleet.startOrchestrator();
  }

  async #killRedis(fault: RedisKill): Promise<void> {
    const { world, fleet, t0 } = this.#target;
    const loss = await killRedis(world, fleet.children, fault, t0);
    this.done.redisLosses.push(loss);
    const what =
      loss.kind === "kill-primary"
        ? `SIGKILL primary ${loss.killed}, ${loss.serving} promoted`
        : loss.emulatedCrashDroppedMs === undefined
          ? "SIGKILL"
          : `SIGKILL + last ${loss.emulatedCrashDroppedMs} ms of AOF dropped (${loss.droppedBytes} bytes)`;
    this.#note(
      fault,
      `${what}, down ${loss.downMs} ms, ${loss.recordsAfter} records after (${loss.recordsBefore} before), ` +
        `${loss.lostKeys.length} keys lost an acknowledged transition (${loss.goneKeys} gone)`,
    );
  }

  /**
   * Waits up to 15 s while no worker can be picked: restarted workers can take that long to come up (a busy
   * machine; a store with durability, which will not start while a failed-over primary has no replica yet).
   * The caller picks right after, in the same turn, so that two faults never take the same worker.
   */
  async #someWorkerRunning(): Promise<void> {
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(100)) {
      if (this.#pickWorker(0) !== undefined) return;
    }
  }

  async #restartPostgres(fault: Extract<Fault, { kind: "restart-postgres" }>): Promise<void> {
    const { world, fleet, t0 } = this.#target;
    const loss = await restartPostgres(world, fleet.children, t0);
    this.done.redisLosses.push(loss);
    this.#note(
      fault,
      `pg_ctl stop -m immediate and start, down ${loss.downMs} ms, ${loss.recordsAfter} records after (${loss.recordsBefore} before), ` +
        `${loss.lostKeys.length} keys lost an acknowledged transition (${loss.goneKeys} gone)`,
    );
  }

  /** The slot of a running worker, not frozen nor about to be: `preferred` if it can, else the next one. */
  #pickWorker(preferred: number): number | undefined {
    const { slots } = this.#target.fleet;
    for (let k = 0; k < CHAOS_TIMING.workers; k++) {
      const slot = (preferred + k) % CHAOS_TIMING.workers;
      const child = slots[slot];
      if (child?.alive && !child.frozen && !this.#reserved.has(child)) return slot;
    }
    return undefined;
  }

  #note(fault: Fault, detail: string): void {
    const entry = { at: Date.now() - this.#target.t0, kind: fault.kind, detail };
    this.done.executed.push(entry);
    this.#target.log(`  +${(entry.at / 1000).toFixed(1)}s ${fault.kind}: ${detail}`);
  }
}

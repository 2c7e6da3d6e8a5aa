// The worker and orchestrator processes of one chaos run, started against the run's world. The faults kill,
// freeze and restart them; every process ever started is kept, with its events, for the verdict.

import { type ChaosChild, type ChildEvent, startChaosChild } from "./chaos-child.js";
import {
  CHAOS_ORCHESTRATOR_CONFIG_ENV,
  CHAOS_TIMING,
  CHAOS_WORKER_CONFIG_ENV,
  type ChaosOrchestratorConfig,
  type ChaosWorkerConfig,
} from "./chaos-config.js";
import type { ChaosTransport } from "./chaos-tools.js";
import type { ChaosWorld } from "./chaos-world.js";
import { FINAL_WRITES, GRANTS } from "./reporting-store.js";

const T = CHAOS_TIMING;
/** A child prints `ready` once its connections are up: slow on a busy machine, and Redis may be restarting. */
const START_TIMEOUT_MS = 90_000;

export interface FleetOptions {
  seed: number;
  calls: number;
  rate: number;
  transport: ChaosTransport;
  /** The workers' RedisStore durability; none when undefined. */
  durability: ChaosWorkerConfig["durability"];
}

/** One event of a worker, with the worker that printed it. */
export interface WorkerEvent {
  child: ChaosChild;
  event: ChildEvent;
}

export class ChaosFleet {
  /** Every process started, dead or alive, in the order they came up. */
  readonly children: ChaosChild[] = [];
  /** The running worker of each slot; undefined while a killed one waits for its restart. */
  readonly slots: (ChaosChild | undefined)[] = [];
  /** Every orchestrator started: a killed one is followed by one that resumes its plan. */
  readonly orchestrators: ChaosChild[] = [];
  readonly #world: ChaosWorld;
  readonly #options: FleetOptions;
  // Calls each worker holds right now: granted claims not yet settled, for "frozen with work in flight".
  readonly #holding = new Map<ChaosChild, Map<string, number>>();

  private constructor(world: ChaosWorld, options: FleetOptions) {
    this.#world = world;
    this.#options = options;
  }

  /** Starts every worker, then the orchestrator, which writes the plan before it dispatches. */
  static async start(world: ChaosWorld, options: FleetOptions): Promise<ChaosFleet> {
    const fleet = new ChaosFleet(world, options);
    const workers = await Promise.all(
      Array.from({ length: T.workers }, (_, slot) => fleet.startWorker(slot)),
    );
    fleet.slots.push(...workers);
    await fleet.startOrchestrator();
    return fleet;
  }

  /** The orchestrator started last (killed or not). */
  get orchestrator(): ChaosChild {
    const last = this.orchestrators.at(-1);
    if (!last) throw new Error("no orchestrator was started");
    return last;
  }

  /** The keys `worker` holds right now, with the fence it holds each under. */
  held(worker: ChaosChild): ReadonlyMap<string, number> {
    return this.#holding.get(worker) ?? new Map();
  }

  /** Starts a worker for `slot` (its name says which); the caller puts it in `slots`. */
  async startWorker(slot: number): Promise<ChaosChild> {
    const child = await startChaosChild({
      name: `worker-${slot}`,
      script: "chaos/chaos-worker.ts",
      env: { [CHAOS_WORKER_CONFIG_ENV]: JSON.stringify(this.#workerConfig(slot)) },
      readyEvent: "ready",
      onEvent: (worker, event) => this.#trackHolding(worker, event),
      timeoutMs: START_TIMEOUT_MS,
    });
    this.children.push(child);
    return child;
  }

  /** Starts an orchestrator: the first writes the plan, the later ones read it back and resume. */
  async startOrchestrator(): Promise<ChaosChild> {
    const child = await startChaosChild({
      name: `orchestrator-${this.orchestrators.length + 1}`,
      script: "chaos/chaos-orchestrator.ts",
      env: { [CHAOS_ORCHESTRATOR_CONFIG_ENV]: JSON.stringify(this.#orchestratorConfig()) },
      readyEvent: this.orchestrators.length === 0 ? "plan-written" : "plan-loaded",
      timeoutMs: START_TIMEOUT_MS,
    });
    this.orchestrators.push(child);
    this.children.push(child);
    return child;
  }

  /** Stops the running workers (SIGTERM), so that no event comes in after the drain. */
  async stopWorkers(): Promise<void> {
    await Promise.all(this.slots.map((child) => child?.stop()));
  }

  /** Every worker's events, worker by worker in the order they came up. */
  workerEvents(): WorkerEvent[] {
    return this.children
      .filter((child) => child.name.startsWith("worker-"))
      .flatMap((child) => child.events.map((event) => ({ child, event })));
  }

  #trackHolding(child: ChaosChild, event: ChildEvent): void {
    if (event.e !== "s") return;
    const held = this.#holding.get(child) ?? new Map<string, number>();
    this.#holding.set(child, held);
    const k = String(event.k);
    if (event.op === "claim" && GRANTS.has(String(event.o))) held.set(k, Number(event.f));
    else if (FINAL_WRITES.has(String(event.op))) held.delete(k);
  }

  #workerConfig(slot: number): ChaosWorkerConfig {
    const world = this.#world;
    return {
      name: `worker-${slot}`,
      redis: world.redis.target(world.workerProxies),
      queueName: world.queueName,
      queuePrefix: world.queuePrefix,
      storePrefix: world.storePrefix,
      store: world.storeLocation("worker"),
      paymentsUrl: world.payments.url,
      leaseMs: T.leaseMs,
      lockDurationMs: T.lockDurationMs,
      stalledIntervalMs: T.stalledIntervalMs,
      concurrency: T.workerConcurrency,
      storeTimeoutMs: T.storeTimeoutMs,
      providerTimeoutMs: T.providerTimeoutMs,
      transport: this.#options.transport,
      ...(this.#options.durability === undefined ? {} : { durability: this.#options.durability }),
    };
  }

  #orchestratorConfig(): ChaosOrchestratorConfig {
    const world = this.#world;
    const { seed, calls, rate } = this.#options;
    return {
      redis: world.redis.target(world.orchestratorProxies),
      queueName: world.queueName,
      queuePrefix: world.queuePrefix,
      storePrefix: world.storePrefix,
      store: world.storeLocation("orchestrator"),
      planFile: world.planFile,
      progressFile: world.progressFile,
      faultsOverFile: world.faultsOverFile,
      seed,
      calls,
      rate,
      concurrency: T.orchestratorConcurrency,
      timeoutMs: T.dispatchTimeoutMs,
      retries: T.dispatchRetries,
      jobAttempts: T.jobAttempts,
      jobBackoffMs: T.jobBackoffMs,
      leaseMs: T.leaseMs,
      lockDurationMs: T.lockDurationMs,
      stalledIntervalMs: T.stalledIntervalMs,
    };
  }
}

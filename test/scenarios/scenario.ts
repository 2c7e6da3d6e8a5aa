// What every scenario sets up and tears down: its own Redis client, BullMQ queue (random name and prefix),
// dedup store (random prefix), payments provider (a real HTTP server on port 0), dispatchers and worker
// processes. `withScenario` cleans all of it up whatever the test did, so tests never depend on each other.

import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Dispatcher, type DispatcherOptions } from "@once/bullmq";
import { deriveKey, type OnceRecord } from "@once/core";
import { type KindLedger, PaymentsClient, type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { type ChargeTools, chargeTools } from "../fixtures/tools.js";
import type { WorkerProcessConfig } from "../fixtures/worker-config.js";
import { startWorkerProcess, type WorkerProcess } from "../support/processes.js";

/** Short BullMQ and once timings for the scenarios about dead, frozen and stalled workers. */
export const FAST_RECOVERY = {
  // The lease matches BullMQ's lock: both run out together, so the worker BullMQ hands the stalled job to
  // finds the first owner's lease expired (or nearly: it then waits `in_flight` without using an attempt).
  leaseMs: 1_000,
  lockDurationMs: 1_000,
  stalledIntervalMs: 500,
  // A loaded two-core machine can make a healthy worker miss a lock renewal; a second stall must not fail
  // the job outright (once keeps a re-run safe).
  maxStalledCount: 10,
} as const satisfies Partial<WorkerProcessConfig>;

export interface Scenario {
  readonly label: string;
  readonly redis: Redis;
  readonly queue: Queue;
  readonly queueName: string;
  readonly queuePrefix: string;
  readonly storePrefix: string;
  /** The store as the orchestrator side sees it (same Redis and prefix as the workers'). */
  readonly store: RedisStore;
  readonly payments: PaymentsServer;
  /** A client of the provider, for look-ups by order or key. */
  readonly provider: PaymentsClient;
  /** The tool declarations the dispatchers are given (the workers build their own). */
  readonly tools: ChargeTools;
  /** The provider's charge counts. */
  charges(): KindLedger;
  key(taskId: string, stepId: string, namespace?: string): string;
  record(taskId: string, stepId: string): Promise<OnceRecord | undefined>;
  /** A dispatcher on this scenario's queue and store; closed by the cleanup. */
  dispatcher(options?: Partial<Omit<DispatcherOptions, "queue" | "store">>): Promise<Dispatcher>;
  /** The worker config of this scenario, with overrides. */
  workerConfig(overrides?: Partial<WorkerProcessConfig>): WorkerProcessConfig;
  /** Starts a worker process; stopped by the cleanup. */
  startWorker(overrides?: Partial<WorkerProcessConfig>, name?: string): Promise<WorkerProcess>;
  /** A path for a pause gate; `openGate` creates the file. */
  gateFile(name: string): string;
  openGate(file: string): void;
}

export interface ScenarioOptions {
  label: string;
  /** Worker settings every `startWorker` of this scenario starts from. */
  worker?: Partial<WorkerProcessConfig>;
}

/** Runs `body` with a fresh scenario and tears everything down afterwards, also when `body` throws. */
export async function withScenario<T>(
  options: ScenarioOptions,
  body: (s: Scenario) => Promise<T>,
): Promise<T> {
  const label = options.label;
  const redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  const queueName = `${label}-${randomBytes(4).toString("hex")}`;
  const queuePrefix = `once-test-bull-${randomBytes(4).toString("hex")}`;
  const storePrefix = randomPrefix(label);
  const gates = mkdtempSync(path.join(os.tmpdir(), "once-gates-"));
  const workers: WorkerProcess[] = [];
  const dispatchers: Dispatcher[] = [];
  let queue: Queue | undefined;
  let payments: PaymentsServer | undefined;
  try {
    queue = new Queue(queueName, { connection: redis, prefix: queuePrefix });
    const store = await RedisStore.create({ redis, prefix: storePrefix });
    payments = await startPaymentsServer({ latency: { fixedMs: 5 } });
    const server = payments;
    const provider = new PaymentsClient(server.url);
    const tools = chargeTools({ paymentsUrl: server.url });
    const scenarioQueue = queue;
    const workerConfig = (overrides: Partial<WorkerProcessConfig> = {}): WorkerProcessConfig => ({
      redisUrl: redisUrl(),
      queueName,
      queuePrefix,
      storePrefix,
      paymentsUrl: server.url,
      ...options.worker,
      ...overrides,
    });
    const scenario: Scenario = {
      label,
      redis,
      queue: scenarioQueue,
      queueName,
      queuePrefix,
      storePrefix,
      store,
      payments: server,
      provider,
      tools,
      charges: () => server.ledger().charges,
      key: (taskId, stepId, namespace) => deriveKey({ taskId, stepId, ...(namespace ? { namespace } : {}) }),
      record: (taskId, stepId) => store.get(deriveKey({ taskId, stepId })),
      async dispatcher(overrides = {}) {
        const dispatcher = await Dispatcher.create({
          queue: scenarioQueue,
          store,
          tools: tools.all,
          timeoutMs: 30_000,
          retries: 0,
          ...overrides,
        });
        dispatchers.push(dispatcher);
        return dispatcher;
      },
      workerConfig,
      async startWorker(overrides = {}, name) {
        const worker = await startWorkerProcess(workerConfig(overrides), name === undefined ? {} : { name });
        workers.push(worker);
        return worker;
      },
      gateFile: (name) => path.join(gates, name),
      openGate: (file) => writeFileSync(file, "open"),
    };
    return await body(scenario);
  } finally {
    await Promise.allSettled(workers.map((worker) => worker.stop()));
    await Promise.allSettled(dispatchers.map((dispatcher) => dispatcher.close()));
    if (queue) {
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close().catch(() => {});
    }
    await cleanupPrefix(redis, storePrefix).catch(() => {});
    await cleanupPrefix(redis, `${queuePrefix}:`).catch(() => {});
    await payments?.close().catch(() => {});
    rmSync(gates, { recursive: true, force: true });
    await redis.quit().catch(() => {});
  }
}

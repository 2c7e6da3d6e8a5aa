import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { OnceStore } from "@once/core";
import { ORCHESTRATOR_MAIN, type OrchestratorFigures } from "@once/orchestrator";
import {
  keyLayout,
  PostgresCounters,
  postgresLayout,
  preparePostgresDeployment,
  RedisCounters,
} from "@once/order-agent";
import { startPaymentsServer } from "@once/payments";
import { PostgresStore } from "@once/postgres";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, NodeChild } from "@once/support";
import { WORKER_MAIN } from "@once/worker";
import { createPostgresBackend, Queue, QueueEvents } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";
import type { ModeFigures } from "./mode-figures.js";

export interface ModeOptions {
  mode: "naive" | "once";
  /** Where the queue and the store are: Redis (`redisUrl`), or PostgreSQL (`postgresUrl`) for both. */
  backend: "redis" | "postgres";
  redisUrl: string;
  postgresUrl?: string;
  /** Random per run: names the keys, queue and tasks of this run. */
  runId: string;
  tasks: number;
  workers: number;
  /** Tasks the orchestrator runs at the same time. */
  concurrency: number;
  workerConcurrency: number;
  timeoutMs: number;
  kill: boolean;
  latency: { p50Ms: number; p99Ms: number };
  seed: number;
  /** Environment of the child processes (tracing settings). */
  childEnv: NodeJS.ProcessEnv;
  report: (event: ModeEvent) => void;
  /** Aborting asks the orchestrator to start no new tasks (its running tasks finish). */
  signal?: AbortSignal;
}

export type ModeEvent =
  | { type: "phase"; mode: string; text: string }
  | { type: "progress"; mode: string; done: number; failed: number; total: number }
  | { type: "note"; mode: string; text: string };

// The failure-handling timings are once's defaults: a 30 s lease, OnceWorker's 2.5 s lock and 0.25 s stalled
// check, a 1 s liveness entry; a killed worker's calls come back within about 3 s of the kill. The
// orchestrator's dispatcher assumes BullMQ's own lock and stalled check in its retry window (the longer one).
const RETENTION_MS = 60 * 60 * 1000;
const DRAIN_TIMEOUT_MS = 60_000;

/** The run was interrupted: nothing was measured, everything was cleaned up. */
export class InterruptedError extends Error {
  override readonly name = "InterruptedError";
  constructor(mode: string) {
    super(`the ${mode} run was interrupted`);
  }
}

/** What one mode produced: its figures, and the tasks whose traces are worth printing, best first. */
export interface ModeRun {
  figures: ModeFigures;
  traceCandidates: { taskId: string; traceId: string }[];
}

/** Runs one mode end to end (payments, workers, orchestrator, kill), measures it, cleans up its keys. */
export async function runMode(options: ModeOptions): Promise<ModeRun> {
  const { mode, report } = options;
  const queueName = `demo-${options.runId}-${mode}`;
  const workDir = mkdtempSync(path.join(os.tmpdir(), `once-demo-${mode}-`));
  const payments = await startPaymentsServer({ latency: options.latency, seed: options.seed });
  const place =
    options.backend === "postgres"
      ? await postgresPlace(options.postgresUrl ?? "", `once_demo_${options.runId}_${mode}`, queueName)
      : await redisPlace(options.redisUrl, `once-demo:${options.runId}:${mode}:`, queueName);
  const { queue, events } = place;
  let duplicatedSends = 0;
  events.on("duplicated", () => duplicatedSends++);
  const workers: NodeChild[] = [];
  let workerKills = 0;
  const timing = ["--retention-ms", String(RETENTION_MS)];
  const common = ["--queue", queueName, ...place.args, ...timing];

  const startWorker = async (slot: number) => {
    const worker = NodeChild.start({
      script: WORKER_MAIN,
      args: [
        ...common,
        "--payments-url",
        payments.url,
        "--concurrency",
        String(options.workerConcurrency),
        "--count-outcomes",
      ],
      ...childOutput(`[${mode}] worker ${slot + 1}`, options.childEnv),
    });
    workers[slot] = worker;
    await worker.waitFor("ready");
    return worker;
  };

  try {
    report({ type: "phase", mode, text: `starting ${options.workers} workers` });
    await Promise.all(Array.from({ length: options.workers }, (_, slot) => startWorker(slot)));

    const summaryPath = path.join(workDir, "summary.json");
    const orchestrator = NodeChild.start({
      script: ORCHESTRATOR_MAIN,
      args: [
        ...common,
        "--mode",
        mode,
        "--tasks",
        String(options.tasks),
        "--task-prefix",
        `${mode}-${options.runId}`,
        "--concurrency",
        String(options.concurrency),
        "--timeout-ms",
        String(options.timeoutMs),
        "--seed-orders",
        "--count-outcomes",
        "--summary",
        summaryPath,
      ],
      ...childOutput(`[${mode}] orchestrator`, options.childEnv),
    });
    report({ type: "phase", mode, text: "running" });
    options.signal?.addEventListener(
      "abort",
      () => {
        // No new tasks; and if the running ones do not finish soon (the workers may be gone too), stop now.
        void orchestrator.kill("SIGTERM");
        setTimeout(() => void orchestrator.kill("SIGKILL"), 5_000).unref();
      },
      { once: true },
    );
    const killAt = Math.max(1, Math.ceil(options.tasks / 3));
    let killing: Promise<void> | undefined;
    orchestrator.onEvent((line) => {
      if (line.type !== "task") return;
      const done = Number(line.done);
      const failed = Number(line.failed);
      report({ type: "progress", mode, done, failed, total: options.tasks });
      if (options.kill && !killing && done + failed >= killAt && done + failed < options.tasks) {
        killing = (async () => {
          const victim = workers[0];
          if (!victim) return;
          await victim.kill("SIGKILL");
          workerKills++;
          report({
            type: "note",
            mode,
            text: `SIGKILLed worker 1 (pid ${victim.pid}) after ${done + failed} tasks; restarting it`,
          });
          const fresh = await startWorker(0);
          report({ type: "note", mode, text: `worker 1 restarted (pid ${fresh.pid})` });
        })();
      }
    });
    const [code, signal] = await orchestrator.exited;
    await killing;
    if (options.signal?.aborted) throw new InterruptedError(mode);
    if (code !== 0 && code !== 3)
      throw new Error(`the ${mode} orchestrator failed (${signal ?? `exit ${code}`})`);
    const figures = JSON.parse(readFileSync(summaryPath, "utf8")) as OrchestratorFigures;

    // Abandoned attempts (naive) and a killed worker's calls (both) may still be running: their effects count.
    report({ type: "phase", mode, text: "waiting for the queue to drain" });
    await drain(queue);

    const ledger = payments.ledger();
    const stats = await place.counters();
    const store = await place.store();
    const recordsByState: Record<string, number> = {};
    for (const key of figures.effectKeys) {
      const state = (await store.get(key))?.state ?? "none";
      recordsByState[state] = (recordsByState[state] ?? 0) + 1;
    }
    const counter = (name: string) => stats[name] ?? 0;
    const storeReplays = counter("claim.replay") + counter("claim.replay_error");
    const figuresOfMode: ModeFigures = {
      mode,
      tasks: figures.tasks,
      tasksOk: figures.tasksOk,
      tasksFailed: figures.tasksFailed,
      calls: figures.calls,
      sends: figures.sends,
      retries: figures.retries,
      chargeCalls: figures.callsByTool.charge_customer ?? 0,
      retriedChargeCalls: figures.retriedCallsByTool.charge_customer ?? 0,
      chargesExpected: figures.chargesIntended,
      chargesMade: ledger.charges.total,
      chargesDuplicate: ledger.charges.duplicates,
      chargesMissing: Math.max(0, figures.chargesIntended - Object.keys(ledger.charges.byOrder).length),
      emailsExpected: figures.emailsIntended,
      emailsSent: ledger.emails.total,
      duplicateEmails: ledger.emails.duplicates,
      duplicateEffects: ledger.charges.duplicates + ledger.emails.duplicates + ledger.tickets.duplicates,
      dedupHits: duplicatedSends + storeReplays,
      dedupHitsByLayer: { queue: duplicatedSends, store: storeReplays },
      replayedCalls: figures.replayedCalls,
      inFlightWaits: counter("claim.in_flight"),
      reconciled: counter("reconcile.applied") + counter("reconcile.not_applied"),
      reconciledApplied: counter("reconcile.applied"),
      reconciledNotApplied: counter("reconcile.not_applied"),
      unknown: recordsByState.unknown ?? 0,
      recordsByState,
      effectsExecuted: counter("claim.acquired") + counter("claim.takeover"),
      workerKills,
      p50Ms: figures.p50Ms,
      p99Ms: figures.p99Ms,
      callsPerSec: figures.callsPerSec,
      wallMs: figures.wallMs,
    };
    return { figures: figuresOfMode, traceCandidates: traceCandidates(figures) };
  } finally {
    await Promise.allSettled(workers.map((worker) => worker.stop()));
    await payments.close();
    await place.close();
    rmSync(workDir, { recursive: true, force: true });
  }
}

/** Where one mode's queue, store, counters and orders are, and how the demo reads and removes them. */
interface Place {
  // biome-ignore lint/suspicious/noExplicitAny: a queue on either backend; only its job counts are read.
  queue: Queue<any, any, string, any, any, string, any, any>;
  // biome-ignore lint/suspicious/noExplicitAny: the events of either backend; only `duplicated` is counted.
  events: QueueEvents<any, any, any>;
  /** The workers' and the orchestrator's options that point them there. */
  args: string[];
  counters(): Promise<Record<string, number>>;
  store(): Promise<OnceStore>;
  /** Closes the connections and removes every key, table and schema of the mode. */
  close(): Promise<void>;
}

async function redisPlace(redisUrl: string, root: string, queueName: string): Promise<Place> {
  const layout = keyLayout(root);
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  await redis.connect();
  const queue = new Queue(queueName, { connection: redis, prefix: layout.bull });
  // QueueEvents blocks its connection, so it gets one of its own (closed below: BullMQ never closes it).
  const eventsConnection = redis.duplicate();
  const events = new QueueEvents(queueName, { connection: eventsConnection, prefix: layout.bull });
  await events.waitUntilReady();
  return {
    queue,
    events,
    args: ["--redis-url", redisUrl, "--prefix", layout.root],
    counters: () => new RedisCounters(redis, layout.stats).read(),
    store: () => RedisStore.create({ redis, prefix: layout.store, checks: false }),
    async close() {
      await events.close();
      await eventsConnection.quit();
      await queue.close();
      await cleanupPrefix(redis, layout.root);
      await redis.quit();
    },
  };
}

/** The queue on BullMQ's Postgres backend and the rest in tables: a schema for once's side, one for BullMQ. */
async function postgresPlace(postgresUrl: string, schema: string, queueName: string): Promise<Place> {
  const layout = postgresLayout(schema);
  const pool = new pg.Pool({ connectionString: postgresUrl, max: 4 });
  pool.on("error", () => {});
  await preparePostgresDeployment(pool, layout);
  const connection = { connectionString: postgresUrl, schema: layout.bullSchema, migrate: true };
  const queue = new Queue(queueName, { connection }, createPostgresBackend);
  await queue.waitUntilReady();
  const events = new QueueEvents(queueName, { connection }, createPostgresBackend);
  await events.waitUntilReady();
  return {
    queue,
    events,
    args: ["--postgres-url", postgresUrl, "--schema", schema],
    counters: () => new PostgresCounters(pool, layout).read(),
    store: () => PostgresStore.create({ pool, schema, migrate: false, checks: false }),
    async close() {
      await events.close();
      await queue.close();
      for (const name of [layout.schema, layout.bullSchema])
        await pool.query(`drop schema if exists "${name}" cascade`);
      await pool.end();
    },
  };
}

async function drain(queue: Place["queue"]): Promise<void> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  for (;;) {
    const counts = await queue.getJobCounts(
      "active",
      "waiting",
      "delayed",
      "prioritized",
      "waiting-children",
    );
    if (Object.values(counts).every((count) => count === 0)) return;
    if (Date.now() > deadline)
      throw new Error(`the queue did not drain within ${DRAIN_TIMEOUT_MS} ms: ${JSON.stringify(counts)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Tasks worth looking at, best first: ones that retried, preferring ones answered from the store, then
 * about three retries (a killed worker's task can have many, too long to read); then the others.
 */
function traceCandidates(figures: OrchestratorFigures): { taskId: string; traceId: string }[] {
  const score = (task: { retries: number; replayed: number }) =>
    (task.replayed > 0 ? 0 : 100) + Math.abs(task.retries - 3);
  const retried = [...figures.retriedTasks].sort((a, b) => score(a) - score(b));
  const ids = [...retried.map((task) => task.taskId), ...Object.keys(figures.traces)];
  return [...new Set(ids)].flatMap((taskId) => {
    const traceId = figures.traces[taskId];
    return traceId ? [{ taskId, traceId }] : [];
  });
}

/** A child's name, environment, and its stderr (and any stdout that is not JSON) passed on, labelled. */
function childOutput(name: string, env: NodeJS.ProcessEnv) {
  return { name, env, onOutput: (line: string) => process.stderr.write(`${name}: ${line}\n`) };
}

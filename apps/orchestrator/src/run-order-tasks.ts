import { Dispatcher, type DispatcherOptions } from "@once/bullmq";
import type { OnceStore } from "@once/core";
import {
  keyLayout,
  ORDER_JOB_RETRY,
  type OrderBook,
  openOrderStore,
  openPostgresOrderStore,
  orderAgentTools,
  PostgresOrderBook,
  postgresLayout,
  preparePostgresDeployment,
  RedisOrderBook,
} from "@once/order-agent";
import { createPostgresBackend, Queue } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";
import { MemoryTaskJournal } from "./memory-task-journal.js";
import {
  type OrchestratorMode,
  OrderOrchestrator,
  type StepEvent,
  type TaskReport,
} from "./order-orchestrator.js";
import { PostgresTaskJournal } from "./postgres-task-journal.js";
import { RedisTaskJournal } from "./redis-task-journal.js";
import type { TaskJournal } from "./task-journal.js";

export interface RunOrderTasksOptions {
  redisUrl: string;
  queue: string;
  /** Root of every key (see `keyLayout`); the workers must use the same. */
  prefix: string;
  mode: OrchestratorMode;
  /** Tasks `<taskPrefix>-1` … `<taskPrefix>-<tasks>`, on orders `<taskPrefix>-order-<i>`. */
  tasks: number;
  taskPrefix: string;
  /** Tasks run at the same time. Default 50. */
  concurrency?: number;
  /** The first wait per call; later waits double up to 8×. */
  timeoutMs: number;
  stepDeadlineMs?: number;
  /** Create the orders (pending, with an amount and an email) unless they exist. */
  seedOrders?: boolean;
  /** Count the dispatcher's store answers in the layout's `stats` hash (see CountingStore). */
  countOutcomes?: boolean;
  /** The workers' settings, for the retry-window check. */
  worker?: { leaseMs?: number; lockDurationMs?: number; stalledIntervalMs?: number };
  retentionMs?: number;
  /** How long a crashed orchestrator may take to resume. Default 5 min. */
  resumeGapMs?: number;
  onStep?: (event: StepEvent) => void;
  onTask?: (report: TaskReport, progress: { done: number; failed: number; total: number }) => void;
  /** Stops starting new tasks when it aborts; running tasks finish. */
  signal?: AbortSignal;
  /**
   * Run on PostgreSQL instead: the queue on BullMQ's Postgres backend, the store, orders, counters and
   * journal under `schema` (see `postgresLayout`); the workers must use the same. `redisUrl`, `prefix` unused.
   */
  postgres?: { url: string; schema: string };
}

/** What the run talks to: the queue, the store, the orders, the journal — on Redis or on PostgreSQL. */
interface Infrastructure {
  queue: DispatcherOptions["queue"];
  store: OnceStore;
  orders: OrderBook;
  journal(): TaskJournal;
  close(): Promise<void>;
}

async function openInfrastructure(options: RunOrderTasksOptions): Promise<Infrastructure> {
  const counted = {
    ...(options.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
    ...(options.countOutcomes === undefined ? {} : { countOutcomes: options.countOutcomes }),
  };
  if (options.postgres) {
    const layout = postgresLayout(options.postgres.schema);
    const pool = new pg.Pool({ connectionString: options.postgres.url, max: 10 });
    pool.on("error", () => {});
    const connection = { connectionString: options.postgres.url, schema: layout.bullSchema, migrate: true };
    const queue = new Queue(options.queue, { connection }, createPostgresBackend);
    try {
      await preparePostgresDeployment(pool, layout);
      await queue.waitUntilReady();
      return {
        queue,
        store: await openPostgresOrderStore({ pool, layout, ...counted }),
        orders: new PostgresOrderBook(pool, layout),
        journal: () => new PostgresTaskJournal(pool, layout),
        close: async () => {
          await queue.close();
          await pool.end();
        },
      };
    } catch (error) {
      await queue.close().catch(() => {});
      await pool.end().catch(() => {});
      throw error;
    }
  }
  const layout = keyLayout(options.prefix);
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  await redis.connect();
  const queue = new Queue(options.queue, { connection: redis, prefix: layout.bull });
  try {
    return {
      queue,
      store: await openOrderStore({ redis, layout, ...counted }),
      orders: new RedisOrderBook({ redis, prefix: layout.orders }),
      journal: () =>
        new RedisTaskJournal({ redis, prefix: layout.journal, ...retention(options.retentionMs) }),
      close: async () => {
        await queue.close();
        await redis.quit();
      },
    };
  } catch (error) {
    await queue.close().catch(() => {});
    redis.disconnect();
    throw error;
  }
}

export interface RunSummary {
  mode: OrchestratorMode;
  tasks: number;
  reports: TaskReport[];
  /** From the first task's start to the last task's end. */
  wallMs: number;
}

/** The order of task `i` (1-based) under `taskPrefix`, with an amount and email derived from `i`. */
export function orderFor(taskPrefix: string, i: number) {
  return {
    orderId: `${taskPrefix}-order-${i}`,
    status: "pending" as const,
    amount: 1_000 + ((i * 7_919) % 9_000),
    currency: "eur",
    email: `customer-${i}@example.com`,
  };
}

/** Connects, runs the tasks with bounded concurrency, disconnects. A task's failure is in its report. */
export async function runOrderTasks(options: RunOrderTasksOptions): Promise<RunSummary> {
  const infrastructure = await openInfrastructure(options);
  const { queue, store, orders } = infrastructure;
  let dispatcher: Dispatcher | undefined;
  try {
    const tools = orderAgentTools();
    dispatcher = await Dispatcher.create({
      queue,
      store,
      tools: tools.all,
      timeoutMs: options.timeoutMs,
      // The orchestrator's loop sends again itself (with backoff, the same in both modes).
      retries: 0,
      jobOptions: {
        ...ORDER_JOB_RETRY,
        // Finished jobs are removed, as in most deployments: a late retry then makes a fresh job, and the
        // worker's claim answers it from the store.
        removeOnComplete: true,
        removeOnFail: { age: 3_600 },
      },
      ...(options.worker === undefined ? {} : { worker: options.worker }),
      // The orchestrator keeps re-sending a step for up to its deadline, outside the dispatcher's own
      // retries: the record must outlive that too, so it counts in the resume gap of the window check.
      resumeGapMs: (options.resumeGapMs ?? 5 * 60_000) + (options.stepDeadlineMs ?? 60_000),
    });
    if (options.seedOrders) {
      for (let i = 1; i <= options.tasks; i++) await orders.create(orderFor(options.taskPrefix, i));
    }
    const orchestrator = new OrderOrchestrator({
      dispatcher,
      tools,
      journal:
        options.mode === "once"
          ? infrastructure.journal()
          : // Naive mints a fresh key per attempt anyway; persisting its step ids would change nothing.
            new MemoryTaskJournal(),
      mode: options.mode,
      timeoutMs: options.timeoutMs,
      ...(options.stepDeadlineMs === undefined ? {} : { stepDeadlineMs: options.stepDeadlineMs }),
      ...(options.onStep === undefined ? {} : { onStep: options.onStep }),
    });

    const reports: TaskReport[] = [];
    const progress = { done: 0, failed: 0, total: options.tasks };
    let next = 1;
    const started = performance.now();
    const lane = async () => {
      while (next <= options.tasks && !options.signal?.aborted) {
        const i = next++;
        const { orderId } = orderFor(options.taskPrefix, i);
        const report = await orchestrator.runTask(`${options.taskPrefix}-${i}`, orderId);
        reports.push(report);
        if (report.ok) progress.done++;
        else progress.failed++;
        options.onTask?.(report, { ...progress });
      }
    };
    await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 50, options.tasks) }, lane));
    return { mode: options.mode, tasks: options.tasks, reports, wallMs: performance.now() - started };
  } finally {
    await dispatcher?.close();
    await infrastructure.close();
  }
}

function retention(retentionMs: number | undefined) {
  return retentionMs === undefined ? {} : { retentionMs };
}

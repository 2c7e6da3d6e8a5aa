import { Dispatcher } from "@once/bullmq";
import {
  keyLayout,
  ORDER_JOB_RETRY,
  openOrderStore,
  orderAgentTools,
  RedisOrderBook,
} from "@once/order-agent";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { MemoryTaskJournal } from "./memory-task-journal.js";
import {
  type OrchestratorMode,
  OrderOrchestrator,
  type StepEvent,
  type TaskReport,
} from "./order-orchestrator.js";
import { RedisTaskJournal } from "./redis-task-journal.js";

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
  const layout = keyLayout(options.prefix);
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  await redis.connect();
  const queue = new Queue(options.queue, { connection: redis, prefix: layout.bull });
  let dispatcher: Dispatcher | undefined;
  try {
    const store = await openOrderStore({
      redis,
      layout,
      ...(options.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
      ...(options.countOutcomes === undefined ? {} : { countOutcomes: options.countOutcomes }),
    });
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
    const orders = new RedisOrderBook({ redis, prefix: layout.orders });
    if (options.seedOrders) {
      for (let i = 1; i <= options.tasks; i++) await orders.create(orderFor(options.taskPrefix, i));
    }
    const orchestrator = new OrderOrchestrator({
      dispatcher,
      tools,
      journal:
        options.mode === "once"
          ? new RedisTaskJournal({ redis, prefix: layout.journal, ...retention(options.retentionMs) })
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
    await queue.close();
    await redis.quit();
  }
}

function retention(retentionMs: number | undefined) {
  return retentionMs === undefined ? {} : { retentionMs };
}

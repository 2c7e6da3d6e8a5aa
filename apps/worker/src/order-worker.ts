import { type BackoffSetting, OnceWorker } from "@once/bullmq";
import {
  keyLayout,
  openOrderStore,
  openPostgresOrderStore,
  orderAgentTools,
  PostgresOrderBook,
  postgresLayout,
  preparePostgresDeployment,
  RedisOrderBook,
} from "@once/order-agent";
import { createPostgresBackend } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";

export interface OrderWorkerOptions {
  redisUrl: string;
  queue: string;
  /** Root of every key (see `keyLayout`), e.g. `once-demo:3f9a0c12:`. */
  prefix: string;
  paymentsUrl: string;
  /** Calls run at once by this process. Default 50. */
  concurrency?: number;
  /** once's lease of an effect call. Default 30 s. */
  leaseMs?: number;
  /** BullMQ's job lock. Default 30 s. */
  lockDurationMs?: number;
  /** BullMQ's stalled-job check. Default 30 s. */
  stalledIntervalMs?: number;
  /** How long the dedup records are kept. Default 24 h. */
  retentionMs?: number;
  /** The `attempts`/`backoff` jobs are enqueued with, for the retry-window check. */
  jobRetry?: { attempts?: number; backoff?: BackoffSetting };
  /** Count claim outcomes in Redis under the layout's `stats` hash (see CountingStore). Default false. */
  countOutcomes?: boolean;
  /**
   * Run on PostgreSQL instead: the queue on BullMQ's Postgres backend, the store a PostgresStore, the orders
   * and counters in tables, all under `schema` (see `postgresLayout`). `redisUrl` and `prefix` are unused then.
   */
  postgres?: { url: string; schema: string };
}

export interface OrderWorker {
  readonly worker: OnceWorker;
  /** Stops taking jobs, waits for running calls (or not, with `force`), closes the Redis connections. */
  close(force?: boolean): Promise<void>;
}

/** Starts a worker running the order agent's tools through once on a RedisStore (or all on PostgreSQL). */
export async function startOrderWorker(options: OrderWorkerOptions): Promise<OrderWorker> {
  if (options.postgres) return startPostgresOrderWorker(options, options.postgres);
  const layout = keyLayout(options.prefix);
  // One connection for the store, the order book and the counters; BullMQ duplicates its own (blocking).
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  const bullConnection = new Redis(options.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  try {
    await redis.connect();
    await bullConnection.connect();
    const store = await openOrderStore({
      redis,
      layout,
      ...(options.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
      ...(options.countOutcomes === undefined ? {} : { countOutcomes: options.countOutcomes }),
    });
    const tools = orderAgentTools({
      paymentsUrl: options.paymentsUrl,
      orders: new RedisOrderBook({ redis, prefix: layout.orders }),
    });
    const worker = await OnceWorker.create({
      queueName: options.queue,
      connection: bullConnection,
      store,
      tools: tools.all,
      concurrency: options.concurrency ?? 50,
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
      ...(options.jobRetry === undefined ? {} : { jobRetry: options.jobRetry }),
      workerOptions: {
        prefix: layout.bull,
        ...(options.lockDurationMs === undefined ? {} : { lockDuration: options.lockDurationMs }),
        ...(options.stalledIntervalMs === undefined ? {} : { stalledInterval: options.stalledIntervalMs }),
        // A SIGKILLed worker's jobs stall once; a loaded machine may stall one more time. Past that, fail.
        maxStalledCount: 3,
      },
    });
    // BullMQ reports a failed lock renewal or a lost connection here; without a listener Node would throw.
    worker.worker.on("error", (error) => process.stderr.write(`worker: ${error.message}\n`));
    return {
      worker,
      async close(force = false) {
        try {
          await worker.close(force);
        } finally {
          await Promise.allSettled([redis.quit(), bullConnection.quit()]);
        }
      },
    };
  } catch (error) {
    redis.disconnect();
    bullConnection.disconnect();
    throw error;
  }
}

/** The worker with its queue, store, orders and counters on PostgreSQL. */
async function startPostgresOrderWorker(
  options: OrderWorkerOptions,
  postgres: { url: string; schema: string },
): Promise<OrderWorker> {
  const layout = postgresLayout(postgres.schema);
  // The store's queries, the orders and the counters share one pool; BullMQ's backend builds its own.
  const pool = new pg.Pool({ connectionString: postgres.url, max: 10 });
  pool.on("error", (error) => process.stderr.write(`worker: ${error.message}\n`));
  try {
    await preparePostgresDeployment(pool, layout);
    const store = await openPostgresOrderStore({
      pool,
      layout,
      ...(options.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
      ...(options.countOutcomes === undefined ? {} : { countOutcomes: options.countOutcomes }),
    });
    const tools = orderAgentTools({
      paymentsUrl: options.paymentsUrl,
      orders: new PostgresOrderBook(pool, layout),
    });
    const worker = await OnceWorker.create({
      queueName: options.queue,
      connection: { connectionString: postgres.url, schema: layout.bullSchema, migrate: true },
      backend: createPostgresBackend,
      store,
      tools: tools.all,
      concurrency: options.concurrency ?? 50,
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
      ...(options.jobRetry === undefined ? {} : { jobRetry: options.jobRetry }),
      workerOptions: {
        ...(options.lockDurationMs === undefined ? {} : { lockDuration: options.lockDurationMs }),
        ...(options.stalledIntervalMs === undefined ? {} : { stalledInterval: options.stalledIntervalMs }),
        maxStalledCount: 3,
      },
    });
    worker.worker.on("error", (error) => process.stderr.write(`worker: ${error.message}\n`));
    return {
      worker,
      async close(force = false) {
        try {
          await worker.close(force);
        } finally {
          await pool.end();
        }
      },
    };
  } catch (error) {
    await pool.end().catch(() => {});
    throw error;
  }
}

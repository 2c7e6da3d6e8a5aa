import type { RetryWindow } from "@once/engine";
import {
  type BackendFactory,
  type ConnectionOptions,
  type createPostgresBackend,
  type IQueueBackend,
  Worker,
  type WorkerOptions,
} from "bullmq";
import { type CallProcessorOptions, createCallProcessor } from "./call-processor.js";

export interface OnceWorkerOptions extends Omit<CallProcessorOptions, "worker"> {
  queueName: string;
  /**
   * BullMQ's connection: an ioredis connection (`maxRetriesPerRequest: null`; BullMQ duplicates it, you close
   * it), or with `backend: createPostgresBackend` what that backend takes (a `pg` pool, a pool config with
   * its `schema`, a connection string).
   */
  connection: ConnectionOptions | PostgresConnection;
  /** BullMQ's backend: `createPostgresBackend` (from `bullmq`) runs the queue on PostgreSQL. Default Redis. */
  backend?: BackendFactory<IQueueBackend, never>;
  concurrency?: number;
  /**
   * Any other BullMQ worker option (prefix, …). `lockDuration` defaults to 2.5 s and `stalledInterval` to
   * 0.25 s here (BullMQ's own are 30 s each): a job whose worker was killed goes back to the queue within 3 s of
   * the kill (its lock, taken when the job started, runs out, and the next stalled check finds it), and its
   * call, whose owner's liveness entry is gone by then, is reconciled at once by the next worker. The price:
   * each worker checks for stalled jobs four times a second and renews its jobs' locks every 1.25 s (measured
   * idle: 4 scripts a second per worker, against 0.2 at BullMQ's defaults; docs/performance.md), and a worker
   * whose event loop blocks for more than 1.25 s loses its jobs' locks: BullMQ hands them to another worker,
   * whose claim finds the call in flight (no effect runs twice), and fails a job that stalls more than
   * `maxStalledCount` times (BullMQ's default 1). Give both for BullMQ's behaviour.
   */
  workerOptions?: Omit<WorkerOptions, "connection" | "concurrency">;
}

/** OnceWorker's `lockDuration` and `stalledInterval` when not given: see `workerOptions`. */
const ONCE_WORKER_LOCK_DURATION_MS = 2_500;
const ONCE_WORKER_STALLED_INTERVAL_MS = 250;

/** What BullMQ's PostgreSQL backend connects with (its `PostgresConnectionOptions`). */
type PostgresConnection = Parameters<typeof createPostgresBackend>[1]["connection"];

/** A BullMQ worker that runs a list of tools through once, on Redis or on BullMQ's PostgreSQL backend. */
export class OnceWorker {
  readonly worker: Worker;
  /** The retry window this worker was checked against. */
  readonly retryWindow: RetryWindow;

  private constructor(worker: Worker, retryWindow: RetryWindow) {
    this.worker = worker;
    this.retryWindow = retryWindow;
  }

  /** Checks the retry window against the store's retention, then starts the worker. */
  static async create(options: OnceWorkerOptions): Promise<OnceWorker> {
    const lockDuration = options.workerOptions?.lockDuration ?? ONCE_WORKER_LOCK_DURATION_MS;
    const stalledInterval = options.workerOptions?.stalledInterval ?? ONCE_WORKER_STALLED_INTERVAL_MS;
    // The processor checks the retry window; this worker knows its own lock and stalled settings.
    const processor = createCallProcessor({
      ...options,
      worker: { lockDurationMs: lockDuration, stalledIntervalMs: stalledInterval },
    });
    const worker = new Worker(
      options.queueName,
      processor,
      {
        ...options.workerOptions,
        lockDuration,
        stalledInterval,
        connection: options.connection as ConnectionOptions,
        concurrency: options.concurrency ?? 1,
      },
      options.backend as undefined,
    );
    await worker.waitUntilReady();
    return new OnceWorker(worker, processor.retryWindow);
  }

  /** Waits for running calls to finish, then stops. */
  close(force = false): Promise<void> {
    return this.worker.close(force);
  }
}

import type { RetryWindow } from "@once/core";
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
  /** Any other BullMQ worker option (lockDuration, stalledInterval, prefix, …). */
  workerOptions?: Omit<WorkerOptions, "connection" | "concurrency">;
}

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
    // The processor checks the retry window; this worker knows its own lock and stalled settings.
    const processor = createCallProcessor({
      ...options,
      worker: {
        lockDurationMs: options.workerOptions?.lockDuration,
        stalledIntervalMs: options.workerOptions?.stalledInterval,
      },
    });
    const worker = new Worker(
      options.queueName,
      processor,
      {
        ...options.workerOptions,
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

import type { RetryWindow } from "@once/core";
import { type ConnectionOptions, Worker, type WorkerOptions } from "bullmq";
import { type CallProcessorOptions, createCallProcessor } from "./call-processor.js";

export interface OnceWorkerOptions extends Omit<CallProcessorOptions, "worker"> {
  queueName: string;
  /** An ioredis connection for BullMQ (`maxRetriesPerRequest: null`); BullMQ duplicates it, you close it. */
  connection: ConnectionOptions;
  concurrency?: number;
  /** Any other BullMQ worker option (lockDuration, stalledInterval, prefix, …). */
  workerOptions?: Omit<WorkerOptions, "connection" | "concurrency">;
}

/** A BullMQ worker that runs a list of tools through once. */
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
    const worker = new Worker(options.queueName, processor, {
      ...options.workerOptions,
      connection: options.connection,
      concurrency: options.concurrency ?? 1,
    });
    await worker.waitUntilReady();
    return new OnceWorker(worker, processor.retryWindow);
  }

  /** Waits for running calls to finish, then stops. */
  close(force = false): Promise<void> {
    return this.worker.close(force);
  }
}

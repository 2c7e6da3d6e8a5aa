import { assertRetryWindow, type BackoffSetting, type RetryWindow } from "@once/core";
import { type ConnectionOptions, Worker, type WorkerOptions } from "bullmq";
import { type CallProcessorOptions, createCallProcessor, DEFAULT_LEASE_MS } from "./call-processor.js";

export interface OnceWorkerOptions extends CallProcessorOptions {
  queueName: string;
  /** An ioredis connection for BullMQ (`maxRetriesPerRequest: null`); BullMQ duplicates it, you close it. */
  connection: ConnectionOptions;
  concurrency?: number;
  /** Any other BullMQ worker option (lockDuration, stalledInterval, prefix, …). */
  workerOptions?: Omit<WorkerOptions, "connection" | "concurrency">;
  /** The `attempts` and `backoff` your jobs are enqueued with, for the retry-window check. */
  jobRetry?: { attempts?: number; backoff?: BackoffSetting };
  /** How long a crashed orchestrator may take to resume with the same step ids. Default 0. */
  resumeGapMs?: number;
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
    const retryWindow = assertRetryWindow({
      retentionMs: options.store.retentionMs,
      leaseMs: Math.max(options.leaseMs ?? DEFAULT_LEASE_MS, ...options.tools.map((t) => t.leaseMs ?? 0)),
      attempts: options.jobRetry?.attempts,
      backoff: options.jobRetry?.backoff,
      lockDurationMs: options.workerOptions?.lockDuration,
      stalledIntervalMs: options.workerOptions?.stalledInterval,
      resumeGapMs: options.resumeGapMs,
    });
    const worker = new Worker(options.queueName, createCallProcessor(options), {
      ...options.workerOptions,
      connection: options.connection,
      concurrency: options.concurrency ?? 1,
    });
    await worker.waitUntilReady();
    return new OnceWorker(worker, retryWindow);
  }

  /** Waits for running calls to finish, then stops. */
  close(force = false): Promise<void> {
    return this.worker.close(force);
  }
}

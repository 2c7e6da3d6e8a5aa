import type { Job, Processor } from "bullmq";
import { type CallProcessorOptions, createCallProcessor } from "./call-processor.js";
import { isCallData } from "./wire.js";

/**
 * Wraps a BullMQ processor you already have: jobs that are once calls (enqueued by a `Dispatcher`)
 * run through once; every other job goes to your processor untouched. Like `createCallProcessor`, it
 * refuses to start when the store's retention is shorter than the retry window: give it your worker's
 * `lockDuration` and `stalledInterval` as `worker`, or BullMQ's defaults are assumed.
 */
export function withOnce<T, R>(
  processor: Processor<T, R>,
  options: CallProcessorOptions,
): Processor<T, unknown> {
  const processCall = createCallProcessor(options);
  return async function processWithOnce(job: Job<T>, token?: string, signal?: AbortSignal) {
    if (isCallData(job.data)) return processCall(job as Job, token, signal);
    return processor(job, token, signal);
  };
}

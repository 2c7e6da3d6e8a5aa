export { DEFAULT_MAX_RESULT_BYTES } from "./call-flow.js";
export { type CallProcessor, type CallProcessorOptions, createCallProcessor } from "./call-processor.js";
export {
  type CallOptions,
  type CallOptionsFor,
  type CallResult,
  Dispatcher,
  type DispatcherOptions,
  type EffectCallOptions,
} from "./dispatcher.js";
export { DuplicateToolError, JobFailedError } from "./errors.js";
export { fetchWithKey } from "./fetch-with-key.js";
export { InProcess, type InProcessOptions, type InProcessResult } from "./in-process.js";
export { OnceWorker, type OnceWorkerOptions } from "./once-worker.js";
export type { CallData, CallOutcome } from "./wire.js";
export { withOnce } from "./with-once.js";

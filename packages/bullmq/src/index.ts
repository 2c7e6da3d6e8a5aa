export { type CallProcessor, type CallProcessorOptions, createCallProcessor } from "./call-processor.js";
export { type CallResult, Dispatcher, type DispatcherOptions } from "./dispatcher.js";
export {
  type BullmqErrorCode,
  DispatchTimeoutError,
  InvalidJobDataError,
  JobFailedError,
  KeyMismatchError,
  ToolKindMismatchError,
} from "./errors.js";
export { jobIdForKey, keyFromJobId } from "./job-id.js";
export { OnceWorker, type OnceWorkerOptions } from "./once-worker.js";
export {
  type BackoffSetting,
  type DispatcherRetrySettings,
  type JobRetrySettings,
  jobRetryTerms,
  jobRetryWindow,
} from "./retry-window.js";
export type { CallData, CallOutcome } from "./wire.js";
export { withOnce } from "./with-once.js";

export {
  observePendingApprovals,
  type PendingApprovalsGauge,
  type PendingApprovalsGaugeOptions,
} from "./approval-gauge.js";
export {
  type ApprovalRequested,
  DEFAULT_MAX_RESULT_BYTES,
  type Delivery,
  type DirectStep,
  type EffectStep,
  type FlowOutcome,
} from "./call-flow.js";
export type { CallOptions, CallOptionsFor, EffectCallOptions, EffectDispatcher } from "./call-options.js";
export { Engine, type EngineOptions, type LivenessOption } from "./engine.js";
export {
  DuplicateToolError,
  type EngineErrorCode,
  InvalidOptionError,
  RetryWindowError,
} from "./errors.js";
export { fetchWithKey } from "./fetch-with-key.js";
export { InProcess, type InProcessOptions, type InProcessResult } from "./in-process.js";
export {
  approvalTtlTerm,
  assertRetryWindow,
  describeLease,
  inProcessTerms,
  type LongestLease,
  longestLease,
  type RetryTerms,
  type RetryWindow,
  type RetryWindowTerm,
  resumeGapTerm,
  retryWindow,
} from "./retry-window.js";
export type { TelemetryOptions } from "./telemetry.js";

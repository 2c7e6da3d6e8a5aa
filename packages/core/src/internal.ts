/**
 * What once's own packages share and users do not need: `@once/core/internal`. No compatibility promise: it
 * changes with the packages that use it, in step.
 */

export {
  emptyStateCounts,
  matchesFilter,
  RecordTally,
  resolveFenced,
  resolveRefusal,
  retentionOf,
} from "./operator-store.js";
export {
  ago,
  errorText,
  formatDuration,
  leaseRemaining,
  leaseText,
  readDuration,
  stateMeaning,
  traceIdOf,
} from "./record-view.js";
export { retryAfterFor } from "./store.js";
export { classifyWith, describeIssues, toStoredError } from "./tool.js";

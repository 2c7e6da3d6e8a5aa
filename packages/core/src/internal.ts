/**
 * What once's own packages share and users do not need: `@once/core/internal`. No compatibility promise: it
 * changes with the packages that use it, in step.
 */

export { decisionRefusal, emptyStateCounts, resolveRefusal, retentionOf } from "./operator-store.js";
export {
  type CodedClaim,
  type CodedWrite,
  decodeApprovalRequest,
  decodeClaim,
  decodeWrite,
  OUTCOME_CODES,
  storedError,
} from "./outcome-codes.js";
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
export { classifyWith, describeIssues, toStoredError } from "./tool.js";

import type { StoredError } from "./errors.js";

// The two terminal failures an approval request can end in, as stored on the record and replayed to every
// retry. Their `code`s are what a caller matches on (`error.stored.code` of a ReplayedFailureError).

/** The stored code of a call a person denied. */
export const APPROVAL_DENIED = "denied";

/** The stored code of a call whose approval request expired with no decision. */
export const APPROVAL_EXPIRED = "approval_expired";

/**
 * The stored failure of an expired request. Its JSON text is written by the stores' own server-side code too
 * (the Redis claim script, the PostgreSQL claim function), which notice the expiry: the conformance suite
 * holds them to this.
 */
export const APPROVAL_EXPIRED_ERROR: StoredError = Object.freeze({
  name: "ApprovalExpiredError",
  message: "the approval request expired with no decision",
  code: APPROVAL_EXPIRED,
});

/** The stored failure of a denied call: who denied it, and why. */
export function deniedError(by: string, why: string): StoredError {
  return {
    name: "ApprovalDeniedError",
    message: `denied by ${by}${why === "" ? "" : `: ${why}`}`,
    code: APPROVAL_DENIED,
  };
}

/** The default time an approval request waits for a decision: 1 hour. */
export const DEFAULT_APPROVAL_TTL_MS = 60 * 60 * 1000;

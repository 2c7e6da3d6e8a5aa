/**
 * `@once/core/store-kit`: what a store's implementation shares with once's own stores — the owner token, the
 * `in_flight` wait, a deadline on every call, the setting checks, a cancel's checks, and the operator's counts, fenced resolve and
 * fenced decisions; and `wrapStore`, for a wrapper around a store that keeps all it can do.
 * Covered by semver like the package's index; the conformance suite is `@once/core/testing`.
 */

export { cancellableTaskKey } from "./cancel-request.js";
export { decideFenced, matchesFilter, RecordTally, resolveFenced } from "./operator-store.js";
export { ownerNonce, ownerToken } from "./owner-token.js";
export { livenessTtl, positiveInteger } from "./positive-integer.js";
export { retryAfterFor } from "./store.js";
export { withTimeout } from "./with-timeout.js";
export { wrapStore } from "./wrap-store.js";

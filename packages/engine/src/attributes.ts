/**
 * once's span and metric attribute names, and the semantic conventions' names it uses. A transport's own
 * (`messaging.*` for a queue) live with the transport.
 */
export const ATTR_ERROR_TYPE = "error.type";
export const ATTR_EXCEPTION_TYPE = "exception.type";
export const ATTR_EXCEPTION_MESSAGE = "exception.message";

export const ATTR_ONCE_KEY = "once.key";
export const ATTR_ONCE_TOOL = "once.tool";
export const ATTR_ONCE_KIND = "once.kind";
export const ATTR_ONCE_NAMESPACE = "once.namespace";
export const ATTR_ONCE_TASK_ID = "once.task_id";
export const ATTR_ONCE_STEP_ID = "once.step_id";
export const ATTR_ONCE_OUTCOME = "once.outcome";
export const ATTR_ONCE_FENCE = "once.fence";
export const ATTR_ONCE_ATTEMPT = "once.attempt";
export const ATTR_ONCE_RETRY_AFTER_MS = "once.retry_after_ms";
export const ATTR_ONCE_REPLAYED = "once.replayed";
export const ATTR_ONCE_ENQUEUES = "once.enqueues";
/** On events and links: what the store held, where a reconcile came from, what a hook found, how a call waited. */
export const ATTR_ONCE_STORED_STATE = "once.stored_state";
export const ATTR_ONCE_STORED_TOOL = "once.stored_tool";
export const ATTR_ONCE_LINK = "once.link";
export const ATTR_ONCE_FROM = "once.from";
export const ATTR_ONCE_APPLIED = "once.applied";
export const ATTR_ONCE_JOINED = "once.joined";
export const ATTR_ONCE_TIMEOUT_MS = "once.timeout_ms";
/** On approval events: when the request expires (ms on the store's clock); its reason only with payloads. */
export const ATTR_ONCE_APPROVAL_EXPIRES_AT = "once.approval.expires_at";
export const ATTR_ONCE_APPROVAL_REASON = "once.approval.reason";
/** Only with `recordPayloads: true`: tool inputs and results can hold personal data and secrets. */
export const ATTR_ONCE_INPUT = "once.input";
export const ATTR_ONCE_RESULT = "once.result";

/** Span event names. */
export const EVENT_DEDUP_HIT = "once.dedup_hit";
export const EVENT_IN_FLIGHT = "once.in_flight";
export const EVENT_CONFLICT = "once.conflict";
export const EVENT_TAKEOVER = "once.takeover";
export const EVENT_RECONCILE = "once.reconcile";
export const EVENT_LEASE_LOST = "once.lease_lost";
export const EVENT_TIMEOUT = "once.timeout";
/** The attempt whose write created an approval request: once per call, across processes. */
export const EVENT_APPROVAL_REQUESTED = "once.approval_requested";
/** A claim found the call waiting for a decision. */
export const EVENT_APPROVAL_PENDING = "once.approval_pending";
/** A claim found the call's task cancelled: nothing ran. */
export const EVENT_TASK_CANCELLED = "once.task_cancelled";

/** Metric names. */
export const METRIC_OUTCOMES = "once.outcomes";
export const METRIC_CLAIM_DURATION = "once.claim.duration";
export const METRIC_APPROVALS_PENDING = "once.approvals.pending";

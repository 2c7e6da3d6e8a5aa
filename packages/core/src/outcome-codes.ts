import type { StoredError } from "./errors.js";
import {
  type ApprovalRequestOutcome,
  type Cancellation,
  type ClaimOutcome,
  retryAfterFor,
  type WriteOutcome,
} from "./store.js";

/**
 * The codes a store's server-side transitions answer with — the Lua scripts of @once/redis and the SQL
 * functions of @once/postgres, which share them — by the outcome each stands for: a claim answers 1 to 9, an
 * owner write, an operator's resolve or a decision 10 to 12 (13 is a record of a newer layout, told apart
 * by each store before it decodes). The numbers are a wire contract between a build's code and the scripts or
 * functions of another build: a number once given keeps its meaning.
 */
export const OUTCOME_CODES = {
  acquired: 1,
  takeover: 2,
  reconcile: 3,
  replay: 4,
  replay_error: 5,
  in_flight: 6,
  conflict: 7,
  awaiting_approval: 8,
  cancelled: 9,
  ok: 10,
  lost: 11,
  refused: 12,
} as const satisfies Record<ClaimOutcome["outcome"] | WriteOutcome["outcome"], number>;

/**
 * A claim's coded answer, its fields by name; which ones a code carries is each script's or function's own
 * contract. Integers may arrive as numbers or as decimal strings (PostgreSQL's bigints).
 */
export interface CodedClaim {
  code: unknown;
  fence?: unknown;
  token?: unknown;
  leaseUntil?: unknown;
  claims?: unknown;
  /**
   * reconcile: the state it reconciles from; in_flight: the owner's state; conflict: the record's tool;
   * awaiting_approval: the request's reason.
   */
  detail?: unknown;
  /** acquired, takeover, reconcile: truthy when the record holds a person's approval. */
  approved?: unknown;
  /** awaiting_approval: when the request was made and when it expires, ms. */
  requestedAt?: unknown;
  expiresAt?: unknown;
  /** replay: the result (JSON text); replay_error: the stored error (JSON text). */
  result?: unknown;
  /** replay, replay_error: the traceparent of the attempt that ran. */
  trace?: unknown;
  /** in_flight: the owner's lease left, ms. */
  remaining?: unknown;
  /** cancelled: who cancelled the task, why, and when (ms). */
  cancelBy?: unknown;
  cancelWhy?: unknown;
  cancelAt?: unknown;
}

/** An owner write's (or resolve's) coded answer, its fields by name. */
export interface CodedWrite {
  code: unknown;
  fence?: unknown;
  leaseUntil?: unknown;
  /** refused: why. */
  detail?: unknown;
  /** ok (heartbeat): truthy when the owner's task was cancelled while its effect ran. */
  cancelRequested?: unknown;
}

/**
 * A claim's coded answer as its outcome: the one place that knows what each code means. `malformed` throws
 * the store's own error (a bug, never unavailability) for an answer that is not one of them.
 */
export function decodeClaim(reply: CodedClaim, malformed: () => never): ClaimOutcome {
  const int = (value: unknown) => integer(value, malformed);
  const ownership = () => {
    if (typeof reply.token !== "string") return malformed();
    const granted = {
      token: reply.token,
      fence: int(reply.fence),
      leaseUntil: int(reply.leaseUntil),
      claims: int(reply.claims),
    };
    return truthy(reply.approved) ? { ...granted, approved: true as const } : granted;
  };
  const traced = typeof reply.trace === "string" ? { trace: reply.trace } : {};
  const { detail } = reply;
  switch (reply.code) {
    case OUTCOME_CODES.acquired:
      return { outcome: "acquired", ...ownership() };
    case OUTCOME_CODES.takeover:
      return { outcome: "takeover", ...ownership() };
    case OUTCOME_CODES.reconcile:
      if (detail !== "claimed" && detail !== "reconciling" && detail !== "unknown") return malformed();
      return { outcome: "reconcile", from: detail, ...ownership() };
    case OUTCOME_CODES.replay:
      return {
        outcome: "replay",
        result: typeof reply.result === "string" ? reply.result : "null",
        fence: int(reply.fence),
        ...traced,
      };
    case OUTCOME_CODES.replay_error:
      return {
        outcome: "replay_error",
        error: storedError(reply.result),
        fence: int(reply.fence),
        ...traced,
      };
    case OUTCOME_CODES.in_flight:
      if (detail !== "claimed" && detail !== "reconciling") return malformed();
      return {
        outcome: "in_flight",
        retryAfterMs: retryAfterFor(int(reply.remaining)),
        state: detail,
        fence: int(reply.fence),
      };
    case OUTCOME_CODES.conflict:
      return { outcome: "conflict", tool: typeof detail === "string" ? detail : "" };
    case OUTCOME_CODES.awaiting_approval:
      if (typeof detail !== "string") return malformed();
      return {
        outcome: "awaiting_approval",
        reason: detail,
        requestedAt: int(reply.requestedAt),
        expiresAt: int(reply.expiresAt),
        fence: int(reply.fence),
      };
    case OUTCOME_CODES.cancelled: {
      const { cancelBy, cancelWhy } = reply;
      if (typeof cancelBy !== "string") return malformed();
      const cancellation: Cancellation = {
        by: cancelBy,
        why: typeof cancelWhy === "string" ? cancelWhy : "",
        at: int(reply.cancelAt),
      };
      return { outcome: "cancelled", cancellation, fence: int(reply.fence) };
    }
  }
  return malformed();
}

/** An owner write's (or resolve's) coded answer as its outcome; `malformed` as for {@link decodeClaim}. */
export function decodeWrite(reply: CodedWrite, malformed: () => never): WriteOutcome {
  switch (reply.code) {
    case OUTCOME_CODES.ok: {
      const fence = integer(reply.fence, malformed);
      const ok: WriteOutcome =
        reply.leaseUntil === null || reply.leaseUntil === undefined
          ? { outcome: "ok", fence }
          : { outcome: "ok", fence, leaseUntil: integer(reply.leaseUntil, malformed) };
      return truthy(reply.cancelRequested) ? { ...ok, cancelRequested: true } : ok;
    }
    case OUTCOME_CODES.lost:
      return { outcome: "lost" };
    case OUTCOME_CODES.refused:
      return { outcome: "refused", reason: String(reply.detail ?? "") };
  }
  return malformed();
}

/** A `requestApproval`'s coded answer: a write's, whose `ok` carries when the request was made and expires. */
export function decodeApprovalRequest(
  reply: CodedWrite & { requestedAt?: unknown; expiresAt?: unknown },
  malformed: () => never,
): ApprovalRequestOutcome {
  if (reply.code !== OUTCOME_CODES.ok) {
    const outcome = decodeWrite(reply, malformed);
    if (outcome.outcome === "ok") return malformed();
    return outcome;
  }
  return {
    outcome: "ok",
    fence: integer(reply.fence, malformed),
    requestedAt: integer(reply.requestedAt, malformed),
    expiresAt: integer(reply.expiresAt, malformed),
  };
}

/** A stored error's JSON text as the error. Mirrors MemoryStore: a failed record always replays some error, even a bare one. */
export function storedError(json: unknown): StoredError {
  if (typeof json !== "string") return { name: "Error", message: "failed" };
  return JSON.parse(json) as StoredError;
}

/** A flag as Lua (1), PostgreSQL (`t`, true) or a decimal string (`1`) sends it. */
function truthy(value: unknown): boolean {
  return value === true || value === 1 || value === "1" || value === "t";
}

function integer(value: unknown, malformed: () => never): number {
  const n = typeof value === "string" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isSafeInteger(n)) return malformed();
  return n;
}

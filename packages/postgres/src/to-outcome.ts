import type { ApprovalRequestOutcome, CancelOutcome, ClaimOutcome, WriteOutcome } from "@once/core";
import { decodeApprovalRequest, decodeClaim, decodeWrite } from "@once/core/internal";
import { PostgresQueryError } from "./errors.js";

// The SQL functions answer with the codes of the Lua scripts of @once/redis; what each code means is
// @once/core's (decodeClaim, decodeWrite). A row only names the fields.

// A record's stored error, read back as the claim's is (to-record.ts).
export { storedError } from "@once/core/internal";

/** A row of the claim function. Bigints arrive as strings. */
export interface ClaimRow {
  code: number;
  fence: string | null;
  token: string | null;
  lease_until: string | null;
  claims: number | null;
  detail: string | null;
  result: string | null;
  trace: string | null;
  remaining: string | null;
  /** The row's layout, with a replay (schema version 2 on). */
  layout: number | null;
  /** A grant: whether the record holds a person's approval (schema version 3 on). */
  approved?: boolean | null;
  /** awaiting_approval: when the request was made and when it expires. */
  approval_at?: string | null;
  approval_until?: string | null;
  /** cancelled: the task's cancellation (schema version 4 on). */
  cancelled_by?: string | null;
  cancelled_why?: string | null;
  cancelled_at?: string | null;
}

/** A row of the cancel_task function. */
export interface CancelRow {
  outcome: string;
  cancelled_by: string;
  cancelled_why: string;
  cancelled_at: string;
  stopped: string[];
  running: string[];
}

/** A row of the request_approval function. */
export interface ApprovalRequestRow {
  code: number;
  fence: string | null;
  detail: string | null;
  approval_at: string | null;
  approval_until: string | null;
}

/** A row of an owner write or resolve. */
export interface WriteRow {
  code: number;
  fence: string | null;
  lease_until: string | null;
  detail: string | null;
  /** A heartbeat's: the task was cancelled while this owner's effect ran (schema version 4 on). */
  cancel_requested?: boolean | null;
}

/** The claim function's coded row as its outcome. */
export function claimOutcome(row: ClaimRow | undefined): ClaimOutcome {
  const malformed = () => rowError("claim", row);
  if (!row) return malformed();
  return decodeClaim(
    {
      code: row.code,
      fence: row.fence,
      token: row.token,
      leaseUntil: row.lease_until,
      claims: row.claims,
      detail: row.detail,
      result: row.result,
      trace: row.trace,
      remaining: row.remaining,
      approved: row.approved,
      requestedAt: row.approval_at,
      expiresAt: row.approval_until,
      cancelBy: row.cancelled_by,
      cancelWhy: row.cancelled_why,
      cancelAt: row.cancelled_at,
    },
    malformed,
  );
}

/** The cancel_task function's row as its outcome. */
export function cancelOutcome(row: CancelRow | undefined): CancelOutcome {
  if (
    !row ||
    (row.outcome !== "cancelled" && row.outcome !== "already_cancelled") ||
    !Array.isArray(row.stopped) ||
    !Array.isArray(row.running)
  )
    return rowError("cancel-task", row);
  return {
    outcome: row.outcome,
    cancellation: { by: row.cancelled_by, why: row.cancelled_why, at: Number(row.cancelled_at) },
    stopped: row.stopped,
    running: row.running,
  };
}

/** The request_approval function's coded row as its outcome. */
export function approvalRequestOutcome(row: ApprovalRequestRow | undefined): ApprovalRequestOutcome {
  const malformed = () => rowError("request-approval", row);
  if (!row) return malformed();
  return decodeApprovalRequest(
    {
      code: row.code,
      fence: row.fence,
      detail: row.detail,
      requestedAt: row.approval_at,
      expiresAt: row.approval_until,
    },
    malformed,
  );
}

/** An owner write's (or resolve's) coded row as its outcome. */
export function writeOutcome(transition: string, row: WriteRow | undefined): WriteOutcome {
  const malformed = () => rowError(transition, row);
  if (!row) return malformed();
  return decodeWrite(
    {
      code: row.code,
      fence: row.fence,
      leaseUntil: row.lease_until,
      detail: row.detail,
      cancelRequested: row.cancel_requested,
    },
    malformed,
  );
}

function rowError(transition: string, row: unknown): never {
  throw new PostgresQueryError(transition, `unexpected row ${JSON.stringify(row)}`);
}

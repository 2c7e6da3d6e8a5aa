import {
  type ApprovalRequest,
  type Cancellation,
  type OnceRecord,
  RECORD_STATES,
  type RecordState,
  type Resolution,
} from "@once/core";
import { PostgresQueryError } from "./errors.js";
import type { Names } from "./names.js";
import { assertReadableLayout } from "./record-layout.js";
import { storedError } from "./to-outcome.js";

const RESOLUTIONS: readonly Resolution["as"][] = ["applied", "not_applied", "failed"];

/** A row of the records table, with its remaining retention. Bigints arrive as strings. */
export interface RecordRow {
  key: string;
  state: string;
  phase: string;
  fence: string;
  owner: string | null;
  lease_until: string | null;
  fp: string;
  tool: string;
  claims: number;
  created_at: string;
  updated_at: string;
  result: string | null;
  error: string | null;
  trace: string | null;
  res_as: string | null;
  res_by: string | null;
  res_why: string | null;
  res_at: string | null;
  layout: number;
  apr_reason: string | null;
  apr_at: string | null;
  apr_until: string | null;
  apr_as: string | null;
  apr_by: string | null;
  apr_why: string | null;
  apr_decided: string | null;
  /** The call's identity (schema version 4 on): set when its claim named its task and the store keeps it. */
  ns: string | null;
  task_id: string | null;
  step_id: string | null;
  /** Its task's cancellation (layout 3). */
  cancel_by: string | null;
  cancel_why: string | null;
  cancel_at: string | null;
  /** The owner's process's liveness entry (schema version 5 on), when its claim named one. */
  live: string | null;
  ttl_ms: string;
}

/** Every column a record is read from, in {@link RecordRow}'s order (without `ttl_ms`). */
const RECORD_COLUMNS = [
  "key",
  "state",
  "phase",
  "fence",
  "owner",
  "lease_until",
  "fp",
  "tool",
  "claims",
  "created_at",
  "updated_at",
  "result",
  "error",
  "trace",
  "res_as",
  "res_by",
  "res_why",
  "res_at",
  "layout",
  "apr_reason",
  "apr_at",
  "apr_until",
  "apr_as",
  "apr_by",
  "apr_why",
  "apr_decided",
  "ns",
  "task_id",
  "step_id",
  "cancel_by",
  "cancel_why",
  "cancel_at",
  "live",
];

/** The columns of {@link RecordRow} from the records table as `alias`, its `ttl_ms` measured from `now`. */
export function recordColumns(alias: string, now: string): string {
  return `${RECORD_COLUMNS.map((column) => `${alias}.${column}`).join(", ")}, ${alias}.expires_at - ${now} as ttl_ms`;
}

/** `select <every column>, <ms left> as ttl_ms from <records> r`: add the `where`. */
export function recordSelect(names: Names): string {
  return `select ${recordColumns("r", `${names.q("now_ms")}()`)} from ${names.q("records")} r`;
}

/** A row as a record. */
export function toRecord(row: RecordRow): OnceRecord {
  // Before any other column: a row of a newer layout may hold any of them in another form.
  assertReadableLayout(row.key, row.layout);
  const state = row.state as RecordState;
  if (!RECORD_STATES.includes(state))
    throw new PostgresQueryError("get", `record ${row.key} has state ${JSON.stringify(row.state)}`);
  const record: OnceRecord = {
    key: row.key,
    state,
    phase: row.phase === "prepare" ? "prepare" : "effect",
    fence: Number(row.fence),
    fingerprint: row.fp,
    tool: row.tool,
    claims: Number(row.claims),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
  if (row.owner !== null) record.owner = row.owner;
  if (row.lease_until !== null) record.leaseUntil = Number(row.lease_until);
  if (row.result !== null) record.result = row.result;
  if (row.error !== null) record.error = storedError(row.error);
  if (row.trace !== null) record.trace = row.trace;
  // The owner's process's liveness entry: it says something only while the record has an owner.
  if (row.live !== null && (state === "claimed" || state === "reconciling")) record.liveness = row.live;
  const as = row.res_as as Resolution["as"] | null;
  if (as !== null && RESOLUTIONS.includes(as)) {
    record.resolution = { as, by: row.res_by ?? "", why: row.res_why ?? "", at: Number(row.res_at ?? 0) };
  }
  const approval = approvalOf(row);
  if (approval !== undefined) record.approval = approval;
  if (row.ns !== null && row.task_id !== null && row.step_id !== null)
    record.task = { namespace: row.ns, taskId: row.task_id, stepId: row.step_id };
  const cancellation = cancellationOf(row.cancel_by, row.cancel_why, row.cancel_at);
  if (cancellation !== undefined) record.cancellation = cancellation;
  record.ttlMs = Math.max(0, Number(row.ttl_ms));
  return record;
}

/** The approval request a row's `apr_*` columns hold (layout 2), or undefined when it was never asked about. */
function approvalOf(row: RecordRow): ApprovalRequest | undefined {
  if (row.apr_at === null) return undefined;
  const approval: ApprovalRequest = {
    reason: row.apr_reason ?? "",
    requestedAt: Number(row.apr_at),
    expiresAt: Number(row.apr_until ?? 0),
  };
  const at = Number(row.apr_decided ?? 0);
  if (row.apr_as === "approved" || row.apr_as === "denied")
    approval.decision = { as: row.apr_as, by: row.apr_by ?? "", why: row.apr_why ?? "", at };
  else if (row.apr_as === "expired") approval.decision = { as: "expired", at };
  return approval;
}

/** A cancellation as its three columns hold it (a record's or a task's), or undefined when there is none. */
export function cancellationOf(
  by: string | null | undefined,
  why: string | null | undefined,
  at: string | number | null | undefined,
): Cancellation | undefined {
  if (at === null || at === undefined) return undefined;
  return { by: by ?? "", why: why ?? "", at: Number(at) };
}

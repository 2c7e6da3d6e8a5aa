import { type OnceRecord, RECORD_STATES, type RecordState, type Resolution } from "@once/core";
import { PostgresQueryError } from "./errors.js";
import type { Names } from "./names.js";
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
  ttl_ms: string;
}

/** `select <every column>, <ms left> as ttl_ms from <records>`: add the `where`. */
export function recordSelect(names: Names): string {
  return `select key, state, phase, fence, owner, lease_until, fp, tool, claims, created_at, updated_at, result,
    error, trace, res_as, res_by, res_why, res_at, expires_at - ${names.q("now_ms")}() as ttl_ms
    from ${names.q("records")}`;
}

/** A row as a record. */
export function toRecord(row: RecordRow): OnceRecord {
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
  const as = row.res_as as Resolution["as"] | null;
  if (as !== null && RESOLUTIONS.includes(as)) {
    record.resolution = { as, by: row.res_by ?? "", why: row.res_why ?? "", at: Number(row.res_at ?? 0) };
  }
  record.ttlMs = Math.max(0, Number(row.ttl_ms));
  return record;
}

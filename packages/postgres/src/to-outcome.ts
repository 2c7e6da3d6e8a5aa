import type { ClaimOutcome, StoredError, WriteOutcome } from "@once/core";
import { retryAfterFor } from "@once/core/internal";
import { PostgresQueryError } from "./errors.js";

// The codes the SQL functions answer with; the same as the Lua scripts of @once/redis.
const ACQUIRED = 1;
const TAKEOVER = 2;
const RECONCILE = 3;
const REPLAY = 4;
const REPLAY_ERROR = 5;
const IN_FLIGHT = 6;
const CONFLICT = 7;
const OK = 10;
const LOST = 11;
const REFUSED = 12;

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
}

/** A row of an owner write or resolve. */
export interface WriteRow {
  code: number;
  fence: string | null;
  lease_until: string | null;
  detail: string | null;
}

/** The claim function's coded row as its outcome; the only place that knows the codes. */
export function claimOutcome(row: ClaimRow | undefined): ClaimOutcome {
  if (!row) return malformed("claim", row);
  switch (row.code) {
    case ACQUIRED:
      return { outcome: "acquired", ...ownership(row) };
    case TAKEOVER:
      return { outcome: "takeover", ...ownership(row) };
    case RECONCILE: {
      const from = row.detail;
      if (from !== "claimed" && from !== "reconciling" && from !== "unknown") return malformed("claim", row);
      return { outcome: "reconcile", from, ...ownership(row) };
    }
    case REPLAY:
      return {
        outcome: "replay",
        result: row.result ?? "null",
        fence: int("claim", row.fence),
        ...traced(row),
      };
    case REPLAY_ERROR:
      return {
        outcome: "replay_error",
        error: storedError(row.result),
        fence: int("claim", row.fence),
        ...traced(row),
      };
    case IN_FLIGHT: {
      const state = row.detail;
      if (state !== "claimed" && state !== "reconciling") return malformed("claim", row);
      return {
        outcome: "in_flight",
        retryAfterMs: retryAfterFor(int("claim", row.remaining)),
        state,
        fence: int("claim", row.fence),
      };
    }
    case CONFLICT:
      return { outcome: "conflict", tool: row.detail ?? "" };
  }
  return malformed("claim", row);
}

/** An owner write's (or resolve's) coded row as its outcome. */
export function writeOutcome(transition: string, row: WriteRow | undefined): WriteOutcome {
  if (!row) return malformed(transition, row);
  switch (row.code) {
    case OK:
      return row.lease_until === null
        ? { outcome: "ok", fence: int(transition, row.fence) }
        : { outcome: "ok", fence: int(transition, row.fence), leaseUntil: int(transition, row.lease_until) };
    case LOST:
      return { outcome: "lost" };
    case REFUSED:
      return { outcome: "refused", reason: row.detail ?? "" };
  }
  return malformed(transition, row);
}

function ownership(row: ClaimRow) {
  if (typeof row.token !== "string") return malformed("claim", row);
  return {
    token: row.token,
    fence: int("claim", row.fence),
    leaseUntil: int("claim", row.lease_until),
    claims: int("claim", row.claims),
  };
}

function traced(row: ClaimRow): { trace?: string } {
  return typeof row.trace === "string" ? { trace: row.trace } : {};
}

/** Mirrors MemoryStore: a failed record always replays some error, even a bare one. */
export function storedError(json: string | null): StoredError {
  if (typeof json !== "string") return { name: "Error", message: "failed" };
  return JSON.parse(json) as StoredError;
}

function int(transition: string, value: unknown): number {
  const n = typeof value === "string" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isSafeInteger(n)) return malformed(transition, value);
  return n;
}

function malformed(transition: string, row: unknown): never {
  throw new PostgresQueryError(transition, `unexpected row ${JSON.stringify(row)}`);
}

import type { OnceRecord, RecordState } from "@once/core";
import { formatDuration } from "./durations.js";

/** A record as `--json` prints it: the record as read, plus what the server's clock says about it. */
export interface RecordJson extends OnceRecord {
  /** Milliseconds of lease left (negative: ran out that long ago); only while an owner holds the key. */
  leaseRemainingMs?: number;
  /** Milliseconds since the last transition. */
  sinceUpdateMs: number;
}

const MEANING: Record<RecordState, string> = {
  claimed: "an owner holds the key",
  reconciling: "an owner is asking the tool's reconcile hook whether the effect happened",
  released: "free: the next attempt runs the tool",
  done: "finished: the stored result is replayed to every later attempt",
  failed: "failed for good: the stored error is replayed to every later attempt",
  unknown:
    "the effect may have happened and nobody knows: the next attempt reconciles, or an operator resolves it",
};

/** One line on what the record's state means for the next attempt. */
export function stateMeaning(record: OnceRecord, now: number): string {
  if ((record.state === "claimed" || record.state === "reconciling") && leaseRemaining(record, now) <= 0) {
    if (record.state === "claimed" && record.phase === "prepare") {
      return "the owner's lease ran out in the prepare phase: the next attempt takes over";
    }
    return "the owner's lease ran out after the effect may have started: the next attempt reconciles";
  }
  if (record.state === "claimed") {
    return record.phase === "prepare"
      ? "an owner holds the key; nothing has touched the outside world yet"
      : "an owner holds the key; the effect may be under way";
  }
  return MEANING[record.state];
}

/** Lease left by the server's clock (negative once it ran out); 0 when nobody owns the key. */
export function leaseRemaining(record: OnceRecord, now: number): number {
  return record.leaseUntil === undefined ? 0 : record.leaseUntil - now;
}

/** `12s left`, `expired 3m ago`, or `-` when nobody owns the key. */
export function leaseText(record: OnceRecord, now: number): string {
  if (record.leaseUntil === undefined) return "-";
  const left = leaseRemaining(record, now);
  return left > 0 ? `${formatDuration(left)} left` : `expired ${formatDuration(-left)} ago`;
}

/** `3m ago` for a server timestamp. */
export function ago(at: number, now: number): string {
  return `${formatDuration(Math.max(0, now - at))} ago`;
}

/** The record for `--json`. */
export function recordJson(record: OnceRecord, now: number): RecordJson {
  return {
    ...record,
    ...(record.leaseUntil === undefined ? {} : { leaseRemainingMs: record.leaseUntil - now }),
    sinceUpdateMs: now - record.updatedAt,
  };
}

/** `name: message (code)` of a stored error. */
export function errorText(error: NonNullable<OnceRecord["error"]>): string {
  return `${error.name}: ${error.message}${error.code === undefined ? "" : ` (${error.code})`}`;
}

/** Prints `value` as indented JSON with a trailing newline. */
export function jsonText(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

import type { OnceRecord } from "@once/core";

/** A record as `--json` prints it: the record as read, plus what the server's clock says about it. */
export interface RecordJson extends OnceRecord {
  /** Milliseconds of lease left (negative: ran out that long ago); only while an owner holds the key. */
  leaseRemainingMs?: number;
  /** Milliseconds since the last transition. */
  sinceUpdateMs: number;
}

/** The record for `--json`. */
export function recordJson(record: OnceRecord, now: number): RecordJson {
  return {
    ...record,
    ...(record.leaseUntil === undefined ? {} : { leaseRemainingMs: record.leaseUntil - now }),
    sinceUpdateMs: now - record.updatedAt,
  };
}

/** Prints `value` as indented JSON with a trailing newline. */
export function jsonText(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

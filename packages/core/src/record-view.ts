import type { StoredError } from "./errors.js";
import type { OnceRecord, RecordState } from "./store.js";

// How a record reads to a person: the words the `once` command and the console both use.

const MEANING: Record<RecordState, string> = {
  claimed: "an owner holds the key",
  reconciling: "an owner is asking the tool's reconcile hook whether the effect happened",
  released: "free: the next attempt runs the tool",
  done: "finished: the stored result is replayed to every later attempt",
  failed: "failed for good: the stored error is replayed to every later attempt",
  unknown:
    "the effect may have happened and nobody knows: the next attempt reconciles, or an operator resolves it",
  awaiting_approval:
    "waits for a person's approval: nothing ran; every attempt is answered pending until it is approved, denied or expires",
  approved: "approved: the next attempt runs the effect, once",
  cancelled: "cancelled with its task: nothing ran; every attempt is answered cancelled (TaskCancelledError)",
};

/** One line on what the record's state means for the next attempt. */
export function stateMeaning(record: OnceRecord, now: number): string {
  if (record.cancellation !== undefined && (record.state === "claimed" || record.state === "reconciling")) {
    return "its task was cancelled while the effect may have been under way: the owner is told to stop at its next heartbeat, and the call settles as usual";
  }
  if (record.cancellation !== undefined && record.state === "unknown") {
    return "its task was cancelled after the effect may have happened: the task's attempts are answered cancelled, so an operator resolves it";
  }
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
  if (record.state === "awaiting_approval" && record.approval && record.approval.expiresAt <= now)
    return "its approval request expired with no decision: the next attempt fails for good (approval_expired)";
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

/** `name: message (code)` of a stored error. */
export function errorText(error: StoredError): string {
  return `${error.name}: ${error.message}${error.code === undefined ? "" : ` (${error.code})`}`;
}

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;

/**
 * Milliseconds in a duration like `30s`, `10m`, `2h`, `1d`, `250ms` or `1h30m`, or undefined when `text` is
 * not one. A bare number is refused: whether `10` meant seconds or minutes is exactly the kind of guess an
 * operator tool must not make.
 */
export function readDuration(text: string): number | undefined {
  const trimmed = text.trim();
  let total = 0;
  PART.lastIndex = 0;
  let matched = 0;
  for (let match = PART.exec(trimmed); match !== null; match = PART.exec(trimmed)) {
    total += Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
    matched = PART.lastIndex;
  }
  return trimmed === "" || matched !== trimmed.length ? undefined : Math.round(total);
}

/** A short human form of a duration: `850ms`, `45s`, `12m30s`, `3h5m`, `2d4h`. */
export function formatDuration(ms: number): string {
  const sign = ms < 0 ? "-" : "";
  let rest = Math.abs(Math.round(ms));
  if (rest === 0) return "0s";
  if (rest < 1_000) return `${sign}${rest}ms`;
  if (rest < 60_000) {
    const seconds = rest / 1_000;
    return `${sign}${Number.isInteger(seconds) ? seconds : seconds.toFixed(1)}s`;
  }
  const parts: string[] = [];
  for (const [unit, size] of [
    ["d", UNIT_MS.d],
    ["h", UNIT_MS.h],
    ["m", UNIT_MS.m],
    ["s", UNIT_MS.s],
  ] as const) {
    const count = Math.floor(rest / size);
    rest -= count * size;
    if (count > 0) parts.push(`${count}${unit}`);
    // Two units are enough to read at a glance: 2d4h, not 2d4h13m7s.
    if (parts.length === 2) break;
  }
  return sign + parts.join("");
}

/** The trace id of a W3C traceparent (`00-<trace id>-<span id>-<flags>`), or undefined if it is not one. */
export function traceIdOf(traceparent: string): string | undefined {
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(traceparent.trim());
  return match === null || /^0+$/.test(match[1] ?? "") ? undefined : match[1];
}

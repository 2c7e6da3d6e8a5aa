import { type AnyTool, DEFAULT_LEASE_MS } from "@once/core";
import { RetryWindowError, type RetryWindowTerm } from "./errors.js";

export type { RetryWindowTerm };

/** The longest time between the first and the last attempt of one key, term by term. */
export interface RetryWindow {
  worstCaseMs: number;
  terms: RetryWindowTerm[];
}

/** The longest lease an entry point's effect calls run with, and where it comes from (for a term's detail). */
export interface LongestLease {
  ms: number;
  /** The tool whose own `leaseMs` it is; undefined when it is the entry point's default lease. */
  tool?: string | undefined;
}

/**
 * The terms of an entry point's retries, given the longest lease its effect calls run with. Each transport
 * knows its own: BullMQ's backoff, lock and stalled interval (`@once/bullmq`), an in-process loop's attempts.
 */
export type RetryTerms = (lease: LongestLease) => RetryWindowTerm[];

/** Sums the terms: the worst case a record must be retained for. */
export function retryWindow(terms: readonly RetryWindowTerm[]): RetryWindow {
  return { worstCaseMs: terms.reduce((sum, term) => sum + term.ms, 0), terms: [...terms] };
}

/** Throws {@link RetryWindowError}, printing every term, when retention is shorter than the retry window. */
export function assertRetryWindow(retentionMs: number, terms: readonly RetryWindowTerm[]): RetryWindow {
  const window = retryWindow(terms);
  if (retentionMs < window.worstCaseMs)
    throw new RetryWindowError(retentionMs, window.worstCaseMs, window.terms);
  return window;
}

/** The term every entry point has: how long a crashed orchestrator may take to resume with the same step ids. */
export function resumeGapTerm(resumeGapMs = 0): RetryWindowTerm {
  return { name: "resumeGap", ms: resumeGapMs, detail: "orchestrator crash-and-resume allowance" };
}

/**
 * The wait of an approval request: a call asked about can be resumed up to its expiry and be answered from
 * its record (pending, or `approval_expired`), so the record must outlive it too.
 */
export function approvalTtlTerm(approvalTtlMs: number): RetryWindowTerm {
  return {
    name: "approvalTtl",
    ms: approvalTtlMs,
    detail: "an approval request waits this long for a decision",
  };
}

/** The longest lease any effect tool runs with: its own `leaseMs`, or the entry point's default. */
export function longestLease(
  tools: readonly AnyTool[] | undefined,
  fallbackMs = DEFAULT_LEASE_MS,
): LongestLease {
  const effects = tools?.filter((tool) => tool.kind === "effect") ?? [];
  if (effects.length === 0) return { ms: fallbackMs };
  let longest: LongestLease = { ms: 0 };
  for (const tool of effects) {
    const ms = tool.leaseMs ?? fallbackMs;
    if (ms > longest.ms) longest = { ms, tool: tool.leaseMs === undefined ? undefined : tool.name };
  }
  return longest;
}

/** A lease as a term's detail says it: `lease 30000 (charge's own)`, or whose default it is. */
export function describeLease(lease: LongestLease, defaultOf: string): string {
  return `lease ${lease.ms} (${lease.tool === undefined ? `${defaultOf}'s` : `${lease.tool}'s own`})`;
}

/** The pause an in-process call makes before `attempt` (2 or later): `backoffMs` doubled each time, at most `maxMs`. */
export function pauseBefore(attempt: number, backoffMs: number, maxMs: number): number {
  return Math.min(backoffMs * 2 ** (attempt - 2), maxMs);
}

/**
 * An in-process call's retries: `attempts` tries, the pauses between them ({@link pauseBefore}). Each try may
 * end with its owner dead mid-effect, and the next waits out that lease before it reconciles.
 */
export function inProcessTerms(attempts: number, backoffMs: number, maxBackoffMs: number): RetryTerms {
  return (lease) => {
    let backoff = 0;
    for (let attempt = 2; attempt <= attempts; attempt++)
      backoff += pauseBefore(attempt, backoffMs, maxBackoffMs);
    return [
      {
        name: "backoff",
        ms: backoff,
        detail: `${attempts - 1} pauses from ${backoffMs} ms, doubled each time, at most ${maxBackoffMs} ms`,
      },
      {
        name: "attempts",
        ms: attempts * lease.ms,
        detail: `${attempts} × ${describeLease(lease, "the caller")}`,
      },
    ];
  };
}

import { RetryWindowError, type RetryWindowTerm } from "./errors.js";
import { type AnyTool, DEFAULT_LEASE_MS } from "./tool.js";

/** BullMQ's backoff setting, as given in job options. */
export type BackoffSetting = number | { type: "fixed" | "exponential"; delay?: number; jitter?: number };

/** BullMQ's defaults for a worker's `lockDuration` and `stalledInterval`. */
const BULLMQ_LOCK_DURATION_MS = 30_000;
const BULLMQ_STALLED_INTERVAL_MS = 30_000;

/**
 * Everything the retry window depends on. The worker side and the dispatcher pass the same fields, so both
 * compute the same window; a setting left out is taken at its default, and the term's detail says so.
 */
export interface RetryWindowInput {
  retentionMs: number;
  /** The tools: each effect tool runs with its own `leaseMs`, or `leaseMs` below. The longest counts. */
  tools?: readonly AnyTool[];
  /** The lease of effect tools without one of their own (the worker's `leaseMs`). Default 30 s. */
  leaseMs?: number;
  /** BullMQ `attempts` of the job (default 1). */
  attempts?: number;
  backoff?: BackoffSetting;
  /** BullMQ worker `lockDuration` (default 30 s). */
  lockDurationMs?: number;
  /** BullMQ worker `stalledInterval` (default 30 s). */
  stalledIntervalMs?: number;
  /** The dispatcher's re-enqueues after a timeout. */
  dispatcher?: { retries: number; timeoutMs: number; backoffMs?: number };
  /** How long a crashed orchestrator may take to resume with the same step ids. */
  resumeGapMs?: number;
}

export interface RetryWindow {
  worstCaseMs: number;
  terms: RetryWindowTerm[];
  /** The longest lease an effect call runs with, as counted in the `attempts` term. */
  leaseMs: number;
}

/** The longest time between the first and the last attempt of one key, term by term. */
export function retryWindow(input: RetryWindowInput): RetryWindow {
  const attempts = Math.max(1, input.attempts ?? 1);
  const lease = longestLease(input.tools, input.leaseMs ?? DEFAULT_LEASE_MS);
  const lockMs = input.lockDurationMs ?? BULLMQ_LOCK_DURATION_MS;
  const stalledMs = input.stalledIntervalMs ?? BULLMQ_STALLED_INTERVAL_MS;
  const perAttempt = Math.max(lease.ms, lockMs) + stalledMs;
  const lock = `lockDuration ${lockMs}${input.lockDurationMs === undefined ? " (BullMQ's default, assumed)" : ""}`;
  const stalled = `stalledInterval ${stalledMs}${input.stalledIntervalMs === undefined ? " (BullMQ's default, assumed)" : ""}`;
  const terms: RetryWindowTerm[] = [
    {
      name: "backoff",
      ms: backoffTotal(input.backoff, attempts),
      detail: `BullMQ backoff over ${attempts} attempts, maximum jitter`,
    },
    {
      name: "attempts",
      ms: attempts * perAttempt,
      detail: `${attempts} × (max(lease ${lease.ms} ${lease.from}, ${lock}) + ${stalled})`,
    },
  ];
  if (input.dispatcher) {
    const { retries, timeoutMs, backoffMs = 0 } = input.dispatcher;
    terms.push({
      name: "dispatcher",
      ms: retries * (timeoutMs + backoffMs),
      detail: `${retries} re-enqueues × (timeout ${timeoutMs} + backoff ${backoffMs})`,
    });
  }
  terms.push({
    name: "resumeGap",
    ms: input.resumeGapMs ?? 0,
    detail: "orchestrator crash-and-resume allowance",
  });
  return { worstCaseMs: terms.reduce((sum, t) => sum + t.ms, 0), terms, leaseMs: lease.ms };
}

/** Throws {@link RetryWindowError}, printing every term, when retention is shorter than the retry window. */
export function assertRetryWindow(input: RetryWindowInput): RetryWindow {
  const window = retryWindow(input);
  if (input.retentionMs < window.worstCaseMs) {
    throw new RetryWindowError(input.retentionMs, window.worstCaseMs, window.terms);
  }
  return window;
}

/** The longest lease any effect tool runs with, and where it comes from (for the term's detail). */
function longestLease(
  tools: readonly AnyTool[] | undefined,
  fallbackMs: number,
): { ms: number; from: string } {
  let longest = { ms: fallbackMs, from: "(the worker's)" };
  const effects = tools?.filter((tool) => tool.kind === "effect") ?? [];
  if (effects.length === 0) return longest;
  longest = { ms: 0, from: "" };
  for (const tool of effects) {
    const ms = tool.leaseMs ?? fallbackMs;
    if (ms > longest.ms)
      longest = { ms, from: tool.leaseMs === undefined ? "(the worker's)" : `(${tool.name}'s own)` };
  }
  return longest;
}

function backoffTotal(backoff: BackoffSetting | undefined, attempts: number): number {
  if (backoff === undefined) return 0;
  const setting = typeof backoff === "number" ? { type: "fixed" as const, delay: backoff } : backoff;
  const delay = setting.delay ?? 0;
  let total = 0;
  // BullMQ waits between attempts, so `attempts` tries have attempts - 1 delays. Jitter only shortens a
  // delay, so the maximum-jitter case is the plain delay.
  for (let made = 1; made < attempts; made++) {
    total += setting.type === "exponential" ? 2 ** (made - 1) * delay : delay;
  }
  return total;
}

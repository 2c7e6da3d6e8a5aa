import { RetryWindowError, type RetryWindowTerm } from "./errors.js";

/** BullMQ's backoff setting, as given in job options. */
export type BackoffSetting = number | { type: "fixed" | "exponential"; delay?: number; jitter?: number };

export interface RetryWindowInput {
  retentionMs: number;
  /** BullMQ `attempts` of the job (default 1). */
  attempts?: number;
  backoff?: BackoffSetting;
  /** once's lease. */
  leaseMs: number;
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
}

/** The longest time between the first and the last attempt of one key, term by term. */
export function retryWindow(input: RetryWindowInput): RetryWindow {
  const attempts = Math.max(1, input.attempts ?? 1);
  const lockMs = input.lockDurationMs ?? 30_000;
  const stalledMs = input.stalledIntervalMs ?? 30_000;
  const perAttempt = Math.max(input.leaseMs, lockMs) + stalledMs;
  const terms: RetryWindowTerm[] = [
    {
      name: "backoff",
      ms: backoffTotal(input.backoff, attempts),
      detail: `BullMQ backoff over ${attempts} attempts, maximum jitter`,
    },
    {
      name: "attempts",
      ms: attempts * perAttempt,
      detail: `${attempts} × (max(lease ${input.leaseMs}, lockDuration ${lockMs}) + stalledInterval ${stalledMs})`,
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
  return { worstCaseMs: terms.reduce((sum, t) => sum + t.ms, 0), terms };
}

/** Throws {@link RetryWindowError}, printing every term, when retention is shorter than the retry window. */
export function assertRetryWindow(input: RetryWindowInput): RetryWindow {
  const window = retryWindow(input);
  if (input.retentionMs < window.worstCaseMs) {
    throw new RetryWindowError(input.retentionMs, window.worstCaseMs, window.terms);
  }
  return window;
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

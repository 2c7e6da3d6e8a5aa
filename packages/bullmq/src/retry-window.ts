import type { AnyTool } from "@once/core";
import {
  describeLease,
  longestLease,
  type RetryTerms,
  type RetryWindow,
  type RetryWindowTerm,
  resumeGapTerm,
  retryWindow,
} from "@once/engine";

/** BullMQ's backoff setting, as given in job options. */
export type BackoffSetting = number | { type: "fixed" | "exponential"; delay?: number; jitter?: number };

/** BullMQ's defaults for a worker's `lockDuration` and `stalledInterval`. */
const BULLMQ_LOCK_DURATION_MS = 30_000;
const BULLMQ_STALLED_INTERVAL_MS = 30_000;

/** What a job's retries depend on in BullMQ: the job's attempts and backoff, the worker's lock and stall check. */
export interface JobRetrySettings {
  /** BullMQ `attempts` of the job (default 1). */
  attempts?: number | undefined;
  backoff?: BackoffSetting | undefined;
  /** BullMQ worker `lockDuration` (default 30 s). */
  lockDurationMs?: number | undefined;
  /** BullMQ worker `stalledInterval` (default 30 s). */
  stalledIntervalMs?: number | undefined;
}

/** A dispatcher's re-enqueues after a timeout. */
export interface DispatcherRetrySettings {
  retries: number;
  timeoutMs: number;
  backoffMs?: number | undefined;
}

/**
 * A BullMQ job's retries as terms of the retry window: the backoff delays over `attempts` (maximum jitter),
 * and per attempt the longer of the lease and the lock, plus the stalled interval (how long a dead worker's
 * job waits before BullMQ hands it on). A dispatcher adds its re-enqueues.
 */
export function jobRetryTerms(settings: JobRetrySettings, dispatcher?: DispatcherRetrySettings): RetryTerms {
  return (lease) => {
    const attempts = Math.max(1, settings.attempts ?? 1);
    const lockMs = settings.lockDurationMs ?? BULLMQ_LOCK_DURATION_MS;
    const stalledMs = settings.stalledIntervalMs ?? BULLMQ_STALLED_INTERVAL_MS;
    const assumed = " (BullMQ's default, assumed)";
    const lock = `lockDuration ${lockMs}${settings.lockDurationMs === undefined ? assumed : ""}`;
    const stalled = `stalledInterval ${stalledMs}${settings.stalledIntervalMs === undefined ? assumed : ""}`;
    const terms: RetryWindowTerm[] = [
      {
        name: "backoff",
        ms: backoffTotal(settings.backoff, attempts),
        detail: `BullMQ backoff over ${attempts} attempts, maximum jitter`,
      },
      {
        name: "attempts",
        ms: attempts * (Math.max(lease.ms, lockMs) + stalledMs),
        detail: `${attempts} × (max(${describeLease(lease, "the worker")}, ${lock}) + ${stalled})`,
      },
    ];
    if (dispatcher) {
      const { retries, timeoutMs, backoffMs = 0 } = dispatcher;
      terms.push({
        name: "dispatcher",
        ms: retries * (timeoutMs + backoffMs),
        detail: `${retries} re-enqueues × (timeout ${timeoutMs} + backoff ${backoffMs})`,
      });
    }
    return terms;
  };
}

/**
 * The retry window workers and dispatchers check for these settings and tools, without starting either:
 * what `once audit` prints. The same terms the entry points compute, plus the resume gap.
 */
export function jobRetryWindow(
  input: JobRetrySettings & {
    tools?: readonly AnyTool[];
    /** The workers' lease for effect tools without one of their own. Default 30 s. */
    leaseMs?: number | undefined;
    dispatcher?: DispatcherRetrySettings | undefined;
    resumeGapMs?: number | undefined;
  },
): RetryWindow & { leaseMs: number } {
  const lease = longestLease(input.tools, input.leaseMs);
  return {
    ...retryWindow([...jobRetryTerms(input, input.dispatcher)(lease), resumeGapTerm(input.resumeGapMs)]),
    leaseMs: lease.ms,
  };
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

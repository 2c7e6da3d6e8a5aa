import type { OperatorStore } from "@once/core";
import type { Meter } from "@opentelemetry/api";
import { METRIC_APPROVALS_PENDING } from "./attributes.js";
import { onceMeter } from "./telemetry.js";

export interface PendingApprovalsGaugeOptions {
  /** How often the store is counted. Default 15 s: a count reads records, an export only reads the last count. */
  intervalMs?: number;
  /** Records counted at most (see OperatorStore.count). Default the store's own (10,000). */
  sample?: number;
  /** Default once's meter on the global meter provider. */
  meter?: Meter;
  /** Told when a count fails; the gauge keeps its last value until the next count succeeds. Default ignored. */
  onError?: (error: unknown) => void;
}

/** A running gauge: `stop()` ends its counting. */
export interface PendingApprovalsGauge {
  /** The last count, or undefined before the first one answered. */
  readonly pending: number | undefined;
  stop(): void;
}

/**
 * Reports `once.approvals.pending`, the approval requests waiting for a person, counted from the store (the
 * records in `awaiting_approval`), so every process that asks and every person who decides is in one number.
 * A call's own process cannot keep it: decisions are made elsewhere, and the process that asked may be gone.
 * Run it in one long-lived process per store (the console, an operator's service).
 */
export function observePendingApprovals(
  operator: Pick<OperatorStore, "count">,
  options: PendingApprovalsGaugeOptions = {},
): PendingApprovalsGauge {
  const meter = options.meter ?? onceMeter();
  const gauge = meter.createObservableGauge(METRIC_APPROVALS_PENDING, {
    description: "Approval requests waiting for a decision (records awaiting_approval in the store)",
  });
  let pending: number | undefined;
  let sampled = false;
  const count = async () => {
    try {
      const counts = await operator.count(options.sample === undefined ? {} : { sample: options.sample });
      pending = counts.byState.awaiting_approval;
      sampled = counts.sampled;
    } catch (error) {
      options.onError?.(error);
    }
  };
  const observe = (result: { observe(value: number, attributes?: Record<string, boolean>): void }) => {
    if (pending !== undefined) result.observe(pending, { "once.sampled": sampled });
  };
  gauge.addCallback(observe);
  void count();
  const timer = setInterval(() => void count(), options.intervalMs ?? 15_000);
  timer.unref();
  return {
    get pending() {
      return pending;
    },
    stop() {
      clearInterval(timer);
      gauge.removeCallback(observe);
    },
  };
}

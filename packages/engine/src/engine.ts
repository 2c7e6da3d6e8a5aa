import {
  type AnyTool,
  assertApprovalTools,
  assertTransactionalTools,
  DEFAULT_APPROVAL_TTL_MS,
  DEFAULT_LEASE_MS,
  isLeaseMs,
  isLivenessStore,
  MIN_LEASE_MS,
  MIN_LIVENESS_TTL_MS,
  type OnceStore,
} from "@once/core";
import { type ApprovalRequested, CallFlow } from "./call-flow.js";
import { InvalidOptionError } from "./errors.js";
import { DEFAULT_LIVENESS_TTL_MS, ProcessLiveness } from "./liveness.js";
import { ToolRegistry } from "./registry.js";
import {
  approvalTtlTerm,
  assertRetryWindow,
  longestLease,
  type RetryTerms,
  type RetryWindow,
  resumeGapTerm,
  retryWindow,
} from "./retry-window.js";
import { Telemetry, type TelemetryOptions } from "./telemetry.js";

/** Whether and how a process keeps its liveness entry: `false` for none, else how long it lives unrenewed. */
export type LivenessOption = false | { ttlMs?: number | undefined };

export interface EngineOptions {
  store: OnceStore;
  tools: readonly AnyTool[];
  /** Lease of an effect call's owner, unless the tool sets its own. Default 30 s. */
  leaseMs?: number | undefined;
  /** Largest result stored, in bytes of JSON. Default 1 MiB. */
  maxResultBytes?: number | undefined;
  /** How long a crashed orchestrator may take to resume with the same step ids. Default 0. */
  resumeGapMs?: number | undefined;
  telemetry?: TelemetryOptions | undefined;
  /**
   * How long an approval request waits for a person's decision before the call fails for good
   * (`approval_expired`). Counted into the retry window when a tool has an approval policy: the record must
   * outlive the wait and every retry after it, or a late resume would find no record and ask again. Default 1 h.
   */
  approvalTtlMs?: number | undefined;
  /**
   * The process's liveness entry in the store (docs/protocol.md, "Liveness"), when the store keeps them: one
   * per process and store, named on every claim, renewed every quarter of `ttlMs` while the process holds a
   * claim. When the process dies or stalls past `ttlMs`, the next claim of its keys reconciles at once instead
   * of waiting out the lease; an owner stalled past it is fenced out like one stalled past its lease, so
   * `ttlMs` is also the longest pause an owner survives. `false` turns it off: only leases, as before.
   * Default `{ ttlMs: 1000 }`.
   */
  liveness?: LivenessOption | undefined;
  /** Told once per call, by the attempt that created its approval request (docs/approvals.md). */
  onApprovalRequested?: ((request: ApprovalRequested) => void | Promise<void>) | undefined;
  /**
   * The entry point's own retries, as terms of the retry window: a queue's backoff and attempts, a
   * dispatcher's re-enqueues, an in-process loop's attempts. The engine adds the resume gap.
   */
  retries: RetryTerms;
}

/**
 * What every entry point stands on — the worker, the processor factory, the wrapper of a user's processor, the
 * dispatcher, `InProcess`, the agent adapters, the MCP server — made in one place, so no entry point can skip
 * what it checks: the tools (one declaration per name; transactional ones on a store that can commit them),
 * the lease, and the store's retention against that entry point's worst-case retry window. A record that
 * expires while a retry can still come lets the retry run the effect again, so it refuses to start instead.
 */
export class Engine {
  readonly store: OnceStore;
  readonly registry: ToolRegistry;
  readonly telemetry: Telemetry;
  readonly flow: CallFlow;
  /** The retry window the store's retention was checked against. */
  readonly retryWindow: RetryWindow;

  constructor(options: EngineOptions) {
    const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    if (!isLeaseMs(leaseMs))
      throw new InvalidOptionError("leaseMs", leaseMs, `an integer of at least ${MIN_LEASE_MS}`);
    const gap = options.resumeGapMs;
    if (gap !== undefined && !(Number.isInteger(gap) && gap >= 0))
      throw new InvalidOptionError("resumeGapMs", gap, "an integer of at least 0");
    const approvalTtlMs = options.approvalTtlMs ?? DEFAULT_APPROVAL_TTL_MS;
    if (!(Number.isInteger(approvalTtlMs) && approvalTtlMs >= 1))
      throw new InvalidOptionError("approvalTtlMs", approvalTtlMs, "an integer of at least 1");
    this.store = options.store;
    this.registry = new ToolRegistry(options.tools);
    assertTransactionalTools(options.tools, options.store);
    assertApprovalTools(options.tools, options.store);
    const approvals = options.tools.some((tool) => tool.kind === "effect" && tool.approval !== undefined);
    const terms = [
      ...options.retries(longestLease(options.tools, leaseMs)),
      resumeGapTerm(options.resumeGapMs),
      ...(approvals ? [approvalTtlTerm(approvalTtlMs)] : []),
    ];
    // Only effect calls keep records: an entry point without effect tools has nothing to outlive its retries.
    const effects = options.tools.some((tool) => tool.kind === "effect");
    this.retryWindow = effects ? assertRetryWindow(options.store.retentionMs, terms) : retryWindow(terms);
    this.telemetry = new Telemetry(options.telemetry);
    this.flow = new CallFlow(
      options.store,
      leaseMs,
      options.maxResultBytes,
      this.telemetry,
      { ttlMs: approvalTtlMs, onRequested: options.onApprovalRequested },
      livenessOf(options.store, options.liveness),
    );
  }
}

/** Stores already warned of for keeping no liveness entries: once per store object is enough. */
const warnedWithoutLiveness = new WeakSet<OnceStore>();

/**
 * The process's liveness in `store`, unless turned off or the store keeps none. A store without the liveness
 * methods still works, on leases alone; but a wrapper that forgot to pass them through looks the same, and
 * then a dead owner's calls wait out the whole lease with nothing said: so it is said, once per store.
 */
function livenessOf(store: OnceStore, option: EngineOptions["liveness"]): ProcessLiveness | undefined {
  if (option === false) return undefined;
  const ttlMs = option?.ttlMs ?? DEFAULT_LIVENESS_TTL_MS;
  if (!(Number.isInteger(ttlMs) && ttlMs >= MIN_LIVENESS_TTL_MS))
    throw new InvalidOptionError("liveness.ttlMs", ttlMs, `an integer of at least ${MIN_LIVENESS_TTL_MS}`);
  if (isLivenessStore(store)) return ProcessLiveness.of(store, ttlMs);
  if (!warnedWithoutLiveness.has(store)) {
    warnedWithoutLiveness.add(store);
    const name = store.constructor?.name;
    process.emitWarning(
      `the store${name && name !== "Object" ? ` (${name})` : ""} keeps no liveness entries (openLiveness, ` +
        "renewLiveness, endLiveness): a dead owner's calls wait out their whole lease before they are " +
        "reconciled. A store wrapper must pass those methods through; pass `liveness: false` to run on leases " +
        "alone without this warning (docs/protocol.md, Liveness).",
      { code: "ONCE_NO_LIVENESS" },
    );
  }
  return undefined;
}

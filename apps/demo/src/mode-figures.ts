/**
 * The figures of one mode, every one measured:
 * - tasks, calls, sends, retries, replayedCalls, p50/p99, calls/s: the orchestrator's call results
 *   (CallResult.enqueues / .replayed, its own clock), summed by summarizeRun;
 * - charges*, emails*, duplicate*: the payments provider's ledger, counted per order after the queue drained
 *   (an abandoned attempt that completes late is still counted);
 * - dedupHits: repeats of a key that ran nothing — re-sends BullMQ refused because the job id was present
 *   (its `duplicated` events) plus worker claims the store answered `replay`/`replay_error`
 *   (CountingStore in the workers);
 * - inFlightWaits, reconciled*, effectsExecuted: claim outcomes and reconcile resolutions counted at the
 *   store boundary by CountingStore in the workers;
 * - unknown, recordsByState: the dedup records of every key used, read from the store after the run.
 */
export interface ModeFigures {
  mode: "naive" | "once";
  tasks: number;
  tasksOk: number;
  tasksFailed: number;
  /** Logical tool calls. */
  calls: number;
  /** Jobs enqueued for them. */
  sends: number;
  /** Calls the orchestrator made again after a timeout (or a failure). */
  retries: number;
  chargeCalls: number;
  /** Charge calls that timed out at least once. */
  retriedChargeCalls: number;
  chargesExpected: number;
  chargesMade: number;
  chargesDuplicate: number;
  /** Orders that should have been charged and were not. */
  chargesMissing: number;
  emailsExpected: number;
  emailsSent: number;
  duplicateEmails: number;
  /** Charges, emails and tickets beyond one per order. */
  duplicateEffects: number;
  dedupHits: number;
  dedupHitsByLayer: { queue: number; store: number };
  /** Calls the dispatcher answered with a stored result. */
  replayedCalls: number;
  inFlightWaits: number;
  reconciled: number;
  reconciledApplied: number;
  reconciledNotApplied: number;
  /** Records left `unknown`: an operator would have to resolve them. */
  unknown: number;
  recordsByState: Record<string, number>;
  /** Effect claims that ran the tool (acquired or takeover). */
  effectsExecuted: number;
  workerKills: number;
  p50Ms: number;
  p99Ms: number;
  callsPerSec: number;
  wallMs: number;
}

import {
  type AnyTool,
  ApprovalPendingError,
  effectKey,
  InFlightError,
  LeaseLostError,
  type OnceStore,
  ReplayedFailureError,
  TaskCancelledError,
} from "@once/core";
import {
  type ApprovalRequested,
  type Delivery,
  type EffectStep,
  Engine,
  type LivenessOption,
  type RetryWindow,
  type TelemetryOptions,
} from "@once/engine";
import {
  ATTR_ONCE_ATTEMPT,
  ATTR_ONCE_KEY,
  callAttributes,
  contextFromCarrier,
  EVENT_LEASE_LOST,
} from "@once/engine/internal";
import { SpanKind } from "@opentelemetry/api";
import { DelayedError, type Job } from "bullmq";
import { KeyMismatchError } from "./errors.js";
import { jobIdForKey } from "./job-id.js";
import { consumerAttributes } from "./messaging.js";
import { type BackoffSetting, jobRetryTerms } from "./retry-window.js";
import {
  assertSameDeclaration,
  type CallData,
  type CallOutcome,
  onceErrorIn,
  parseCallData,
  unrecoverable,
} from "./wire.js";

export interface CallProcessorOptions {
  store: OnceStore;
  tools: readonly AnyTool[];
  /** Lease of an effect call's owner, unless the tool sets its own. Default 30 s. */
  leaseMs?: number;
  /** Largest result stored, in bytes of JSON. Default 1 MiB. */
  maxResultBytes?: number;
  /** The process's liveness entry (`EngineOptions.liveness`): on by default, `false` for leases only. */
  liveness?: LivenessOption;
  /**
   * The `lockDuration` and `stalledInterval` of the BullMQ `Worker` that runs this processor, for the
   * retry-window check. A processor cannot read them from its worker: when left out, BullMQ's defaults
   * (30 s each) are assumed, and the check's terms say so. `OnceWorker` fills them in from its own options.
   */
  worker?: { lockDurationMs?: number; stalledIntervalMs?: number };
  /** The `attempts` and `backoff` your jobs are enqueued with, for the retry-window check. */
  jobRetry?: { attempts?: number; backoff?: BackoffSetting };
  /** How long a crashed orchestrator may take to resume with the same step ids. Default 0. */
  resumeGapMs?: number;
  telemetry?: TelemetryOptions;
  /** How long an approval request waits for a decision (tools with an approval policy). Default 1 h. */
  approvalTtlMs?: number;
  /**
   * Told when a call's approval request is created: once per call, by the worker whose claim made it (a
   * crash right after that write loses the call; the record keeps the request). Its errors are ignored.
   */
  onApprovalRequested?: (request: ApprovalRequested) => void | Promise<void>;
}

/** A BullMQ processor function for once calls, with the retry window it was checked against. */
export interface CallProcessor {
  /** `signal`: BullMQ's, aborted when the job is cancelled; the tool's `ctx.signal` aborts with it. */
  (job: Job, token?: string, signal?: AbortSignal): Promise<CallOutcome>;
  readonly retryWindow: RetryWindow;
}

/**
 * The worker flow of docs/protocol.md as a BullMQ processor: parse and check the job, claim its key,
 * then run, replay, reconcile or wait as the claim says. Errors that retrying cannot mend are thrown
 * as BullMQ `UnrecoverableError`s carrying once's named error as `cause`.
 *
 * Refuses to start ({@link RetryWindowError}) when the store's retention is shorter than the retry window:
 * a record that expires while its job can still be retried lets the retry run the effect again.
 */
export function createCallProcessor(options: CallProcessorOptions): CallProcessor {
  const engine = new Engine({
    store: options.store,
    tools: options.tools,
    leaseMs: options.leaseMs,
    maxResultBytes: options.maxResultBytes,
    liveness: options.liveness,
    resumeGapMs: options.resumeGapMs,
    telemetry: options.telemetry,
    approvalTtlMs: options.approvalTtlMs,
    onApprovalRequested: options.onApprovalRequested,
    retries: jobRetryTerms({
      attempts: options.jobRetry?.attempts,
      backoff: options.jobRetry?.backoff,
      lockDurationMs: options.worker?.lockDurationMs,
      stalledIntervalMs: options.worker?.stalledIntervalMs,
    }),
  });
  const { flow, registry, telemetry, retryWindow } = engine;
  async function processCall(job: Job, token?: string, signal?: AbortSignal): Promise<CallOutcome> {
    const carrier = (job.data as { trace?: unknown } | undefined)?.trace;
    return telemetry.span(
      `process ${job.queueName}`,
      {
        kind: SpanKind.CONSUMER,
        parent: contextFromCarrier(carrier),
        attributes: {
          ...consumerAttributes(job.queueName, job.id),
          [ATTR_ONCE_ATTEMPT]: job.attemptsMade + 1,
        },
      },
      async (span) => {
        let call: CallData;
        let tool: AnyTool;
        try {
          call = parseCallData(job.data);
          tool = registry.get(call.tool);
          assertSameDeclaration(tool, call, job.id);
        } catch (error) {
          throw unrecoverable(error as Error);
        }
        if (span.isRecording()) span.setAttributes(callAttributes(tool, call));
        telemetry.payload(span, "input", call.input);
        const delivery = bullmqDelivery(job, token, signal);
        try {
          let outcome: CallOutcome;
          if (tool.kind === "effect") {
            const step = checkedStep(tool, call, job.id);
            const done = await flow.effect(tool, step, delivery, span);
            // The answer names the call it belongs to (its fingerprint and call id): the dispatcher checks both.
            outcome = { ...done, ...(call.v === 1 ? {} : { callId: call.callId }) };
          } else {
            outcome = await flow.direct(tool, call, delivery);
          }
          telemetry.payload(span, "result", outcome.result);
          return outcome;
        } catch (error) {
          if (error instanceof LeaseLostError) {
            span.addEvent(EVENT_LEASE_LOST, { [ATTR_ONCE_KEY]: error.key });
            telemetry.outcome(span, tool.name, "lease_lost");
          }
          throw error;
        }
      },
      // An in-flight wait (the job moved to delayed by throwing), a replayed failure, a call waiting for a
      // person's decision and a call of a cancelled task are not failures. A pending call ends its job
      // unrecoverably: no retry can change the answer until someone decides, and the dispatcher reads the record
      // to say so. A cancelled task's call ends its job unrecoverably too: every retry would be refused.
      (error) =>
        error instanceof DelayedError ||
        onceErrorIn(error) instanceof ReplayedFailureError ||
        onceErrorIn(error) instanceof ApprovalPendingError ||
        onceErrorIn(error) instanceof TaskCancelledError,
    );
  }
  return Object.assign(processCall, { retryWindow });
}

/** BullMQ's side of the flow: failures that must not be retried are unrecoverable; an in-flight wait delays the job. */
function bullmqDelivery(job: Job, token: string | undefined, signal: AbortSignal | undefined): Delivery {
  return {
    attempt: job.attemptsMade + 1,
    signal,
    terminal: unrecoverable,
    async waitInFlight(key, retryAfterMs) {
      // Come back when the other owner's lease would have run out, without using an attempt.
      if (token === undefined) throw new InFlightError(key, retryAfterMs);
      await job.moveToDelayed(Date.now() + retryAfterMs, token);
      throw new DelayedError();
    },
  };
}

/** The job must name its own key: derived from its task and step, it must match the job id. Nothing is touched otherwise. */
function checkedStep(tool: AnyTool, call: CallData, jobId: string | undefined): EffectStep {
  try {
    const key = effectKey(tool.name, call);
    const expected = jobIdForKey(key);
    if (jobId !== expected) throw new KeyMismatchError(String(jobId), expected);
    return {
      key,
      namespace: call.namespace,
      taskId: call.taskId ?? "",
      stepId: call.stepId ?? "",
      input: call.input,
    };
  } catch (error) {
    throw unrecoverable(error as Error);
  }
}

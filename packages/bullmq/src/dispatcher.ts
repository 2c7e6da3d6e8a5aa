import { randomUUID } from "node:crypto";
import {
  type AnyTool,
  ApprovalPendingError,
  CallFailedError,
  type Cancellation,
  DEFAULT_NAMESPACE,
  effectKey,
  fingerprint,
  IdempotencyConflictError,
  type InputOf,
  isTaskStore,
  type OnceRecord,
  type OnceStore,
  OutcomeUnknownError,
  type OutputOf,
  parseInput,
  ReplayedFailureError,
  TaskCancelledError,
  validateKeyPart,
} from "@once/core";
import {
  type CallOptions,
  type CallOptionsFor,
  type EffectCallOptions,
  Engine,
  type RetryWindow,
  type TelemetryOptions,
} from "@once/engine";
import {
  ATTR_ONCE_ENQUEUES,
  ATTR_ONCE_JOINED,
  ATTR_ONCE_KEY,
  ATTR_ONCE_REPLAYED,
  ATTR_ONCE_STORED_STATE,
  ATTR_ONCE_TIMEOUT_MS,
  ATTR_ONCE_TOOL,
  callAttributes,
  currentTraceCarrier,
  EVENT_DEDUP_HIT,
  EVENT_IN_FLIGHT,
  EVENT_TIMEOUT,
  type Telemetry,
  type ToolRegistry,
  taskCancelled,
} from "@once/engine/internal";
import { type Counter, type Span, SpanKind } from "@opentelemetry/api";
import type { JobsOptions } from "bullmq";
import { DispatchTimeoutError, JobFailedError } from "./errors.js";
import { JobEvents } from "./job-events.js";
import { jobIdForKey } from "./job-id.js";
import {
  ATTR_MESSAGING_MESSAGE_ID,
  METRIC_DISPATCHER_REENQUEUES,
  METRIC_DISPATCHER_TIMEOUTS,
  producerAttributes,
} from "./messaging.js";
import type { AnyQueue } from "./queue-backend.js";
import { type BackoffSetting, jobRetryTerms } from "./retry-window.js";
import { CALL_VERSION, type CallData, type CallOutcome, failedErrorName } from "./wire.js";

export interface DispatcherOptions {
  /**
   * The queue workers consume, on Redis or on BullMQ's PostgreSQL backend (`createPostgresBackend`). You own it
   * and its connection.
   */
  queue: AnyQueue;
  /** The store the workers use; the dispatcher reads records to answer replays without a job. */
  store: OnceStore;
  tools: readonly AnyTool[];
  /** Default namespace of keys. Default "default". */
  namespace?: string;
  /** How long to wait for one enqueue before enqueueing again with the same key. Default 30 s. */
  timeoutMs?: number;
  /** Re-enqueues after a timeout. Default 2. */
  retries?: number;
  /** Pause before each re-enqueue. Default 0. */
  retryBackoffMs?: number;
  /** BullMQ options for every job (attempts, backoff, removeOnComplete…); `jobId` is once's. */
  jobOptions?: Omit<JobsOptions, "jobId" | "attempts" | "backoff"> & {
    attempts?: number;
    backoff?: BackoffSetting;
  };
  /**
   * The workers' settings, for the retry-window check (the tools' own leases count too). once's and BullMQ's
   * defaults if omitted.
   */
  worker?: { leaseMs?: number; lockDurationMs?: number; stalledIntervalMs?: number };
  /** How long a crashed orchestrator may take to resume with the same step ids. Default 0. */
  resumeGapMs?: number;
  telemetry?: TelemetryOptions;
}

export interface CallResult<Out> {
  result: Out;
  /** True when this call ran nothing: the result was stored by an earlier attempt. */
  replayed: boolean;
  /** The idempotency key (effect tools). */
  key?: string;
  jobId?: string;
  /** How many times this call enqueued its job. 0 when the store answered first. */
  enqueues: number;
}

/** An effect call on its way: what every answer to it is checked against. */
interface KeyedCall {
  tool: AnyTool;
  key: string;
  jobId: string;
  fingerprint: string;
  /** This `call()`'s own id, in the job data: it tells whether the job under the key is this call's. */
  callId: string;
  /** Set when this call re-ran a failed job that another call created: what that job does now is this call's. */
  revived: boolean;
}

/** Whose execution produced an answer. `replayed` is true exactly when it was another call's. */
type Runner = "this call" | "another call";

/**
 * The orchestrator's side: derives the key, validates input, enqueues with the key as job id, waits,
 * re-enqueues with the same key on timeout. Two callers of one key share one result; none re-fires.
 */
export class Dispatcher {
  readonly retryWindow: RetryWindow;
  readonly #queue: AnyQueue;
  readonly #store: OnceStore;
  readonly #registry: ToolRegistry;
  readonly #telemetry: Telemetry;
  /** Waits that timed out, and the enqueues repeated after them, by tool. */
  readonly #timeouts: Counter;
  readonly #reenqueues: Counter;
  readonly #events: JobEvents;
  readonly #defaults: Required<
    Pick<DispatcherOptions, "namespace" | "timeoutMs" | "retries" | "retryBackoffMs">
  >;
  readonly #jobOptions: JobsOptions;
  #closed: Promise<void> | undefined;
  readonly #inFlight = new Map<
    string,
    { tool: string; fingerprint: string; result: Promise<CallResult<unknown>> }
  >();

  private constructor(options: DispatcherOptions, events: JobEvents) {
    this.#queue = options.queue;
    this.#store = options.store;
    this.#events = events;
    this.#defaults = {
      namespace: validateKeyPart("namespace", options.namespace ?? DEFAULT_NAMESPACE),
      timeoutMs: options.timeoutMs ?? 30_000,
      retries: options.retries ?? 2,
      retryBackoffMs: options.retryBackoffMs ?? 0,
    };
    this.#jobOptions = options.jobOptions ?? {};
    // The dispatcher runs no flow, but it stands on the same engine: the same tool and lease checks, and the
    // same terms as the workers' (call-processor.ts) with its own re-enqueues on top.
    const engine = new Engine({
      store: options.store,
      tools: options.tools,
      leaseMs: options.worker?.leaseMs,
      resumeGapMs: options.resumeGapMs,
      telemetry: options.telemetry,
      retries: jobRetryTerms(
        {
          attempts: options.jobOptions?.attempts,
          backoff: options.jobOptions?.backoff,
          lockDurationMs: options.worker?.lockDurationMs,
          stalledIntervalMs: options.worker?.stalledIntervalMs,
        },
        {
          retries: this.#defaults.retries,
          timeoutMs: this.#defaults.timeoutMs,
          backoffMs: this.#defaults.retryBackoffMs,
        },
      ),
    });
    this.retryWindow = engine.retryWindow;
    this.#registry = engine.registry;
    this.#telemetry = engine.telemetry;
    this.#timeouts = engine.telemetry.meter.createCounter(METRIC_DISPATCHER_TIMEOUTS, {
      description: "Dispatcher waits that timed out, by tool",
    });
    this.#reenqueues = engine.telemetry.meter.createCounter(METRIC_DISPATCHER_REENQUEUES, {
      description: "Enqueues repeated with the same key after a timeout, by tool",
    });
  }

  /** Checks the retry window, then listens to the queue's events on a connection of its own. */
  static async create(options: DispatcherOptions): Promise<Dispatcher> {
    const events = await JobEvents.open(options.queue);
    try {
      return new Dispatcher(options, events);
    } catch (error) {
      await events.close();
      throw error;
    }
  }

  /** Calls a tool through the queue; for effect tools the step's key makes every retry the same call. */
  call<T extends AnyTool>(
    tool: T,
    input: InputOf<T>,
    // A tuple, not an optional parameter: leaving the options out must not type-check for an effect tool.
    ...options: T["kind"] extends "effect" ? [options: EffectCallOptions] : [options?: CallOptions]
  ): Promise<CallResult<OutputOf<T>>>;
  async call<T extends AnyTool>(
    tool: T,
    input: InputOf<T>,
    options: CallOptionsFor<T> = {} as CallOptionsFor<T>,
  ): Promise<CallResult<OutputOf<T>>> {
    const namespace = options.namespace ?? this.#defaults.namespace;
    const attributes = callAttributes(tool, { ...options, namespace });
    const result = await this.#telemetry.span(`call ${tool.name}`, { attributes }, async (span) => {
      this.#registry.resolve(tool);
      const key = tool.kind === "effect" ? effectKey(tool.name, { ...options, namespace }) : undefined;
      parseInput(tool, input);
      this.#telemetry.payload(span, "input", input);
      const data = {
        v: CALL_VERSION,
        tool: tool.name,
        kind: tool.kind,
        callId: randomUUID(),
        namespace,
        input,
        ...(options.taskId === undefined ? {} : { taskId: options.taskId }),
        ...(options.stepId === undefined ? {} : { stepId: options.stepId }),
      } satisfies CallData;
      const answer =
        key === undefined
          ? await this.#callDirect(tool, data, options, span)
          : await this.#callOnce(tool, data, key, options, span);
      span.setAttributes({ [ATTR_ONCE_REPLAYED]: answer.replayed, [ATTR_ONCE_ENQUEUES]: answer.enqueues });
      this.#telemetry.payload(span, "result", answer.result);
      return answer;
    });
    return result as CallResult<OutputOf<T>>;
  }

  /** Stops listening; safe to call twice. The queue is yours to close. */
  close(): Promise<void> {
    this.#closed ??= this.#events.close();
    return this.#closed;
  }

  /** One call per key in this process: a second caller of a running key joins it. */
  #callOnce(
    tool: AnyTool,
    data: CallData & { v: typeof CALL_VERSION },
    key: string,
    options: CallOptions,
    span: Span,
  ): Promise<CallResult<unknown>> {
    span.setAttribute(ATTR_ONCE_KEY, key);
    const call: KeyedCall = {
      tool,
      key,
      jobId: jobIdForKey(key),
      fingerprint: fingerprint(tool.name, data.input),
      callId: data.callId,
      revived: false,
    };
    const running = this.#inFlight.get(key);
    if (running) {
      if (running.fingerprint !== call.fingerprint)
        throw new IdempotencyConflictError(key, tool.name, running.tool);
      span.addEvent(EVENT_IN_FLIGHT, { [ATTR_ONCE_JOINED]: true });
      // This caller enqueues and runs nothing: whatever the call it joined gets, for this one it is a replay.
      return running.result.then((answer) => ({ ...answer, replayed: true, enqueues: 0 }));
    }
    const result = this.#callEffect(call, data, options, span).finally(() => this.#inFlight.delete(key));
    this.#inFlight.set(key, { tool: tool.name, fingerprint: call.fingerprint, result });
    return result;
  }

  async #callEffect(
    call: KeyedCall,
    data: CallData,
    options: CallOptions,
    span: Span,
  ): Promise<CallResult<unknown>> {
    const { tool, key, jobId } = call;
    const watch = this.#events.watch(jobId);
    try {
      // Listening starts before the look-up, so a completion between the two is not missed. A record settled
      // before this call enqueued anything was settled by another call.
      const stored = await this.#record(call, (options as Partial<EffectCallOptions>).recorded);
      if (isSettled(stored)) {
        if (stored.state === "done") span.addEvent(EVENT_DEDUP_HIT, { [ATTR_ONCE_STORED_STATE]: "done" });
        return this.#settledBy(stored, call, "another call", 0);
      }
      // Waiting for a person: no job can change that, so none is enqueued. Past its expiry the worker's claim
      // fails it for good, and that answer is a job's to give.
      const pending = pendingApproval(call, stored);
      if (pending !== undefined && pending.expiresAt > Date.now()) throw pending;
      // Its task was cancelled: every claim of the key is refused, so no job is enqueued for it.
      if (stored?.state === "cancelled") throw cancelledCall(call, data, stored.cancellation);
      const { timeoutMs, retries, retryBackoffMs } = { ...this.#defaults, ...definedOnly(options) };
      for (let enqueues = 1; enqueues <= retries + 1; enqueues++) {
        if (enqueues > 1) {
          this.#reenqueues.add(1, { [ATTR_ONCE_TOOL]: tool.name });
          if (retryBackoffMs > 0) await sleep(retryBackoffMs);
        }
        // While the job exists this is a no-op; if it was removed, a fresh job. The worker dedups either way.
        await this.#enqueue(tool, data, jobId);
        const deadline = Date.now() + timeoutMs;
        let settled = await watch.next(timeoutMs);
        while (settled?.kind === "duplicated") {
          const finished = await this.#revisit(call, enqueues);
          if (finished) return finished;
          settled = await watch.next(deadline - Date.now());
        }
        if (settled?.kind === "completed") return await this.#fromOutcome(settled.value, call, enqueues);
        if (settled?.kind === "failed") throw await this.#failure(call, data, settled.reason);
        this.#timedOut(span, tool, enqueues, timeoutMs);
        // The job may have finished unseen (removed on completion): the record knows.
        const record = await this.#record(call);
        if (isSettled(record)) return this.#settledBy(record, call, await this.#runner(call), enqueues);
      }
      throw new DispatchTimeoutError(key, tool.name, retries + 1, timeoutMs);
    } finally {
      watch.stop();
    }
  }

  /** `read` and `write` tools: a plain job; a timeout enqueues a fresh one (they are safe to repeat). */
  async #callDirect(
    tool: AnyTool,
    data: CallData,
    options: CallOptions,
    span: Span,
  ): Promise<CallResult<unknown>> {
    const { timeoutMs, retries } = { ...this.#defaults, ...definedOnly(options) };
    for (let enqueues = 1; enqueues <= retries + 1; enqueues++) {
      // An id of our own, so listening starts before the job exists and no completion goes unseen.
      const jobId = `call-${randomUUID()}`;
      const watch = this.#events.watch(jobId);
      try {
        await this.#enqueue(tool, data, jobId);
        const settled = await watch.next(timeoutMs);
        if (settled?.kind === "completed")
          return { result: settled.value.result, replayed: false, jobId, enqueues };
        if (settled?.kind === "failed") throw new JobFailedError(tool.name, jobId, settled.reason);
        this.#timedOut(span, tool, enqueues, timeoutMs);
      } finally {
        watch.stop();
      }
    }
    throw new DispatchTimeoutError("(none)", tool.name, retries + 1, timeoutMs);
  }

  /**
   * The enqueue found the job already there: maybe another caller's, with another input, so the fingerprint
   * binds here too. A completed job answers with its stored return value; a failed one runs again, since a
   * new call is a new attempt (an `unknown` record gets reconciled).
   */
  async #revisit(call: KeyedCall, enqueues: number): Promise<CallResult<unknown> | undefined> {
    const job = await this.#queue.getJob(call.jobId);
    if (!job) return undefined;
    const theirs = job.data as Partial<CallData> | undefined;
    if (typeof theirs?.tool !== "string" || fingerprint(theirs.tool, theirs.input) !== call.fingerprint)
      throw new IdempotencyConflictError(call.key, call.tool.name, String(theirs?.tool));
    const state = await job.getState();
    if (state === "completed") return this.#fromOutcome(job.returnvalue as CallOutcome, call, enqueues);
    // Another caller may have retried it first: then it is no longer failed, which is all we need.
    if (state === "failed") {
      call.revived ||= await job.retry("failed").then(
        () => true,
        () => false,
      );
    }
    return undefined;
  }

  /**
   * A completed job's return value, as this call's answer. The fingerprint binds: the job under this key
   * may have run another caller's input.
   */
  async #fromOutcome(outcome: CallOutcome, call: KeyedCall, enqueues: number): Promise<CallResult<unknown>> {
    if (outcome.fingerprint !== call.fingerprint) {
      // No fingerprint: a worker from before outcomes carried one; the record tells whose result this is.
      // Another fingerprint: the record, read to name the tool, raises the conflict.
      const record = await this.#record(call);
      if (outcome.fingerprint === undefined && isSettled(record))
        return this.#settledBy(record, call, await this.#runner(call), enqueues);
      throw new IdempotencyConflictError(call.key, call.tool.name, record?.tool ?? call.tool.name);
    }
    // A worker that answered from the store ran nothing for anyone; otherwise the job's creator ran it.
    const ranBy: Runner = outcome.outcome === "replay" ? "another call" : runnerOf(outcome.callId, call);
    return answer(call, outcome.result, ranBy, enqueues);
  }

  /** Whose enqueue created the job under this key, as far as the job still tells. */
  async #runner(call: KeyedCall): Promise<Runner> {
    const job = await this.#queue.getJob(call.jobId);
    return runnerOf((job?.data as { callId?: unknown } | undefined)?.callId, call);
  }

  /** One enqueue, as a producer span whose context travels in the job data. */
  #enqueue(tool: AnyTool, data: CallData, jobId: string) {
    const attributes = {
      ...producerAttributes(this.#queue.name),
      [ATTR_MESSAGING_MESSAGE_ID]: jobId,
    };
    return this.#telemetry.span(`send ${this.#queue.name}`, { kind: SpanKind.PRODUCER, attributes }, () => {
      const trace = currentTraceCarrier();
      return this.#queue.add(tool.name, trace ? { ...data, trace } : data, { ...this.#jobOptions, jobId });
    });
  }

  #timedOut(span: Span, tool: AnyTool, enqueues: number, timeoutMs: number): void {
    span.addEvent(EVENT_TIMEOUT, { [ATTR_ONCE_ENQUEUES]: enqueues, [ATTR_ONCE_TIMEOUT_MS]: timeoutMs });
    this.#timeouts.add(1, { [ATTR_ONCE_TOOL]: tool.name });
  }

  /** The cancellation of the call's task, as its store keeps it (a store that knows tasks). */
  async #cancellationOf(data: CallData): Promise<Cancellation | undefined> {
    if (!isTaskStore(this.#store) || data.taskId === undefined) return undefined;
    const task = await this.#store.readTask({ namespace: data.namespace, taskId: data.taskId });
    return task.cancellation;
  }

  /**
   * The record of this call's key, if any (the one given, when it is `done`). One with another fingerprint is another call's: a conflict — unless
   * it is `cancelled`, which answers every call of its key alike (a cancel's tombstone knows no call at all).
   */
  async #record(call: KeyedCall, recorded?: OnceRecord): Promise<OnceRecord | undefined> {
    // A record the caller read before and found `done` is still what the store holds: a done record never changes.
    const record =
      recorded?.state === "done" && recorded.key === call.key ? recorded : await this.#store.get(call.key);
    if (record && record.state !== "cancelled" && record.fingerprint !== call.fingerprint)
      throw new IdempotencyConflictError(call.key, call.tool.name, record.tool);
    return record;
  }

  /**
   * A settled record as this call's answer: its result, or its stored failure raised. `ranBy`: whose
   * execution settled it — another call's makes this answer a replay (or a replayed failure).
   */
  #settledBy(record: SettledRecord, call: KeyedCall, ranBy: Runner, enqueues: number): CallResult<unknown> {
    if (record.state === "done") return answer(call, JSON.parse(record.result ?? "null"), ranBy, enqueues);
    const stored = record.error ?? { name: "Error", message: "failed" };
    throw ranBy === "another call"
      ? new ReplayedFailureError(call.key, stored)
      : new CallFailedError(call.key, call.tool.name, stored);
  }

  /** Turns a failed job into once's named error, reading the record for what the worker left. */
  async #failure(call: KeyedCall, data: CallData, reason: string): Promise<Error> {
    const { key, tool } = call;
    const record = await this.#record(call);
    if (record?.state === "failed") {
      const stored = record.error ?? { name: "Error", message: reason };
      // The worker names the error first in `failedReason`: a replay of an earlier failure, or this one.
      return failedErrorName(reason) === ReplayedFailureError.name
        ? new ReplayedFailureError(key, stored)
        : new CallFailedError(key, tool.name, stored);
    }
    const pending = pendingApproval(call, record);
    if (pending !== undefined) return pending;
    // The worker's claim was refused, or the cancel stopped the call before its effect: who, when and why are
    // the record's, or the task's when the key has no record (a store refusing a claim need not keep one).
    if (record?.state === "cancelled") return cancelledCall(call, data, record.cancellation);
    if (failedErrorName(reason) === TaskCancelledError.name)
      return cancelledCall(call, data, record?.cancellation ?? (await this.#cancellationOf(data)));
    if (record?.state === "unknown") {
      // The record says why in its own words; the worker's `failedReason` would repeat this error's message.
      const why = record.error;
      return new OutcomeUnknownError(
        key,
        tool.name,
        why === undefined || why.name === OutcomeUnknownError.name
          ? (why?.message ?? reason)
          : `${why.name}: ${why.message}`,
      );
    }
    return new JobFailedError(tool.name, call.jobId, reason);
  }
}

/** The answer to a call of a cancelled task. */
function cancelledCall(
  call: KeyedCall,
  data: CallData,
  cancellation: Cancellation | undefined,
): TaskCancelledError {
  return taskCancelled(call.key, data.taskId, cancellation);
}

/** The call whose enqueue created a job (so whose execution it ran), from the `callId` the job carries. */
function runnerOf(callId: unknown, call: KeyedCall): Runner {
  if (call.revived || callId === call.callId) return "this call";
  // No call id: the job is gone (removed on completion) or came from a dispatcher before call ids. Either
  // way this call enqueued it and waited for it.
  return typeof callId === "string" ? "another call" : "this call";
}

function answer(call: KeyedCall, result: unknown, ranBy: Runner, enqueues: number): CallResult<unknown> {
  return { result, replayed: ranBy === "another call", key: call.key, jobId: call.jobId, enqueues };
}

/** The pending answer of a record that waits for a person's decision, or undefined for any other record. */
function pendingApproval(call: KeyedCall, record: OnceRecord | undefined): ApprovalPendingError | undefined {
  if (record?.state !== "awaiting_approval" || record.approval === undefined) return undefined;
  const { reason, requestedAt, expiresAt } = record.approval;
  return new ApprovalPendingError(call.key, call.tool.name, reason, requestedAt, expiresAt);
}

type SettledRecord = OnceRecord & { state: "done" | "failed" };

function isSettled(record: OnceRecord | undefined): record is SettledRecord {
  return record?.state === "done" || record?.state === "failed";
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

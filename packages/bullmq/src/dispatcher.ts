import { randomUUID } from "node:crypto";
import {
  type AnyTool,
  assertRetryWindow,
  type BackoffSetting,
  CallFailedError,
  DEFAULT_NAMESPACE,
  DispatchTimeoutError,
  effectKey,
  fingerprint,
  IdempotencyConflictError,
  type InputOf,
  jobIdForKey,
  type OnceRecord,
  type OnceStore,
  OutcomeUnknownError,
  type OutputOf,
  parseInput,
  ReplayedFailureError,
  type RetryWindow,
  validateKeyPart,
} from "@once/core";
import { type Span, SpanKind } from "@opentelemetry/api";
import { type BackendFactory, type IQueueBackend, type JobsOptions, type Queue, QueueEvents } from "bullmq";
import {
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_ONCE_ENQUEUES,
  ATTR_ONCE_JOINED,
  ATTR_ONCE_KEY,
  ATTR_ONCE_REPLAYED,
  ATTR_ONCE_STORED_STATE,
  ATTR_ONCE_TIMEOUT_MS,
  ATTR_ONCE_TOOL,
  EVENT_DEDUP_HIT,
  EVENT_IN_FLIGHT,
  EVENT_TIMEOUT,
} from "./attributes.js";
import { JobFailedError } from "./errors.js";
import { ToolRegistry } from "./registry.js";
import {
  callAttributes,
  currentTraceCarrier,
  producerAttributes,
  Telemetry,
  type TelemetryOptions,
} from "./telemetry.js";
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

export interface CallOptions {
  taskId?: string;
  stepId?: string;
  namespace?: string;
  timeoutMs?: number;
  retries?: number;
}

/** Effect calls must name the step: the key is derived from it. */
export interface EffectCallOptions extends CallOptions {
  taskId: string;
  stepId: string;
}

export type CallOptionsFor<T extends AnyTool> = T["kind"] extends "effect" ? EffectCallOptions : CallOptions;

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

/** A queue on any of BullMQ's backends (Redis by default, or PostgreSQL), with any connection options. */
// biome-ignore lint/suspicious/noExplicitAny: the connection options differ by backend; only the queue's own methods are used.
type AnyQueue = Queue<any, any, string, any, any, string, IQueueBackend, any>;

interface Closable {
  quit(): Promise<unknown>;
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

type Settled =
  | { kind: "completed"; value: CallOutcome }
  | { kind: "failed"; reason: string }
  /** An enqueue found the job already there (BullMQ's `duplicated` event). */
  | { kind: "duplicated" };

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
  readonly #events: QueueEvents;
  readonly #ownedConnection: Closable | undefined;
  readonly #defaults: Required<
    Pick<DispatcherOptions, "namespace" | "timeoutMs" | "retries" | "retryBackoffMs">
  >;
  readonly #jobOptions: JobsOptions;
  #closed: Promise<void> | undefined;
  readonly #waiters = new Map<string, Set<(settled: Settled) => void>>();
  readonly #inFlight = new Map<
    string,
    { tool: string; fingerprint: string; result: Promise<CallResult<unknown>> }
  >();

  private constructor(options: DispatcherOptions, events: QueueEvents, owned: Closable | undefined) {
    this.#queue = options.queue;
    this.#store = options.store;
    this.#registry = new ToolRegistry(options.tools);
    this.#telemetry = new Telemetry(options.telemetry);
    this.#events = events;
    this.#ownedConnection = owned;
    this.#defaults = {
      namespace: validateKeyPart("namespace", options.namespace ?? DEFAULT_NAMESPACE),
      timeoutMs: options.timeoutMs ?? 30_000,
      retries: options.retries ?? 2,
      retryBackoffMs: options.retryBackoffMs ?? 0,
    };
    this.#jobOptions = options.jobOptions ?? {};
    // The same inputs as the worker side's check (call-processor.ts), so both compute the same window.
    this.retryWindow = assertRetryWindow({
      retentionMs: options.store.retentionMs,
      tools: options.tools,
      attempts: options.jobOptions?.attempts,
      backoff: options.jobOptions?.backoff,
      leaseMs: options.worker?.leaseMs,
      lockDurationMs: options.worker?.lockDurationMs,
      stalledIntervalMs: options.worker?.stalledIntervalMs,
      dispatcher: {
        retries: this.#defaults.retries,
        timeoutMs: this.#defaults.timeoutMs,
        backoffMs: this.#defaults.retryBackoffMs,
      },
      resumeGapMs: options.resumeGapMs,
    });
    events.on("completed", ({ jobId, returnvalue }) =>
      this.#notify(jobId, { kind: "completed", value: returnvalue as CallOutcome }),
    );
    events.on("duplicated", ({ jobId }) => this.#notify(jobId, { kind: "duplicated" }));
    events.on("failed", ({ jobId, failedReason }) =>
      this.#notify(jobId, { kind: "failed", reason: failedReason }),
    );
  }

  /** Checks the retry window, then listens to the queue's events on a connection of its own. */
  static async create(options: DispatcherOptions): Promise<Dispatcher> {
    const connection = options.queue.opts.connection as { duplicate?: () => Closable };
    // QueueEvents blocks its connection: it needs one of its own.
    const owned = typeof connection.duplicate === "function" ? connection.duplicate() : undefined;
    // Read the queue's events from the last one there now, not from whenever the first blocking read goes
    // out ("$"): an event between now and then — a `duplicated` that carries a conflict, a completion — would
    // be missed, and this dispatcher would wait for an answer that already came.
    // The queue's own backend (Redis, or BullMQ's PostgreSQL backend): its events are read the same way.
    const events = new QueueEvents(
      options.queue.name,
      {
        connection: (owned ?? connection) as never,
        prefix: options.queue.opts.prefix,
        ...(await lastEventId(options.queue)),
      },
      backendFactoryOf(options.queue) as undefined,
    );
    let dispatcher: Dispatcher;
    try {
      dispatcher = new Dispatcher(options, events, owned);
      await events.waitUntilReady();
    } catch (error) {
      await events.close();
      await owned?.quit();
      throw error;
    }
    return dispatcher;
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
    this.#closed ??= (async () => {
      await this.#events.close();
      await this.#ownedConnection?.quit();
    })();
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
    const watch = this.#watch(jobId);
    try {
      // Listening starts before the look-up, so a completion between the two is not missed. A record settled
      // before this call enqueued anything was settled by another call.
      const stored = await this.#record(call);
      if (isSettled(stored)) {
        if (stored.state === "done") span.addEvent(EVENT_DEDUP_HIT, { [ATTR_ONCE_STORED_STATE]: "done" });
        return this.#settledBy(stored, call, "another call", 0);
      }
      const { timeoutMs, retries, retryBackoffMs } = { ...this.#defaults, ...definedOnly(options) };
      for (let enqueues = 1; enqueues <= retries + 1; enqueues++) {
        if (enqueues > 1) {
          this.#telemetry.reenqueues.add(1, { [ATTR_ONCE_TOOL]: tool.name });
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
        if (settled?.kind === "failed") throw await this.#failure(call, settled.reason);
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
      const watch = this.#watch(jobId);
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
    this.#telemetry.timeouts.add(1, { [ATTR_ONCE_TOOL]: tool.name });
  }

  /** The record of this call's key, if any. One with another fingerprint is another call's: a conflict. */
  async #record(call: KeyedCall): Promise<OnceRecord | undefined> {
    const record = await this.#store.get(call.key);
    if (record && record.fingerprint !== call.fingerprint)
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
  async #failure(call: KeyedCall, reason: string): Promise<Error> {
    const { key, tool } = call;
    const record = await this.#record(call);
    if (record?.state === "failed") {
      const stored = record.error ?? { name: "Error", message: reason };
      // The worker names the error first in `failedReason`: a replay of an earlier failure, or this one.
      return failedErrorName(reason) === ReplayedFailureError.name
        ? new ReplayedFailureError(key, stored)
        : new CallFailedError(key, tool.name, stored);
    }
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

  #watch(jobId: string): { next(timeoutMs: number): Promise<Settled | undefined>; stop(): void } {
    const queue: Settled[] = [];
    let wake: (() => void) | undefined;
    const listener = (settled: Settled) => {
      queue.push(settled);
      wake?.();
    };
    const listeners = this.#waiters.get(jobId) ?? new Set();
    this.#waiters.set(jobId, listeners);
    listeners.add(listener);
    return {
      next: async (timeoutMs) => {
        if (queue.length === 0) {
          let timer: NodeJS.Timeout | undefined;
          await new Promise<void>((resolve) => {
            wake = resolve;
            timer = setTimeout(resolve, timeoutMs);
          });
          clearTimeout(timer);
          wake = undefined;
        }
        return queue.shift();
      },
      stop: () => {
        listeners.delete(listener);
        if (listeners.size === 0) this.#waiters.delete(jobId);
      },
    };
  }

  #notify(jobId: string, settled: Settled): void {
    for (const listener of this.#waiters.get(jobId) ?? []) listener(settled);
  }
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

type SettledRecord = OnceRecord & { state: "done" | "failed" };

function isSettled(record: OnceRecord | undefined): record is SettledRecord {
  return record?.state === "done" || record?.state === "failed";
}

/** The factory the queue was built with (undefined: BullMQ's default, Redis). */
function backendFactoryOf(queue: AnyQueue): BackendFactory | undefined {
  return (queue as unknown as { backendFactory?: BackendFactory }).backendFactory;
}

/**
 * The id of the newest event of the queue: on Redis from its stream, read on the queue's own connection when
 * it is a client; on BullMQ's PostgreSQL backend from its event table, on the backend's pool.
 */
async function lastEventId(queue: AnyQueue): Promise<{ lastEventId?: string }> {
  const postgres = (queue.backend as { connection?: { pool?: unknown; schema?: unknown } } | undefined)
    ?.connection;
  if (postgres && typeof postgres.schema === "string" && isQueryable(postgres.pool)) {
    await queue.waitUntilReady();
    const { rows } = await postgres.pool.query<{ max: string }>(
      `select coalesce(max(id), 0)::bigint as max from "${postgres.schema.replaceAll('"', '""')}".event where queue = $1`,
      [queue.name],
    );
    return { lastEventId: String(rows[0]?.max ?? "0") };
  }
  const client = queue.opts.connection as {
    xrevrange?: (key: string, end: string, start: string, count: "COUNT", n: number) => Promise<[string][]>;
  };
  if (typeof client.xrevrange !== "function") return {};
  const [newest] = await client.xrevrange(queue.toKey("events"), "+", "-", "COUNT", 1);
  return { lastEventId: newest?.[0] ?? "0-0" };
}

interface Queryable {
  query<R>(text: string, values: unknown[]): Promise<{ rows: R[] }>;
}

function isQueryable(value: unknown): value is Queryable {
  return typeof (value as Partial<Queryable> | undefined)?.query === "function";
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

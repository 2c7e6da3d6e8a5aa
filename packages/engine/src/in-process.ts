import {
  type AnyTool,
  CallFailedError,
  DEFAULT_NAMESPACE,
  effectKey,
  type InputOf,
  OnceError,
  type OnceStore,
  type OutputOf,
  parseInput,
  validateKeyPart,
} from "@once/core";
import { toStoredError } from "@once/core/internal";
import { ATTR_ONCE_ATTEMPT, ATTR_ONCE_REPLAYED } from "./attributes.js";
import type { ApprovalRequested, Delivery, FlowOutcome } from "./call-flow.js";
import type { CallOptions, CallOptionsFor, EffectCallOptions } from "./call-options.js";
import { Engine, type LivenessOption } from "./engine.js";
import { inProcessTerms, pauseBefore, type RetryWindow } from "./retry-window.js";
import { callAttributes, type TelemetryOptions } from "./telemetry.js";

export interface InProcessOptions {
  store: OnceStore;
  tools: readonly AnyTool[];
  /** Default namespace of keys. Default "default". */
  namespace?: string;
  /** Lease of an effect call's owner, unless the tool sets its own. Default 30 s. */
  leaseMs?: number;
  /** Largest result stored, in bytes of JSON. Default 1 MiB. */
  maxResultBytes?: number;
  /** The process's liveness entry (`EngineOptions.liveness`): on by default, `false` for leases only. */
  liveness?: LivenessOption;
  /**
   * Attempts of one call when a failure can be retried (the provider refused before acting, a `prepare`
   * failed, the outcome is unknown and the next attempt reconciles). Default 3.
   */
  attempts?: number;
  /** Pause before the second attempt, doubled before each later one, up to `maxBackoffMs`. Default 100 ms. */
  backoffMs?: number;
  /** The longest pause between two attempts. Default 5 s: a caller in process is waiting for its answer. */
  maxBackoffMs?: number;
  /**
   * How long a crashed caller may take to call the same step again (an agent loop resumed by a new process).
   * Counted into the retry window the store's retention must cover. Default 0.
   */
  resumeGapMs?: number;
  telemetry?: TelemetryOptions;
  /** How long an approval request waits for a decision (tools with an approval policy). Default 1 h. */
  approvalTtlMs?: number;
  /**
   * Told when a call's approval request is created: once per call, by the call whose claim made it, in
   * whichever process that was (a pager, a chat message). Its errors are ignored: the record is the truth.
   */
  onApprovalRequested?: (request: ApprovalRequested) => void | Promise<void>;
}

/** What a call run in process returns. */
export interface InProcessResult<Out> {
  result: Out;
  /** True when this call ran nothing: the result was stored by an earlier call. */
  replayed: boolean;
  /** The idempotency key (effect tools). */
  key?: string;
  /** How the answer came: ran now, replayed from the store, or found out from the provider. */
  outcome: FlowOutcome["outcome"];
}

/**
 * Runs tools in the caller's own process — no queue hop — through the same flow as a worker: for effect tools
 * the key is claimed before the effect, leases are kept alive by heartbeats, the result is stored, a crash
 * mid-effect is reconciled by the next call, and a second caller of a running key waits for it. The way to
 * make a function idempotent without a queue, and what agent frameworks' in-process tools run on.
 *
 * Refuses to start ({@link RetryWindowError}) when the store's retention is shorter than its retry window:
 * its attempts, each of which may wait out a dead owner's lease, their backoff, and `resumeGapMs`.
 */
export class InProcess {
  /** The retry window the store's retention was checked against. */
  readonly retryWindow: RetryWindow;
  readonly #engine: Engine;
  readonly #namespace: string;
  readonly #attempts: number;
  readonly #backoffMs: number;
  readonly #maxBackoffMs: number;

  constructor(options: InProcessOptions) {
    this.#attempts = Math.max(1, options.attempts ?? 3);
    this.#backoffMs = options.backoffMs ?? 100;
    this.#maxBackoffMs = options.maxBackoffMs ?? 5_000;
    this.#engine = new Engine({
      store: options.store,
      tools: options.tools,
      leaseMs: options.leaseMs,
      maxResultBytes: options.maxResultBytes,
      liveness: options.liveness,
      resumeGapMs: options.resumeGapMs,
      telemetry: options.telemetry,
      approvalTtlMs: options.approvalTtlMs,
      onApprovalRequested: options.onApprovalRequested,
      retries: inProcessTerms(this.#attempts, this.#backoffMs, this.#maxBackoffMs),
    });
    this.retryWindow = this.#engine.retryWindow;
    this.#namespace = validateKeyPart("namespace", options.namespace ?? DEFAULT_NAMESPACE);
  }

  /** Runs one call; for effect tools `taskId` and `stepId` name the step, and so the key. */
  call<T extends AnyTool>(
    tool: T,
    input: InputOf<T>,
    // A tuple, not an optional parameter: leaving the options out must not type-check for an effect tool.
    ...options: T["kind"] extends "effect"
      ? [options: EffectCallOptions & { signal?: AbortSignal }]
      : [options?: CallOptions & { signal?: AbortSignal }]
  ): Promise<InProcessResult<OutputOf<T>>>;
  async call<T extends AnyTool>(
    tool: T,
    input: InputOf<T>,
    options: CallOptionsFor<T> & { signal?: AbortSignal } = {} as CallOptionsFor<T> & {
      signal?: AbortSignal;
    },
  ): Promise<InProcessResult<OutputOf<T>>> {
    const namespace = options.namespace ?? this.#namespace;
    const attributes = callAttributes(tool, { ...options, namespace });
    const { flow, registry, telemetry } = this.#engine;
    return telemetry.span(`run ${tool.name}`, { attributes }, async (span) => {
      registry.resolve(tool);
      const key = tool.kind === "effect" ? effectKey(tool.name, { ...options, namespace }) : undefined;
      parseInput(tool, input);
      telemetry.payload(span, "input", input);
      const terminal = new WeakSet<Error>();
      let waits = 0;
      for (let attempt = 1; ; attempt++) {
        span.setAttribute(ATTR_ONCE_ATTEMPT, attempt);
        const delivery: Delivery = {
          attempt,
          signal: options.signal,
          terminal: (error) => {
            terminal.add(error);
            return error;
          },
          // The other owner is in this process or another one: look again soon, then less often, never later
          // than its lease says (a queue would wait that long; a caller in process is waiting for an answer).
          waitInFlight: (_key, retryAfterMs) =>
            sleep(Math.min(retryAfterMs, IN_FLIGHT_POLL_MS * 2 ** Math.min(waits++, 6)), options.signal),
        };
        try {
          const done =
            key === undefined
              ? await flow.direct(tool, { ...options, namespace, input }, delivery)
              : await flow.effect(
                  tool,
                  {
                    key,
                    namespace,
                    taskId: options.taskId ?? "",
                    stepId: options.stepId ?? "",
                    input,
                    recorded: (options as Partial<EffectCallOptions>).recorded,
                  },
                  delivery,
                  span,
                );
          const replayed = done.outcome === "replay";
          span.setAttribute(ATTR_ONCE_REPLAYED, replayed);
          telemetry.payload(span, "result", done.result);
          return {
            result: done.result as OutputOf<T>,
            replayed,
            outcome: done.outcome,
            ...(key === undefined ? {} : { key }),
          };
        } catch (error) {
          const final = terminal.has(error as Error) || attempt >= this.#attempts || options.signal?.aborted;
          if (final)
            throw key !== undefined && terminal.has(error as Error) ? firstFailure(key, tool, error) : error;
          await sleep(pauseBefore(attempt + 1, this.#backoffMs, this.#maxBackoffMs), options.signal);
        }
      }
    });
  }
}

/** The first look again at a key another owner holds; doubled after each look, up to the lease's end. */
const IN_FLIGHT_POLL_MS = 20;

/**
 * A terminal failure as the caller sees it, the same as through a dispatcher: the tool's own error (a declined
 * card) becomes `CallFailedError`, stored and replayed to later calls; once's own errors stay what they are.
 */
function firstFailure(key: string, tool: AnyTool, error: unknown): Error {
  if (OnceError.is(error)) return error;
  return new CallFailedError(key, tool.name, toStoredError(error));
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

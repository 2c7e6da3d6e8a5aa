import {
  type AnyTool,
  type CallContext,
  type ClaimOutcome,
  type EffectContext,
  fingerprint,
  IdempotencyConflictError,
  isTransactionalStore,
  LeaseLostError,
  type OnceStore,
  OutcomeUnknownError,
  type Ownership,
  parseInput,
  parseOutput,
  ReplayedFailureError,
  ResultNotSerializableError,
  ResultTooLargeError,
  TransitionRefusedError,
  type WriteOutcome,
} from "@once/core";
import { classifyWith, toStoredError } from "@once/core/internal";
import type { Span } from "@opentelemetry/api";
import {
  ATTR_ONCE_APPLIED,
  ATTR_ONCE_FENCE,
  ATTR_ONCE_FROM,
  ATTR_ONCE_KEY,
  ATTR_ONCE_LINK,
  ATTR_ONCE_RETRY_AFTER_MS,
  ATTR_ONCE_STORED_STATE,
  ATTR_ONCE_STORED_TOOL,
  ATTR_ONCE_TOOL,
  EVENT_CONFLICT,
  EVENT_DEDUP_HIT,
  EVENT_IN_FLIGHT,
  EVENT_RECONCILE,
  EVENT_TAKEOVER,
} from "./attributes.js";
import { Lease } from "./lease.js";
import { parseTraceparent, type Telemetry, traceparentOf } from "./telemetry.js";
import type { CallOutcome } from "./wire.js";

/** Largest result stored, in bytes of JSON, unless the worker sets its own. */
export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;

/**
 * How one attempt of a call reached the flow, and the two things the flow leaves to its transport: BullMQ
 * (call-processor.ts) and a call run in the caller's own process differ only here.
 */
export interface Delivery {
  /** 1 for the first attempt. */
  attempt: number;
  /** Aborts when the call must stop from outside (BullMQ cancelled the job); the tool's `ctx.signal` with it. */
  signal?: AbortSignal | undefined;
  /**
   * Another owner holds the key and its lease is alive for `retryAfterMs`. Resolves when the flow should claim
   * again; may throw instead (BullMQ moves the job to delayed, without using an attempt, and throws).
   */
  waitInFlight(key: string, retryAfterMs: number): Promise<void>;
  /** Marks a failure that no retry can mend (BullMQ: an `UnrecoverableError`); returns what to throw. */
  terminal(error: Error): Error;
}

/** The step an effect call belongs to, with its key (derived and checked by the caller of the flow). */
export interface EffectStep {
  key: string;
  namespace: string;
  taskId: string;
  stepId: string;
  input: unknown;
}

/** What a `read` or `write` call carries: no key, and a task and step only if the caller named them. */
export interface DirectStep {
  namespace: string;
  taskId?: string | undefined;
  stepId?: string | undefined;
  input: unknown;
}

/** What the flow returns for a call: the outcome a worker reports, less the job's call id (the transport's). */
export type FlowOutcome = Omit<CallOutcome, "callId">;

/** One attempt of one call, with everything the steps share. */
interface Attempt {
  tool: AnyTool;
  step: EffectStep;
  /** The call's fingerprint: what every outcome of this attempt belongs to. */
  fingerprint: string;
  delivery: Delivery;
  span: Span;
}

/**
 * The worker flow of docs/protocol.md for one call, after its job was parsed and its tool looked up: claim,
 * then run, replay, reconcile or wait as the claim says; heartbeats, fencing and settling on the way.
 */
export class CallFlow {
  readonly #store: OnceStore;
  readonly #leaseMs: number;
  readonly #maxResultBytes: number;
  readonly #telemetry: Telemetry;

  constructor(store: OnceStore, leaseMs: number, maxResultBytes: number | undefined, telemetry: Telemetry) {
    this.#store = store;
    this.#leaseMs = leaseMs;
    this.#maxResultBytes = maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    this.#telemetry = telemetry;
  }

  /** `read` and `write` tools: validate, run, validate. No store. */
  async direct(tool: AnyTool, step: DirectStep, delivery: Delivery): Promise<FlowOutcome> {
    let input: unknown;
    try {
      input = parseInput(tool, step.input);
    } catch (error) {
      throw delivery.terminal(error as Error);
    }
    const ctx: CallContext = {
      tool: tool.name,
      namespace: step.namespace,
      attempt: delivery.attempt,
      signal: delivery.signal ?? new AbortController().signal,
      ...(step.taskId === undefined ? {} : { taskId: step.taskId }),
      ...(step.stepId === undefined ? {} : { stepId: step.stepId }),
    };
    const output = await tool.run(input, ctx as never, undefined);
    try {
      return { result: parseOutput(tool, output), outcome: "direct" };
    } catch (error) {
      throw delivery.terminal(error as Error);
    }
  }

  /** An effect call: claim its key, and act on the claim's outcome (claiming again after an in-flight wait). */
  async effect(tool: AnyTool, step: EffectStep, delivery: Delivery, span: Span): Promise<FlowOutcome> {
    const attempt: Attempt = { tool, step, fingerprint: fingerprint(tool.name, step.input), delivery, span };
    span.setAttribute(ATTR_ONCE_KEY, step.key);
    for (;;) {
      // The store's lease starts no earlier than this: the owner counts its lease from here (on the monotonic
      // clock), not from when it read the answer, so a stall in between cannot make it trust a lease that ran out.
      const claimSentAt = performance.now();
      const claim = await this.#store.claim({
        key: step.key,
        fingerprint: attempt.fingerprint,
        tool: tool.name,
        // A transactional effect is not in doubt before its commit: it never leaves the prepare phase.
        phase: tool.prepare || tool.transactional !== undefined ? "prepare" : "effect",
        leaseMs: this.#leaseFor(tool),
        // The record keeps this attempt's span, so later replays can link to the attempt that executed. Without
        // a tracing SDK the span is not valid: an all-zero traceparent would cost bytes on every record.
        trace: traceparentOf(span.spanContext()),
      });
      this.#telemetry.claimDuration.record(performance.now() - claimSentAt, { [ATTR_ONCE_TOOL]: tool.name });
      this.#trace(attempt, claim);
      if (claim.outcome !== "in_flight")
        return { ...(await this.#act(attempt, claim, claimSentAt)), fingerprint: attempt.fingerprint };
      // Another owner is alive: come back when its lease would have run out.
      await delivery.waitInFlight(step.key, claim.retryAfterMs);
    }
  }

  /** The claim's outcome on the attempt's span: an attribute, an event, a link to the executing attempt. */
  #trace(attempt: Attempt, claim: ClaimOutcome): void {
    const { span, tool } = attempt;
    this.#telemetry.outcome(span, tool.name, claim.outcome);
    if ("fence" in claim) span.setAttribute(ATTR_ONCE_FENCE, claim.fence);
    switch (claim.outcome) {
      case "replay":
      case "replay_error": {
        span.addEvent(EVENT_DEDUP_HIT, {
          [ATTR_ONCE_STORED_STATE]: claim.outcome === "replay" ? "done" : "failed",
        });
        const executed = parseTraceparent(claim.trace);
        if (executed) span.addLink({ context: executed, attributes: { [ATTR_ONCE_LINK]: "executed" } });
        return;
      }
      case "in_flight":
        span.addEvent(EVENT_IN_FLIGHT, { [ATTR_ONCE_RETRY_AFTER_MS]: claim.retryAfterMs });
        return;
      case "conflict":
        span.addEvent(EVENT_CONFLICT, { [ATTR_ONCE_STORED_TOOL]: claim.tool });
        return;
      case "takeover":
        span.addEvent(EVENT_TAKEOVER, { [ATTR_ONCE_FENCE]: claim.fence });
        return;
      case "reconcile":
        span.addEvent(EVENT_RECONCILE, { [ATTR_ONCE_FENCE]: claim.fence, [ATTR_ONCE_FROM]: claim.from });
        return;
      case "acquired":
        return;
    }
  }

  async #act(
    attempt: Attempt,
    claim: Exclude<ClaimOutcome, { outcome: "in_flight" }>,
    claimSentAt: number,
  ): Promise<FlowOutcome> {
    const { step, tool, delivery } = attempt;
    switch (claim.outcome) {
      case "replay":
        return { result: JSON.parse(claim.result), outcome: "replay", fence: claim.fence };
      case "replay_error":
        throw delivery.terminal(new ReplayedFailureError(step.key, claim.error));
      case "conflict":
        throw delivery.terminal(new IdempotencyConflictError(step.key, tool.name, claim.tool));
      case "acquired":
      case "takeover":
        return this.#execute(attempt, claim, false, claimSentAt);
      case "reconcile":
        return this.#reconcile(attempt, claim, claimSentAt);
    }
  }

  /** Steps 3–5: prepare, begin the effect, run, settle. */
  async #execute(
    attempt: Attempt,
    owner: Ownership,
    inEffectPhase: boolean,
    confirmedAt: number,
  ): Promise<FlowOutcome> {
    const { tool } = attempt;
    const { key } = attempt.step;
    const lease = new Lease(this.#store, key, owner.token, this.#leaseFor(tool), confirmedAt);
    try {
      let input: unknown;
      try {
        input = parseInput(tool, attempt.step.input);
      } catch (error) {
        await this.#settle(key, owner, this.#store.failTerminal(key, owner.token, toStoredError(error)));
        throw attempt.delivery.terminal(error as Error);
      }
      const ctx = this.#context(attempt, owner, lease);
      let prepared: unknown;
      if (tool.prepare) {
        try {
          prepared = await tool.prepare(input, ctx);
        } catch (error) {
          // Nothing touched the outside world yet: hand the key back and let BullMQ retry.
          await this.#settle(
            key,
            owner,
            this.#store.release(key, owner.token, { notApplied: inEffectPhase }),
          );
          throw error;
        }
        // A transactional effect stays in the prepare phase: until its transaction commits with `done`, nothing
        // happened, so an owner that died is taken over, never reconciled.
        if (!inEffectPhase && tool.transactional === undefined)
          await this.#settle(key, owner, this.#store.beginEffect(key, owner.token));
      }
      // A stall since the lease was last confirmed (a GC pause, SIGSTOP, a starved CPU) may have let it run
      // out and another owner take over: the effect never starts on a lease this owner cannot vouch for.
      // When fresh, this check and the call of `run` are one synchronous stretch: `run` starts with at least
      // half of its lease left.
      await lease.assert();
      if (tool.transactional !== undefined)
        return await this.#executeInTransaction(attempt, owner, lease, { input, ctx, prepared });
      let output: unknown;
      try {
        output = await this.#telemetry.span(`effect ${tool.name}`, {}, () =>
          Promise.resolve(tool.run(input, ctx, prepared)),
        );
      } catch (error) {
        throw await this.#runFailed(attempt, owner, lease, error);
      }
      if (lease.lost) throw new LeaseLostError(key, owner.token);
      const { result, text } = await this.#storable(attempt, owner, output);
      await this.#settle(key, owner, this.#store.complete(key, owner.token, text));
      return { result, outcome: "executed", fence: owner.fence };
    } finally {
      lease.stop();
    }
  }

  /**
   * Steps 4–5 of a transactional tool: `run` in a transaction of the store's database, `complete` in the same
   * transaction. Whatever fails before the commit rolled the effect back with it: the key is released (or, for
   * a terminal failure, failed) — never `unknown`.
   */
  async #executeInTransaction(
    attempt: Attempt,
    owner: Ownership,
    lease: Lease,
    call: { input: unknown; ctx: EffectContext; prepared: unknown },
  ): Promise<FlowOutcome> {
    const { tool } = attempt;
    const { key } = attempt.step;
    const store = this.#store;
    if (!isTransactionalStore(store))
      throw attempt.delivery.terminal(new TypeError(`tool ${tool.name} is transactional; the store is not`));
    let failure: { error: unknown; invalidOutput: boolean } | undefined;
    let stored: { result: unknown; text: string } | undefined;
    let write: WriteOutcome;
    try {
      write = await store.completeInTransaction(
        key,
        owner.token,
        async (transaction) => {
          let output: unknown;
          try {
            output = await this.#telemetry.span(`effect ${tool.name}`, {}, () =>
              Promise.resolve(tool.run(call.input, { ...call.ctx, transaction }, call.prepared)),
            );
          } catch (error) {
            failure = { error, invalidOutput: false };
            throw error;
          }
          if (lease.lost) throw new LeaseLostError(key, owner.token);
          try {
            stored = this.#serialize(tool, output);
          } catch (error) {
            failure = { error, invalidOutput: true };
            throw error;
          }
          return stored.text;
        },
        { leaseMs: this.#leaseFor(tool) },
      );
    } catch (error) {
      if (lease.lost) throw new LeaseLostError(key, owner.token);
      if (failure?.invalidOutput || (failure && classifyWith(tool, failure.error) === "terminal")) {
        await this.#settle(key, owner, this.#store.failTerminal(key, owner.token, toStoredError(error)));
        throw attempt.delivery.terminal(asError(error));
      }
      // Rolled back: the effect did not happen. Hand the key back, so the retry runs it at once. Should the
      // commit have gone through unseen, the record is `done` and this is refused: the retry replays.
      await this.#store.release(key, owner.token, { notApplied: true }).catch(() => undefined);
      throw error;
    }
    await this.#settle(key, owner, Promise.resolve(write));
    const { result } = stored as { result: unknown; text: string };
    return { result, outcome: "executed", fence: owner.fence };
  }

  /** Step 5: `classifyError` decides what a failure of `run` leaves behind. */
  async #runFailed(attempt: Attempt, owner: Ownership, lease: Lease, error: unknown): Promise<Error> {
    const { tool } = attempt;
    const { key } = attempt.step;
    if (lease.lost) return new LeaseLostError(key, owner.token);
    switch (classifyWith(tool, error)) {
      case "terminal":
        await this.#settle(key, owner, this.#store.failTerminal(key, owner.token, toStoredError(error)));
        return attempt.delivery.terminal(asError(error));
      case "not_applied":
        await this.#settle(key, owner, this.#store.release(key, owner.token, { notApplied: true }));
        return asError(error);
      case "unknown":
        await this.#settle(key, owner, this.#store.markUnknown(key, owner.token, toStoredError(error)));
        // Retryable on purpose: the next attempt claims `unknown` and asks the reconcile hook.
        return new OutcomeUnknownError(key, tool.name, "run failed after the effect may have begun", {
          cause: error,
        });
    }
  }

  /** Step 6: ask the outside world whether the effect happened; never re-fire blindly. */
  async #reconcile(attempt: Attempt, owner: Ownership, claimSentAt: number): Promise<FlowOutcome> {
    const { tool } = attempt;
    const { key } = attempt.step;
    if (!tool.reconcile) {
      await this.#settle(key, owner, this.#store.giveUp(key, owner.token, noHook));
      throw attempt.delivery.terminal(
        new OutcomeUnknownError(key, tool.name, "the tool has no reconcile hook"),
      );
    }
    const lease = new Lease(this.#store, key, owner.token, this.#leaseFor(tool), claimSentAt);
    let verdict: Awaited<ReturnType<NonNullable<AnyTool["reconcile"]>>>;
    try {
      const input = parseInput(tool, attempt.step.input);
      const reconcile = tool.reconcile;
      const ctx = this.#context(attempt, owner, lease);
      verdict = await this.#telemetry.span(`reconcile ${tool.name}`, {}, async (span) => {
        const answer = await reconcile(input, ctx);
        span.setAttribute(ATTR_ONCE_APPLIED, answer.applied);
        return answer;
      });
    } catch (error) {
      lease.stop();
      await this.#settle(key, owner, this.#store.giveUp(key, owner.token, toStoredError(error)));
      // Retryable: the provider may answer the next time it is asked.
      throw new OutcomeUnknownError(key, tool.name, "the reconcile hook failed", { cause: error });
    }
    if (verdict.applied) {
      try {
        const { result, text } = await this.#storable(attempt, owner, verdict.result, "reconcile");
        await this.#settle(key, owner, this.#store.resolveApplied(key, owner.token, text));
        return { result, outcome: "reconciled", fence: owner.fence };
      } finally {
        lease.stop();
      }
    }
    lease.stop();
    await this.#settle(key, owner, this.#store.resolveNotApplied(key, owner.token));
    return this.#execute(attempt, owner, true, lease.confirmedAt);
  }

  /** Validates and serialises a result; a bad one after the effect is terminal, never a re-run. */
  async #storable(
    attempt: Attempt,
    owner: Ownership,
    output: unknown,
    via: "run" | "reconcile" = "run",
  ): Promise<{ result: unknown; text: string }> {
    const { tool } = attempt;
    const { key } = attempt.step;
    try {
      return this.#serialize(tool, output);
    } catch (error) {
      const stored = toStoredError(error);
      const write =
        via === "run"
          ? this.#store.failTerminal(key, owner.token, stored)
          : this.#store.giveUp(key, owner.token, stored);
      await this.#settle(key, owner, write);
      throw attempt.delivery.terminal(asError(error));
    }
  }

  /** A result validated and as JSON text; throws what makes it unstorable. */
  #serialize(tool: AnyTool, output: unknown): { result: unknown; text: string } {
    const result = parseOutput(tool, output);
    const text = toJson(tool.name, result);
    const bytes = Buffer.byteLength(text);
    if (bytes > this.#maxResultBytes) throw new ResultTooLargeError(tool.name, bytes, this.#maxResultBytes);
    return { result, text };
  }

  /** Every owner write: `lost` means another owner holds the key and this attempt's work is discarded. */
  async #settle(key: string, owner: Ownership, write: Promise<WriteOutcome>): Promise<void> {
    const answer = await write;
    if (answer.outcome === "lost") throw new LeaseLostError(key, owner.token);
    if (answer.outcome === "refused") throw new TransitionRefusedError(key, "owner write", answer.reason);
  }

  #context(attempt: Attempt, owner: Ownership, lease: Lease): EffectContext {
    const { step, tool, delivery } = attempt;
    let signal: AbortSignal | undefined;
    return {
      tool: tool.name,
      namespace: step.namespace,
      taskId: step.taskId,
      stepId: step.stepId,
      attempt: delivery.attempt,
      // A lost lease or a cancellation from outside: either way the call must stop. Combined when first read
      // (AbortSignal.any costs more than the rest of the context, and most tools never read it).
      get signal() {
        signal ??= delivery.signal ? AbortSignal.any([lease.signal, delivery.signal]) : lease.signal;
        return signal;
      },
      key: step.key,
      fence: owner.fence,
      assertLease: () => lease.assert(),
    };
  }

  #leaseFor(tool: AnyTool): number {
    return tool.leaseMs ?? this.#leaseMs;
  }
}

const noHook = { name: "OutcomeUnknownError", message: "the tool has no reconcile hook" };

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** JSON text of a result; refuses what JSON would silently change (undefined, functions, NaN, bigint). */
function toJson(tool: string, value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (_key, v: unknown) => {
      if (typeof v === "function" || typeof v === "symbol") throw new TypeError(`a ${typeof v} is not JSON`);
      if (typeof v === "number" && !Number.isFinite(v)) throw new TypeError(`${v} is not JSON`);
      return v;
    });
  } catch (error) {
    throw new ResultNotSerializableError(tool, (error as Error).message, { cause: error });
  }
  if (text === undefined) throw new ResultNotSerializableError(tool, "the result is undefined");
  return text;
}

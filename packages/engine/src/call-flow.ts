import {
  type AnyTool,
  type ApprovalContext,
  ApprovalPendingError,
  ApprovalPolicyError,
  type ApprovalStore,
  type CallContext,
  type Cancellation,
  type ClaimOutcome,
  type ClaimRequest,
  type EffectContext,
  fingerprint,
  IdempotencyConflictError,
  isTaskStore,
  isTransactionalStore,
  LeaseLostError,
  OnceError,
  type OnceRecord,
  type OnceStore,
  OutcomeUnknownError,
  type Ownership,
  parseInput,
  parseOutput,
  ReplayedFailureError,
  ResultNotSerializableError,
  ResultTooLargeError,
  StoreUnavailableError,
  TaskCancelledError,
  type TaskIdentity,
  TransitionRefusedError,
  type WriteOutcome,
} from "@once/core";
import { classifyWith, toStoredError } from "@once/core/internal";
import type { Span } from "@opentelemetry/api";
import {
  ATTR_ONCE_APPLIED,
  ATTR_ONCE_APPROVAL_EXPIRES_AT,
  ATTR_ONCE_APPROVAL_REASON,
  ATTR_ONCE_FENCE,
  ATTR_ONCE_FROM,
  ATTR_ONCE_KEY,
  ATTR_ONCE_LINK,
  ATTR_ONCE_RETRY_AFTER_MS,
  ATTR_ONCE_STORED_STATE,
  ATTR_ONCE_STORED_TOOL,
  ATTR_ONCE_TOOL,
  EVENT_APPROVAL_PENDING,
  EVENT_APPROVAL_REQUESTED,
  EVENT_CONFLICT,
  EVENT_DEDUP_HIT,
  EVENT_IN_FLIGHT,
  EVENT_RECONCILE,
  EVENT_TAKEOVER,
  EVENT_TASK_CANCELLED,
} from "./attributes.js";
import { Lease, taskCancelled } from "./lease.js";
import type { LivenessHold, ProcessLiveness } from "./liveness.js";
import { parseTraceparent, type Telemetry, traceparentOf } from "./telemetry.js";

/** Largest result stored, in bytes of JSON, unless the worker sets its own. */
export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;

/**
 * How one attempt of a call reached the flow, and the two things the flow leaves to its transport: a queue
 * (`@once/bullmq`'s processor) and a call run in the caller's own process (`InProcess`) differ only here.
 */
export interface Delivery {
  /** 1 for the first attempt. */
  attempt: number;
  /** Aborts when the call must stop from outside (a queue cancelled the job); the tool's `ctx.signal` with it. */
  signal?: AbortSignal | undefined;
  /**
   * Another owner holds the key and its lease is alive for `retryAfterMs`. Resolves when the flow should claim
   * again; may throw instead (a queue moves the job to delayed, without using an attempt, and throws).
   */
  waitInFlight(key: string, retryAfterMs: number): Promise<void>;
  /** Marks a failure that no retry can mend (a queue's own unrecoverable error); returns what to throw. */
  terminal(error: Error): Error;
}

/** The step an effect call belongs to, with its key (derived and checked by the caller of the flow). */
export interface EffectStep {
  key: string;
  namespace: string;
  taskId: string;
  stepId: string;
  input: unknown;
  /** The step's record read before, if any: a `done` one for this call replays without a claim. */
  recorded?: OnceRecord | undefined;
}

/** What a `read` or `write` call carries: no key, and a task and step only if the caller named them. */
export interface DirectStep {
  namespace: string;
  taskId?: string | undefined;
  stepId?: string | undefined;
  input: unknown;
}

/** What `onApprovalRequested` is told: a request exists, and a person must decide it. */
export interface ApprovalRequested {
  key: string;
  tool: string;
  namespace: string;
  taskId: string;
  stepId: string;
  /** Why the tool's policy asked. */
  reason: string;
  /** The record's fence: what a decision is fenced on (with the call's fingerprint). */
  fence: number;
  fingerprint: string;
  requestedAt: number;
  expiresAt: number;
}

/** What the flow does about approvals: how long a request waits, and whom to tell when one is made. */
export interface ApprovalSettings {
  ttlMs: number;
  /**
   * Called by the attempt whose write created the request, and by no other: once per call across every
   * process (a crash right after that write loses the call; the record still says the request exists).
   */
  onRequested?: ((request: ApprovalRequested) => void | Promise<void>) | undefined;
}

/** What the flow returns for a call; a transport adds what is its own (BullMQ: the job's call id). */
export interface FlowOutcome {
  result: unknown;
  /** `executed`: ran now; `replay`: answered from the store; `reconciled`: found out from the provider. */
  outcome: "executed" | "replay" | "reconciled" | "direct";
  fence?: number;
  /** The fingerprint the result belongs to (effect calls): a caller with another input must not take it. */
  fingerprint?: string;
}

/** One attempt of one call, with everything the steps share. */
interface Attempt {
  tool: AnyTool;
  step: EffectStep;
  /** The call's fingerprint: what every outcome of this attempt belongs to. */
  fingerprint: string;
  delivery: Delivery;
  span: Span;
  /** The task the claims name, when the store knows tasks: then a cancel of the task stops the call. */
  task: TaskIdentity | undefined;
  /** The hold on the process's liveness entry that the current claim names, when the flow keeps one. */
  liveness?: LivenessHold | undefined;
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
  readonly #approvals: ApprovalSettings;
  /** The store files claims under their task and refuses those of a cancelled one. */
  readonly #knowsTasks: boolean;
  /** The process's liveness entry in the store, named on every claim; undefined when turned off. */
  readonly #liveness: ProcessLiveness | undefined;

  constructor(
    store: OnceStore,
    leaseMs: number,
    maxResultBytes: number | undefined,
    telemetry: Telemetry,
    approvals: ApprovalSettings,
    liveness?: ProcessLiveness,
  ) {
    this.#liveness = liveness;
    this.#store = store;
    this.#leaseMs = leaseMs;
    this.#maxResultBytes = maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    this.#telemetry = telemetry;
    this.#approvals = approvals;
    this.#knowsTasks = isTaskStore(store);
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
    const attempt: Attempt = {
      tool,
      step,
      fingerprint: fingerprint(tool.name, step.input),
      delivery,
      span,
      task: this.#taskOf(step),
    };
    span.setAttribute(ATTR_ONCE_KEY, step.key);
    const replay = replayOf(step.recorded, step.key, tool.name, attempt.fingerprint);
    if (replay !== undefined) {
      this.#trace(attempt, replay);
      return { ...(await this.#act(attempt, replay, performance.now())), fingerprint: attempt.fingerprint };
    }
    for (;;) {
      // The store's lease starts no earlier than this: the owner counts its lease from here (on the monotonic
      // clock), not from when it read the answer, so a stall in between cannot make it trust a lease that ran out.
      // The entry exists before a claim names it: no claimant can see it gone before it was made.
      const hold = await this.#liveness?.hold().catch((error: unknown) => {
        // What could not happen is the claim: say so, with the store's own error as the cause.
        if (OnceError.is(error, "ONCE_STORE_UNAVAILABLE"))
          throw new StoreUnavailableError("claim (this process's liveness entry could not be confirmed)", {
            cause: error,
          });
        throw error;
      });
      attempt.liveness = hold;
      const claimSentAt = performance.now();
      const claim = await this.#claim(hold, {
        key: step.key,
        fingerprint: attempt.fingerprint,
        tool: tool.name,
        // A transactional effect is not in doubt before its commit: it never leaves the prepare phase. A call
        // that may need approval has touched nothing until its policy said no (or a person said yes).
        phase: startsInPrepare(tool) ? "prepare" : "effect",
        leaseMs: this.#leaseFor(tool),
        // The record keeps this attempt's span, so later replays can link to the attempt that executed. Without
        // a tracing SDK the span is not valid: an all-zero traceparent would cost bytes on every record.
        trace: traceparentOf(span.spanContext()),
        // Filed under its task: once the task is cancelled, this claim is refused and nothing of the tool runs.
        ...(attempt.task === undefined ? {} : { task: attempt.task }),
        // The process's liveness entry: should this process die, the next claim need not wait out the lease.
        ...(hold === undefined ? {} : { liveness: hold.id }),
      });
      this.#telemetry.claimDuration.record(performance.now() - claimSentAt, { [ATTR_ONCE_TOOL]: tool.name });
      this.#trace(attempt, claim);
      if (claim.outcome !== "in_flight") {
        try {
          return { ...(await this.#act(attempt, claim, claimSentAt)), fingerprint: attempt.fingerprint };
        } finally {
          hold?.release();
        }
      }
      hold?.release();
      // Another owner is alive: come back when its lease (or its process's liveness entry) would have run out.
      await delivery.waitInFlight(step.key, claim.retryAfterMs);
    }
  }

  /** The claim; a claim that fails gives its liveness hold back. */
  async #claim(hold: LivenessHold | undefined, request: ClaimRequest): Promise<ClaimOutcome> {
    try {
      return await this.#store.claim(request);
    } catch (error) {
      hold?.release();
      throw error;
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
      case "awaiting_approval":
        span.addEvent(EVENT_APPROVAL_PENDING, { [ATTR_ONCE_APPROVAL_EXPIRES_AT]: claim.expiresAt });
        return;
      case "cancelled":
        span.addEvent(EVENT_TASK_CANCELLED);
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
      case "awaiting_approval":
        throw delivery.terminal(
          new ApprovalPendingError(step.key, tool.name, claim.reason, claim.requestedAt, claim.expiresAt),
        );
      case "cancelled":
        // The task was cancelled before this call's effect began: nothing of the tool runs, and no retry of it
        // ever will (every later claim is answered the same).
        throw delivery.terminal(cancelledError(step, claim.cancellation));
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
    const lease = this.#lease(attempt, owner, confirmedAt);
    try {
      let input: unknown;
      try {
        input = parseInput(tool, attempt.step.input);
      } catch (error) {
        await this.#settle(attempt, owner, this.#store.failTerminal(key, owner.token, toStoredError(error)));
        throw attempt.delivery.terminal(error as Error);
      }
      // Asked before anything of the tool runs, prepare included; never again once the record holds a yes, nor
      // in the effect phase (a reconcile found the effect not applied: it was allowed to begin).
      if (tool.approval !== undefined && !inEffectPhase && owner.approved !== true) {
        const reason = await this.#approvalReason(attempt, owner, input);
        if (reason !== undefined) throw await this.#requestApproval(attempt, owner, reason);
      }
      const ctx = this.#context(attempt, owner, lease);
      let prepared: unknown;
      if (tool.prepare) {
        try {
          prepared = await tool.prepare(input, ctx);
        } catch (error) {
          // Nothing touched the outside world yet: hand the key back and let the transport retry.
          await this.#settle(
            attempt,
            owner,
            this.#store.release(key, owner.token, { notApplied: inEffectPhase }),
          );
          throw lease.cancelled ? attempt.delivery.terminal(lease.cancelled) : error;
        }
      }
      // A transactional effect stays in the prepare phase: until its transaction commits with `done`, nothing
      // happened, so an owner that died is taken over, never reconciled.
      if (startsInPrepare(tool) && !inEffectPhase && tool.transactional === undefined)
        await this.#settle(attempt, owner, this.#store.beginEffect(key, owner.token));
      // A stall since the lease was last confirmed (a GC pause, SIGSTOP, a starved CPU) may have let it run
      // out and another owner take over: the effect never starts on a lease this owner cannot vouch for.
      // When fresh, this check and the call of `run` are one synchronous stretch: `run` starts with at least
      // half of its lease left.
      await lease.assert().catch((error: unknown) => {
        throw this.#leaseEnded(attempt, lease, error);
      });
      // The task was cancelled while this owner held the key in the effect phase (a tool without a prepare
      // step starts there), and its effect has not begun: it never will.
      if (lease.cancelled) {
        await this.#settle(attempt, owner, this.#store.release(key, owner.token, { notApplied: true }));
        throw attempt.delivery.terminal(lease.cancelled);
      }
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
      if (lease.lost) throw this.#leaseEnded(attempt, lease);
      const { result, text } = await this.#storable(attempt, owner, output);
      await this.#settle(attempt, owner, this.#store.complete(key, owner.token, text));
      return { result, outcome: "executed", fence: owner.fence };
    } finally {
      lease.stop();
    }
  }

  /**
   * The tool's policy on the validated input: a reason when a person must approve, undefined when not. A
   * policy that throws, or answers something else, fails closed: the key is handed back, nothing ran.
   */
  async #approvalReason(attempt: Attempt, owner: Ownership, input: unknown): Promise<string | undefined> {
    const { tool, step } = attempt;
    const policy = tool.approval;
    if (policy === true) return `${tool.name} needs a person's approval for every call`;
    let answer: unknown;
    let failure: ApprovalPolicyError | undefined;
    try {
      const ctx: ApprovalContext = {
        tool: tool.name,
        namespace: step.namespace,
        taskId: step.taskId,
        stepId: step.stepId,
        key: step.key,
      };
      answer = await (policy as Exclude<typeof policy, true | undefined>)(input, ctx);
    } catch (error) {
      failure = new ApprovalPolicyError(tool.name, `it threw ${errorName(error)}`, { cause: error });
    }
    if (failure === undefined) {
      if (answer === undefined || answer === null) return undefined;
      if (typeof answer === "string" && answer !== "") return answer;
      failure = new ApprovalPolicyError(
        tool.name,
        `it answered ${answer === "" ? "an empty string" : typeof answer}, not a reason or nothing`,
      );
    }
    await this.#settle(attempt, owner, this.#store.release(step.key, owner.token, { notApplied: true }));
    throw attempt.delivery.terminal(failure);
  }

  /**
   * claimed → awaiting_approval. The write that creates the request is made by one owner only (its token),
   * once per record (the store refuses a second request): so this attempt, and no other anywhere, tells
   * `onApprovalRequested` and the trace. Returns what to throw: the pending answer every caller gets.
   */
  async #requestApproval(attempt: Attempt, owner: Ownership, reason: string): Promise<Error> {
    const { tool, step, span } = attempt;
    const store = this.#store as ApprovalStore;
    const asked = await store.requestApproval(step.key, owner.token, {
      reason,
      ttlMs: this.#approvals.ttlMs,
    });
    if (asked.outcome === "lost") return this.#lostWrite(attempt, owner);
    if (asked.outcome === "refused")
      return new TransitionRefusedError(step.key, "requestApproval", asked.reason);
    this.#telemetry.outcome(span, tool.name, "approval_requested");
    span.addEvent(EVENT_APPROVAL_REQUESTED, {
      [ATTR_ONCE_APPROVAL_EXPIRES_AT]: asked.expiresAt,
      ...(this.#telemetry.recordPayloads ? { [ATTR_ONCE_APPROVAL_REASON]: reason } : {}),
    });
    const hook = this.#approvals.onRequested;
    if (hook) {
      try {
        await hook({
          key: step.key,
          tool: tool.name,
          namespace: step.namespace,
          taskId: step.taskId,
          stepId: step.stepId,
          reason,
          fence: asked.fence,
          fingerprint: attempt.fingerprint,
          requestedAt: asked.requestedAt,
          expiresAt: asked.expiresAt,
        });
      } catch (error) {
        // The request exists whatever the hook did: the record is the truth, the hook only tells.
        span.addEvent("exception", { "exception.type": errorName(error) });
      }
    }
    return attempt.delivery.terminal(
      new ApprovalPendingError(step.key, tool.name, reason, asked.requestedAt, asked.expiresAt),
    );
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
          if (lease.lost) throw this.#leaseEnded(attempt, lease);
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
      if (lease.lost) throw this.#leaseEnded(attempt, lease);
      if (failure?.invalidOutput || (failure && classifyWith(tool, failure.error) === "terminal")) {
        await this.#settle(attempt, owner, this.#store.failTerminal(key, owner.token, toStoredError(error)));
        throw attempt.delivery.terminal(asError(error));
      }
      // Rolled back: the effect did not happen. Hand the key back, so the retry runs it at once. Should the
      // commit have gone through unseen, the record is `done` and this is refused: the retry replays.
      await this.#store.release(key, owner.token, { notApplied: true }).catch(() => undefined);
      // Rolled back because the tool stopped for the cancel: no retry of a cancelled task runs.
      throw lease.cancelled ? attempt.delivery.terminal(lease.cancelled) : error;
    }
    await this.#settle(attempt, owner, Promise.resolve(write));
    const { result } = stored as { result: unknown; text: string };
    return { result, outcome: "executed", fence: owner.fence };
  }

  /** Step 5: `classifyError` decides what a failure of `run` leaves behind. */
  async #runFailed(attempt: Attempt, owner: Ownership, lease: Lease, error: unknown): Promise<Error> {
    const { tool } = attempt;
    const { key } = attempt.step;
    if (lease.lost) return this.#leaseEnded(attempt, lease);
    switch (classifyWith(tool, error)) {
      case "terminal":
        await this.#settle(attempt, owner, this.#store.failTerminal(key, owner.token, toStoredError(error)));
        return attempt.delivery.terminal(asError(error));
      case "not_applied":
        await this.#settle(attempt, owner, this.#store.release(key, owner.token, { notApplied: true }));
        // Stopped by the cancel before it changed anything: that is the answer, and no retry runs it.
        return lease.cancelled ? attempt.delivery.terminal(lease.cancelled) : asError(error);
      case "unknown": {
        await this.#settle(attempt, owner, this.#store.markUnknown(key, owner.token, toStoredError(error)));
        // Retryable on purpose: the next attempt claims `unknown` and asks the reconcile hook. Not when the
        // tool stopped for its task's cancel: every later claim is refused, so the caller hears now that the
        // effect may have happened (the record stays `unknown`, for an operator to settle).
        const cancelled = lease.cancelled;
        const unknown = new OutcomeUnknownError(
          key,
          tool.name,
          cancelled
            ? "run failed after the effect may have begun, stopped by its task's cancel"
            : "run failed after the effect may have begun",
          { cause: error },
        );
        return cancelled ? attempt.delivery.terminal(unknown) : unknown;
      }
    }
  }

  /** Step 6: ask the outside world whether the effect happened; never re-fire blindly. */
  async #reconcile(attempt: Attempt, owner: Ownership, claimSentAt: number): Promise<FlowOutcome> {
    const { tool } = attempt;
    const { key } = attempt.step;
    if (!tool.reconcile) {
      await this.#settle(attempt, owner, this.#store.giveUp(key, owner.token, noHook));
      throw attempt.delivery.terminal(
        new OutcomeUnknownError(key, tool.name, "the tool has no reconcile hook"),
      );
    }
    const lease = this.#lease(attempt, owner, claimSentAt);
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
      await this.#settle(attempt, owner, this.#store.giveUp(key, owner.token, toStoredError(error)));
      // Retryable: the provider may answer the next time it is asked.
      throw new OutcomeUnknownError(key, tool.name, "the reconcile hook failed", { cause: error });
    }
    if (verdict.applied) {
      try {
        const { result, text } = await this.#storable(attempt, owner, verdict.result, "reconcile");
        await this.#settle(attempt, owner, this.#store.resolveApplied(key, owner.token, text));
        return { result, outcome: "reconciled", fence: owner.fence };
      } finally {
        lease.stop();
      }
    }
    lease.stop();
    await this.#settle(attempt, owner, this.#store.resolveNotApplied(key, owner.token));
    // Not applied, and the task was cancelled while the provider was asked: the effect is not begun again.
    if (lease.cancelled) {
      await this.#settle(attempt, owner, this.#store.release(key, owner.token, { notApplied: true }));
      throw attempt.delivery.terminal(lease.cancelled);
    }
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
      await this.#settle(attempt, owner, write);
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

  /**
   * Every owner write: `lost` means another owner holds the key and this attempt's work is discarded — or the
   * task was cancelled, which turned the record `cancelled` (docs/cancellation.md).
   */
  async #settle(attempt: Attempt, owner: Ownership, write: Promise<WriteOutcome>): Promise<void> {
    const answer = await write;
    if (answer.outcome === "lost") throw await this.#lostWrite(attempt, owner);
    if (answer.outcome === "refused")
      throw new TransitionRefusedError(attempt.step.key, "owner write", answer.reason);
  }

  /**
   * What to throw for an owner write answered `lost`: {@link TaskCancelledError} (no retry) when the record
   * says the task was cancelled — the cancel cleared the owner — else {@link LeaseLostError}.
   */
  async #lostWrite(attempt: Attempt, owner: Ownership): Promise<Error> {
    const { key } = attempt.step;
    if (attempt.task !== undefined) {
      const record = await this.#store.get(key).catch(() => undefined);
      if (record?.state === "cancelled")
        return attempt.delivery.terminal(cancelledError(attempt.step, record.cancellation));
    }
    return new LeaseLostError(key, owner.token);
  }

  /** What to throw when the lease was lost: to a cancel (terminal), or to another owner (`error`, if given). */
  #leaseEnded(attempt: Attempt, lease: Lease, error?: unknown): Error {
    const lost = lease.lostWith;
    if (lost instanceof TaskCancelledError) return attempt.delivery.terminal(lost);
    return asError(error ?? lost);
  }

  /** The owner's lease, told the task when the claim named one (so a cancel can reach the tool). */
  #lease(attempt: Attempt, owner: Ownership, confirmedAt: number): Lease {
    const { tool, step, task, liveness } = attempt;
    return new Lease(
      this.#store,
      step.key,
      owner.token,
      this.#leaseFor(tool),
      confirmedAt,
      task?.taskId,
      liveness,
    );
  }

  /** The identity a claim files the call under, when the store knows tasks and the step names one. */
  #taskOf(step: EffectStep): TaskIdentity | undefined {
    if (!this.#knowsTasks || step.taskId === "" || step.stepId === "") return undefined;
    return { namespace: step.namespace, taskId: step.taskId, stepId: step.stepId };
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
      // A lost lease, the task cancelled, or a cancellation from outside: the call must stop. Combined when first read
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

/** True when a fresh owner of `tool` starts in the prepare phase: nothing has touched the outside world yet. */
function startsInPrepare(tool: AnyTool): boolean {
  return tool.prepare !== undefined || tool.transactional !== undefined || tool.approval !== undefined;
}

/** The answer to a call of a cancelled task: who cancelled it, when and why, as the store keeps it. */
function cancelledError(step: EffectStep, cancellation: Cancellation | undefined): TaskCancelledError {
  return taskCancelled(step.key, step.taskId === "" ? undefined : step.taskId, cancellation);
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
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

/**
 * What a claim would answer for a record read before: a `done` record of this call (its key, tool and fingerprint)
 * is a replay, and stays one, since a `done` record never changes. Anything else is the claim's to answer.
 */
function replayOf(
  record: OnceRecord | undefined,
  key: string,
  tool: string,
  fingerprint: string,
): Extract<ClaimOutcome, { outcome: "replay" }> | undefined {
  if (record?.state !== "done" || record.key !== key || record.result === undefined) return undefined;
  if (record.tool !== tool || record.fingerprint !== fingerprint) return undefined;
  return {
    outcome: "replay",
    result: record.result,
    fence: record.fence,
    ...(record.trace === undefined ? {} : { trace: record.trace }),
  };
}

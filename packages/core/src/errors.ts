/** The codes of @once/core's errors: stable, safe to match on. Every package exports its own. */
export type CoreErrorCode =
  | "ONCE_INVALID_KEY_PART"
  | "ONCE_NOT_JSON"
  | "ONCE_INVALID_TOOL"
  | "ONCE_UNKNOWN_TOOL"
  | "ONCE_INVALID_INPUT"
  | "ONCE_INVALID_OUTPUT"
  | "ONCE_RESULT_NOT_JSON"
  | "ONCE_RESULT_TOO_LARGE"
  | "ONCE_MISSING_STEP_IDENTITY"
  | "ONCE_CONFLICT"
  | "ONCE_OUTCOME_UNKNOWN"
  | "ONCE_LEASE_LOST"
  | "ONCE_IN_FLIGHT"
  | "ONCE_CALL_FAILED"
  | "ONCE_REPLAYED_FAILURE"
  | "ONCE_STORE_UNAVAILABLE"
  | "ONCE_TRANSITION_REFUSED"
  | "ONCE_TRANSACTION_STORE"
  | "ONCE_RECORD_LAYOUT"
  | "ONCE_APPROVAL_PENDING"
  | "ONCE_APPROVAL_POLICY"
  | "ONCE_APPROVAL_STORE"
  | "ONCE_DECISION_REFUSED"
  | "ONCE_TASK_CANCELLED"
  | "ONCE_CANCEL_REFUSED";

/**
 * The brand every once error carries, in the global symbol registry: the same symbol in every copy of every
 * once package, so an error made by one copy is recognised by another (as the AI SDK and Temporal do).
 */
const ONCE_ERROR = Symbol.for("once.error");

/**
 * Every error once raises, in whichever package. Each has a stable `code` (safe to match on; each package
 * exports its codes as a union type) and carries the fields a caller needs; `cause` is always chained.
 * Messages never include tool inputs or results.
 */
export class OnceError<Code extends string = string> extends Error {
  readonly code: Code;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
    Object.defineProperty(this, ONCE_ERROR, { value: true });
  }

  /**
   * True when `error` is a once error (with `code`, that code). Checks the brand, not the class: a process can
   * load two copies of a once package (a user's module bundling its own), and `instanceof` then fails silently.
   */
  static is<C extends string = string>(error: unknown, code?: C): error is OnceError<C> {
    return (
      error instanceof Error &&
      (error as { [ONCE_ERROR]?: unknown })[ONCE_ERROR] === true &&
      typeof (error as { code?: unknown }).code === "string" &&
      (code === undefined || (error as { code?: unknown }).code === code)
    );
  }
}

/** A part of an idempotency key (namespace, taskId, stepId) is empty, too long or has control characters. */
export class InvalidKeyPartError extends OnceError<"ONCE_INVALID_KEY_PART"> {
  constructor(
    readonly part: string,
    reason: string,
  ) {
    super("ONCE_INVALID_KEY_PART", `invalid ${part}: ${reason}`);
  }
}

/** A value cannot be canonicalised to JSON (undefined, a function, a bigint, NaN, a cycle…). */
export class NotJsonError extends OnceError<"ONCE_NOT_JSON"> {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super("ONCE_NOT_JSON", `value at ${path} is not JSON: ${reason}`);
  }
}

/** A transactional tool was given a store it cannot commit its effect with (no transactions, or another database). */
export class TransactionStoreError extends OnceError<"ONCE_TRANSACTION_STORE"> {
  constructor(
    readonly tool: string,
    reason: string,
  ) {
    super("ONCE_TRANSACTION_STORE", `tool ${JSON.stringify(tool)} cannot run on this store: ${reason}`);
  }
}

/** A tool definition is malformed. */
export class InvalidToolError extends OnceError<"ONCE_INVALID_TOOL"> {
  constructor(
    readonly tool: string,
    reason: string,
  ) {
    super("ONCE_INVALID_TOOL", `invalid tool ${JSON.stringify(tool)}: ${reason}`);
  }
}

/** No tool of that name is registered. */
export class UnknownToolError extends OnceError<"ONCE_UNKNOWN_TOOL"> {
  constructor(readonly tool: string) {
    super("ONCE_UNKNOWN_TOOL", `unknown tool ${JSON.stringify(tool)}`);
  }
}

/** The input failed the tool's input schema. `issues` lists paths and messages, never values. */
export class InvalidInputError extends OnceError<"ONCE_INVALID_INPUT"> {
  constructor(
    readonly tool: string,
    readonly issues: readonly string[],
    options?: { cause?: unknown },
  ) {
    super("ONCE_INVALID_INPUT", `input for ${tool} is invalid: ${issues.join("; ")}`, options);
  }
}

/** The tool returned something its output schema rejects. After an effect this is terminal, never a re-run. */
export class InvalidOutputError extends OnceError<"ONCE_INVALID_OUTPUT"> {
  constructor(
    readonly tool: string,
    readonly issues: readonly string[],
    options?: { cause?: unknown },
  ) {
    super("ONCE_INVALID_OUTPUT", `output of ${tool} is invalid: ${issues.join("; ")}`, options);
  }
}

/** The tool's result cannot be stored as JSON. */
export class ResultNotSerializableError extends OnceError<"ONCE_RESULT_NOT_JSON"> {
  constructor(
    readonly tool: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super("ONCE_RESULT_NOT_JSON", `result of ${tool} is not JSON-serialisable: ${reason}`, options);
  }
}

/** The tool's result is larger than the configured limit. */
export class ResultTooLargeError extends OnceError<"ONCE_RESULT_TOO_LARGE"> {
  constructor(
    readonly tool: string,
    readonly bytes: number,
    readonly limitBytes: number,
  ) {
    super("ONCE_RESULT_TOO_LARGE", `result of ${tool} is ${bytes} bytes, over the ${limitBytes}-byte limit`);
  }
}

/** An effect call was made without the `taskId` and `stepId` its key is derived from. */
export class MissingStepIdentityError extends OnceError<"ONCE_MISSING_STEP_IDENTITY"> {
  constructor(
    readonly tool: string,
    readonly missing: readonly string[],
  ) {
    super(
      "ONCE_MISSING_STEP_IDENTITY",
      `${tool} is an effect tool: ${missing.join(" and ")} required (the orchestrator's own, stable across retries)`,
    );
  }
}

/** The same key was used for a different call (another tool or another input). Nothing ran. */
export class IdempotencyConflictError extends OnceError<"ONCE_CONFLICT"> {
  constructor(
    readonly key: string,
    readonly tool: string,
    readonly storedTool: string,
    /** The step in the caller's words (e.g. "turn 3 of task order-42"), to lead the message. */
    readonly step?: string,
  ) {
    super(
      "ONCE_CONFLICT",
      `${step === undefined ? "" : `${step}: `}key ${key} already belongs to a different ${storedTool === tool ? `${tool} call (other input)` : `tool (${storedTool})`}`,
    );
  }
}

/** The effect may or may not have happened and nothing could tell which: an operator must resolve the key. */
export class OutcomeUnknownError extends OnceError<"ONCE_OUTCOME_UNKNOWN"> {
  constructor(
    readonly key: string,
    readonly tool: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super("ONCE_OUTCOME_UNKNOWN", `outcome of ${tool} for key ${key} is unknown: ${reason}`, options);
  }
}

/** This owner no longer holds the key (its lease ran out and another owner took it). Its result is discarded. */
export class LeaseLostError extends OnceError<"ONCE_LEASE_LOST"> {
  constructor(
    readonly key: string,
    readonly token: string,
  ) {
    super("ONCE_LEASE_LOST", `lease on ${key} lost by owner ${token}`);
  }
}

/** Another owner is running this key right now. Retry after `retryAfterMs`; this is not a failure. */
export class InFlightError extends OnceError<"ONCE_IN_FLIGHT"> {
  constructor(
    readonly key: string,
    readonly retryAfterMs: number,
  ) {
    super("ONCE_IN_FLIGHT", `key ${key} is in flight elsewhere; retry in ${retryAfterMs} ms`);
  }
}

/** The tool failed terminally (e.g. card declined). The failure is stored: every later attempt replays it. */
export class CallFailedError extends OnceError<"ONCE_CALL_FAILED"> {
  constructor(
    readonly key: string,
    readonly tool: string,
    readonly stored: StoredError,
  ) {
    super("ONCE_CALL_FAILED", `${tool} failed (key ${key}): ${stored.name}: ${stored.message}`);
  }
}

/** The call failed terminally before (e.g. card declined); the stored failure is replayed, nothing re-runs. */
export class ReplayedFailureError extends OnceError<"ONCE_REPLAYED_FAILURE"> {
  constructor(
    readonly key: string,
    readonly stored: StoredError,
  ) {
    super("ONCE_REPLAYED_FAILURE", `${stored.name}: ${stored.message} (stored failure for key ${key})`);
  }
}

/** The store could not be reached. once fails closed: a claim that fails this way runs nothing. */
export class StoreUnavailableError extends OnceError<"ONCE_STORE_UNAVAILABLE"> {
  constructor(operation: string, options?: { cause?: unknown }) {
    super("ONCE_STORE_UNAVAILABLE", `dedup store unavailable during ${operation}`, options);
  }
}

/** The store refused a transition the record's state does not allow. */
export class TransitionRefusedError extends OnceError<"ONCE_TRANSITION_REFUSED"> {
  constructor(
    readonly key: string,
    readonly transition: string,
    readonly reason: string,
  ) {
    super("ONCE_TRANSITION_REFUSED", `${transition} refused for ${key}: ${reason}`);
  }
}

/**
 * A record was written in a layout newer than this build of its store reads: by a later @once/redis or
 * @once/postgres. Nothing was read from the record, nothing changed in it, and nothing ran. Upgrade this
 * process (docs/protocol.md, "Record layouts", says in which order).
 */
export class RecordLayoutError extends OnceError<"ONCE_RECORD_LAYOUT"> {
  constructor(
    readonly key: string,
    /** The layout the record was written in. */
    readonly layout: number,
    /** The newest layout this reader knows. */
    readonly knownLayout: number,
    /** The store package whose layouts these are, e.g. `@once/redis`. */
    readonly store: string,
  ) {
    super(
      "ONCE_RECORD_LAYOUT",
      `${store} record ${key} was written by layout ${layout}, this reader knows up to ${knownLayout}: ` +
        "upgrade it; nothing was read or run",
    );
  }
}

/**
 * The call waits for a person's approval: nothing ran. Every caller, retry and resume of the call gets this
 * same answer until someone approves or denies it (`approve` / `deny`, `once approve` / `once deny`), or until
 * `expiresAt`, after which it fails for good (`approval_expired`).
 */
export class ApprovalPendingError extends OnceError<"ONCE_APPROVAL_PENDING"> {
  constructor(
    readonly key: string,
    readonly tool: string,
    /** Why the tool's policy asked for approval. */
    readonly reason: string,
    /** When the request was made, ms on the store's clock. */
    readonly requestedAt: number,
    /** When the request expires with no decision, ms on the store's clock. */
    readonly expiresAt: number,
  ) {
    super(
      "ONCE_APPROVAL_PENDING",
      `${tool} (key ${key}) waits for approval: ${reason}; the request expires at ${new Date(expiresAt).toISOString()}`,
    );
  }
}

/** A tool's approval policy threw, or answered something that is neither a reason nor nothing: nothing ran. */
export class ApprovalPolicyError extends OnceError<"ONCE_APPROVAL_POLICY"> {
  constructor(
    readonly tool: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(
      "ONCE_APPROVAL_POLICY",
      `the approval policy of ${tool} failed, so the call was refused (fail closed, nothing ran): ${reason}`,
      options,
    );
  }
}

/** A tool with an approval policy was given a store that keeps no approval requests. */
export class ApprovalStoreError extends OnceError<"ONCE_APPROVAL_STORE"> {
  constructor(
    readonly tool: string,
    store: string,
  ) {
    super(
      "ONCE_APPROVAL_STORE",
      `tool ${JSON.stringify(tool)} needs approval, and ${store} keeps no approval requests (no requestApproval and decide)`,
    );
  }
}

/**
 * An approve or deny was refused: no record, a record that does not await approval (already decided,
 * expired, never asked), another fingerprint or fence than the one given, or no `by`. Nothing changed.
 */
export class DecisionRefusedError extends OnceError<"ONCE_DECISION_REFUSED"> {
  constructor(
    readonly key: string,
    readonly decision: "approved" | "denied",
    readonly reason: string,
  ) {
    super(
      "ONCE_DECISION_REFUSED",
      `${decision === "approved" ? "approve" : "deny"} refused for ${key}: ${reason}; nothing changed`,
    );
  }
}

/**
 * The call's task was cancelled: nothing of this call ran (or, for an effect that was running, its owner was
 * told to stop). Every later call of the task gets this same answer; a new task id is the way forward.
 */
export class TaskCancelledError extends OnceError<"ONCE_TASK_CANCELLED"> {
  constructor(
    readonly key: string,
    readonly taskId: string | undefined,
    readonly by: string,
    readonly why: string,
    /** When the task was cancelled, ms on the store's clock. */
    readonly at: number,
  ) {
    super(
      "ONCE_TASK_CANCELLED",
      `${taskId === undefined ? "the task" : `task ${JSON.stringify(taskId)}`} was cancelled by ${by} at ${new Date(at).toISOString()}${why === "" ? "" : `: ${why}`}; call ${key} does not run`,
    );
  }
}

/** A cancel was refused (no `by`, a task id that is not a valid key part, a store that knows no tasks): nothing changed. */
export class CancelRefusedError extends OnceError<"ONCE_CANCEL_REFUSED"> {
  constructor(
    readonly taskId: string,
    readonly reason: string,
  ) {
    super(
      "ONCE_CANCEL_REFUSED",
      `cancel of task ${JSON.stringify(taskId)} refused: ${reason}; nothing changed`,
    );
  }
}

/** A failure that the tool classified as terminal, as stored on the record and replayed. */
export interface StoredError {
  name: string;
  message: string;
  code?: string;
}

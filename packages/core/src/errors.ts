/** Every code a once error carries, across all of once's packages: stable, safe to match on. */
export const ONCE_ERROR_CODES = [
  "ONCE_INVALID_KEY_PART",
  "ONCE_NOT_JSON",
  "ONCE_INVALID_TOOL",
  "ONCE_UNKNOWN_TOOL",
  "ONCE_INVALID_INPUT",
  "ONCE_INVALID_OUTPUT",
  "ONCE_RESULT_NOT_JSON",
  "ONCE_RESULT_TOO_LARGE",
  "ONCE_MISSING_STEP_IDENTITY",
  "ONCE_CONFLICT",
  "ONCE_OUTCOME_UNKNOWN",
  "ONCE_LEASE_LOST",
  "ONCE_IN_FLIGHT",
  "ONCE_CALL_FAILED",
  "ONCE_REPLAYED_FAILURE",
  "ONCE_KEY_MISMATCH",
  "ONCE_TOOL_KIND_MISMATCH",
  "ONCE_INVALID_JOB",
  "ONCE_STORE_UNAVAILABLE",
  "ONCE_TRANSITION_REFUSED",
  "ONCE_RETRY_WINDOW",
  "ONCE_DISPATCH_TIMEOUT",
  // @once/bullmq
  "ONCE_JOB_FAILED",
  "ONCE_DUPLICATE_TOOL",
  // @once/redis
  "ONCE_REDIS_CONFIG",
  "ONCE_REDIS_SCRIPT",
  // @once/postgres
  "ONCE_POSTGRES_CONFIG",
  "ONCE_POSTGRES_VERSION",
  "ONCE_POSTGRES_SCHEMA",
  "ONCE_POSTGRES_QUERY",
  "ONCE_TRANSACTION_STORE",
  // @once/agent
  "ONCE_RECORDED_TURN_MISMATCH",
  "ONCE_UNRECORDED_TOOL_CALL",
  "ONCE_UNSETTLED_TOOL_CALL",
] as const;

export type OnceErrorCode = (typeof ONCE_ERROR_CODES)[number];

const CODES: ReadonlySet<string> = new Set(ONCE_ERROR_CODES);

/**
 * Every error once raises. Each has a stable `code` (safe to match on) and carries the fields a caller
 * needs; `cause` is always chained. Messages never include tool inputs or results.
 */
export class OnceError extends Error {
  readonly code: OnceErrorCode;

  constructor(code: OnceErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }

  /**
   * True when `error` is a once error (with `code`, that code). Checks the code, not the class: a process can
   * load two copies of `@once/core` (a user's module bundling its own), and `instanceof` then fails silently.
   */
  static is<C extends OnceErrorCode>(error: unknown, code?: C): error is OnceError & { code: C } {
    const found = (error as { code?: unknown } | null | undefined)?.code;
    return (
      error instanceof Error &&
      typeof found === "string" &&
      CODES.has(found) &&
      (code === undefined || found === code)
    );
  }
}

/** A part of an idempotency key (namespace, taskId, stepId) is empty, too long or has control characters. */
export class InvalidKeyPartError extends OnceError {
  constructor(
    readonly part: string,
    reason: string,
  ) {
    super("ONCE_INVALID_KEY_PART", `invalid ${part}: ${reason}`);
  }
}

/** A value cannot be canonicalised to JSON (undefined, a function, a bigint, NaN, a cycle…). */
export class NotJsonError extends OnceError {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super("ONCE_NOT_JSON", `value at ${path} is not JSON: ${reason}`);
  }
}

/** A transactional tool was given a store it cannot commit its effect with (no transactions, or another database). */
export class TransactionStoreError extends OnceError {
  constructor(
    readonly tool: string,
    reason: string,
  ) {
    super("ONCE_TRANSACTION_STORE", `tool ${JSON.stringify(tool)} cannot run on this store: ${reason}`);
  }
}

/** A tool definition is malformed. */
export class InvalidToolError extends OnceError {
  constructor(
    readonly tool: string,
    reason: string,
  ) {
    super("ONCE_INVALID_TOOL", `invalid tool ${JSON.stringify(tool)}: ${reason}`);
  }
}

/** No tool of that name is registered. */
export class UnknownToolError extends OnceError {
  constructor(readonly tool: string) {
    super("ONCE_UNKNOWN_TOOL", `unknown tool ${JSON.stringify(tool)}`);
  }
}

/** The input failed the tool's input schema. `issues` lists paths and messages, never values. */
export class InvalidInputError extends OnceError {
  constructor(
    readonly tool: string,
    readonly issues: readonly string[],
    options?: { cause?: unknown },
  ) {
    super("ONCE_INVALID_INPUT", `input for ${tool} is invalid: ${issues.join("; ")}`, options);
  }
}

/** The tool returned something its output schema rejects. After an effect this is terminal, never a re-run. */
export class InvalidOutputError extends OnceError {
  constructor(
    readonly tool: string,
    readonly issues: readonly string[],
    options?: { cause?: unknown },
  ) {
    super("ONCE_INVALID_OUTPUT", `output of ${tool} is invalid: ${issues.join("; ")}`, options);
  }
}

/** The tool's result cannot be stored as JSON. */
export class ResultNotSerializableError extends OnceError {
  constructor(
    readonly tool: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super("ONCE_RESULT_NOT_JSON", `result of ${tool} is not JSON-serialisable: ${reason}`, options);
  }
}

/** The tool's result is larger than the configured limit. */
export class ResultTooLargeError extends OnceError {
  constructor(
    readonly tool: string,
    readonly bytes: number,
    readonly limitBytes: number,
  ) {
    super("ONCE_RESULT_TOO_LARGE", `result of ${tool} is ${bytes} bytes, over the ${limitBytes}-byte limit`);
  }
}

/** An effect call was made without the `taskId` and `stepId` its key is derived from. */
export class MissingStepIdentityError extends OnceError {
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
export class IdempotencyConflictError extends OnceError {
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
export class OutcomeUnknownError extends OnceError {
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
export class LeaseLostError extends OnceError {
  constructor(
    readonly key: string,
    readonly token: string,
  ) {
    super("ONCE_LEASE_LOST", `lease on ${key} lost by owner ${token}`);
  }
}

/** Another owner is running this key right now. Retry after `retryAfterMs`; this is not a failure. */
export class InFlightError extends OnceError {
  constructor(
    readonly key: string,
    readonly retryAfterMs: number,
  ) {
    super("ONCE_IN_FLIGHT", `key ${key} is in flight elsewhere; retry in ${retryAfterMs} ms`);
  }
}

/** The tool failed terminally (e.g. card declined). The failure is stored: every later attempt replays it. */
export class CallFailedError extends OnceError {
  constructor(
    readonly key: string,
    readonly tool: string,
    readonly stored: StoredError,
  ) {
    super("ONCE_CALL_FAILED", `${tool} failed (key ${key}): ${stored.name}: ${stored.message}`);
  }
}

/** The call failed terminally before (e.g. card declined); the stored failure is replayed, nothing re-runs. */
export class ReplayedFailureError extends OnceError {
  constructor(
    readonly key: string,
    readonly stored: StoredError,
  ) {
    super("ONCE_REPLAYED_FAILURE", `${stored.name}: ${stored.message} (stored failure for key ${key})`);
  }
}

/** A job's id does not match the key derived from its own taskId/stepId/namespace. */
export class KeyMismatchError extends OnceError {
  constructor(
    readonly jobId: string,
    readonly expectedJobId: string,
  ) {
    super(
      "ONCE_KEY_MISMATCH",
      `job id ${jobId} does not match the key derived from its data (${expectedJobId})`,
    );
  }
}

/**
 * The job and this worker disagree about a tool: another kind, or a key where the kind has none (two deploys
 * that declare the tool differently). Nothing ran: an effect never runs outside the store.
 */
export class ToolKindMismatchError extends OnceError {
  constructor(
    readonly tool: string,
    /** What the orchestrator that enqueued the job declared, or `undefined` for job data without a kind. */
    readonly jobKind: string | undefined,
    readonly workerKind: string,
    detail?: string,
  ) {
    const declared = jobKind === undefined ? "sent no kind" : `declared it ${jobKind}`;
    super(
      "ONCE_TOOL_KIND_MISMATCH",
      `${tool}: the orchestrator ${declared}, this worker declares it ${workerKind}${detail ? ` (${detail})` : ""}; ` +
        "nothing ran: deploy both sides with one declaration of the tool",
    );
  }
}

/** Job data is not a once tool call. */
export class InvalidJobDataError extends OnceError {
  constructor(
    readonly issues: readonly string[],
    options?: { cause?: unknown },
  ) {
    super("ONCE_INVALID_JOB", `job data is not a once call: ${issues.join("; ")}`, options);
  }
}

/** The store could not be reached. once fails closed: a claim that fails this way runs nothing. */
export class StoreUnavailableError extends OnceError {
  constructor(operation: string, options?: { cause?: unknown }) {
    super("ONCE_STORE_UNAVAILABLE", `dedup store unavailable during ${operation}`, options);
  }
}

/** The store refused a transition the record's state does not allow. */
export class TransitionRefusedError extends OnceError {
  constructor(
    readonly key: string,
    readonly transition: string,
    readonly reason: string,
  ) {
    super("ONCE_TRANSITION_REFUSED", `${transition} refused for ${key}: ${reason}`);
  }
}

/** The record's retention is shorter than the worst-case retry window. */
export class RetryWindowError extends OnceError {
  constructor(
    readonly retentionMs: number,
    readonly worstCaseMs: number,
    readonly terms: readonly RetryWindowTerm[],
  ) {
    const lines = terms.map((t) => `  ${t.name}: ${t.ms} ms (${t.detail})`).join("\n");
    super(
      "ONCE_RETRY_WINDOW",
      `retention ${retentionMs} ms is shorter than the worst-case retry window ${worstCaseMs} ms:\n${lines}\n` +
        "raise retentionMs or shorten the retry chain; an expired record lets a retry fire the effect again",
    );
  }
}

/** The dispatcher gave up waiting after its retries. The call may still complete; calling again is safe. */
export class DispatchTimeoutError extends OnceError {
  constructor(
    readonly key: string,
    readonly tool: string,
    readonly attempts: number,
    readonly timeoutMs: number,
  ) {
    super(
      "ONCE_DISPATCH_TIMEOUT",
      `${tool} (key ${key}) did not finish within ${attempts} × ${timeoutMs} ms; calling again with the same step is safe`,
    );
  }
}

/** A failure that the tool classified as terminal, as stored on the record and replayed. */
export interface StoredError {
  name: string;
  message: string;
  code?: string;
}

/** One term of the retry-window sum. */
export interface RetryWindowTerm {
  name: string;
  ms: number;
  detail: string;
}

import { OnceError } from "@once/core";

/** The codes of @once/bullmq's errors: stable, safe to match on. */
export type BullmqErrorCode =
  | "ONCE_JOB_FAILED"
  | "ONCE_KEY_MISMATCH"
  | "ONCE_TOOL_KIND_MISMATCH"
  | "ONCE_INVALID_JOB"
  | "ONCE_DISPATCH_TIMEOUT";

/** The job failed for a reason once does not own (the tool threw, BullMQ gave up). */
export class JobFailedError extends OnceError<"ONCE_JOB_FAILED"> {
  constructor(
    readonly tool: string,
    readonly jobId: string,
    readonly failedReason: string,
  ) {
    super("ONCE_JOB_FAILED", `${tool} job ${jobId} failed: ${failedReason}`);
  }
}

/** A job's id does not match the key derived from its own taskId/stepId/namespace. */
export class KeyMismatchError extends OnceError<"ONCE_KEY_MISMATCH"> {
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
export class ToolKindMismatchError extends OnceError<"ONCE_TOOL_KIND_MISMATCH"> {
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
export class InvalidJobDataError extends OnceError<"ONCE_INVALID_JOB"> {
  constructor(
    readonly issues: readonly string[],
    options?: { cause?: unknown },
  ) {
    super("ONCE_INVALID_JOB", `job data is not a once call: ${issues.join("; ")}`, options);
  }
}

/** The dispatcher gave up waiting after its retries. The call may still complete; calling again is safe. */
export class DispatchTimeoutError extends OnceError<"ONCE_DISPATCH_TIMEOUT"> {
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

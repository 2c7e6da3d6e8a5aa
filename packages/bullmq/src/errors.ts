import { OnceError } from "@once/core";
import { UnrecoverableError } from "bullmq";

/** The job failed for a reason once does not own (the tool threw, BullMQ gave up). */
export class JobFailedError extends OnceError {
  constructor(
    readonly tool: string,
    readonly jobId: string,
    readonly failedReason: string,
  ) {
    super("ONCE_JOB_FAILED", `${tool} job ${jobId} failed: ${failedReason}`);
  }
}

/** A tool is registered twice under one name. */
export class DuplicateToolError extends OnceError {
  constructor(readonly tool: string) {
    super("ONCE_DUPLICATE_TOOL", `tool ${JSON.stringify(tool)} is registered twice`);
  }
}

/**
 * BullMQ retries a failed job unless the error is an `UnrecoverableError`. This keeps once's named
 * error as the `cause` and its name at the head of the job's `failedReason`.
 */
export function unrecoverable(error: Error): UnrecoverableError {
  const wrapped = new UnrecoverableError(`${error.name}: ${error.message}`);
  (wrapped as { cause?: unknown }).cause = error;
  return wrapped;
}

import { OnceError } from "@once/core";

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

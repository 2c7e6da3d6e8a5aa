import { OnceError } from "@once/core";

/** The codes of @once/agent's errors: stable, safe to match on. */
export type AgentErrorCode =
  | "ONCE_RECORDED_TURN_MISMATCH"
  | "ONCE_UNRECORDED_TOOL_CALL"
  | "ONCE_UNSETTLED_TOOL_CALL";

/**
 * A turn recorded before the code changed no longer fits the current tools: it called a tool that is gone,
 * or with an input the tool's schema now refuses. Resuming would replay calls the code cannot run; nothing
 * is dispatched.
 */
export class RecordedTurnMismatchError extends OnceError<"ONCE_RECORDED_TURN_MISMATCH"> {
  constructor(
    readonly taskId: string,
    readonly turn: number,
    readonly tool: string,
    reason: string,
  ) {
    super(
      "ONCE_RECORDED_TURN_MISMATCH",
      `turn ${turn} of task ${JSON.stringify(taskId)} called ${tool}, which ${reason}: the recorded turn no ` +
        "longer fits the tools given; resume with the code that recorded it, or start a new task",
    );
  }
}

/**
 * A tool call the once tools were asked to run that no recorded turn produced: the model the loop asks is not
 * the task's own (for the AI SDK, `task.model(…)`), so its turns are not recorded.
 */
export class UnrecordedToolCallError extends OnceError<"ONCE_UNRECORDED_TOOL_CALL"> {
  constructor(
    readonly tool: string,
    readonly toolCallId: string,
  ) {
    super(
      "ONCE_UNRECORDED_TOOL_CALL",
      `${tool} was called as ${toolCallId}, which no recorded turn of this task produced: give the loop ` +
        "the task's model (task.model(…)) so each turn is recorded before its tool calls run",
    );
  }
}

/**
 * The task's next model call was not made: an effect call of an earlier turn ended without a stored outcome
 * (its outcome is unknown, its lease was lost, the store was unreachable). Telling the model would let it call
 * the tool again under a new id — a new key, and a second effect if the first one happened. Resume the task
 * (the call runs again under its own step and is reconciled), or settle the record (`once resolve`) first.
 */
export class UnsettledToolCallError extends OnceError<"ONCE_UNSETTLED_TOOL_CALL"> {
  constructor(
    readonly taskId: string,
    readonly turn: number,
    readonly tool: string,
    readonly toolCallId: string,
    options?: { cause?: unknown },
  ) {
    const reason =
      options?.cause instanceof Error ? `${options.cause.name}: ${options.cause.message}` : "no outcome";
    super(
      "ONCE_UNSETTLED_TOOL_CALL",
      `turn ${turn} of task ${JSON.stringify(taskId)} was not asked: ${tool} (${toolCallId}) ended without a ` +
        `stored outcome (${reason}); resume the task to run it again under its step, or resolve its record first`,
      options,
    );
  }
}

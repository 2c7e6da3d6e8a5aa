import { OnceError } from "@once/core";

/**
 * A turn recorded before the code changed no longer fits the current tools: it called a tool that is gone,
 * or with an input the tool's schema now refuses. Resuming would replay calls the code cannot run; nothing
 * is dispatched.
 */
export class RecordedTurnMismatchError extends OnceError {
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
export class UnrecordedToolCallError extends OnceError {
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

import { createStep } from "@mastra/core/workflows";
import { AgentTask, type AgentTaskOptions } from "@once/agent";
import type { AnyTool, OutputOf } from "@once/core";

export type OnceStepOptions = Omit<AgentTaskOptions, "taskId" | "tools"> & {
  /** The step's id in the workflow (default: the tool's name): the key is the run's id and this. */
  id?: string;
};

/**
 * A once tool as a Mastra workflow step: its input is the step's `inputData`, its output the step's output, and
 * it runs once per (run, step): the step `<stepId>` of the task `<runId>`. A resumed, restarted or retried run,
 * in this process or another, replays the stored result, joins the call still running, or reconciles a call cut
 * off by a crash; a resumed run that hands the step another input gets `IdempotencyConflictError`; cancelling
 * the run's task (`cancelTask({ taskId: runId })`) stops its steps. Read and write tools are recorded too, so a
 * resumed run sees the answer it saw. A step inside a loop runs once per run: give each iteration a step of
 * its own.
 */
export function onceStep<T extends AnyTool>(tool: T, options: OnceStepOptions) {
  const { id = tool.name, ...rest } = options;
  // An AgentTask checks its tools as it is built: a tool that is not a once tool is refused here, not mid-run.
  new AgentTask({ ...rest, tools: [tool], taskId: "(step)" });
  return createStep({
    id,
    description: tool.description ?? tool.name,
    inputSchema: tool.input,
    outputSchema: tool.output,
    execute: async ({ inputData, runId, abortSignal }) => {
      // A step of the run's task, `<runId>`, named by its id: a cancel of the run stops it, and its record sits
      // with the rest of the run's, read in one round trip when the run resumes.
      const task = new AgentTask({ ...rest, tools: [tool], taskId: runId });
      return (await task.step(
        tool.name,
        id,
        inputData,
        abortSignal ? { signal: abortSignal } : {},
      )) as OutputOf<T>;
    },
  });
}

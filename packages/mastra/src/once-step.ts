import { createStep } from "@mastra/core/workflows";
import { AgentTask, type AgentTaskOptions } from "@once/agent";
import type { AnyTool, OutputOf } from "@once/core";

export type OnceStepOptions = Omit<AgentTaskOptions, "taskId" | "tools"> & {
  /** The step's id in the workflow (default: the tool's name): the key is the run's id and this. */
  id?: string;
};

/** What a step's record is asked to run: the tool and the step's input, so a resumed step with another input conflicts. */
interface StepCall {
  calls: { toolCallId: string; toolName: string; input: unknown }[];
}

/**
 * A once tool as a Mastra workflow step: its input is the step's `inputData`, its output the step's output, and
 * it runs once per (run, step) — a resumed, restarted or retried run, in this process or another, replays the
 * stored result, joins the call still running, or reconciles a call cut off by a crash. Read and write tools
 * are recorded too, so a resumed run sees the answer it saw. A step inside a loop runs once per run: give
 * each iteration a step of its own.
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
      // A step is a task of its own (`<runId>/<stepId>`): its one "turn" records the call the run asked for, and
      // the call runs as that turn's step — the same flow as an agent's tool call, with no model to ask.
      const task = new AgentTask({ ...rest, tools: [tool], taskId: `${runId}/${id}` });
      await task.turn<StepCall>(
        { provider: "mastra", modelId: "workflow-step", step: id, tool: tool.name, input: inputData },
        async () => ({ calls: [{ toolCallId: id, toolName: tool.name, input: inputData }] }),
        (asked) => asked.calls,
        abortSignal ? { signal: abortSignal } : {},
      );
      return (await task.call(
        tool.name,
        id,
        inputData,
        abortSignal ? { signal: abortSignal } : {},
      )) as OutputOf<T>;
    },
  });
}

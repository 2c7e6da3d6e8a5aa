import { AgentTask, type AgentTaskOptions, type TurnStep } from "@once/agent";
import { type LanguageModelMiddleware, type Tool, tool, wrapLanguageModel } from "ai";
import {
  type ModelOfCall,
  type RecordedTurn,
  recordGenerate,
  recordStream,
  replayGenerate,
  replayStream,
  toolCallsOf,
  turnRequest,
} from "./recorded-turn.js";

export type OnceTaskOptions = AgentTaskOptions;

/** A durable agent task: the model wrapped so each turn is recorded, and the tools, keyed from the turns. */
export interface OnceTask {
  readonly taskId: string;
  /** The model for `generateText` / `streamText` / `ToolLoopAgent`: each call is a recorded turn. */
  model(model: ModelOfCall): ModelOfCall;
  /** The AI SDK tools, by name: each call runs once, keyed from the turn that made it. */
  readonly tools: Record<string, Tool>;
  /** The middleware itself, for `wrapLanguageModel` with other middleware. */
  readonly middleware: LanguageModelMiddleware;
  /**
   * The step a tool call of a recorded turn runs as, for tools that are not once's own (an MCP server's,
   * called with the step in the request): `UnrecordedToolCallError` for a call no recorded turn made.
   */
  stepOf(toolName: string, toolCallId: string): TurnStep;
}

/**
 * A durable AI SDK task. Each model call is a step of its own, `turn-<n>` of the task, claimed and stored
 * before any of its tool calls is dispatched; each tool call is the step `turn-<n>/<toolCallId>`, the id the
 * recorded turn gave it. Run the loop as usual; after a crash, run it again with the same `taskId`: recorded
 * turns are replayed instead of asking the model again, so the same calls go out under the same keys, and each
 * replays or joins the call still in flight. A crash during a model call asks the model again — safe, since
 * none of that turn's calls was dispatched.
 */
export function onceTask(options: OnceTaskOptions): OnceTask {
  const task = new AgentTask(options);

  const middleware: LanguageModelMiddleware = {
    wrapGenerate: async ({ doGenerate, params, model }) => {
      const recorded = await task.turn(
        turnRequest("generate", model, params),
        async () => recordGenerate(await doGenerate()),
        toolCallsOf,
        params.abortSignal ? { signal: params.abortSignal } : {},
      );
      // The mode is in the turn's fingerprint: a turn recorded by the other mode is a conflict, never here.
      return replayGenerate(recorded as RecordedTurn & { mode: "generate" });
    },
    wrapStream: async ({ doStream, params, model }) => {
      const recorded = await task.turn(
        turnRequest("stream", model, params),
        async () => recordStream((await doStream()).stream),
        toolCallsOf,
        params.abortSignal ? { signal: params.abortSignal } : {},
      );
      return replayStream(recorded as RecordedTurn & { mode: "stream" });
    },
  };

  const tools: Record<string, Tool> = {};
  for (const [name, declared] of task.tools) {
    tools[name] = tool({
      ...(declared.description === undefined ? {} : { description: declared.description }),
      inputSchema: declared.input,
      execute: (
        input: unknown,
        { toolCallId, abortSignal }: { toolCallId: string; abortSignal?: AbortSignal },
      ) => task.call(name, toolCallId, input, abortSignal ? { signal: abortSignal } : {}),
    } as Tool);
  }

  return {
    taskId: task.taskId,
    model: (model) => wrapLanguageModel({ model, middleware }) as ModelOfCall,
    tools,
    middleware,
    stepOf: (toolName, toolCallId) => task.stepOf(toolName, toolCallId),
  };
}

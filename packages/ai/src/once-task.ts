import {
  AgentTask,
  type AgentTaskOptions,
  describeApproval,
  type PendingApproval,
  type TurnStep,
} from "@once/agent";
import {
  type LanguageModelMiddleware,
  type Tool,
  type ToolApprovalConfiguration,
  type ToolSet,
  tool,
  wrapLanguageModel,
} from "ai";
import {
  type ModelOfCall,
  type RecordedTurn,
  recordGenerate,
  recordStream,
  replayGenerate,
  replayStream,
  toolCallIdsOf,
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
   * For `toolApproval` of `generateText` / `streamText` / `ToolLoopAgent`: the same answers as the tools' own
   * `needsApproval`, with the record's request in words (key, reason, expiry, the command that approves it)
   * as the reason of the SDK's `tool-approval-request`.
   */
  readonly toolApproval: ToolApprovalConfiguration<ToolSet, unknown>;
  /**
   * The approval request a tool call waits for, as its record holds it, for a `tool-approval-request`'s
   * `toolCall.toolCallId`; `undefined` when this task found none for it.
   */
  approvalRequest(toolCallId: string): PendingApproval | undefined;
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
      await task.continueAfter(toolCallIdsOf(params));
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
      await task.continueAfter(toolCallIdsOf(params));
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
  const toolApproval: Record<string, (input: unknown, options: { toolCallId: string }) => Promise<unknown>> =
    {};
  for (const [name, declared] of task.tools) {
    // The SDK asks before it runs a call, and again before it runs one the app approved in the messages: both
    // times the record answers. The app's approval is not the decision — the record's is, and the call itself
    // runs only on an approved record (else it answers ApprovalPendingError, or the stored denial).
    const pending = async (input: unknown, toolCallId: string) => {
      await task.continueAfter([toolCallId]);
      return task.pendingApproval(name, toolCallId, input);
    };
    const asks = declared.kind === "effect" && declared.approval !== undefined;
    if (asks)
      toolApproval[name] = async (input, { toolCallId }) => {
        const request = await pending(input, toolCallId);
        return request && { type: "user-approval", reason: describeApproval(request) };
      };
    tools[name] = tool({
      ...(declared.description === undefined ? {} : { description: declared.description }),
      inputSchema: declared.input,
      ...(asks
        ? {
            needsApproval: async (input: unknown, { toolCallId }: { toolCallId: string }) =>
              (await pending(input, toolCallId)) !== undefined,
          }
        : {}),
      // A call the app approved in a saved message history may be of a turn another process asked.
      execute: async (
        input: unknown,
        { toolCallId, abortSignal }: { toolCallId: string; abortSignal?: AbortSignal },
      ) => {
        await task.continueAfter([toolCallId]);
        return task.call(name, toolCallId, input, abortSignal ? { signal: abortSignal } : {});
      },
    } as Tool);
  }

  return {
    taskId: task.taskId,
    model: (model) => wrapLanguageModel({ model, middleware }) as ModelOfCall,
    tools,
    middleware,
    toolApproval: toolApproval as ToolApprovalConfiguration<ToolSet, unknown>,
    approvalRequest: (toolCallId) => task.approvalRequestOf(toolCallId),
    stepOf: (toolName, toolCallId) => task.stepOf(toolName, toolCallId),
  };
}

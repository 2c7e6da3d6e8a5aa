import {
  AgentTask,
  type AgentTaskOptions,
  type PendingApproval,
  type TurnStep,
  UnrecordedToolCallError,
} from "@once/agent";
import {
  type AnyTool,
  type CallFailedError,
  InvalidToolError,
  OnceError,
  type ReplayedFailureError,
  type StoredError,
} from "@once/core";
import {
  type FunctionTool,
  getDefaultModel,
  type Model,
  type ModelProvider,
  type ModelRequest,
  type StreamEvent,
  tool,
} from "@openai/agents";
import {
  callIdsOf,
  type RecordedTurn,
  recordStream,
  replayResponse,
  toolCallsOf,
  turnRequest,
} from "./recorded-turn.js";

export type OnceTaskOptions = AgentTaskOptions;

/** A durable agent task: the model wrapped so each turn is recorded, and the tools, keyed from the turns. */
export interface OnceTask {
  readonly taskId: string;
  /**
   * The model for an `Agent` (`new Agent({ model: task.model(m, "gpt-5.1") })`): each call is a recorded turn.
   * `name` is the model's, for the turn's fingerprint and the span (the SDK's `Model` does not tell it).
   */
  model(model: Model, name?: string): Model;
  /** A model provider whose models are the task's (`new Runner({ modelProvider: task.modelProvider(p) })`). */
  modelProvider(provider: ModelProvider): ModelProvider;
  /** The SDK's function tools, for the `Agent`'s `tools`: each call runs once, keyed from the turn that made it. */
  readonly tools: FunctionTool[];
  /**
   * The approval request a tool call waits for, as its record holds it, for an interruption's
   * `rawItem.callId`; `undefined` when this task found none for it.
   */
  approvalRequest(callId: string): PendingApproval | undefined;
  /**
   * The step a tool call of a recorded turn runs as, for tools that are not once's own (an MCP server's,
   * called with the step in the request): `UnrecordedToolCallError` for a call no recorded turn made.
   */
  stepOf(toolName: string, toolCallId: string): TurnStep;
}

/**
 * A durable OpenAI Agents SDK task. Each model call is a step of its own, `turn-<n>` of the task, claimed and
 * stored before any of its tool calls is dispatched; each tool call is the step `turn-<n>/<callId>`, the id
 * the recorded turn gave it. Run the agent as usual; after a crash, run it again with the same `taskId`:
 * recorded turns are replayed instead of asking the model again, so the same calls go out under the same
 * keys, and each replays or joins the call still in flight. A crash during a model call asks the model again
 * — safe, since none of that turn's calls was dispatched.
 */
export function onceTask(options: OnceTaskOptions): OnceTask {
  const task = new AgentTask(options);
  const tools: FunctionTool[] = [];
  const onceName = new Map<string, string>();
  for (const [name, declared] of task.tools) {
    const made = functionTool(task, name, declared);
    const taken = onceName.get(made.name);
    if (taken !== undefined)
      throw new InvalidToolError(name, `the OpenAI Agents SDK names it ${made.name}, as it names ${taken}`);
    onceName.set(made.name, name);
    tools.push(made);
  }
  const callsOf = toolCallsOf(onceName);

  const model = (inner: Model, name = "default"): Model => {
    // The provider is the model's class (OpenAIResponsesModel, …): the interface names nothing else.
    const id = { provider: inner.constructor.name, modelId: name };
    const signal = (request: ModelRequest) => (request.signal ? { signal: request.signal } : {});
    return {
      ...(inner.supportsPromptModelSelection === undefined
        ? {}
        : { supportsPromptModelSelection: inner.supportsPromptModelSelection }),
      async getResponse(request) {
        await task.continueAfter(callIdsOf(request));
        const recorded = await task.turn(
          turnRequest("response", id, request),
          async (): Promise<RecordedTurn> => ({
            mode: "response",
            response: await inner.getResponse(request),
          }),
          callsOf,
          signal(request),
        );
        // The mode is in the turn's fingerprint: a turn recorded by the other mode is a conflict, never here.
        return replayResponse(recorded as RecordedTurn & { mode: "response" });
      },
      async *getStreamedResponse(request): AsyncIterable<StreamEvent> {
        await task.continueAfter(callIdsOf(request));
        const recorded = await task.turn(
          turnRequest("stream", id, request),
          () => recordStream(inner.getStreamedResponse(request)),
          callsOf,
          signal(request),
        );
        // Emitted again from the record, the first time too: a replay and the first run stream the same events.
        yield* (recorded as RecordedTurn & { mode: "stream" }).events;
      },
      // The SDK's retries of a failed model call ask the same turn again: the inner model advises on them.
      ...(inner.getRetryAdvice ? { getRetryAdvice: (args) => inner.getRetryAdvice?.(args) } : {}),
    };
  };

  return {
    taskId: task.taskId,
    model,
    modelProvider: (provider) => ({
      getModel: async (name) => model(await provider.getModel(name), name ?? getDefaultModel()),
    }),
    tools,
    approvalRequest: (callId) => task.approvalRequestOf(callId),
    stepOf: (toolName, toolCallId) => task.stepOf(toolName, toolCallId),
  };
}

/** A once tool as the SDK's function tool, whose calls run through the task under their recorded turn's step. */
function functionTool(task: AgentTask, name: string, declared: AnyTool): FunctionTool {
  try {
    return tool({
      name,
      description: declared.description ?? "",
      // The SDK takes zod objects in strict mode only: every field required (an optional one is sent as null).
      parameters: declared.input as never,
      strict: true,
      // The SDK's interruption, asked of the call's record: pending until a person approves the record. The
      // run state's own approve or reject is not the decision: the call runs only on an approved record (else
      // it ends the run with ApprovalPendingError, or tells the model the stored denial).
      ...(declared.kind === "effect" && declared.approval !== undefined
        ? {
            needsApproval: async (_context: unknown, input: unknown, callId?: string) => {
              if (callId === undefined) return true;
              await task.continueAfter([callId]);
              return (await task.pendingApproval(name, callId, input)) !== undefined;
            },
          }
        : {}),
      execute: async (input: unknown, _context, details) => {
        try {
          const callId = details?.toolCall?.callId;
          if (callId === undefined) throw new UnrecordedToolCallError(name, "(no call id)");
          // A run state restored in another process makes the calls of a turn asked there.
          await task.continueAfter([callId]);
          return await task.call(name, callId, input, details?.signal ? { signal: details.signal } : {});
        } catch (error) {
          if (storedFailure(error) === undefined && error instanceof Error) endsTheRun.add(error);
          throw error;
        }
      },
      errorFunction: (_context, error) => {
        if (endsTheRun.has(error as Error)) throw error;
        const stored = storedFailure(error);
        // The same words for a failure run now and one replayed: a resumed loop's next prompt is the recorded one.
        return stored ? `${name} failed: ${stored.name}: ${stored.message}` : SDK_TOOL_ERROR;
      },
    }) as FunctionTool;
  } catch (error) {
    throw new InvalidToolError(
      name,
      `the OpenAI Agents SDK cannot take its input schema: ${(error as Error).message}`,
    );
  }
}

/**
 * Errors of a call that the model must not hear of. The SDK tells the model of any failed call, and to try
 * again; here it hears only of failures the store holds (a declined card, stored and replayed alike) and of
 * the SDK's own refusals (an input the schema rejects). Anything else a call ends with — an outcome nobody
 * knows, a lost lease, a call no recorded turn made, a refusal the tool did not store — ends the run:
 * retried by the model it would be a new call under a new key, and the next turn's prompt would hold an
 * answer the store does not; resumed, it is the same call under the same key.
 */
const endsTheRun = new WeakSet<Error>();

/** The SDK's default answer to the model for a failed call. */
const SDK_TOOL_ERROR = "An error occurred while running the tool. Please try again.";

function storedFailure(error: unknown): StoredError | undefined {
  return OnceError.is(error, "ONCE_CALL_FAILED") || OnceError.is(error, "ONCE_REPLAYED_FAILURE")
    ? (error as CallFailedError | ReplayedFailureError).stored
    : undefined;
}

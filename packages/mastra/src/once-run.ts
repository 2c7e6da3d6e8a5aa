import { createTool, type Tool } from "@mastra/core/tools";
import {
  AgentTask,
  type AgentTaskOptions,
  type PendingApproval,
  pendingApprovalOf,
  UnrecordedToolCallError,
} from "@once/agent";
import { ApprovalPendingError } from "@once/core";
import {
  type CallOptions,
  type GenerateResult,
  type RecordedTurn,
  recordGenerate,
  recordStream,
  replayGenerate,
  replayStream,
  type SpecLanguageModel,
  type StreamPart,
  toolCallIdsOf,
  toolCallsOf,
  turnRequest,
} from "./recorded-turn.js";

export type OnceRunOptions = Omit<AgentTaskOptions, "taskId"> & {
  /** The run's own id, stable across crashes (`agent.generate(…, { runId })`): build the run again with it to resume. */
  runId: string;
};

/** A durable Mastra agent run: the model wrapped so each turn is recorded, and the tools, keyed from the turns. */
export interface OnceRun {
  readonly runId: string;
  /** The language model for the `Agent` (`new Agent({ model: run.model(m) })`): each call is a recorded turn. */
  model<Model extends SpecLanguageModel>(model: Model): Model;
  /** Mastra tools (`createTool`), by name, for the `Agent`'s `tools`: each call runs once, keyed from the turn that made it. */
  readonly tools: Record<string, Tool>;
  /**
   * The approval request a tool call of this run waits for, as its record holds it (key, tool, reason, expiry,
   * `once approve <key>`): for the `toolCallId` of a run that ended suspended for a tool's approval.
   */
  approvalRequest(toolCallId: string): PendingApproval | undefined;
}

/**
 * A durable Mastra agent run. Each model call is a step of its own, `turn-<n>` of the run, claimed and stored
 * before any of its tool calls is dispatched; each tool call is the step `turn-<n>/<toolCallId>`, the id the
 * recorded turn gave it. Run the agent as usual; after a crash, run it again with the same `runId`: recorded
 * turns are replayed instead of asking the model again, so the same calls go out under the same keys, and each
 * replays or joins the call still in flight. A crash during a model call asks the model again — safe, since
 * none of that turn's calls was dispatched.
 */
export function onceRun(options: OnceRunOptions): OnceRun {
  const { runId, ...rest } = options;
  const task = new AgentTask({ ...rest, taskId: runId });

  const model = <Model extends SpecLanguageModel>(inner: Model): Model => {
    const signal = (options: { abortSignal?: AbortSignal }) =>
      options.abortSignal ? { signal: options.abortSignal } : {};
    // The model as it is (its version, provider, id, supported URLs, read from it), its two calls recorded.
    const wrapped = {
      specificationVersion: inner.specificationVersion,
      provider: inner.provider,
      modelId: inner.modelId,
      get supportedUrls() {
        return (inner as { supportedUrls?: unknown }).supportedUrls;
      },
      doGenerate: async (callOptions: CallOptions) => {
        await task.continueAfter(toolCallIdsOf(callOptions));
        const recorded = await task.turn<RecordedTurn>(
          turnRequest("generate", inner, callOptions),
          async () => recordGenerate((await inner.doGenerate(callOptions as never)) as GenerateResult),
          toolCallsOf,
          signal(callOptions),
        );
        // The mode is in the turn's fingerprint: a turn recorded by the other mode is a conflict, never here.
        return replayGenerate(recorded as RecordedTurn & { mode: "generate" });
      },
      doStream: async (callOptions: CallOptions) => {
        await task.continueAfter(toolCallIdsOf(callOptions));
        const recorded = await task.turn<RecordedTurn>(
          turnRequest("stream", inner, callOptions),
          async () =>
            recordStream((await inner.doStream(callOptions as never)).stream as ReadableStream<StreamPart>),
          toolCallsOf,
          signal(callOptions),
        );
        return replayStream(recorded as RecordedTurn & { mode: "stream" });
      },
    } as unknown as Model;
    return wrapped;
  };

  const tools: Record<string, Tool> = {};
  for (const [name, declared] of task.tools) {
    tools[name] = createTool({
      id: name,
      description: declared.description ?? name,
      inputSchema: declared.input as never,
      execute: async (input: unknown, context) => {
        const callId = context?.agent?.toolCallId;
        if (callId === undefined) throw new UnrecordedToolCallError(name, "(no call id)");
        const signal = context?.abortSignal ? { signal: context.abortSignal } : {};
        // A run Mastra resumed from its snapshot in another process: the call goes in the turn that made it.
        await task.continueAfter([callId]);
        // Mastra's "needs approval?" is asked here, of the call's record, not by a `requireApproval` flag: while
        // the record awaits approval the run suspends for the tool's approval (Mastra's own suspension), and
        // `approveToolCall` resumes it into this same question — the record decides, the resume does not.
        const suspend = context?.agent?.suspend;
        const pending = suspend ? await task.pendingApproval(name, callId, input, signal) : undefined;
        if (pending && suspend) return suspend(pending, { requireToolApproval: true });
        try {
          return await task.call(name, callId, input, signal);
        } catch (error) {
          // Asked for between the look and the call (another process's claim wrote the request): the same.
          if (!(error instanceof ApprovalPendingError) || !suspend) throw error;
          return suspend(pendingApprovalOf(error), { requireToolApproval: true });
        }
      },
    }) as unknown as Tool;
  }

  return {
    runId: task.taskId,
    model,
    tools,
    approvalRequest: (toolCallId) => task.approvalRequestOf(toolCallId),
  };
}

import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import { BaseChatModel, type BindToolsInput } from "@langchain/core/language_models/chat_models";
import { AIMessage, type AIMessageChunk, type BaseMessage, isBaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { type Runnable, RunnableBinding, type RunnableConfig } from "@langchain/core/runnables";
import { type StructuredToolInterface, tool } from "@langchain/core/tools";
import {
  GraphInterrupt,
  getConfig,
  task as graphTask,
  interrupt,
  isGraphInterrupt,
} from "@langchain/langgraph";
import {
  AgentTask,
  type AgentTaskOptions,
  type PendingApproval,
  pendingApprovalOf,
  UnrecordedToolCallError,
} from "@once/agent";
import { type AnyTool, ApprovalPendingError, InvalidKeyPartError, OnceError } from "@once/core";
import { type RecordedTurn, recordResult, replayResult, toolCallsOf, turnRequest } from "./recorded-turn.js";
import { ThreadTurns } from "./thread-turns.js";

export type OnceGraphOptions = Omit<AgentTaskOptions, "taskId">;

/**
 * The value of the interrupt a call waiting for approval raises: the request its record holds, and the tool call
 * it is for. Resuming the thread with `Command({ resume })` is not the decision: the call runs once its record is
 * approved (`once approve <key>`), whatever the resume value says.
 */
export interface ApprovalInterrupt extends PendingApproval {
  once: "ONCE_APPROVAL_PENDING";
  toolCallId: string;
}

/** once for a LangGraph graph: its model's turns recorded and its tools keyed, per thread. */
export interface OnceGraph {
  /**
   * The chat model for the graph's model node or `createAgent`: each call is a recorded turn of the thread it
   * runs in (`configurable.thread_id`). `name` is the model's, for the turn's fingerprint and span (default:
   * the model's own `model` or `modelName` field, else its LLM type).
   */
  model(model: BaseChatModel, name?: string): BaseChatModel;
  /** LangChain tools, for a `ToolNode` or `createAgent`'s `tools`: each call runs once, keyed from the turn that made it. */
  readonly tools: StructuredToolInterface[];
  /**
   * LangGraph's functional-API `task`, for the model calls and tool calls of an `entrypoint`: the same task,
   * and the recorded turns it is given and returns are replayed into the thread's once task, so a tool call
   * of a turn that LangGraph answered from its checkpoint still has its step.
   */
  task<Args extends unknown[], Output>(
    name: string,
    run: (...args: Args) => Output | Promise<Output>,
  ): (...args: Args) => Promise<Output>;
}

/** How many threads' turns a process keeps at hand; one dropped is rebuilt from its messages when next used. */
const THREADS_KEPT = 1_000;

/**
 * once for LangGraph.js. A thread is a task (`taskId` = the thread id): model call `n` of the thread is the
 * step `turn-<n>`, recorded before any of its tool calls is dispatched, and each tool call is the step
 * `turn-<n>/<toolCallId>`, the id the recorded turn gave it. A graph resumed from its checkpoint replays, from
 * the store, the turns the checkpoint holds; one resumed from an older checkpoint (the newer one lost, with the
 * `async` or `exit` durability modes) asks its turns again and gets the recorded answers, tool-call ids and
 * all: the same calls go out under the same keys, and each replays or joins the call still in flight.
 */
export function onceGraph(options: OnceGraphOptions): OnceGraph {
  const threads = new Map<string, ThreadTurns>();
  const threadOf = (config: RunnableConfig | undefined): ThreadTurns => {
    const id = config?.configurable?.thread_id as unknown;
    if (typeof id !== "string" || id === "")
      throw new InvalidKeyPartError(
        "taskId",
        "once keys a graph's turns and calls by its thread: run it with { configurable: { thread_id } }",
      );
    let thread = threads.get(id);
    if (thread) threads.delete(id);
    else thread = new ThreadTurns(id, options);
    threads.set(id, thread);
    for (const [oldest] of threads) {
      if (threads.size <= THREADS_KEPT) break;
      threads.delete(oldest);
    }
    return thread;
  };
  // An AgentTask checks every tool as it is built (a once tool, with a kind and zod schemas): one here, so a bad
  // tool is refused before the graph runs, and its tools are the ones every thread's task runs.
  const declared = new AgentTask({ ...options, taskId: "(tools)" }).tools;

  const tools = [...declared.values()].map((once) => graphTool(once, threadOf));

  return {
    model: (model, name) => new OnceChatModel(model, threadOf, name),
    tools,
    task<Args extends unknown[], Output>(name: string, run: (...args: Args) => Output | Promise<Output>) {
      const inner = graphTask(name, run as never) as (...args: Args) => Promise<Output>;
      return async (...args: Args): Promise<Output> => {
        const output = await inner(...args);
        const messages = [...args.flatMap(messagesIn), ...messagesIn(output)];
        if (messages.some((message) => AIMessage.isInstance(message))) {
          const thread = threadOf(getConfig());
          await thread.exclusive(() => thread.holding(messages));
        }
        return output;
      };
    },
  };
}

/** The messages a functional task was given or returned: a message, a list of them, or a state holding them. */
function messagesIn(value: unknown): BaseMessage[] {
  if (isBaseMessage(value)) return [value];
  if (Array.isArray(value)) return value.filter((item) => isBaseMessage(item));
  const held = (value as { messages?: unknown } | null | undefined)?.messages;
  return Array.isArray(held) ? held.filter((item) => isBaseMessage(item)) : [];
}

/**
 * A once tool as a LangChain tool. The tool node hands it the call (`config.toolCall`) and the node's state
 * (`config.state`): the recorded turns the state holds are replayed first, so the call has its step.
 *
 * A call that ended without a stored outcome (unknown, a lost lease, the store unreachable), or that once
 * refused (no recorded turn made it, no thread), interrupts the graph instead of answering the model: a tool
 * node tells the model of any error, a checkpoint would keep that answer, and the model, told, may call the
 * tool again under a new id — a new key. Interrupted, the node's writes are not kept; resuming the thread
 * runs the same call under the same step, and it is reconciled. A stored failure (a declined card), a
 * read's or a write's own failure, and a call refused because its task was cancelled are the tool node's to
 * tell, as LangGraph does: a cancelled task has nothing to resume, and its next model call ends the run with
 * `TaskCancelledError`.
 */
function graphTool(
  once: AnyTool,
  threadOf: (config: RunnableConfig | undefined) => ThreadTurns,
): StructuredToolInterface {
  return tool(
    async (input: unknown, config: RunnableConfig & { toolCall?: { id?: string }; state?: unknown }) => {
      const callId = config.toolCall?.id;
      let thread: ThreadTurns | undefined;
      try {
        thread = threadOf(config);
        const held = messagesIn(config.state);
        const owner = thread;
        const task = await owner.exclusive(async () => (held.length > 0 ? owner.holding(held) : owner.task));
        if (callId === undefined) throw new UnrecordedToolCallError(once.name, "(no call id)");
        const signal = config.signal ? { signal: config.signal } : {};
        // The record decides, never the resume value: each pass asks the record, and while it awaits approval
        // the graph interrupts with its request. A resumed node runs from its start, and `interrupt()` answers
        // the resumes it has had in order, so the record is asked once per resume and the last pass interrupts
        // again — the same request — until an operator approves or denies it.
        for (;;) {
          const pending = await task.pendingApproval(once.name, callId, input, signal);
          if (pending) {
            interrupt(approvalInterrupt(pending, callId));
            continue;
          }
          try {
            return await task.call(once.name, callId, input, signal);
          } catch (error) {
            // Asked for between the look and the call (another process's claim wrote the request): the same.
            if (!(error instanceof ApprovalPendingError)) throw error;
            interrupt(approvalInterrupt(pendingApprovalOf(error), callId));
          }
        }
      } catch (error) {
        if (isGraphInterrupt(error)) throw error;
        const told =
          OnceError.is(error, "ONCE_CALL_FAILED") ||
          OnceError.is(error, "ONCE_TASK_CANCELLED") ||
          (once.kind !== "effect" && !OnceError.is(error));
        if (told) throw error;
        // The task that saw this call fail must not ask a next turn: the thread's next run starts over.
        thread?.forget();
        throw new GraphInterrupt([
          {
            value: {
              once: OnceError.is(error) ? error.code : "ONCE_UNSETTLED_TOOL_CALL",
              tool: once.name,
              toolCallId: callId ?? null,
              message: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
            },
          },
        ]);
      }
    },
    {
      name: once.name,
      description: once.description ?? once.name,
      schema: once.input as never,
    },
  ) as unknown as StructuredToolInterface;
}

function approvalInterrupt(pending: PendingApproval, toolCallId: string): ApprovalInterrupt {
  return { once: "ONCE_APPROVAL_PENDING", ...pending, toolCallId };
}

/**
 * A chat model whose every call is a recorded turn of the thread it runs in. It asks the model it wraps by its
 * `_generate` (a stream is read whole: the turn is recorded before anything of it is seen), and binds tools
 * through it, so provider-specific tool formats stay the provider's.
 */
class OnceChatModel extends BaseChatModel {
  readonly #inner: BaseChatModel;
  readonly #threadOf: (config: RunnableConfig | undefined) => ThreadTurns;
  readonly #id: { provider: string; modelId: string };

  constructor(
    inner: BaseChatModel,
    threadOf: (config: RunnableConfig | undefined) => ThreadTurns,
    name?: string,
  ) {
    super({});
    this.#inner = inner;
    this.#threadOf = threadOf;
    const named = inner as { model?: unknown; modelName?: unknown };
    const modelId =
      name ??
      (typeof named.model === "string"
        ? named.model
        : typeof named.modelName === "string"
          ? named.modelName
          : inner._llmType());
    this.#id = { provider: inner._llmType(), modelId };
  }

  _llmType(): string {
    // BaseChatModel's constructor asks before this class's fields are set.
    return #inner in this ? this.#inner._llmType() : "once";
  }

  override bindTools(
    tools: BindToolsInput[],
    kwargs?: Partial<this["ParsedCallOptions"]>,
  ): Runnable<BaseLanguageModelInput, AIMessageChunk> {
    if (!this.#inner.bindTools)
      throw new Error(`the chat model ${this.#inner.getName()} cannot bind tools (it has no bindTools)`);
    const bound = this.#inner.bindTools(tools, kwargs);
    // A provider binds its tools as call options on itself: the same options, on this model around it.
    const inner = bound instanceof RunnableBinding ? bound.bound : undefined;
    if (!(inner instanceof BaseChatModel))
      throw new Error(
        `the chat model ${this.#inner.getName()} bound its tools to something other than a chat model`,
      );
    return new RunnableBinding({
      bound: new OnceChatModel(inner, this.#threadOf, this.#id.modelId),
      kwargs: (bound as RunnableBinding<BaseLanguageModelInput, AIMessageChunk>).kwargs ?? {},
      config: (bound as RunnableBinding<BaseLanguageModelInput, AIMessageChunk>).config,
    });
  }

  async _generate(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun,
  ): Promise<ChatResult> {
    const thread = this.#threadOf(getConfig());
    return thread.exclusive(async () => {
      const { task, turn } = await thread.atTurnOf(messages);
      const request = turnRequest(this.#id, messages, options as Record<string, unknown>);
      const recorded = await task.turn<RecordedTurn>(
        request,
        async () =>
          recordResult(await this.#inner._generate(messages, options, runManager), {
            task: thread.taskId,
            turn,
            request,
          }),
        toolCallsOf,
        options.signal ? { signal: options.signal } : {},
      );
      const result = replayResult(recorded);
      for (const generation of result.generations) thread.asked(generation.message);
      return result;
    });
  }
}

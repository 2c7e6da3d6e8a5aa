import { createHash, randomUUID } from "node:crypto";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import type { TurnRequest, TurnToolCall } from "@once/agent";
import { canonicalJson } from "@once/core";

/** What a model turn's record holds: the chat model's one generation, as JSON (the message as `toDict` gives it). */
export interface RecordedTurn {
  message: { type: "ai"; data: Record<string, unknown> };
  text: string;
  generationInfo?: Record<string, unknown>;
  llmOutput?: Record<string, unknown>;
}

/**
 * What a recorded AI message carries in its `response_metadata.once`, so the thread's checkpoint says which
 * turn it was and what that turn was asked: a process resuming the thread from the checkpoint replays the turns
 * it holds from the store, in order, before it asks the next one or runs a call one of them made.
 */
export interface TurnMark {
  /** The thread (the task) the turn belongs to. */
  task: string;
  turn: number;
  request: TurnRequest;
}

/**
 * Call options that are not what the model is asked: the tools (checked against the recorded calls instead),
 * and what LangChain and LangGraph hand every call at run time — the signal, the prompt's index, and the
 * graph's execution info (checkpoint and task ids, timestamps) that `createAgent` passes its model.
 */
const RUNTIME_OPTIONS = new Set([
  "tools",
  "functions",
  "signal",
  "promptIndex",
  "executionInfo",
  "control",
  "timeout",
  "runtime",
  "context",
  "store",
  "writer",
]);

/**
 * What the turn's fingerprint covers: the model and, as one digest, everything it was asked — each message by
 * what it says (its kind, text, name, tool calls and their ids, the call it answers), not by the ids and
 * metadata LangGraph and the providers give it, and the call options but not the tools (a changed tool set is
 * checked against the recorded calls instead, naming the tool), nor what travels per call (the signal, tracing
 * options). A digest, so the mark each recorded message carries stays small.
 */
export function turnRequest(
  model: { provider: string; modelId: string },
  messages: readonly BaseMessage[],
  options: Record<string, unknown>,
): TurnRequest {
  const settings = Object.fromEntries(
    Object.entries(options).filter(([name]) => !RUNTIME_OPTIONS.has(name) && !name.startsWith("ls_")),
  );
  const asked = JSON.parse(JSON.stringify({ messages: messages.map(said), settings })) as unknown;
  return {
    provider: model.provider,
    modelId: model.modelId,
    asked: createHash("sha256").update(canonicalJson(asked)).digest("hex"),
  };
}

/** A message by what it says: what a model is asked, stable across checkpoints and the ids LangGraph assigns. */
function said(message: BaseMessage) {
  const type = message.getType();
  const calls = AIMessage.isInstance(message)
    ? (message.tool_calls ?? []).map((call) => ({ id: call.id, name: call.name, args: call.args }))
    : undefined;
  const answers = message as { tool_call_id?: unknown; status?: unknown };
  return {
    type,
    content: message.content,
    name: message.name,
    ...(calls && calls.length > 0 ? { tool_calls: calls } : {}),
    ...(type === "tool" ? { tool_call_id: answers.tool_call_id, status: answers.status } : {}),
  };
}

/**
 * A chat result as stored: its one generation, the message marked with its turn, and every id it needs given
 * now (the message's, each tool call's) so a replay hands LangGraph the same message, ids and all.
 */
export function recordResult(result: ChatResult, mark: TurnMark): RecordedTurn {
  const [generation, ...more] = result.generations;
  if (!generation || more.length > 0)
    throw new Error(`a model turn must produce one generation, got ${result.generations.length}`);
  if (!AIMessage.isInstance(generation.message))
    throw new Error(`a model turn must produce an AI message, got ${generation.message.getType()}`);
  const message = generation.message;
  const data: Record<string, unknown> = { ...message.toDict().data };
  data.id = message.id ?? `once-${randomUUID()}`;
  data.tool_calls = (message.tool_calls ?? []).map((call) => ({
    ...call,
    id: call.id ?? `call_${randomUUID()}`,
  }));
  data.response_metadata = { ...message.response_metadata, once: mark };
  return {
    message: { type: "ai", data: JSON.parse(JSON.stringify(data)) as Record<string, unknown> },
    text: generation.text,
    ...(generation.generationInfo === undefined ? {} : { generationInfo: generation.generationInfo }),
    ...(result.llmOutput === undefined ? {} : { llmOutput: result.llmOutput }),
  };
}

/** A recorded AI message from the thread's state, as its turn's record holds it (the record was lost: retention). */
export function recordMessage(message: AIMessage): RecordedTurn {
  return {
    message: {
      type: "ai",
      data: JSON.parse(JSON.stringify(message.toDict().data)) as Record<string, unknown>,
    },
    text: message.text,
  };
}

/** A recorded turn as the chat model hands it back. */
export function replayResult(turn: RecordedTurn): ChatResult {
  return {
    generations: [
      {
        text: turn.text,
        message: new AIMessage(turn.message.data as ConstructorParameters<typeof AIMessage>[0] & object),
        ...(turn.generationInfo === undefined ? {} : { generationInfo: turn.generationInfo }),
      },
    ],
    ...(turn.llmOutput === undefined ? {} : { llmOutput: turn.llmOutput }),
  };
}

/** The tool calls a recorded turn made: their ids, tool names and arguments. */
export function toolCallsOf(turn: RecordedTurn): TurnToolCall[] {
  const calls = (turn.message.data.tool_calls ?? []) as { id?: string; name: string; args: unknown }[];
  return calls.flatMap((call) =>
    typeof call.id === "string" ? [{ toolCallId: call.id, toolName: call.name, input: call.args }] : [],
  );
}

/** The turn mark of a message of `task`, if it is an AI message a recorded turn of that task produced. */
export function markOf(message: BaseMessage, task: string): (TurnMark & { id: string }) | undefined {
  if (!AIMessage.isInstance(message)) return undefined;
  const mark = (message.response_metadata as { once?: Partial<TurnMark> } | undefined)?.once;
  if (mark?.task !== task || typeof mark.turn !== "number" || typeof message.id !== "string")
    return undefined;
  return { ...(mark as TurnMark), id: message.id };
}

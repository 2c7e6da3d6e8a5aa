import type { TurnRequest, TurnToolCall } from "@once/agent";
import type { LanguageModelMiddleware } from "ai";

// The AI SDK's own shapes, as its middleware hands them over (its provider types are not re-exported by `ai`).
type WrapGenerate = NonNullable<LanguageModelMiddleware["wrapGenerate"]>;
type WrapStream = NonNullable<LanguageModelMiddleware["wrapStream"]>;
export type ModelCallParams = Parameters<WrapGenerate>[0]["params"];
export type ModelOfCall = Parameters<WrapGenerate>[0]["model"];
export type GenerateResult = Awaited<ReturnType<WrapGenerate>>;
export type StreamResult = Awaited<ReturnType<WrapStream>>;
export type StreamPart = StreamResult["stream"] extends ReadableStream<infer Part> ? Part : never;

/** How a turn was asked: `generateText` calls `doGenerate`, `streamText` calls `doStream`. */
export type TurnMode = "generate" | "stream";

/** What a model turn's record holds: the response, as JSON, replayable in the mode it was asked in. */
export type RecordedTurn =
  | { mode: "generate"; response: GenerateResult }
  | { mode: "stream"; parts: StreamPart[] };

/**
 * What the turn's fingerprint covers: the model and everything it was asked, but not the tools (a changed tool
 * set is checked against the recorded calls instead, naming the tool), nor what travels per request (signal,
 * headers, raw-chunk switch).
 */
export function turnRequest(mode: TurnMode, model: ModelOfCall, params: ModelCallParams): TurnRequest {
  const { tools: _tools, abortSignal: _signal, headers: _headers, includeRawChunks: _raw, ...asked } = params;
  return { mode, provider: model.provider, modelId: model.modelId, asked };
}

/** A generate result as stored: the response the loop needs, without raw HTTP bodies. */
export function recordGenerate(result: GenerateResult): RecordedTurn {
  const { request: _request, response, ...kept } = result;
  const metadata = response === undefined ? undefined : { ...response, body: undefined, headers: undefined };
  return { mode: "generate", response: { ...kept, ...(metadata ? { response: metadata } : {}) } };
}

/** Reads a whole model stream, so the turn is recorded before any of its tool calls can go out. */
export async function recordStream(stream: ReadableStream<StreamPart>): Promise<RecordedTurn> {
  const parts: StreamPart[] = [];
  for await (const part of stream) {
    // The stream said the call failed: nothing to record, and the turn is asked again.
    if (part.type === "error") throw part.error;
    if (part.type !== "raw") parts.push(part);
  }
  return { mode: "stream", parts };
}

/** A recorded generate result, as the SDK expects it back (JSON turned its Dates into strings). */
export function replayGenerate(turn: RecordedTurn & { mode: "generate" }): GenerateResult {
  const { response } = turn;
  const timestamp = response.response?.timestamp;
  return timestamp === undefined
    ? response
    : { ...response, response: { ...response.response, timestamp: new Date(timestamp) } };
}

/** A recorded stream, emitted again part by part. */
export function replayStream(turn: RecordedTurn & { mode: "stream" }): StreamResult {
  const parts = turn.parts.map((part) =>
    part.type === "response-metadata" && part.timestamp !== undefined
      ? { ...part, timestamp: new Date(part.timestamp) }
      : part,
  );
  return {
    stream: new ReadableStream<StreamPart>({
      start(controller) {
        for (const part of parts) controller.enqueue(part);
        controller.close();
      },
    }),
  };
}

/** The tool calls a turn made: their ids, tool names and inputs (parsed from the JSON text the model wrote). */
export function toolCallsOf(turn: RecordedTurn): TurnToolCall[] {
  const parts: readonly unknown[] = turn.mode === "generate" ? turn.response.content : turn.parts;
  const calls: TurnToolCall[] = [];
  for (const part of parts as { type?: string; toolCallId?: string; toolName?: string; input?: unknown }[]) {
    if (part.type === "tool-call" && typeof part.toolCallId === "string" && typeof part.toolName === "string")
      calls.push({ toolCallId: part.toolCallId, toolName: part.toolName, input: parsedInput(part.input) });
  }
  return calls;
}

/**
 * The ids of the tool calls a prompt's history holds: a loop started from a saved message history goes on
 * after the recorded turn that made them (`AgentTask.continueAfter`).
 */
export function toolCallIdsOf(params: ModelCallParams): string[] {
  const ids: string[] = [];
  for (const message of params.prompt) {
    if (message.role !== "assistant") continue;
    for (const part of message.content) if (part.type === "tool-call") ids.push(part.toolCallId);
  }
  return ids;
}

/** Input text that is not JSON stays text: no tool's schema accepts it, and the SDK answers the model. */
function parsedInput(text: unknown): unknown {
  try {
    return JSON.parse(String(text ?? ""));
  } catch {
    return text;
  }
}

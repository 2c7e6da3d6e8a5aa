import type { TurnRequest, TurnToolCall } from "@once/agent";

/**
 * A language model as Mastra takes one from the AI SDK's provider spec (v2, v3 or v4: `specificationVersion`):
 * its two calls, with options and results as plain data. once reads only what all three versions share.
 */
export interface SpecLanguageModel {
  readonly specificationVersion: string;
  readonly provider: string;
  readonly modelId: string;
  // Each version's own option and result types: once passes the options through and reads the results as JSON.
  doGenerate(options: never): PromiseLike<unknown>;
  doStream(options: never): PromiseLike<{ stream: ReadableStream<unknown> }>;
}

/** A model call's options: the prompt and settings, the tools, and what travels per call (signal, headers). */
export type CallOptions = { abortSignal?: AbortSignal; [option: string]: unknown };
export type GenerateResult = {
  content: unknown[];
  response?: { timestamp?: unknown };
  [field: string]: unknown;
};
export type StreamPart = { type: string; [field: string]: unknown };

/** How a turn was asked: `doGenerate` or `doStream`. */
export type TurnMode = "generate" | "stream";

/** What a model turn's record holds: the response, as JSON, replayable in the mode it was asked in. */
export type RecordedTurn =
  | { mode: "generate"; response: GenerateResult }
  | { mode: "stream"; parts: StreamPart[] };

/**
 * What the turn's fingerprint covers: the model and everything it was asked, but not the tools (a changed tool
 * set is checked against the recorded calls instead, naming the tool), nor what travels per call (the signal,
 * headers, the raw-chunk switch, Mastra's own marks on the prompt).
 */
export function turnRequest(mode: TurnMode, model: SpecLanguageModel, options: CallOptions): TurnRequest {
  const {
    tools: _tools,
    abortSignal: _signal,
    headers: _headers,
    includeRawChunks: _raw,
    ...asked
  } = options;
  return { mode, provider: model.provider, modelId: model.modelId, asked: withoutMastraOptions(asked) };
}

/**
 * The call as the provider sees it: Mastra marks each message part it sends with options of its own
 * (`providerOptions.mastra`, its creation time among them), which no provider reads and no two runs share.
 */
function withoutMastraOptions(asked: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(
    JSON.stringify(asked, (key, value: unknown) => {
      if (key !== "providerOptions" || typeof value !== "object" || value === null) return value;
      const { mastra: _mastra, ...others } = value as Record<string, unknown>;
      return Object.keys(others).length > 0 ? others : undefined;
    }),
  ) as Record<string, unknown>;
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

/** A recorded generate result, as the loop expects it back (JSON turned its Date into a string). */
export function replayGenerate(turn: RecordedTurn & { mode: "generate" }): GenerateResult {
  const { response } = turn;
  const timestamp = response.response?.timestamp;
  return typeof timestamp === "string"
    ? { ...response, response: { ...response.response, timestamp: new Date(timestamp) } }
    : response;
}

/** A recorded stream, emitted again part by part. */
export function replayStream(turn: RecordedTurn & { mode: "stream" }): {
  stream: ReadableStream<StreamPart>;
} {
  const parts = turn.parts.map((part) =>
    part.type === "response-metadata" && typeof part.timestamp === "string"
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
  const parts = (turn.mode === "generate" ? turn.response.content : turn.parts) as {
    type?: string;
    toolCallId?: unknown;
    toolName?: unknown;
    input?: unknown;
  }[];
  const calls: TurnToolCall[] = [];
  for (const part of parts) {
    if (part.type === "tool-call" && typeof part.toolCallId === "string" && typeof part.toolName === "string")
      calls.push({ toolCallId: part.toolCallId, toolName: part.toolName, input: parsedInput(part.input) });
  }
  return calls;
}

/** Input text that is not JSON stays text: no tool's schema accepts it, and Mastra answers the model. */
function parsedInput(text: unknown): unknown {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The ids of the tool calls a model call's prompt holds: a run Mastra resumed from its snapshot in another
 * process goes on after the recorded turn that made them (`AgentTask.continueAfter`).
 */
export function toolCallIdsOf(options: CallOptions): string[] {
  const ids: string[] = [];
  const prompt = Array.isArray(options.prompt) ? (options.prompt as unknown[]) : [];
  for (const message of prompt) {
    const { role, content } = message as { role?: unknown; content?: unknown };
    if (role !== "assistant" || !Array.isArray(content)) continue;
    for (const part of content as { type?: unknown; toolCallId?: unknown }[])
      if (part.type === "tool-call" && typeof part.toolCallId === "string") ids.push(part.toolCallId);
  }
  return ids;
}

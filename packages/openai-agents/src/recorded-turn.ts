import type { TurnRequest, TurnToolCall } from "@once/agent";
import { type ModelRequest, type ModelResponse, type StreamEvent, Usage } from "@openai/agents";

/** How a turn was asked: `run(agent, input)` calls `getResponse`, `run(…, { stream: true })` `getStreamedResponse`. */
export type TurnMode = "response" | "stream";

/** What a model turn's record holds: the response, as JSON, replayable in the mode it was asked in. */
export type RecordedTurn =
  | { mode: "response"; response: ModelResponse }
  | { mode: "stream"; events: StreamEvent[] };

/**
 * What the turn's fingerprint covers: the model and everything it was asked (instructions, input items,
 * settings, output type, prompt, previous response or conversation), but not the tools and handoffs (a
 * changed tool set is checked against the recorded calls instead, naming the tool), nor what travels per
 * request: the signal, the tracing switch, the runner's own bookkeeping (`_internal`), and the settings the
 * SDK calls runtime-only (`retry`, `timeoutMs`).
 */
export function turnRequest(
  mode: TurnMode,
  model: { provider: string; modelId: string },
  request: ModelRequest,
): TurnRequest {
  const {
    signal: _signal,
    tracing: _tracing,
    tools: _tools,
    toolsExplicitlyProvided: _explicit,
    handoffs: _handoffs,
    modelSettings: { retry: _retry, timeoutMs: _timeout, ...settings },
    ...asked
  } = request;
  const { _internal: _runner, ...kept } = asked as typeof asked & { _internal?: unknown };
  return { mode, ...model, asked: { ...kept, modelSettings: settings } };
}

/** Reads a whole model stream, so the turn is recorded before any of its tool calls can go out. */
export async function recordStream(stream: AsyncIterable<StreamEvent>): Promise<RecordedTurn> {
  const events: StreamEvent[] = [];
  // The provider's raw events (`type: "model"`) are its transport, not the response: kept out of the record,
  // and so out of the stream the runner sees, on the first run as on a replay.
  for await (const event of stream) if (event.type !== "model") events.push(event);
  // A stream that ended without its response is a failed call: nothing to record, and the turn is asked again.
  if (!events.some((event) => event.type === "response_done"))
    throw new Error("the model's stream ended without a response_done event");
  return { mode: "stream", events };
}

/** A recorded response, as the runner expects it back (JSON turned its `Usage` into a plain object). */
export function replayResponse(turn: RecordedTurn & { mode: "response" }): ModelResponse {
  return { ...turn.response, usage: new Usage(turn.response.usage) };
}

/**
 * The function calls a turn made: their ids, the once tools' names (the SDK turns a name's `.` and `-` into
 * `_`: `onceName` maps them back) and inputs (parsed from the JSON text the model wrote).
 */
export function toolCallsOf(onceName: ReadonlyMap<string, string>) {
  return (turn: RecordedTurn): TurnToolCall[] => {
    const output =
      turn.mode === "response"
        ? turn.response.output
        : turn.events.flatMap((event) => (event.type === "response_done" ? event.response.output : []));
    const calls: TurnToolCall[] = [];
    for (const item of output) {
      if (item.type === "function_call")
        calls.push({
          toolCallId: item.callId,
          toolName: onceName.get(item.name) ?? item.name,
          input: parsedInput(item.arguments),
        });
    }
    return calls;
  };
}

/** Arguments that are not JSON stay text: no tool's schema accepts them, and the SDK answers the model. */
function parsedInput(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The ids of the function calls a request's history holds: a run resumed from a saved run state goes on after
 * the recorded turn that made them (`AgentTask.continueAfter`).
 */
export function callIdsOf(request: ModelRequest): string[] {
  if (typeof request.input === "string") return [];
  return request.input.flatMap((item) => (item.type === "function_call" ? [item.callId] : []));
}

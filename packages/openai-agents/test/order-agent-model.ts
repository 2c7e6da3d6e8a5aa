// A model scripted as an order agent, implementing the OpenAI Agents SDK's own `Model` interface: read the
// order, then charge and email a receipt (two calls in one turn), then set the status, then answer.
// Nondeterministic on purpose, as a real model is: asked the same prompt again it charges another amount and
// gives its calls new ids. It counts every call it answers, so a test can tell a replayed turn (not asked)
// from one asked again.

import { type Model, type ModelRequest, type ModelResponse, type StreamEvent, Usage } from "@openai/agents";
import { assistantMessage, functionCall } from "@openai/agents/testing";

export interface OrderAgentModelOptions {
  latencyMs?: () => number;
  /** Called as each call is answered, with the turn it answers. */
  answering?: (turn: number) => Promise<void> | void;
  /** The amount it charges. Default: another one every time it is asked. */
  amount?: () => number;
}

const randomId = (prefix: string) => `${prefix}_${Math.random().toString(36).slice(2, 10)}`;

/** Which turn of the order agent a request asks for: 0 read, 1 charge and email, 2 set status, 3 answer. */
export function turnOf(request: ModelRequest): number {
  const input = typeof request.input === "string" ? [] : request.input;
  const results = input.filter((item) => item.type === "function_call_result").length;
  return [0, 1, 1, 2, 3][results] ?? 3;
}

export class OrderAgentModel implements Model {
  #answered = 0;

  constructor(
    readonly orderId: string,
    readonly options: OrderAgentModelOptions = {},
  ) {}

  /** Calls answered (plain and streamed). */
  calls(): number {
    return this.#answered;
  }

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const turn = turnOf(request);
    const ms = this.options.latencyMs?.() ?? 0;
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
    await this.options.answering?.(turn);
    this.#answered++;
    return this.#respond(turn);
  }

  async *getStreamedResponse(request: ModelRequest): AsyncIterable<StreamEvent> {
    const { output, usage, responseId } = await this.getResponse(request);
    yield { type: "response_started" };
    for (const item of output) {
      if (item.type === "message" && item.role === "assistant")
        for (const part of item.content)
          if (part.type === "output_text") yield { type: "output_text_delta", delta: part.text };
    }
    yield { type: "model", event: { type: "raw.provider.event" } };
    // The stream's items are the protocol's output items, which a ModelResponse's (wider) type does not narrow to.
    const items = output as Extract<StreamEvent, { type: "response_done" }>["response"]["output"];
    yield { type: "response_done", response: { id: responseId ?? randomId("resp"), usage, output: items } };
  }

  #respond(turn: number): ModelResponse {
    const { orderId } = this;
    const call = (name: string, input: Record<string, unknown>) =>
      functionCall(name, input, { callId: randomId("call") });
    const amount = this.options.amount?.() ?? 1_000 + Math.floor(Math.random() * 9_000);
    const output =
      turn === 0
        ? [call("get_order_status", { orderId })]
        : turn === 1
          ? [
              call("charge_customer", { orderId, amount, currency: "eur" }),
              call("send_email", {
                orderId,
                to: "customer@example.com",
                subject: "Your receipt",
                body: `We charged ${amount} cents.`,
              }),
            ]
          : turn === 2
            ? [call("set_status", { orderId, status: "paid" })]
            : [assistantMessage(`order ${orderId} is paid`)];
    return {
      output,
      usage: new Usage({ requests: 1, inputTokens: 100, outputTokens: 20 }),
      responseId: randomId("resp"),
    };
  }
}

// A model scripted as an order agent, on the AI SDK's own MockLanguageModelV4: read the order, then charge and
// email a receipt (two calls in one turn), then set the status, then answer. Nondeterministic on purpose, as a
// real model is: asked the same prompt again it charges another amount and gives its calls new ids. It counts
// every call it answers, so a test can tell a replayed turn (not asked) from one asked again.

import { MockLanguageModelV4 } from "ai/test";

type Call = MockLanguageModelV4["doGenerateCalls"][number];
type Result = Awaited<ReturnType<MockLanguageModelV4["doGenerate"]>>;

export interface OrderAgentModel {
  readonly model: MockLanguageModelV4;
  /** Calls answered (generate and stream). */
  calls(): number;
}

const usage = { inputTokens: { total: 100 }, outputTokens: { total: 20 } } as Result["usage"];

function toolCall(toolName: string, input: unknown): Result["content"][number] {
  return {
    type: "tool-call",
    toolCallId: `call_${Math.random().toString(36).slice(2, 10)}`,
    toolName,
    input: JSON.stringify(input),
  } as Result["content"][number];
}

/** The next response, from how many tool results the prompt already holds. */
function respond(call: Call, orderId: string): Result {
  const results = call.prompt.flatMap((m) => (m.role === "tool" ? m.content : [])).length;
  const amount = 1_000 + Math.floor(Math.random() * 9_000); // another amount every time it is asked
  const content =
    results === 0
      ? [toolCall("get_order", { orderId })]
      : results === 1
        ? [
            toolCall("charge_customer", { orderId, amount }),
            toolCall("send_email", { orderId, template: "receipt" }),
          ]
        : results === 3
          ? [toolCall("set_status", { orderId, status: "paid" })]
          : [{ type: "text", text: `order ${orderId} is paid` } as Result["content"][number]];
  const finish = content[0]?.type === "tool-call" ? "tool-calls" : "stop";
  return {
    content,
    finishReason: { unified: finish, raw: finish },
    usage,
    warnings: [],
    response: {
      id: `resp_${Math.random().toString(36).slice(2, 8)}`,
      modelId: "order-agent",
      timestamp: new Date(),
    },
  } as Result;
}

export interface OrderAgentModelOptions {
  latencyMs?: () => number;
  /** Called as each call is answered, with the turn it answers. */
  answering?: (turn: number) => Promise<void> | void;
}

/** Which turn of the order agent a prompt asks for: 0 read, 1 charge and email, 2 set status, 3 answer. */
export function turnOf(call: Call): number {
  const results = call.prompt.flatMap((m) => (m.role === "tool" ? m.content : [])).length;
  return [0, 1, 1, 2, 3][results] ?? 3;
}

export function orderAgentModel(orderId: string, options: OrderAgentModelOptions = {}): OrderAgentModel {
  let answered = 0;
  const wait = async () => {
    const ms = options.latencyMs?.() ?? 0;
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  };
  const model = new MockLanguageModelV4({
    provider: "mock",
    modelId: "order-agent",
    doGenerate: async (call) => {
      await wait();
      await options.answering?.(turnOf(call));
      answered++;
      return respond(call, orderId);
    },
    doStream: async (call) => {
      await wait();
      await options.answering?.(turnOf(call));
      answered++;
      const { content, finishReason, usage: used } = respond(call, orderId);
      const parts: unknown[] = [
        { type: "stream-start", warnings: [] },
        ...content.flatMap((part, i): unknown[] =>
          part.type === "text"
            ? [
                { type: "text-start", id: `t${i}` },
                { type: "text-delta", id: `t${i}`, delta: part.text },
                { type: "text-end", id: `t${i}` },
              ]
            : [part],
        ),
        { type: "finish", finishReason, usage: used },
      ];
      return {
        stream: new ReadableStream<unknown>({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }),
      } as unknown as Awaited<ReturnType<MockLanguageModelV4["doStream"]>>;
    },
  });
  return { model, calls: () => answered };
}

// A model scripted as the order agent, on the AI SDK's own MockLanguageModelV4, calling `orderAgentTools`:
// read the order (get_order_status), then charge it and email the receipt (two calls in one turn), then mark
// it paid (set_status), then answer. Nondeterministic on purpose, as a real model is: asked the same prompt
// again it charges another amount and gives its calls new ids, so a loop that asks again makes new calls. It
// counts every call it answers, so a test can tell a replayed turn (not asked) from one asked again.

import { MockLanguageModelV4 } from "ai/test";

type Call = MockLanguageModelV4["doGenerateCalls"][number];
type Result = Awaited<ReturnType<MockLanguageModelV4["doGenerate"]>>;
type Content = Result["content"][number];

export interface OrderAgentModel {
  readonly model: MockLanguageModelV4;
  /** Calls answered (generate and stream). */
  calls(): number;
}

export interface OrderAgentModelOptions {
  /** How long each answer takes, drawn per call (default: at once). */
  latencyMs?: () => number;
  /** Called as each call is answered, after its latency, with the turn it answers. */
  answering?: (turn: number) => Promise<void> | void;
}

/** The prompt of one model call, as the model receives it. */
export type OrderAgentPrompt = Call["prompt"];

const usage = { inputTokens: { total: 100 }, outputTokens: { total: 20 } } as Result["usage"];

/** A model's latency, heavy-tailed as a real one's: mostly 5–25 ms, one call in ten about ten times slower. */
export function modelLatencyMs(): number {
  return Math.random() < 0.9 ? 5 + Math.random() * 20 : 100 + Math.random() * 200;
}

function toolResults(prompt: OrderAgentPrompt) {
  return prompt.flatMap((message) => (message.role === "tool" ? message.content : []));
}

/** Which turn of the order agent a prompt asks for: 0 read, 1 charge and email, 2 set status, 3 answer. */
export function orderAgentTurn(prompt: OrderAgentPrompt): number {
  return [0, 1, 1, 2, 3][toolResults(prompt).length] ?? 3;
}

function toolCall(toolName: string, input: unknown): Content {
  return {
    type: "tool-call",
    toolCallId: `call_${Math.random().toString(36).slice(2, 10)}`,
    toolName,
    input: JSON.stringify(input),
  } as Content;
}

/** The customer's email, as get_order_status returned it in the prompt (a model reads its tool results). */
function customerEmail(prompt: OrderAgentPrompt): string {
  for (const part of toolResults(prompt)) {
    if (part.type !== "tool-result" || part.toolName !== "get_order_status" || part.output.type !== "json")
      continue;
    const email = (part.output.value as { email?: unknown } | null)?.email;
    if (typeof email === "string") return email;
  }
  return "customer@example.com";
}

/** The next response, from how many tool results the prompt already holds. */
function respond(call: Call, orderId: string): Result {
  const turn = orderAgentTurn(call.prompt);
  const amount = 1_000 + Math.floor(Math.random() * 9_000); // another amount every time it is asked
  const content =
    turn === 0
      ? [toolCall("get_order_status", { orderId })]
      : turn === 1
        ? [
            toolCall("charge_customer", { orderId, amount, currency: "eur" }),
            toolCall("send_email", {
              orderId,
              to: customerEmail(call.prompt),
              subject: `Receipt for ${orderId}`,
              body: `We charged ${(amount / 100).toFixed(2)} EUR for your order.`,
            }),
          ]
        : turn === 2
          ? [toolCall("set_status", { orderId, status: "paid" })]
          : [{ type: "text", text: `order ${orderId} is paid` } as Content];
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

/** The order agent's model for one order. */
export function orderAgentModel(orderId: string, options: OrderAgentModelOptions = {}): OrderAgentModel {
  let answered = 0;
  const answer = async (call: Call) => {
    const ms = options.latencyMs?.() ?? 0;
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
    await options.answering?.(orderAgentTurn(call.prompt));
    answered++;
    return respond(call, orderId);
  };
  const model = new MockLanguageModelV4({
    provider: "mock",
    modelId: "order-agent",
    doGenerate: answer,
    doStream: async (call) => {
      const { content, finishReason, usage: used } = await answer(call);
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

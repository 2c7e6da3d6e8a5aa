// A language model scripted as the order agent, on Mastra's own mock (`MastraLanguageModelV2Mock`): read the
// order, then charge it and email the receipt (two calls in one turn), then mark it paid, then answer.
// Nondeterministic on purpose, as a real model is: asked the same prompt again it charges another amount and
// gives its calls new ids. It counts every call it answers, so a test can tell a replayed turn (not asked) from
// one asked again.

import { MastraLanguageModelV2Mock } from "@mastra/core/test-utils/llm-mock";

export interface OrderAgentModelOptions {
  /** How long each answer takes, drawn per call (default: at once). */
  latencyMs?: () => number;
  /** Called as each call is answered, after its latency, with the turn it answers. */
  answering?: (turn: number) => Promise<void> | void;
  /** The amount it charges. Default: another one every time it is asked. */
  amount?: () => number;
}

type CallOptions = Parameters<MastraLanguageModelV2Mock["doStream"]>[0];

/** Which turn of the order agent a prompt asks for: 0 read, 1 charge and email, 2 set status, 3 answer. */
export function orderAgentTurn(prompt: CallOptions["prompt"]): number {
  const results = prompt.flatMap((message) =>
    message.role === "tool" ? message.content.filter((part) => part.type === "tool-result") : [],
  ).length;
  return [0, 1, 1, 2, 3][results] ?? 3;
}

const randomId = (prefix: string) => `${prefix}_${Math.random().toString(36).slice(2, 10)}`;

export interface OrderAgentModel {
  readonly model: MastraLanguageModelV2Mock;
  /** Calls answered (generate and stream). */
  answers(): number;
}

export function orderAgentModel(orderId: string, options: OrderAgentModelOptions = {}): OrderAgentModel {
  let answered = 0;
  const respond = async (call: CallOptions) => {
    const ms = options.latencyMs?.() ?? 0;
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
    const turn = orderAgentTurn(call.prompt);
    await options.answering?.(turn);
    answered++;
    const amount = options.amount?.() ?? 1_000 + Math.floor(Math.random() * 9_000);
    const toolCall = (toolName: string, input: unknown) => ({
      type: "tool-call" as const,
      toolCallId: randomId("call"),
      toolName,
      input: JSON.stringify(input),
    });
    const content =
      turn === 0
        ? [toolCall("get_order_status", { orderId })]
        : turn === 1
          ? [
              toolCall("charge_customer", { orderId, amount, currency: "eur" }),
              toolCall("send_email", {
                orderId,
                to: "customer@example.com",
                subject: `Receipt for ${orderId}`,
                body: `We charged ${(amount / 100).toFixed(2)} EUR for your order.`,
              }),
            ]
          : turn === 2
            ? [toolCall("set_status", { orderId, status: "paid" })]
            : [{ type: "text" as const, text: `order ${orderId} is paid` }];
    return { content, finishReason: content[0]?.type === "tool-call" ? "tool-calls" : "stop" } as const;
  };
  const usage = { inputTokens: 100, outputTokens: 20, totalTokens: 120 };
  const model = new MastraLanguageModelV2Mock({
    provider: "mock",
    modelId: "order-agent",
    doGenerate: async (call) => {
      const { content, finishReason } = await respond(call);
      return { content, finishReason, usage, warnings: [] };
    },
    doStream: async (call) => {
      const { content, finishReason } = await respond(call);
      const parts: unknown[] = [
        { type: "stream-start" as const, warnings: [] },
        {
          type: "response-metadata" as const,
          id: randomId("resp"),
          modelId: "order-agent",
          timestamp: new Date(),
        },
        ...content.flatMap((part, i): unknown[] =>
          part.type === "text"
            ? [
                { type: "text-start" as const, id: `t${i}` },
                { type: "text-delta" as const, id: `t${i}`, delta: part.text },
                { type: "text-end" as const, id: `t${i}` },
              ]
            : [part],
        ),
        { type: "finish" as const, finishReason, usage },
      ];
      return {
        stream: new ReadableStream<never>({
          start(controller) {
            for (const part of parts) controller.enqueue(part as never);
            controller.close();
          },
        }),
      };
    },
  });
  return { model, answers: () => answered };
}

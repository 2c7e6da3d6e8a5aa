// A chat model scripted as the order agent, on LangChain's own fake model (`FakeBuiltModel`, what `fakeModel()`
// builds): read the order, then charge it and email the receipt (two calls in one turn), then mark it paid,
// then answer. Nondeterministic on purpose, as a real model is: asked the same prompt again it charges another
// amount and gives its calls new ids. It counts every call it answers, so a test can tell a replayed turn (not
// asked) from one asked again.

import type { BaseMessage } from "@langchain/core/messages";
import { AIMessage } from "@langchain/core/messages";
import { FakeBuiltModel } from "@langchain/core/testing";

export interface OrderAgentModelOptions {
  /** How long each answer takes, drawn per call (default: at once). */
  latencyMs?: () => number;
  /** Called as each call is answered, after its latency, with the turn it answers. */
  answering?: (turn: number) => Promise<void> | void;
  /** The amount it charges. Default: another one every time it is asked. */
  amount?: () => number;
}

/** Which turn of the order agent a prompt asks for: 0 read, 1 charge and email, 2 set status, 3 answer. */
export function orderAgentTurn(messages: readonly BaseMessage[]): number {
  const results = messages.filter((message) => message.getType() === "tool").length;
  return [0, 1, 1, 2, 3][results] ?? 3;
}

const randomId = (prefix: string) => `${prefix}_${Math.random().toString(36).slice(2, 10)}`;

export class OrderAgentChatModel extends FakeBuiltModel {
  #answered = 0;
  readonly #options: OrderAgentModelOptions;

  constructor(
    readonly orderId: string,
    options: OrderAgentModelOptions = {},
  ) {
    super();
    this.#options = options;
    // The fake model answers its queue in order, one entry per call: every entry is the script.
    for (let i = 0; i < 100; i++) this.respond((messages) => this.#respond(messages));
  }

  /** Calls answered. */
  answers(): number {
    return this.#answered;
  }

  override async _generate(...args: Parameters<FakeBuiltModel["_generate"]>) {
    const ms = this.#options.latencyMs?.() ?? 0;
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
    await this.#options.answering?.(orderAgentTurn(args[0]));
    this.#answered++;
    return super._generate(...args);
  }

  // The fake model's own bindTools answers from a copy of itself without the script's hooks; the script needs
  // no tool definitions, so it binds none.
  override bindTools(): ReturnType<FakeBuiltModel["bindTools"]> {
    return this.withConfig({}) as ReturnType<FakeBuiltModel["bindTools"]>;
  }

  #respond(messages: BaseMessage[]): AIMessage {
    const { orderId } = this;
    const turn = orderAgentTurn(messages);
    const amount = this.#options.amount?.() ?? 1_000 + Math.floor(Math.random() * 9_000);
    const call = (name: string, args: Record<string, unknown>) => ({
      id: randomId("call"),
      name,
      args,
      type: "tool_call" as const,
    });
    const tool_calls =
      turn === 0
        ? [call("get_order_status", { orderId })]
        : turn === 1
          ? [
              call("charge_customer", { orderId, amount, currency: "eur" }),
              call("send_email", {
                orderId,
                to: "customer@example.com",
                subject: `Receipt for ${orderId}`,
                body: `We charged ${(amount / 100).toFixed(2)} EUR for your order.`,
              }),
            ]
          : turn === 2
            ? [call("set_status", { orderId, status: "paid" })]
            : [];
    return new AIMessage({
      id: randomId("msg"),
      content: turn === 3 ? `order ${orderId} is paid` : "",
      tool_calls,
    });
  }
}

import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage, HumanMessage } from "@langchain/core/messages";
import { FakeBuiltModel } from "@langchain/core/testing";
import { type StructuredToolInterface, tool } from "@langchain/core/tools";
import { END, INTERRUPT, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { onceGraph } from "@once/langgraph";
import { runPlain } from "../plain-tools.js";
import { resendOnTimeout } from "../resend-on-timeout.js";
import type { AgentFramework } from "./framework.js";
import { modelLatency, scriptedAnswer, turnOf } from "./order-agent-script.js";

const turnOfMessages = (messages: readonly BaseMessage[]) =>
  turnOf(messages.filter((m) => m.getType() === "tool").length);

/** The order agent on LangChain's own fake chat model (`FakeBuiltModel`, what `fakeModel()` builds). */
class ScriptedChatModel extends FakeBuiltModel {
  constructor(
    readonly orderId: string,
    readonly answered: (turn: number) => Promise<void>,
  ) {
    super();
    for (let i = 0; i < 50; i++)
      this.respond((messages) => {
        const { calls, text } = scriptedAnswer(orderId, turnOfMessages(messages));
        return new AIMessage({
          content: text,
          tool_calls: calls.map((c) => ({
            id: c.id,
            name: c.name,
            args: c.input,
            type: "tool_call" as const,
          })),
        });
      });
  }

  override async _generate(...args: Parameters<FakeBuiltModel["_generate"]>) {
    await modelLatency();
    await this.answered(turnOfMessages(args[0]));
    return super._generate(...args);
  }

  // The fake's own bindTools answers from a copy without this script; the script needs no tool definitions.
  override bindTools(): ReturnType<FakeBuiltModel["bindTools"]> {
    return this.withConfig({}) as ReturnType<FakeBuiltModel["bindTools"]>;
  }
}

/**
 * LangGraph's own runtime: a StateGraph with a model node and LangGraph's ToolNode, on an in-memory
 * checkpointer, which a killed process loses — its thread starts over from the prompt. once through
 * `@once/langgraph`.
 */
export const langGraph: AgentFramework = {
  loop: "a LangGraph StateGraph (model node + ToolNode, MemorySaver)",
  async runTask(run) {
    const once =
      run.store &&
      onceGraph({ store: run.store, tools: run.tools, leaseMs: run.leaseMs, turnLeaseMs: run.leaseMs });
    const inner = new ScriptedChatModel(run.orderId, run.answered);
    const model: BaseChatModel = once ? once.model(inner, "order-agent") : inner;
    const tools: StructuredToolInterface[] =
      once?.tools ??
      run.tools.map(
        (declared) =>
          tool(
            (input: unknown, config: { toolCall?: { id?: string } }) =>
              runPlain(declared, run.taskId, config.toolCall?.id ?? "(none)", input),
            {
              name: declared.name,
              description: declared.description ?? declared.name,
              schema: declared.input as never,
            },
          ) as unknown as StructuredToolInterface,
      );
    for (const t of tools)
      t.invoke = resendOnTimeout(t.name, t.invoke.bind(t), run.resend) as typeof t.invoke;
    const bound = model.bindTools?.(tools);
    if (!bound) throw new Error("the model cannot bind tools");
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("model", async (state) => {
        const answer = await bound.invoke(state.messages);
        // The graph has taken this turn's answer (for once, after the turn was recorded).
        await run.taken(turnOfMessages(state.messages));
        return { messages: [answer] };
      })
      .addNode("tools", new ToolNode(tools))
      .addEdge(START, "model")
      .addConditionalEdges("model", (state) =>
        (state.messages.at(-1) as AIMessage).tool_calls?.length ? "tools" : END,
      )
      .addEdge("tools", "model")
      .compile({ checkpointer: new MemorySaver() });
    const result = await graph.invoke(
      { messages: [new HumanMessage(run.prompt)] },
      { configurable: { thread_id: run.taskId }, recursionLimit: 25 },
    );
    const interrupted = (result as { [INTERRUPT]?: { value: unknown }[] })[INTERRUPT];
    if (interrupted?.length)
      throw new Error(`the graph was interrupted: ${JSON.stringify(interrupted[0]?.value)}`);
  },
};

// The graphs the tests run, as a user writes them: a StateGraph with a model node and LangGraph's ToolNode, and
// langchain's createAgent, each on the once graph's model and tools.

import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { HumanMessage } from "@langchain/core/messages";
import type { StructuredToolInterface } from "@langchain/core/tools";
import { type BaseCheckpointSaver, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { createAgent } from "langchain";

export const SYSTEM_PROMPT = "You settle orders: read the order, charge it, email the receipt, mark it paid.";
export const PROMPT = "Settle the order.";
export const input = () => ({ messages: [new HumanMessage(PROMPT)] });

/** A ReAct graph: the model node asks the model with the system prompt, the tool node runs its calls. */
export function reactGraph(
  model: BaseChatModel,
  tools: StructuredToolInterface[],
  checkpointer: BaseCheckpointSaver,
  systemPrompt = SYSTEM_PROMPT,
) {
  const bound = model.bindTools?.(tools);
  if (!bound) throw new Error("the model cannot bind tools");
  return new StateGraph(MessagesAnnotation)
    .addNode("model", async (state) => ({
      messages: [await bound.invoke([{ role: "system", content: systemPrompt }, ...state.messages])],
    }))
    .addNode("tools", new ToolNode(tools))
    .addEdge(START, "model")
    .addConditionalEdges("model", (state) => {
      const last = state.messages.at(-1) as { tool_calls?: unknown[] } | undefined;
      return last?.tool_calls?.length ? "tools" : END;
    })
    .addEdge("tools", "model")
    .compile({ checkpointer });
}

/** langchain's createAgent on the same model and tools. */
export function agentGraph(
  model: BaseChatModel,
  tools: StructuredToolInterface[],
  checkpointer: BaseCheckpointSaver,
  systemPrompt = SYSTEM_PROMPT,
) {
  return createAgent({ model, tools, checkpointer, systemPrompt });
}

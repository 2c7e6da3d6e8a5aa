import { AIMessage, type BaseMessage, HumanMessage, type ToolMessage } from "@langchain/core/messages";
import { type StructuredToolInterface, tool } from "@langchain/core/tools";
import {
  Command,
  END,
  entrypoint,
  INTERRUPT,
  interrupt,
  MemorySaver,
  MessagesAnnotation,
  START,
  StateGraph,
  task,
} from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import {
  type AnyTool,
  defineTool,
  IdempotencyConflictError,
  InvalidKeyPartError,
  InvalidToolError,
  TaskCancelledError,
} from "@once/core";
import { hookedOrderAgentTools, MemoryOrderBook, pendingOrder } from "@once/order-agent";
import { PaymentsClient } from "@once/payments";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { onceGraph, RecordedTurnMismatchError } from "../src/index.js";
import { payments, store, useAgentWorld } from "./agent-world.js";
import { agentGraph, input, reactGraph, SYSTEM_PROMPT } from "./graphs.js";
import { OrderAgentChatModel } from "./order-agent-model.js";

useAgentWorld("langgraph");

let serial = 0;
const newOrder = () => `order-${process.pid}-${++serial}`;

async function ledger(orderId: string) {
  const client = new PaymentsClient(payments.url);
  return {
    charges: (await client.findCharges({ orderId })).length,
    emails: (await client.findEmails({ orderId })).length,
  };
}

async function orderTools(orderId: string) {
  const orders = new MemoryOrderBook();
  await orders.create(pendingOrder(orderId));
  return hookedOrderAgentTools(payments.url, orders);
}

/** Each AI message's tool calls, by tool name and input: the shape of a run. */
const transcript = (messages: BaseMessage[]) =>
  messages.flatMap((m) =>
    AIMessage.isInstance(m) ? [(m.tool_calls ?? []).map((c) => ({ tool: c.name, input: c.args }))] : [],
  );

const threadOf = (orderId: string) => ({ configurable: { thread_id: `thread-${orderId}` } });

describe.each([
  ["a StateGraph with LangGraph's ToolNode", reactGraph],
  ["langchain's createAgent", agentGraph],
] as const)("%s through onceGraph", (_name, build) => {
  /** One run of the graph in a fresh "process": a new once graph, model and saver (the old checkpoints lost). */
  async function runGraph(orderId: string, tools: AnyTool[], systemPrompt?: string) {
    const model = new OrderAgentChatModel(orderId);
    const once = onceGraph({ store, tools });
    const graph = build(once.model(model, "order-agent"), once.tools, new MemorySaver(), systemPrompt);
    const result = await graph.invoke(input(), threadOf(orderId));
    return { messages: result.messages as BaseMessage[], modelCalls: model.answers() };
  }

  it("charges once and emails once; the thread run again after its checkpoints were lost asks nothing, charges nothing", async () => {
    const orderId = newOrder();
    const tools = (await orderTools(orderId)).all;
    const first = await runGraph(orderId, tools);
    expect(first.modelCalls).toBe(4);
    expect(first.messages.at(-1)?.content).toBe(`order ${orderId} is paid`);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });

    const again = await runGraph(orderId, tools);
    expect(again.modelCalls).toBe(0);
    // The same calls, ids and amounts: the recorded turns, not new answers.
    expect(transcript(again.messages)).toEqual(transcript(first.messages));
    expect(again.messages.map((m) => m.id).filter((id) => id?.startsWith("msg_"))).toEqual(
      first.messages.map((m) => m.id).filter((id) => id?.startsWith("msg_")),
    );
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("a thread cancelled while the model answers: its calls are refused and told, and the next model call ends the run with TaskCancelledError", async () => {
    const orderId = newOrder();
    const tools = (await orderTools(orderId)).all;
    const taskId = threadOf(orderId).configurable.thread_id;
    const by = { by: "ops@example.com", why: "the order was withdrawn" };
    const model = new OrderAgentChatModel(orderId, {
      answering: async (turn) => {
        // Turn 1 charges and emails.
        if (turn === 1) await store.cancelTask({ taskId }, by);
      },
    });
    const once = onceGraph({ store, tools });
    const graph = build(once.model(model, "order-agent"), once.tools, new MemorySaver());
    const failed = await graph.invoke(input(), threadOf(orderId)).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(TaskCancelledError);
    expect(failed).toMatchObject({ taskId, ...by });
    expect(model.answers()).toBe(2);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 0 });
  });

  it("a changed system prompt for a recorded turn: IdempotencyConflictError naming the turn, nothing dispatched", async () => {
    const orderId = newOrder();
    const tools = (await orderTools(orderId)).all;
    await runGraph(orderId, tools);
    const resumed = runGraph(orderId, tools, `${SYSTEM_PROMPT} Be brief.`);
    await expect(resumed).rejects.toThrow(IdempotencyConflictError);
    await expect(resumed).rejects.toThrow(
      /^turn 0 of task "thread-order-[^"]+" \(its model or prompt differs/,
    );
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("resumed without a tool a recorded turn called: RecordedTurnMismatchError naming turn and tool", async () => {
    const orderId = newOrder();
    const tools = (await orderTools(orderId)).all;
    await runGraph(orderId, tools);
    const resumed = runGraph(
      orderId,
      tools.filter((t) => t.name !== "send_email"),
    );
    await expect(resumed).rejects.toThrow(RecordedTurnMismatchError);
    await expect(resumed).rejects.toThrow(
      /turn 1 of task .* called send_email, which is not among the tools given/,
    );
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("run without a thread id: InvalidKeyPartError naming it, the model not asked, nothing dispatched", async () => {
    const orderId = newOrder();
    const model = new OrderAgentChatModel(orderId);
    const once = onceGraph({ store, tools: (await orderTools(orderId)).all });
    const graph = build(once.model(model), once.tools, new MemorySaver());
    const failed = await graph.invoke(input(), { configurable: {} }).catch((error: unknown) => error);
    // LangGraph itself wants a thread id with a checkpointer; without one, once does.
    expect(String(failed)).toMatch(/thread_id/);
    const bare = build(once.model(model), once.tools, undefined as never);
    await expect(bare.invoke(input())).rejects.toThrow(InvalidKeyPartError);
    await expect(bare.invoke(input())).rejects.toThrow(
      /invalid taskId: once keys a graph's turns and calls by its thread/,
    );
    expect(model.answers()).toBe(0);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 0 });
  });

  it("a model that is not the once graph's: its tool calls were never recorded, the graph interrupts, nothing runs", async () => {
    const orderId = newOrder();
    const model = new OrderAgentChatModel(orderId);
    const once = onceGraph({ store, tools: (await orderTools(orderId)).all });
    const graph = build(model, once.tools, new MemorySaver());
    const result = await graph.invoke(input(), threadOf(orderId));
    const [stopped] = (result as { [INTERRUPT]?: { value: Record<string, unknown> }[] })[INTERRUPT] ?? [];
    expect(stopped?.value).toMatchObject({ once: "ONCE_UNRECORDED_TOOL_CALL", tool: "get_order_status" });
    expect(model.answers()).toBe(1);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 0 });
  });
});

/** The charge replaced by one that fails as `fail` says (no reconcile hook unless it brings one). */
function failingCharge(tools: AnyTool[], fail: Partial<AnyTool>): AnyTool[] {
  return tools.map((t) =>
    t.name === "charge_customer" ? defineTool({ ...t, reconcile: undefined, ...fail } as never) : t,
  );
}

describe("bad tools", () => {
  it("a LangChain tool handed in instead of a once tool: InvalidToolError, before the graph runs", () => {
    const plain = tool(async () => "ok", { name: "plain", description: "", schema: z.object({}) });
    expect(() => onceGraph({ store, tools: [plain as never] })).toThrow(InvalidToolError);
    expect(() => onceGraph({ store, tools: [plain as never] })).toThrow(
      /invalid tool "plain": is not a once tool: declare it with defineTool and a kind/,
    );
  });
});

describe("a failed tool call in the ToolNode", () => {
  it("a stored failure (a declined card) reaches the model, in the same words when the lost thread runs again", async () => {
    const orderId = newOrder();
    const declined = failingCharge((await orderTools(orderId)).all, {
      run: () => {
        throw new Error("card declined");
      },
      classifyError: () => "terminal",
    });
    const run = async () => {
      const model = new OrderAgentChatModel(orderId);
      const once = onceGraph({ store, tools: declined });
      const graph = reactGraph(once.model(model, "order-agent"), once.tools, new MemorySaver());
      const { messages } = await graph.invoke(input(), threadOf(orderId));
      const said = (messages as BaseMessage[]).filter(
        (m) => m.getType() === "tool" && m.name === "charge_customer",
      );
      return { said: said.map((m) => m.content), modelCalls: model.answers() };
    };
    const first = await run();
    expect(first.said).toEqual([
      expect.stringMatching(
        /^Error: charge_customer failed \(key [0-9a-f]{64}\): Error: card declined\n Please fix/,
      ),
    ]);
    expect(first.modelCalls).toBe(4);
    expect(await run()).toEqual({ ...first, modelCalls: 0 });
  });

  it("an outcome nobody knows interrupts the graph instead of telling the model; resumed, the call is reconciled: one charge", async () => {
    const orderId = newOrder();
    const client = new PaymentsClient(payments.url);
    let providerAnswers = false;
    const tools = failingCharge((await orderTools(orderId)).all, {
      // The charge goes through, and its answer is lost.
      run: async (input: never, ctx: never) => {
        const charge = (await orderTools(orderId)).chargeCustomer;
        await charge.run(input, ctx, undefined);
        throw new Error("socket hang up");
      },
      classifyError: () => "unknown",
      // Asking the provider whether it happened fails until it answers again.
      reconcile: async (_input: never, ctx: { key: string }) => {
        if (!providerAnswers) throw new Error("provider unreachable");
        const [charge] = await client.findCharges({ metadata: { once_key: ctx.key } });
        return charge
          ? {
              applied: true,
              result: { chargeId: charge.id, orderId, amount: charge.amount, currency: charge.currency },
            }
          : { applied: false };
      },
    } as never);
    const model = new OrderAgentChatModel(orderId);
    const once = onceGraph({ store, tools, leaseMs: 300 });
    const graph = reactGraph(once.model(model, "order-agent"), once.tools, new MemorySaver());
    const stopped = await graph.invoke(input(), threadOf(orderId));
    const [pending] = (stopped as { [INTERRUPT]?: { value: Record<string, unknown> }[] })[INTERRUPT] ?? [];
    expect(pending?.value).toMatchObject({ once: "ONCE_OUTCOME_UNKNOWN", tool: "charge_customer" });
    // The model was not told: turn 2 was never asked, and the checkpoint holds no answer of that tool node (the
    // email, run beside the charge, is done and stored).
    expect(model.answers()).toBe(2);
    const state = await graph.getState(threadOf(orderId));
    expect((state.values.messages as BaseMessage[]).filter((m) => m.getType() === "tool")).toHaveLength(1);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });

    providerAnswers = true;
    const resumed = await graph.invoke(new Command({ resume: "settled" }), threadOf(orderId));
    expect(resumed.messages.at(-1)?.content).toBe(`order ${orderId} is paid`);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    expect(model.answers()).toBe(4);
  });
});

describe("interrupt() and Command({ resume }) around once's effect tools", () => {
  it("a human approves the turn's calls before the tool node: resumed, each effect runs once", async () => {
    const orderId = newOrder();
    const model = new OrderAgentChatModel(orderId);
    const once = onceGraph({ store, tools: (await orderTools(orderId)).all });
    const bound = once.model(model, "order-agent").bindTools?.(once.tools);
    const tools = new ToolNode(once.tools);
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("model", async (state) => ({ messages: [await bound?.invoke(state.messages)] }))
      .addNode("approve", async (state) => {
        const last = state.messages.at(-1) as AIMessage;
        const effects = (last.tool_calls ?? []).filter((c) => c.name === "charge_customer");
        if (effects.length > 0 && interrupt({ approve: effects.map((c) => c.args) }) !== "yes")
          return { messages: [] };
        return tools.invoke(state);
      })
      .addEdge(START, "model")
      .addConditionalEdges("model", (state) =>
        (state.messages.at(-1) as AIMessage).tool_calls?.length ? "approve" : END,
      )
      .addEdge("approve", "model")
      .compile({ checkpointer: new MemorySaver() });

    const asked = await graph.invoke(input(), threadOf(orderId));
    expect((asked as { [INTERRUPT]?: unknown[] })[INTERRUPT]).toHaveLength(1);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 0 });
    const done = await graph.invoke(new Command({ resume: "yes" }), threadOf(orderId));
    expect(done.messages.at(-1)?.content).toBe(`order ${orderId} is paid`);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    expect(model.answers()).toBe(4);
  });

  it("a node that charges, then interrupts: resumed, the node runs again from its start and the charge replays", async () => {
    const orderId = newOrder();
    const model = new OrderAgentChatModel(orderId);
    const once = onceGraph({ store, tools: (await orderTools(orderId)).all });
    const bound = once.model(model, "order-agent").bindTools?.(once.tools);
    const byName = new Map(once.tools.map((t) => [t.name, t]));
    let charged = 0;
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("model", async (state) => ({ messages: [await bound?.invoke(state.messages)] }))
      .addNode("act", async (state, config) => {
        const last = state.messages.at(-1) as AIMessage;
        const answers: ToolMessage[] = [];
        for (const call of last.tool_calls ?? []) {
          const tool = byName.get(call.name) as StructuredToolInterface;
          answers.push(await tool.invoke({ ...call, type: "tool_call" }, { ...config, state } as never));
          // Confirm with a person after the charge went out: the node runs again when resumed.
          if (call.name === "charge_customer") {
            charged++;
            interrupt({ charged: call.args });
          }
        }
        return { messages: answers };
      })
      .addEdge(START, "model")
      .addConditionalEdges("model", (state) =>
        (state.messages.at(-1) as AIMessage).tool_calls?.length ? "act" : END,
      )
      .addEdge("act", "model")
      .compile({ checkpointer: new MemorySaver() });

    await graph.invoke(input(), threadOf(orderId));
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 0 });
    const done = await graph.invoke(new Command({ resume: "ok" }), threadOf(orderId));
    expect(done.messages.at(-1)?.content).toBe(`order ${orderId} is paid`);
    // The charge call ran twice in the graph (before and after the interrupt) and once at the provider.
    expect(charged).toBe(2);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    expect(model.answers()).toBe(4);
  });
});

describe("the functional API: entrypoint and once.task", () => {
  /** A ReAct loop in the functional API, as LangGraph's docs write it, its tasks made by `makeTask`. */
  function functionalAgent(
    orderId: string,
    tools: AnyTool[],
    fails: { email: boolean },
    plainModelTask = false,
  ) {
    const model = new OrderAgentChatModel(orderId);
    const once = onceGraph({ store, tools });
    const bound = once.model(model, "order-agent").bindTools?.(once.tools);
    const byName = new Map(once.tools.map((t) => [t.name, t]));
    const ask = async (messages: BaseMessage[]): Promise<BaseMessage> => {
      if (!bound) throw new Error("the model cannot bind tools");
      return bound.invoke(messages);
    };
    const callModel = plainModelTask ? task("callModel", ask) : once.task("callModel", ask);
    const callTool = once.task("callTool", async (call: { id: string; name: string; args: unknown }) => {
      if (call.name === "send_email" && fails.email) throw new Error("the mail relay is down");
      return (byName.get(call.name) as StructuredToolInterface).invoke({ ...call, type: "tool_call" });
    });
    const agent = entrypoint(
      { name: "agent", checkpointer: new MemorySaver() },
      async (messages: BaseMessage[]) => {
        let history = messages;
        let response = (await callModel(history)) as AIMessage;
        while (response.tool_calls?.length) {
          // One after the other: the email's failure must not abort the charge beside it.
          const results: BaseMessage[] = [];
          for (const call of response.tool_calls)
            results.push((await callTool(call as never)) as BaseMessage);
          history = [...history, response, ...results];
          response = (await callModel(history)) as AIMessage;
        }
        return response.content;
      },
    );
    return { agent, model };
  }

  it("a failed run resumed from its checkpoint: the tool task of a turn LangGraph answered from the checkpoint still has its step", async () => {
    const orderId = newOrder();
    const tools = (await orderTools(orderId)).all;
    const fails = { email: true };
    const { agent, model } = functionalAgent(orderId, tools, fails);
    const config = threadOf(orderId);
    await expect(agent.invoke([new HumanMessage("Settle the order.")], config)).rejects.toThrow(/mail relay/);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 0 });

    // Another process resumes the thread: LangGraph answers the model tasks and the charge from its checkpoint.
    fails.email = false;
    const { agent: resumed, model: again } = functionalAgent(orderId, tools, fails);
    // Same saver: the entrypoint of the first process holds it.
    const saver = (agent as unknown as { checkpointer: MemorySaver }).checkpointer;
    (resumed as unknown as { checkpointer: MemorySaver }).checkpointer = saver;
    expect(await resumed.invoke(null, config)).toBe(`order ${orderId} is paid`);
    expect(model.answers() + again.answers()).toBe(4);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("the model task made with LangGraph's own task: a resumed run cannot key the email, and interrupts", async () => {
    const orderId = newOrder();
    const tools = (await orderTools(orderId)).all;
    const fails = { email: true };
    const { agent } = functionalAgent(orderId, tools, fails, true);
    const config = threadOf(orderId);
    await expect(agent.invoke([new HumanMessage("Settle the order.")], config)).rejects.toThrow(/mail relay/);
    fails.email = false;
    const { agent: resumed } = functionalAgent(orderId, tools, fails, true);
    (resumed as unknown as { checkpointer: MemorySaver }).checkpointer = (
      agent as unknown as { checkpointer: MemorySaver }
    ).checkpointer;
    const result = await resumed.invoke(null, config);
    expect(JSON.stringify(result)).toMatch(/ONCE_UNRECORDED_TOOL_CALL/);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 0 });
  });
});

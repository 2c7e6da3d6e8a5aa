import {
  type AnyTool,
  defineTool,
  IdempotencyConflictError,
  InvalidToolError,
  OutcomeUnknownError,
} from "@once/core";
import { PaymentsClient } from "@once/payments";
import { type RunItem, Runner, run, ToolCallError, tool } from "@openai/agents";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { onceTask, RecordedTurnMismatchError, UnrecordedToolCallError } from "../src/index.js";
import { payments, store, useAgentWorld } from "./agent-world.js";
import { orderAgent, orderTools, PROMPT } from "./order-agent.js";
import { OrderAgentModel } from "./order-agent-model.js";

useAgentWorld("openai-agents");

let serial = 0;
const newOrder = () => `order-${process.pid}-${++serial}`;

async function ledger(orderId: string) {
  const client = new PaymentsClient(payments.url);
  return {
    charges: (await client.findCharges({ orderId })).length,
    emails: (await client.findEmails({ orderId })).length,
  };
}

/** One run of the agent as a user writes it, through the task's model and tools. */
async function runAgent(taskId: string, orderId: string, instructions?: string) {
  const model = new OrderAgentModel(orderId);
  const tools = await orderTools(payments.url, orderId);
  const task = onceTask({ taskId, store, tools: tools.all });
  const result = await run(orderAgent(task.model(model, "order-agent"), task.tools, instructions), PROMPT);
  return { output: result.finalOutput, items: result.newItems.length, modelCalls: model.calls() };
}

describe("onceTask with the SDK's runner", () => {
  it("a run charges once and emails once; run again with the same taskId, it asks nothing and charges nothing", async () => {
    const orderId = newOrder();
    const taskId = `task-${orderId}`;
    const first = await runAgent(taskId, orderId);
    expect(first).toMatchObject({ output: `order ${orderId} is paid`, modelCalls: 4 });
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });

    const again = await runAgent(taskId, orderId);
    expect(again).toEqual({ ...first, modelCalls: 0 });
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("a streamed run: each turn read to its end and recorded, then re-emitted, and on resume replayed", async () => {
    const orderId = newOrder();
    const taskId = `task-${orderId}`;
    const streamed = async () => {
      const model = new OrderAgentModel(orderId);
      const task = onceTask({ taskId, store, tools: (await orderTools(payments.url, orderId)).all });
      const result = await run(orderAgent(task.model(model, "order-agent"), task.tools), PROMPT, {
        stream: true,
      });
      let text = "";
      for await (const chunk of result.toTextStream()) text += chunk;
      await result.completed;
      return { output: result.finalOutput, text, modelCalls: model.calls() };
    };
    const first = await streamed();
    expect(first).toEqual({
      output: `order ${orderId} is paid`,
      text: `order ${orderId} is paid`,
      modelCalls: 4,
    });
    expect(await streamed()).toEqual({ ...first, modelCalls: 0 });
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("a Runner whose model provider is the task's: agents name their model, each turn is recorded", async () => {
    const orderId = newOrder();
    const taskId = `task-${orderId}`;
    const names: (string | undefined)[] = [];
    const viaProvider = async () => {
      const model = new OrderAgentModel(orderId);
      const task = onceTask({ taskId, store, tools: (await orderTools(payments.url, orderId)).all });
      const runner = new Runner({
        modelProvider: task.modelProvider({
          getModel: (name) => {
            names.push(name);
            return model;
          },
        }),
      });
      const agent = orderAgent(model, task.tools).clone({ model: "order-agent-v2" });
      const result = await runner.run(agent, PROMPT);
      return { output: result.finalOutput, modelCalls: model.calls() };
    };
    expect(await viaProvider()).toEqual({ output: `order ${orderId} is paid`, modelCalls: 4 });
    expect(await viaProvider()).toEqual({ output: `order ${orderId} is paid`, modelCalls: 0 });
    expect(new Set(names)).toEqual(new Set(["order-agent-v2"]));
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });
});

/** What the runner told the model each charge_customer call returned. */
const chargeOutputs = (result: { newItems: RunItem[] }) =>
  result.newItems.flatMap((item) =>
    item.type === "tool_call_output_item" &&
    item.rawItem.type === "function_call_result" &&
    item.rawItem.name === "charge_customer"
      ? [item.output]
      : [],
  );

describe("a failed tool call", () => {
  /** The order agent, its charge replaced by one that fails as `fail` says. */
  async function runFailing(
    taskId: string,
    orderId: string,
    fail: Pick<AnyTool, "run" | "classifyError">,
    model = new OrderAgentModel(orderId),
  ) {
    const tools = (await orderTools(payments.url, orderId)).all.map((t) =>
      t.name === "charge_customer" ? defineTool({ ...t, reconcile: undefined, ...fail } as never) : t,
    );
    const task = onceTask({ taskId, store, tools });
    const result = await run(orderAgent(task.model(model, "order-agent"), task.tools), PROMPT);
    return { output: result.finalOutput, said: chargeOutputs(result), modelCalls: model.calls() };
  }

  it("a stored failure (a declined card) reaches the model, in the same words when the run is resumed", async () => {
    const orderId = newOrder();
    const declined = {
      run: () => {
        throw new Error("card declined");
      },
      classifyError: () => "terminal" as const,
    };
    const first = await runFailing(`task-${orderId}`, orderId, declined);
    expect(first).toEqual({
      output: `order ${orderId} is paid`,
      said: ["charge_customer failed: Error: card declined"],
      modelCalls: 4,
    });
    // Resumed, the failure is replayed from the store: the next turn's prompt is the recorded one.
    expect(await runFailing(`task-${orderId}`, orderId, declined)).toEqual({ ...first, modelCalls: 0 });
  });

  it("an input the tool's schema refuses: the SDK's own answer reaches the model, the same on resume", async () => {
    const orderId = newOrder();
    const taskId = `task-${orderId}`;
    const refused = async () => {
      const model = new OrderAgentModel(orderId, { amount: () => -5 });
      const task = onceTask({ taskId, store, tools: (await orderTools(payments.url, orderId)).all });
      const result = await run(orderAgent(task.model(model, "order-agent"), task.tools), PROMPT);
      return { output: result.finalOutput, said: chargeOutputs(result), modelCalls: model.calls() };
    };
    const first = await refused();
    expect(first).toEqual({
      output: `order ${orderId} is paid`,
      said: ["An error occurred while running the tool. Please try again."],
      modelCalls: 4,
    });
    expect(await refused()).toEqual({ ...first, modelCalls: 0 });
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });
  });

  it("a call whose outcome nobody knows ends the run: the model is not told to try again under a new key", async () => {
    const orderId = newOrder();
    const lost = {
      run: () => {
        throw new Error("connection reset after the request was sent");
      },
      classifyError: () => "unknown" as const,
    };
    const model = new OrderAgentModel(orderId);
    const failed = await runFailing(`task-${orderId}`, orderId, lost, model).catch((error) => error);
    // The SDK wraps what a tool threw: the cause is once's own error, and the model was asked no further turn.
    expect(failed).toBeInstanceOf(ToolCallError);
    expect((failed as ToolCallError).error).toBeInstanceOf(OutcomeUnknownError);
    expect(model.calls()).toBe(2);
  });
});

describe("a resumed task that asks another thing, or was given bad input: a named error, nothing dispatched", () => {
  it("changed instructions for a recorded turn: IdempotencyConflictError naming the turn", async () => {
    const orderId = newOrder();
    const taskId = `task-${orderId}`;
    await runAgent(taskId, orderId);
    const resumed = runAgent(taskId, orderId, "You settle orders, and you are brief about it.");
    await expect(resumed).rejects.toThrow(IdempotencyConflictError);
    await expect(resumed).rejects.toThrow(/^turn 0 of task "task-order-[^"]+" \(its model or prompt differs/);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("a resumed task without a tool a recorded turn called: RecordedTurnMismatchError naming turn and tool", async () => {
    const orderId = newOrder();
    const taskId = `task-${orderId}`;
    await runAgent(taskId, orderId);
    const tools = (await orderTools(payments.url, orderId)).all.filter((t) => t.name !== "send_email");
    const task = onceTask({ taskId, store, tools });
    const resumed = run(
      orderAgent(task.model(new OrderAgentModel(orderId), "order-agent"), task.tools),
      PROMPT,
    );
    await expect(resumed).rejects.toThrow(RecordedTurnMismatchError);
    await expect(resumed).rejects.toThrow(
      /turn 1 of task .* called send_email, which is not among the tools given/,
    );
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("an agent whose model is not the task's: its tool calls were never recorded, UnrecordedToolCallError ends the run", async () => {
    const orderId = newOrder();
    const model = new OrderAgentModel(orderId);
    const task = onceTask({
      taskId: `task-${orderId}`,
      store,
      tools: (await orderTools(payments.url, orderId)).all,
    });
    const failed = await run(orderAgent(model, task.tools), PROMPT).catch((error) => error);
    expect(failed).toBeInstanceOf(ToolCallError);
    expect((failed as ToolCallError).error).toBeInstanceOf(UnrecordedToolCallError);
    expect(model.calls()).toBe(1);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 0 });
  });

  it("an SDK tool handed in instead of a once tool: InvalidToolError", () => {
    const plain = tool({ name: "plain", description: "", parameters: z.object({}), execute: () => "ok" });
    expect(() => onceTask({ taskId: "t", store, tools: [plain as never] })).toThrow(InvalidToolError);
    expect(() => onceTask({ taskId: "t", store, tools: [plain as never] })).toThrow(
      /invalid tool "plain": is not a once tool: declare it with defineTool and a kind/,
    );
  });

  it("a once tool whose input the SDK cannot take (not an object): InvalidToolError naming it", () => {
    const echo = defineTool({
      name: "echo",
      kind: "read",
      input: z.string(),
      output: z.string(),
      run: (text) => text,
    });
    expect(() => onceTask({ taskId: "t", store, tools: [echo] })).toThrow(
      /invalid tool "echo": the OpenAI Agents SDK cannot take its input schema: .*object/,
    );
  });

  it("two once tools the SDK would give one name: InvalidToolError", () => {
    const named = (name: string) =>
      defineTool({ name, kind: "read", input: z.object({}), output: z.object({}), run: () => ({}) });
    expect(() => onceTask({ taskId: "t", store, tools: [named("get.order"), named("get_order")] })).toThrow(
      /invalid tool "get_order": the OpenAI Agents SDK names it get_order, as it names get.order/,
    );
  });
});

// The AI SDK's loop through @once/ai's onceTask, with an MCP server's tools next to the task's own: the MCP
// calls go out as the steps of the recorded turns that made them, so a resumed loop sends the same steps and
// the server answers them from its store.

import { onceTask, UnrecordedToolCallError } from "@once/ai";
import { defineTool } from "@once/core";
import { PaymentsClient } from "@once/payments";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { expect, it } from "vitest";
import { z } from "zod";
import { onceMcpTools } from "../src/ai.js";
import { orderTools } from "./tools.js";
import { chargesOf, connect, payments, store, useMcpWorld } from "./world.js";

useMcpWorld("mcp-ai");

type Result = Awaited<ReturnType<MockLanguageModelV4["doGenerate"]>>;

/**
 * An order agent: read the order (MCP), charge it (MCP) and note it (the task's own tool) in one turn, mark it
 * paid (MCP), answer. Asked again it charges another amount under new call ids, as a real model may. It can
 * fail once at a given turn, as a process that died there would.
 */
function orderAgent(orderId: string, failAtTurn?: number) {
  let asked = 0;
  let failed = false;
  const call = (toolName: string, input: unknown) =>
    ({
      type: "tool-call",
      toolCallId: `call_${Math.random().toString(36).slice(2, 10)}`,
      toolName,
      input: JSON.stringify(input),
    }) as Result["content"][number];
  const model = new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const results = prompt.flatMap((m) => (m.role === "tool" ? m.content : [])).length;
      const turn = [0, 1, 1, 2, 3][results] ?? 3;
      if (turn === failAtTurn && !failed) {
        failed = true;
        throw new Error("the process died here");
      }
      asked++;
      const amount = 1_000 + Math.floor(Math.random() * 9_000);
      const content = [
        [call("get_order", { orderId })],
        [call("charge_customer", { orderId, amount }), call("note", { text: "charged" })],
        [call("set_status", { orderId, status: "paid" })],
        [{ type: "text", text: `order ${orderId} is paid` } as Result["content"][number]],
      ][turn] as Result["content"];
      const finish = turn < 3 ? "tool-calls" : "stop";
      return {
        content,
        finishReason: { unified: finish, raw: finish },
        usage: { inputTokens: { total: 10 }, outputTokens: { total: 5 } } as Result["usage"],
        warnings: [],
      } as Result;
    },
  });
  return { model, asked: () => asked };
}

const note = defineTool({
  name: "note",
  kind: "write",
  description: "Notes something about the task.",
  input: z.object({ text: z.string() }),
  output: z.object({ noted: z.boolean() }),
  run: () => ({ noted: true }),
});

async function runAgent(
  taskId: string,
  agent: ReturnType<typeof orderAgent>,
  tools = orderTools(payments.url),
) {
  const task = onceTask({ taskId, store, tools: [note] });
  const client = await connect(tools.all);
  const mcpTools = await onceMcpTools(client, task);
  return generateText({
    model: task.model(agent.model),
    tools: { ...task.tools, ...mcpTools },
    stopWhen: stepCountIs(10),
    maxRetries: 0,
    prompt: "Settle the order.",
  });
}

it("runs the loop with the MCP server's tools: one charge, the step of each call its recorded turn's", async () => {
  const orderId = `order-ai-${process.pid}-1`;
  const taskId = `task-${orderId}`;
  const result = await runAgent(taskId, orderAgent(orderId));
  expect(result.text).toBe(`order ${orderId} is paid`);
  expect(result.steps.map((step) => step.toolCalls.map((c) => c.toolName))).toEqual([
    ["get_order"],
    ["charge_customer", "note"],
    ["set_status"],
    [],
  ]);
  const charge = result.steps[1]?.toolResults.find((r) => r.toolName === "charge_customer");
  expect(charge?.output).toMatchObject({ structuredContent: { amount: expect.any(Number) } });
  expect(chargesOf(orderId)).toBe(1);
});

it("resumed after dying between turns: recorded turns replayed, the charge answered by the server's store", async () => {
  const orderId = `order-ai-${process.pid}-2`;
  const taskId = `task-${orderId}`;
  const tools = orderTools(payments.url);
  // Dies asking turn 2: turns 0 and 1 are recorded, and the charge of turn 1 was made.
  await expect(runAgent(taskId, orderAgent(orderId, 2), tools)).rejects.toThrow(/the process died here/);
  expect(chargesOf(orderId)).toBe(1);
  // The order now reads otherwise than when turn 0 read it: the recorded read is what the resumed loop sees.
  tools.statuses.set(orderId, "looked-at");

  const agent = orderAgent(orderId);
  const resumed = await runAgent(taskId, agent, tools);
  expect(resumed.text).toBe(`order ${orderId} is paid`);
  expect(agent.asked()).toBe(2); // turns 2 and 3 only
  expect(chargesOf(orderId)).toBe(1);
  const charged = resumed.steps[1]?.toolCalls.find((c) => c.toolName === "charge_customer");
  // The amount the resumed transcript says it charged is the one the provider charged.
  const [made] = await new PaymentsClient(payments.url).findCharges({ orderId });
  expect(charged?.input).toMatchObject({ amount: made?.amount });
});

it("an MCP tool called for a tool call no recorded turn made: refused before the server is called", async () => {
  const task = onceTask({ taskId: `task-unrecorded-${process.pid}`, store, tools: [note] });
  const client = await connect(orderTools(payments.url).all);
  const mcpTools = await onceMcpTools(client, task);
  const orderId = `order-ai-${process.pid}-3`;
  await expect(
    mcpTools.charge_customer?.execute?.(
      { orderId, amount: 5 },
      { toolCallId: "call_x", messages: [], context: {} },
    ),
  ).rejects.toThrow(UnrecordedToolCallError);
  expect(chargesOf(orderId)).toBe(0);
});

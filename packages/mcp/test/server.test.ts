import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Dispatcher, OnceWorker } from "@once/bullmq";
import { defineTool, InvalidToolError } from "@once/core";
import { redisUrl } from "@once/support";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { callOnceTool, ONCE_REPLAYED_META, ONCE_STEP_META, onceMcpServer } from "../src/index.js";
import { orderTools } from "./tools.js";
import { chargesOf, connect, payments, store, useMcpWorld } from "./world.js";

useMcpWorld("mcp");

let serial = 0;
const newOrder = () => `order-${process.pid}-${++serial}`;
const textOf = (result: CallToolResult) =>
  result.content.map((part) => (part as { text: string }).text).join();

describe("tools/list", () => {
  it("lists each tool with its zod input and output as JSON Schema, and the hints its kind gives", async () => {
    const client = await connect(orderTools(payments.url).all);
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((listed) => [listed.name, listed]));
    expect(byName.get_order?.annotations).toEqual({ readOnlyHint: true });
    expect(byName.set_status?.annotations).toEqual({ readOnlyHint: false, idempotentHint: true });
    expect(byName.charge_customer?.annotations).toEqual({
      readOnlyHint: false,
      idempotentHint: false,
      openWorldHint: true,
    });
    expect(byName.charge_customer?.description).toBe("Charges the order's customer.");
    expect(byName.charge_customer?.inputSchema).toMatchObject({
      type: "object",
      properties: {
        orderId: { type: "string", minLength: 1 },
        amount: { type: "integer", exclusiveMinimum: 0 },
      },
      required: ["orderId", "amount"],
    });
    expect(byName.set_status?.inputSchema.properties?.status).toEqual({
      type: "string",
      enum: ["pending", "paid"],
    });
    expect(byName.charge_customer?.outputSchema).toMatchObject({
      type: "object",
      required: ["chargeId", "amount"],
    });
  });

  it("refuses at start-up a tool whose input is not an object, naming it", () => {
    const scalar = defineTool({
      name: "ping",
      kind: "read",
      input: z.string(),
      output: z.string(),
      run: (input) => input,
    });
    expect(() => onceMcpServer({ name: "t", version: "0", store, tools: [scalar] })).toThrow(
      InvalidToolError,
    );
    expect(() => onceMcpServer({ name: "t", version: "0", store, tools: [scalar] })).toThrow(
      /"ping".*declare its input as z\.object/,
    );
  });
});

describe("an effect call", () => {
  it("called twice with the same step: one charge, the second answered from the store", async () => {
    const orderId = newOrder();
    const client = await connect(orderTools(payments.url).all);
    const step = { taskId: `task-${orderId}`, stepId: "charge" };
    const first = await callOnceTool(client, "charge_customer", { orderId, amount: 1200 }, step);
    const second = await callOnceTool(client, "charge_customer", { orderId, amount: 1200 }, step);
    expect(first.isError).toBeUndefined();
    expect(first._meta?.[ONCE_REPLAYED_META]).toBe(false);
    expect(second._meta?.[ONCE_REPLAYED_META]).toBe(true);
    expect(second.structuredContent).toEqual(first.structuredContent);
    expect(JSON.parse(textOf(second))).toEqual(first.structuredContent);
    expect(chargesOf(orderId)).toBe(1);
  });

  it("two clients calling one step at once: one charge, the same answer", async () => {
    const orderId = newOrder();
    const tools = orderTools(payments.url).all;
    const [a, b] = await Promise.all([connect(tools), connect(tools)]);
    const step = { taskId: `task-${orderId}`, stepId: "charge" };
    const answers = await Promise.all(
      [a, b].map((client) => callOnceTool(client, "charge_customer", { orderId, amount: 900 }, step)),
    );
    expect(answers[0]?.structuredContent).toEqual(answers[1]?.structuredContent);
    expect(chargesOf(orderId)).toBe(1);
  });

  it("without a step: refused with a tool error saying what to send, and nothing runs", async () => {
    const orderId = newOrder();
    const client = await connect(orderTools(payments.url).all);
    const result = (await client.callTool({
      name: "charge_customer",
      arguments: { orderId, amount: 1200 },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe(
      'charge_customer is an effect tool: name the call\'s step in _meta["once/step"] ({ taskId, stepId, ' +
        "namespace? }, the same on every retry of this call) so it runs once; nothing ran",
    );
    expect(chargesOf(orderId)).toBe(0);
  });

  it.each([
    [
      "not an object",
      "task-1/charge",
      /_meta\["once\/step"\] must be an object \{ taskId, stepId, namespace\? \}/,
    ],
    [
      "an empty taskId",
      { taskId: "", stepId: "charge" },
      /_meta\["once\/step"\]: invalid taskId: must not be empty/,
    ],
    ["no stepId", { taskId: "task-1" }, /invalid stepId: must be a string, got undefined/],
    [
      "a misspelt field",
      { taskId: "task-1", step_id: "charge" },
      /has unknown field step_id: it is \{ taskId/,
    ],
    [
      "a namespace with a control character",
      { taskId: "t", stepId: "s", namespace: "a\nb" },
      /invalid namespace/,
    ],
  ])("with %s as its step: refused, naming the problem, and nothing runs", async (_case, value, reason) => {
    const orderId = newOrder();
    const client = await connect(orderTools(payments.url).all);
    const result = (await client.callTool({
      name: "charge_customer",
      arguments: { orderId, amount: 1200 },
      _meta: { [ONCE_STEP_META]: value },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^charge_customer: /);
    expect(textOf(result)).toMatch(reason);
    expect(textOf(result)).toMatch(/; nothing ran$/);
    expect(chargesOf(orderId)).toBe(0);
  });

  it("with an input its schema refuses: a tool error naming the field, and nothing runs", async () => {
    const orderId = newOrder();
    const client = await connect(orderTools(payments.url).all);
    const step = { taskId: `task-${orderId}`, stepId: "charge" };
    const result = await callOnceTool(client, "charge_customer", { orderId, amount: -5 }, step);
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^input for charge_customer is invalid: amount: /);
    expect(chargesOf(orderId)).toBe(0);
    // The step was not used up: called right, it runs.
    const right = await callOnceTool(client, "charge_customer", { orderId, amount: 5 }, step);
    expect(right.isError).toBeUndefined();
    expect(chargesOf(orderId)).toBe(1);
  });

  it("its step called again with another input: a conflict, in words and by code, and nothing runs", async () => {
    const orderId = newOrder();
    const client = await connect(orderTools(payments.url).all);
    const step = { taskId: `task-${orderId}`, stepId: "charge" };
    await callOnceTool(client, "charge_customer", { orderId, amount: 1200 }, step);
    const other = await callOnceTool(client, "charge_customer", { orderId, amount: 9900 }, step);
    expect(other.isError).toBe(true);
    expect(textOf(other)).toMatch(/already belongs to a different charge_customer call \(other input\)/);
    expect(other._meta?.["once/error"]).toBe("ONCE_CONFLICT");
    expect(chargesOf(orderId)).toBe(1);
  });

  it("a terminal failure is stored: the replay reads the same, and the tool is not run again", async () => {
    const orderId = newOrder();
    const tools = orderTools(payments.url);
    const client = await connect(tools.all);
    const step = { taskId: `task-${orderId}`, stepId: "decline" };
    const first = await callOnceTool(client, "charge_declined", { orderId }, step);
    const again = await callOnceTool(client, "charge_declined", { orderId }, step);
    expect(first.isError).toBe(true);
    expect(textOf(first)).toBe("charge_declined failed: CardDeclined: card declined");
    expect(again).toEqual(first);
    expect(tools.declines()).toBe(1);
  });

  it("through a dispatcher: the worker runs it, once per step", async () => {
    const orderId = newOrder();
    const queueName = `mcp-${orderId}`;
    const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const queue = new Queue(queueName, { connection });
    const worker = await OnceWorker.create({
      queueName,
      connection,
      store,
      tools: orderTools(payments.url).all,
    });
    const tools = orderTools(payments.url).all;
    const dispatcher = await Dispatcher.create({ queue, store, tools });
    try {
      const client = await connect(tools, { dispatcher });
      const step = { taskId: `task-${orderId}`, stepId: "charge" };
      const first = await callOnceTool(client, "charge_customer", { orderId, amount: 700 }, step);
      const second = await callOnceTool(client, "charge_customer", { orderId, amount: 700 }, step);
      expect(second.structuredContent).toEqual(first.structuredContent);
      expect(second._meta?.[ONCE_REPLAYED_META]).toBe(true);
      expect((await queue.getJobs(["completed"])).map((job) => job.name)).toEqual(["charge_customer"]);
      expect(chargesOf(orderId)).toBe(1);
    } finally {
      await dispatcher.close();
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    }
  });
});

describe("read and write calls", () => {
  it("need no step: they run each time", async () => {
    const orderId = newOrder();
    const tools = orderTools(payments.url);
    const client = await connect(tools.all);
    const read = await client.callTool({ name: "get_order", arguments: { orderId } });
    expect(read.structuredContent).toEqual({ orderId, status: "pending", total: 4200 });
    await client.callTool({ name: "set_status", arguments: { orderId, status: "paid" } });
    const after = await client.callTool({ name: "get_order", arguments: { orderId } });
    expect(after.structuredContent).toMatchObject({ status: "paid" });
  });

  it("with a step: the answer is stored under it, so the step reads the same when called again", async () => {
    const orderId = newOrder();
    const tools = orderTools(payments.url);
    const client = await connect(tools.all);
    const step = { taskId: `task-${orderId}`, stepId: "read" };
    const first = await callOnceTool(client, "get_order", { orderId }, step);
    tools.statuses.set(orderId, "paid");
    const again = await callOnceTool(client, "get_order", { orderId }, step);
    expect(again.structuredContent).toEqual(first.structuredContent);
    expect(again._meta?.[ONCE_REPLAYED_META]).toBe(true);
  });

  it("a read tool's own error is a tool error in its words", async () => {
    const failing = defineTool({
      name: "get_missing",
      kind: "read",
      input: z.object({ orderId: z.string() }),
      output: z.object({}),
      run: ({ orderId }) => {
        throw new Error(`no order ${orderId}`);
      },
    });
    const client = await connect([failing]);
    const result = (await client.callTool({
      name: "get_missing",
      arguments: { orderId: "o-1" },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe("get_missing failed: no order o-1");
  });
});

it("an unknown tool is the protocol's error, as the spec has it", async () => {
  const client = await connect(orderTools(payments.url).all);
  await expect(client.callTool({ name: "refund", arguments: {} })).rejects.toThrow(/unknown tool "refund"/);
});

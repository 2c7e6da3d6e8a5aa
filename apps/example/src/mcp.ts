import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { onceTask } from "@once/ai";
import { defineTool } from "@once/core";
import { callOnceTool, onceMcpServer } from "@once/mcp";
import { onceMcpTools } from "@once/mcp/ai";
import { RedisStore } from "@once/redis";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { Redis } from "ioredis";
import { z } from "zod";

// A payments provider that honours no idempotency key and counts charges, per order.
const charges: Record<string, number> = {};
let made = 0;
const provider = createServer(async (req, res) => {
  const { orderId } = JSON.parse(Buffer.concat(await req.toArray()).toString()) as { orderId: string };
  charges[orderId] = (charges[orderId] ?? 0) + 1;
  res.end(JSON.stringify({ id: `ch_${++made}` }));
});
await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
const providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;

const chargeCustomer = defineTool({
  name: "charge_customer",
  kind: "effect", // listed without idempotentHint; a call must name its step
  description: "Charges the order's customer.",
  input: z.object({ orderId: z.string(), amount: z.number().int().positive() }),
  output: z.object({ chargeId: z.string() }),
  run: async (input, ctx) => {
    await ctx.assertLease();
    const body = JSON.stringify({ ...input, metadata: { once_key: ctx.key } });
    const res = await fetch(`${providerUrl}/charges`, { method: "POST", body, signal: ctx.signal });
    return { chargeId: ((await res.json()) as { id: string }).id };
  },
});

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: `mcp-example:${Date.now()}:` });

// The server: connect it to StdioServerTransport or StreamableHTTPServerTransport; here, to a client in
// this process.
const server = onceMcpServer({ name: "payments", version: "1.0.0", store, tools: [chargeCustomer] });
const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
await server.connect(serverSide);
const client = new Client({ name: "agent", version: "1.0.0" });
await client.connect(clientSide);

// Any MCP client: the step in _meta["once/step"], the same on every retry of the call.
const unnamed = await client.callTool({
  name: "charge_customer",
  arguments: { orderId: "order_41", amount: 900 },
});
console.log(`without a step: ${JSON.stringify(unnamed.content)}`);
const step = { taskId: "order-41", stepId: "charge" };
await callOnceTool(client, "charge_customer", { orderId: "order_41", amount: 900 }, step);
const retried = await callOnceTool(client, "charge_customer", { orderId: "order_41", amount: 900 }, step);
console.log(
  `retried: ${JSON.stringify(retried.structuredContent)}, replayed: ${retried._meta?.["once/replayed"]}, ` +
    `charges of order_41: ${charges.order_41}`,
);

// An AI SDK agent: the server's tools, each call the step of the recorded turn that made it. The model is the
// AI SDK's mock, and it picks another amount each time it is asked, as a real model may.
let modelCalls = 0;
const model = new MockLanguageModelV4({
  doGenerate: async ({ prompt }) => {
    modelCalls++;
    const charged = prompt.some((message) => message.role === "tool");
    const amount = 1000 + Math.floor(Math.random() * 9000);
    const content = charged
      ? [{ type: "text" as const, text: "Charged." }]
      : [
          {
            type: "tool-call" as const,
            toolCallId: `call_${amount}`,
            toolName: "charge_customer",
            input: JSON.stringify({ orderId: "order_42", amount }),
          },
        ];
    return {
      content,
      finishReason: { unified: charged ? "stop" : "tool-calls", raw: undefined },
      usage: { inputTokens: { total: 10 }, outputTokens: { total: 5 } },
      warnings: [],
    } as never;
  },
});

async function runAgent() {
  const task = onceTask({ taskId: "task-8", store, tools: [] }); // the MCP server's tools only
  const { text } = await generateText({
    model: task.model(model),
    tools: { ...task.tools, ...(await onceMcpTools(client, task)) },
    stopWhen: stepCountIs(5),
    prompt: "Charge order_42.",
  });
  return text;
}

const first = await runAgent();
const calls = modelCalls;
const resumed = await runAgent(); // after a crash: the same taskId again
console.log(`${first} model calls: ${calls}`);
console.log(
  `${resumed} model calls on resume: ${modelCalls - calls}, charges of order_42: ${charges.order_42}`,
);

await client.close();
redis.disconnect();
provider.closeAllConnections();
provider.close();

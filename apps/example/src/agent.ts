import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { onceTask } from "@once/ai";
import { defineTool } from "@once/core";
import { RedisStore } from "@once/redis";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { Redis } from "ioredis";
import { z } from "zod";

// A payments provider that honours no idempotency key and counts charges.
let charges = 0;
const provider = createServer((req, res) => {
  req.resume();
  res.end(JSON.stringify({ id: `ch_${++charges}` }));
});
await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
const providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;

const chargeCustomer = defineTool({
  name: "charge_customer",
  kind: "effect",
  description: "Charges the order's customer.",
  input: z.object({ orderId: z.string(), amount: z.number().int().positive() }),
  output: z.object({ chargeId: z.string() }),
  run: async (input, ctx) => {
    await ctx.assertLease(); // the last look before the request leaves (fetchWithKey does it for you)
    const body = JSON.stringify({ ...input, metadata: { once_key: ctx.key } });
    const res = await fetch(`${providerUrl}/charges`, { method: "POST", body, signal: ctx.signal });
    return { chargeId: ((await res.json()) as { id: string }).id };
  },
});

// Your model here (openai("…"), anthropic("…")): this one is the AI SDK's mock, and it picks another amount
// each time it is asked, as a real model may.
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

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: `agent-example:${Date.now()}:` });

async function runAgent() {
  const task = onceTask({ taskId: "task-7", store, tools: [chargeCustomer] }); // the task's own id
  const { text } = await generateText({
    model: task.model(model),
    tools: task.tools,
    stopWhen: stepCountIs(5),
    prompt: "Charge order_42.",
  });
  return text;
}

const first = await runAgent(); // the agent's loop, as you write it
const calls = modelCalls;
const resumed = await runAgent(); // after a crash: the same taskId again
console.log(`${first} model calls: ${calls}`);
console.log(`${resumed} model calls on resume: ${modelCalls - calls}, charges at the provider: ${charges}`);

redis.disconnect();
provider.closeAllConnections();
provider.close();

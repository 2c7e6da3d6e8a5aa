import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent } from "@mastra/core/agent";
import { MastraLanguageModelV2Mock } from "@mastra/core/test-utils/llm-mock";
import { defineTool } from "@once/core";
import { onceRun } from "@once/mastra";
import { RedisStore } from "@once/redis";
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

// Your model here (openai("gpt-5.1"), …): this one is Mastra's mock, and it picks another amount each time it is
// asked, as a real model may.
let modelCalls = 0;
const model = new MastraLanguageModelV2Mock({
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
    const finishReason = charged ? ("stop" as const) : ("tool-calls" as const);
    return {
      content,
      finishReason,
      usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
      warnings: [],
    };
  },
});

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: `mastra-example:${Date.now()}:` });

async function runAgent() {
  const run = onceRun({ runId: "run-7", store, tools: [chargeCustomer] }); // the run's own id
  const agent = new Agent({
    id: "billing",
    name: "billing",
    instructions: "Charge the order you are given.",
    model: run.model(model),
    tools: run.tools,
  });
  const { text } = await agent.generate("Charge order_42.", { runId: run.runId, maxSteps: 5 });
  return text;
}

const first = await runAgent(); // the agent's run, as you write it
const calls = modelCalls;
const resumed = await runAgent(); // after a crash: the same runId again
console.log(`${first} model calls: ${calls}`);
console.log(`${resumed} model calls on resume: ${modelCalls - calls}, charges at the provider: ${charges}`);

redis.disconnect();
provider.closeAllConnections();
provider.close();

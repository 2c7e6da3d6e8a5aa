import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { defineTool } from "@once/core";
import { onceTask } from "@once/openai-agents";
import { RedisStore } from "@once/redis";
import { Agent, type Model, run, setTracingDisabled, Usage } from "@openai/agents";
import { assistantMessage, functionCall } from "@openai/agents/testing";
import { Redis } from "ioredis";
import { z } from "zod";

setTracingDisabled(true); // this example calls no OpenAI service, for traces either

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

// Your model here (new OpenAIResponsesModel(client, "gpt-5.1"), or by name through task.modelProvider):
// this one is scripted, and it picks another amount and another call id each time it is asked, as a real
// model may.
let modelCalls = 0;
const model: Model = {
  async getResponse({ input }) {
    modelCalls++;
    const charged = typeof input !== "string" && input.some((item) => item.type === "function_call_result");
    const amount = 1000 + Math.floor(Math.random() * 9000);
    const output = charged
      ? [assistantMessage("Charged.")]
      : [functionCall("charge_customer", { orderId: "order_42", amount }, { callId: `call_${amount}` })];
    return { output, usage: new Usage({ requests: 1, inputTokens: 10, outputTokens: 5 }) };
  },
  getStreamedResponse: () => {
    throw new Error("this example does not stream");
  },
};

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: `openai-agents-example:${Date.now()}:` });

async function runAgent() {
  const task = onceTask({ taskId: "task-7", store, tools: [chargeCustomer] }); // the task's own id
  const agent = new Agent({
    name: "billing",
    instructions: "Charge the order you are given.",
    model: task.model(model, "scripted"),
    tools: task.tools,
  });
  const { finalOutput } = await run(agent, "Charge order_42.");
  return finalOutput;
}

const first = await runAgent(); // the agent's run, as you write it
const calls = modelCalls;
const resumed = await runAgent(); // after a crash: the same taskId again
console.log(`${first} model calls: ${calls}`);
console.log(`${resumed} model calls on resume: ${modelCalls - calls}, charges at the provider: ${charges}`);

redis.disconnect();
provider.closeAllConnections();
provider.close();

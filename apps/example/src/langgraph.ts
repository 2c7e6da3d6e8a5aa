import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { MemorySaver } from "@langchain/langgraph";
import { defineTool } from "@once/core";
import { onceGraph } from "@once/langgraph";
import { RedisStore } from "@once/redis";
import { Redis } from "ioredis";
import { createAgent } from "langchain";
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

// Your model here (new ChatOpenAI({ model: "gpt-5.1" }), …): this one is LangChain's fake, and it picks another
// amount and another call id each time it is asked, as a real model may.
const answer = (messages: BaseMessage[]) => {
  const amount = 1000 + Math.floor(Math.random() * 9000);
  return messages.some((message) => message.getType() === "tool")
    ? new AIMessage("Charged.")
    : new AIMessage({
        content: "",
        tool_calls: [
          { id: `call_${amount}`, name: "charge_customer", args: { orderId: "order_42", amount } },
        ],
      });
};
const model = fakeModel().respond(answer).respond(answer).respond(answer).respond(answer);

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: `langgraph-example:${Date.now()}:` });
const once = onceGraph({ store, tools: [chargeCustomer] });

async function runAgent() {
  // A checkpointer that dies with the process: after a crash the thread starts over from the prompt.
  const agent = createAgent({ model: once.model(model), tools: once.tools, checkpointer: new MemorySaver() });
  const config = { configurable: { thread_id: "thread-7" } }; // the thread is the task
  const { messages } = await agent.invoke(
    { messages: [{ role: "user", content: "Charge order_42." }] },
    config,
  );
  return messages.at(-1)?.text;
}

const first = await runAgent(); // the agent, as you write it
const calls = model.callCount;
const resumed = await runAgent(); // after a crash: the same thread again, its checkpoints lost
console.log(`${first} model calls: ${calls}`);
console.log(
  `${resumed} model calls on resume: ${model.callCount - calls}, charges at the provider: ${charges}`,
);

redis.disconnect();
provider.closeAllConnections();
provider.close();

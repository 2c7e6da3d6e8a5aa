import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Dispatcher, OnceWorker } from "@once/bullmq";
import { defineTool } from "@once/core";
import { fetchWithKey } from "@once/engine";
import { RedisStore } from "@once/redis";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { z } from "zod";

// A payments provider that honours no idempotency key, counts charges, and answers after our 100 ms timeout.
let charges = 0;
const provider = createServer((req, res) => {
  const id = `ch_${++charges}`;
  req.resume();
  setTimeout(() => res.end(JSON.stringify({ id })), 300);
});
await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
const providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;

const chargeCustomer = defineTool({
  name: "charge_customer",
  kind: "effect", // "read" and "write" tools skip the store
  input: z.object({ orderId: z.string(), amount: z.number().int().positive() }),
  output: z.object({ chargeId: z.string() }),
  run: async (input, ctx) => {
    const body = JSON.stringify({ ...input, currency: "eur", metadata: { once_key: ctx.key } });
    const res = await fetchWithKey(ctx)(`${providerUrl}/charges`, { method: "POST", body });
    return { chargeId: ((await res.json()) as { id: string }).id };
  },
});

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: `example:${Date.now()}:` });
const queue = new Queue(`example-${Date.now()}`, { connection: redis });
const worker = await OnceWorker.create({
  queueName: queue.name,
  connection: redis,
  store,
  tools: [chargeCustomer],
});
const dispatcher = await Dispatcher.create({
  queue,
  store,
  tools: [chargeCustomer],
  timeoutMs: 100,
  retries: 5,
});

const call = { taskId: "task-7", stepId: "charge" }; // the orchestrator's own ids, stable across retries
const first = await dispatcher.call(chargeCustomer, { orderId: "order_42", amount: 1999 }, call);
const again = await dispatcher.call(chargeCustomer, { orderId: "order_42", amount: 1999 }, call);
console.log(first, again, `charges at the provider: ${charges}`);

await dispatcher.close();
await worker.close();
await queue.obliterate({ force: true });
await queue.close();
redis.disconnect();
provider.closeAllConnections();
provider.close();

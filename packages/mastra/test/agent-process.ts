// The order agent's Mastra run in a process of its own, for the crash scenarios: `node --import tsx
// agent-process.ts` with its settings as JSON in ONCE_AGENT_CONFIG. It runs Mastra's own Agent through onceRun,
// prints one JSON line per event, and SIGKILLs itself at the point it was told to — a real crash, mid-flight,
// with nothing cleaned up.

import { hookedOrderAgentTools, modelLatencyMs, pendingOrder, RedisOrderBook } from "@once/order-agent";
import { RedisStore } from "@once/redis";
import { Redis } from "ioredis";
import { agentChild, crashPoints } from "../../../test/support/agent-child.js";
import { onceRun } from "../src/index.js";
import { orderAgent, PROMPT, stepsOf } from "./order-agent.js";
import { orderAgentModel } from "./order-agent-model.js";

const child = agentChild();
const { config, emit, die } = child;
const crash = crashPoints(child);

const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: config.prefix });
// The order book in Redis, as a deployment's would be: the resumed process sees the status the crashed one set.
const orders = new RedisOrderBook({ redis, prefix: `${config.prefix}order:` });
await orders.create(pendingOrder(config.orderId));
const tools = hookedOrderAgentTools(config.paymentsUrl, orders, crash.toolHooks);
const { model } = orderAgentModel(config.orderId, {
  latencyMs: modelLatencyMs,
  answering: crash.answering,
});
const run = onceRun({
  runId: config.taskId,
  store,
  tools: tools.all,
  leaseMs: config.leaseMs,
  turnLeaseMs: config.leaseMs,
});
const charge = run.tools.charge_customer;
if (charge?.execute) {
  const execute = charge.execute.bind(charge);
  charge.execute = async (...args) => {
    const result = await execute(...args);
    crash.chargeStored();
    return result;
  };
}
const result = await orderAgent(run.model(model), run.tools).generate(PROMPT, {
  runId: run.runId,
  maxSteps: 10,
});
if (config.killAt === "after-last-turn") await die("after-last-turn");
emit("done", { answer: result.text, steps: stepsOf(result as never) });
redis.disconnect();

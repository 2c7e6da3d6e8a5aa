// The order agent's orchestrator in a process of its own, for the crash scenarios: `node --import tsx
// agent-process.ts` with its settings as JSON in ONCE_AGENT_CONFIG. It runs the AI SDK's generateText loop
// through onceTask, prints one JSON line per event ({"event":"model-call","turn":1}, {"event":"done",…}), and
// SIGKILLs itself at the point it was told to — a real crash, mid-flight, with nothing cleaned up.

import {
  hookedOrderAgentTools,
  modelLatencyMs,
  orderAgentModel,
  pendingOrder,
  RedisOrderBook,
} from "@once/order-agent";
import { RedisStore } from "@once/redis";
import { generateText, stepCountIs } from "ai";
import { Redis } from "ioredis";
import { agentChild, crashPoints } from "../../../test/support/agent-child.js";
import { onceTask } from "../src/index.js";

const child = agentChild();
const { config, emit, die } = child;
const crash = crashPoints(child);

const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: config.prefix });
// The order book in Redis, as a deployment's would be: the resumed process sees the status the crashed one set.
const orders = new RedisOrderBook({ redis, prefix: `${config.prefix}order:` });
await orders.create(pendingOrder(config.orderId));
const tools = hookedOrderAgentTools(config.paymentsUrl, orders, crash.toolHooks);
const model = orderAgentModel(config.orderId, {
  latencyMs: modelLatencyMs,
  answering: crash.answering,
});
const task = onceTask({
  taskId: config.taskId,
  store,
  tools: tools.all,
  leaseMs: config.leaseMs,
  turnLeaseMs: config.leaseMs,
});
const chargeTool = task.tools.charge_customer;
if (chargeTool?.execute) {
  const execute = chargeTool.execute;
  chargeTool.execute = async (...args) => {
    const result = await execute(...args);
    crash.chargeStored();
    return result;
  };
}
const result = await generateText({
  model: task.model(model.model),
  tools: task.tools,
  stopWhen: stepCountIs(10),
  prompt: "Settle the order: read it, charge it, email the receipt, mark it paid.",
});
if (config.killAt === "after-last-turn") await die("after-last-turn");
emit("done", {
  answer: result.text,
  steps: result.steps.map((step) =>
    step.toolCalls.map((call) => ({ tool: call.toolName, input: call.input })),
  ),
});
redis.disconnect();

// The order agent's orchestrator in a process of its own, for the crash scenarios: `node --import tsx
// agent-process.ts` with its settings as JSON in ONCE_AGENT_CONFIG. It runs the OpenAI Agents SDK's runner
// through onceTask, prints one JSON line per event ({"event":"model-call","turn":1}, {"event":"done",…}), and
// SIGKILLs itself at the point it was told to — a real crash, mid-flight, with nothing cleaned up.

import { RedisStore } from "@once/redis";
import { run, setTracingDisabled } from "@openai/agents";
import { Redis } from "ioredis";
import { agentChild, crashPoints } from "../../../test/support/agent-child.js";
import { onceTask } from "../src/index.js";
import { orderAgent, orderTools, PROMPT } from "./order-agent.js";
import { OrderAgentModel } from "./order-agent-model.js";

const child = agentChild();
const { config, emit, die } = child;
const crash = crashPoints(child);

setTracingDisabled(true);
const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: config.prefix });
const tools = await orderTools(config.paymentsUrl, config.orderId, crash.toolHooks);
const model = new OrderAgentModel(config.orderId, {
  // Heavy-tailed, as a model's latency is: mostly quick, one call in ten ten times slower.
  latencyMs: () => (Math.random() < 0.9 ? 5 + Math.random() * 20 : 100 + Math.random() * 200),
  answering: crash.answering,
});
const task = onceTask({
  taskId: config.taskId,
  store,
  tools: tools.all,
  leaseMs: config.leaseMs,
  turnLeaseMs: config.leaseMs,
});
const chargeTool = task.tools.find((t) => t.name === "charge_customer");
if (chargeTool) {
  const invoke = chargeTool.invoke;
  chargeTool.invoke = async (...args) => {
    const result = await invoke(...args);
    crash.chargeStored();
    return result;
  };
}
const result = await run(orderAgent(task.model(model, "order-agent"), task.tools), PROMPT);
if (config.killAt === "after-last-turn") await die("after-last-turn");
emit("done", {
  answer: result.finalOutput,
  steps: result.rawResponses.map((response) =>
    response.output.flatMap((item) =>
      item.type === "function_call" ? [{ tool: item.name, input: JSON.parse(item.arguments) }] : [],
    ),
  ),
});
redis.disconnect();

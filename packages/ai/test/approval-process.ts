// The order agent's orchestrator for the approval crash scenarios, in a process of its own: `node --import tsx
// approval-process.ts` with its settings as JSON in ONCE_AGENT_CONFIG (test/support/agent-child.ts). It runs the
// AI SDK's generateText loop from the task's first message, with a charge that needs a person's approval, and
// prints one JSON line per event: `approval-requested` with the record's request when the loop stopped for it
// (then SIGKILLs itself, if told to), else `done`. With `together`, the children of one task start their loop
// at once (a Redis gate), so their calls race.

import { orderAgentModel, pendingOrder, RedisOrderBook } from "@once/order-agent";
import { RedisStore } from "@once/redis";
import { generateText, stepCountIs } from "ai";
import { Redis } from "ioredis";
import { agentChild } from "../../../test/support/agent-child.js";
import { onceTask } from "../src/index.js";
import { approvalTools } from "./approval-tools.js";

const { config, emit, die } = agentChild();

const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: config.prefix });
const orders = new RedisOrderBook({ redis, prefix: `${config.prefix}order:` });
await orders.create(pendingOrder(config.orderId));
const model = orderAgentModel(config.orderId, {
  answering: (turn) => {
    emit("model-call", { turn });
  },
});
const task = onceTask({
  taskId: config.taskId,
  store,
  tools: approvalTools(config.paymentsUrl, orders, {
    afterCharge: () => {
      emit("charged");
    },
  }),
  leaseMs: config.leaseMs,
  turnLeaseMs: config.leaseMs,
});
if (config.together !== undefined) {
  const gate = `${config.prefix}together:${config.taskId}`;
  await redis.incr(gate);
  const until = Date.now() + 30_000;
  while (Number(await redis.get(gate)) < config.together && Date.now() < until)
    await new Promise((resolve) => setTimeout(resolve, 10));
}
const result = await generateText({
  model: task.model(model.model),
  tools: task.tools,
  stopWhen: stepCountIs(10),
  prompt: "Settle the order: read it, charge it, email the receipt, mark it paid.",
});
const request = result.content.find((part) => part.type === "tool-approval-request");
if (request?.type === "tool-approval-request") {
  emit("approval-requested", { request: task.approvalRequest(request.toolCall.toolCallId) });
  if (config.killAt === "approval-requested") await die("approval-requested");
} else {
  emit("done", {
    answer: result.text,
    steps: result.steps.map((step) =>
      step.toolCalls.map((call) => ({ tool: call.toolName, input: call.input })),
    ),
  });
}
redis.disconnect();

// The order agent's Mastra run for the approval crash scenarios, in a process of its own: `node --import tsx
// approval-process.ts` with its settings as JSON in ONCE_AGENT_CONFIG (test/support/agent-child.ts) and Mastra's
// in ONCE_MASTRA_APPROVAL (the PostgresStore's URL and schema, and how the run goes on). `start` runs the agent
// from its prompt; `approve` resumes the run Mastra suspended with its own `approveToolCallGenerate` — the
// app's yes, which is not the decision. It prints `approval-requested` with the record's request when the run
// ended suspended for approval (then SIGKILLs itself, if told to), else `done`. With `together`, the children
// of one task act at once.

import { Mastra } from "@mastra/core";
import { PostgresStore } from "@mastra/pg";
import { pendingOrder, RedisOrderBook } from "@once/order-agent";
import { RedisStore } from "@once/redis";
import { Redis } from "ioredis";
import { agentChild } from "../../../test/support/agent-child.js";
import { onceRun } from "../src/index.js";
import { approvalTools } from "./approval-tools.js";
import { orderAgent, PROMPT, stepsOf } from "./order-agent.js";
import { orderAgentModel } from "./order-agent-model.js";

/** Mastra's side of the child's settings. */
export interface MastraApprovalConfig {
  postgres: { url: string; schema: string };
  action: "start" | "approve";
}

const { config, emit, die } = agentChild();
const settings = JSON.parse(process.env.ONCE_MASTRA_APPROVAL ?? "null") as MastraApprovalConfig;

const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: config.prefix });
const orders = new RedisOrderBook({ redis, prefix: `${config.prefix}order:` });
await orders.create(pendingOrder(config.orderId));
const storage = new PostgresStore({
  id: "once-test",
  connectionString: settings.postgres.url,
  schemaName: settings.postgres.schema,
});
const { model } = orderAgentModel(config.orderId, {
  answering: (turn) => {
    emit("model-call", { turn });
  },
});
const run = onceRun({
  runId: config.taskId,
  store,
  tools: approvalTools(config.paymentsUrl, orders, {
    afterCharge: () => {
      emit("charged");
    },
  }),
  leaseMs: config.leaseMs,
  turnLeaseMs: config.leaseMs,
});
const mastra = new Mastra({
  storage,
  agents: { order: orderAgent(run.model(model), run.tools) },
  logger: false,
});
const agent = mastra.getAgent("order");

if (config.together !== undefined) {
  const gate = `${config.prefix}together:${config.taskId}`;
  await redis.incr(gate);
  const until = Date.now() + 30_000;
  while (Number(await redis.get(gate)) < config.together && Date.now() < until)
    await new Promise((resolve) => setTimeout(resolve, 10));
}
const result =
  settings.action === "start"
    ? await agent.generate(PROMPT, { runId: run.runId, maxSteps: 10 })
    : await agent.approveToolCallGenerate({ runId: run.runId, maxSteps: 10 });
if (result.finishReason === "suspended") {
  const { toolCallId } = result.suspendPayload as { toolCallId: string };
  emit("approval-requested", { toolCallId, request: run.approvalRequest(toolCallId) });
  if (config.killAt === "approval-requested") await die("approval-requested");
} else {
  emit("done", { answer: result.text, steps: stepsOf(result as never) });
}
redis.disconnect();
await storage.close();

// The order agent's graph for the approval crash scenarios, in a process of its own: `node --import tsx
// approval-process.ts` with its settings as JSON in ONCE_AGENT_CONFIG (test/support/agent-child.ts) and the
// PostgresSaver's URL and schema in ONCE_LANGGRAPH. A thread with no checkpoint starts from the prompt; one with
// a checkpoint is resumed with `Command({ resume: { approved: true } })` — the app's own say-so, which is not
// the decision. It prints `approval-requested` with the interrupt's value when the graph interrupted (then
// SIGKILLs itself, if told to), else `done`. With `together`, the children of one task resume at once.

import type { BaseMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { pendingOrder, RedisOrderBook } from "@once/order-agent";
import { RedisStore } from "@once/redis";
import { Redis } from "ioredis";
import { agentChild } from "../../../test/support/agent-child.js";
import { type ApprovalInterrupt, onceGraph } from "../src/index.js";
import type { GraphProcessConfig } from "./agent-process.js";
import { approvalTools } from "./approval-tools.js";
import { input, reactGraph } from "./graphs.js";
import { OrderAgentChatModel } from "./order-agent-model.js";

const { config, emit, die } = agentChild();
const settings = JSON.parse(process.env.ONCE_LANGGRAPH ?? "null") as GraphProcessConfig;
if (!settings.postgres) throw new Error("the approval scenarios run on a PostgresSaver");

const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: config.prefix });
const orders = new RedisOrderBook({ redis, prefix: `${config.prefix}order:` });
await orders.create(pendingOrder(config.orderId));
const checkpointer = PostgresSaver.fromConnString(settings.postgres.url, {
  schema: settings.postgres.schema,
});

const model = new OrderAgentChatModel(config.orderId, {
  answering: (turn) => {
    emit("model-call", { turn });
  },
});
const tools = approvalTools(config.paymentsUrl, orders, {
  afterCharge: () => {
    emit("charged");
  },
});
const once = onceGraph({ store, tools, leaseMs: config.leaseMs, turnLeaseMs: config.leaseMs });
const graph = reactGraph(once.model(model, "order-agent"), once.tools, checkpointer);
const thread = { configurable: { thread_id: config.taskId }, durability: settings.durability };

if (config.together !== undefined) {
  const gate = `${config.prefix}together:${config.taskId}`;
  await redis.incr(gate);
  const until = Date.now() + 30_000;
  while (Number(await redis.get(gate)) < config.together && Date.now() < until)
    await new Promise((resolve) => setTimeout(resolve, 10));
}
const saved = await graph.getState(thread);
const started = ((saved.values as { messages?: unknown[] }).messages ?? []).length > 0;
emit("resuming", { started });
const result = await graph.invoke(started ? new Command({ resume: { approved: true } }) : input(), thread);
const interrupts = (result as { __interrupt__?: { value: ApprovalInterrupt }[] }).__interrupt__ ?? [];
if (interrupts.length > 0) {
  emit("approval-requested", { request: interrupts[0]?.value, interrupts: interrupts.length });
  if (config.killAt === "approval-requested") await die("approval-requested");
} else {
  const messages = (result as { messages: BaseMessage[] }).messages;
  const answers = messages.filter((m) => m.getType() === "ai");
  emit("done", {
    answer: answers.at(-1)?.content,
    steps: answers.map((m) =>
      ((m as { tool_calls?: { name: string; args: unknown }[] }).tool_calls ?? []).map((call) => ({
        tool: call.name,
        input: call.args,
      })),
    ),
  });
}
redis.disconnect();
await checkpointer.end();

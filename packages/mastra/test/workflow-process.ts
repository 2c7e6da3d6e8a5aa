// The settle-order workflow (order-agent.ts) in a process of its own: `node --import tsx workflow-process.ts`
// with its settings as JSON in ONCE_MASTRA_WORKFLOW. It starts the run (which suspends for approval), resumes
// it, or restarts it after a crash — Mastra's own runner, on a PostgresStore — prints one JSON line per event,
// and SIGKILLs itself in the step it was told to, after the provider acted: a real crash, nothing cleaned up.

import { Mastra } from "@mastra/core/mastra";
import { PostgresStore } from "@mastra/pg";
import { defineTool } from "@once/core";
import { hookedOrderAgentTools, MemoryOrderBook, pendingOrder } from "@once/order-agent";
import { RedisStore } from "@once/redis";
import { Redis } from "ioredis";
import { settleWorkflow } from "./order-agent.js";

/** The child's settings. */
export interface WorkflowProcessConfig {
  redisUrl: string;
  prefix: string;
  paymentsUrl: string;
  postgres: { url: string; schema: string };
  runId: string;
  orderId: string;
  leaseMs: number;
  action: "start" | "resume" | "restart";
  /** SIGKILL in this step, right after the provider acted. */
  killIn?: "charge" | "email";
  /** Start the action only when this many processes have reached it (a Redis counter under `prefix`). */
  together?: number;
}

const config = JSON.parse(process.env.ONCE_MASTRA_WORKFLOW ?? "null") as WorkflowProcessConfig;
const emit = (event: string, fields: Record<string, unknown> = {}) =>
  process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);
const die = (step: string) => {
  emit("killed", { step });
  process.kill(process.pid, "SIGKILL");
  return new Promise<never>(() => {});
};

const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: config.prefix });
const orders = new MemoryOrderBook();
await orders.create(pendingOrder(config.orderId));
const tools = hookedOrderAgentTools(config.paymentsUrl, orders, {
  afterCharge: () => (config.killIn === "charge" ? die("charge") : undefined),
});
const sendEmail = defineTool({
  ...tools.sendEmail,
  run: async (input, ctx, prepared) => {
    const sent = await tools.sendEmail.run(input, ctx, prepared);
    if (config.killIn === "email") await die("email");
    return sent;
  },
});
const storage = new PostgresStore({
  id: "once-test",
  connectionString: config.postgres.url,
  schemaName: config.postgres.schema,
});
const mastra = new Mastra({
  storage,
  workflows: {
    settle: settleWorkflow({ ...tools, sendEmail }, store, config.leaseMs, () => emit("past-charge")),
  },
  logger: false,
});
const run = await mastra.getWorkflow("settle").createRun({ runId: config.runId });
if (config.together !== undefined) {
  // Each process is ready (its imports done, its run loaded) before any of them acts: they act at once.
  const gate = `${config.prefix}together:${config.runId}:${config.action}`;
  await redis.incr(gate);
  const until = Date.now() + 30_000;
  while (Number(await redis.get(gate)) < config.together && Date.now() < until)
    await new Promise((resolve) => setTimeout(resolve, 10));
}
try {
  const result =
    config.action === "start"
      ? await run.start({ inputData: { orderId: config.orderId, amount: 4_200, currency: "eur" } })
      : config.action === "resume"
        ? await run.resume({ step: "approve", resumeData: { approved: true } })
        : await run.restart();
  emit("done", {
    status: result.status,
    ...(result.status === "failed" ? { error: String(result.error) } : {}),
  });
} catch (error) {
  // Mastra's own refusal: a run another process already resumed is no longer suspended.
  emit("refused", { error: String(error) });
}
await storage.close();
redis.disconnect();

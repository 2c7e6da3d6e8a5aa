import { Dispatcher, OnceWorker } from "@once/bullmq";
import { type AnyTool, defineTool, type OnceStore } from "@once/core";
import { fetchWithKey, InProcess } from "@once/engine";
import { PostgresStore, transactionalTool } from "@once/postgres";
import { RedisStore } from "@once/redis";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";
import { z } from "zod";
import { redisCpuSeconds } from "../../server-stats.js";
import { charge, findCharge } from "../effect.js";
import { type ChildConfig, orderId, taskId } from "../protocol.js";
import { EFFECTS_TABLE } from "./effects-table.js";
import { postgresBackendsCpu } from "./postgres-cpu.js";
import { type CpuMeter, counterMeter, type RunnerFactory, required } from "./runner.js";

const input = z.object({ orderId: z.string() });
const output = z.object({ id: z.string(), orderId: z.string() });

/**
 * The step as once's docs have it for a provider that honours no key: the call carries the key (as
 * `Idempotency-Key`, through `fetchWithKey`, and as metadata), and a reconcile hook asks the provider for a
 * charge with that key when a crash left the outcome unknown.
 */
export function chargeTool(providerUrl: string): AnyTool {
  return defineTool({
    name: "charge",
    kind: "effect",
    input,
    output,
    run: ({ orderId }, ctx) =>
      charge(providerUrl, orderId, { metadata: { once_key: ctx.key }, fetch: fetchWithKey(ctx) }),
    reconcile: async (_input, ctx) => {
      const found = await findCharge(providerUrl, ctx.key, ctx.signal);
      return found ? { applied: true, result: found } : { applied: false };
    },
  });
}

/**
 * The transactional step: the effect is a row written with the store's own transaction, held open for the
 * provider's latency (so a step costs what a POST to the provider costs in wall time), and committed with
 * the record's `done`. `emit` announces the effect, so the kill runs can strike inside it.
 */
function transactionalChargeTool(effectMs: number, emit: (orderId: string) => void): AnyTool {
  return transactionalTool({
    name: "charge",
    input,
    output,
    run: async ({ orderId }, ctx) => {
      await ctx.transaction.query(`insert into ${EFFECTS_TABLE} (order_id) values ($1)`, [orderId]);
      emit(orderId);
      await new Promise((resolve) => setTimeout(resolve, effectMs));
      return { id: orderId, orderId };
    },
  });
}

/** once in process (`InProcess`) on RedisStore, on PostgresStore, or with a transactional step on PostgresStore. */
export const inProcessRunner: RunnerFactory = async (config, onStep, emit) => {
  const { store, tool, serverCpu, close } = await storeFor(config, emit);
  const runner = new InProcess({
    store,
    tools: [tool],
    ...(config.leaseMs ? { leaseMs: config.leaseMs } : {}),
  });
  return {
    async runTask(n, k) {
      const id = taskId(config.runId, n);
      for (let i = 0; i < k; i++) {
        await runner.call(tool, { orderId: orderId(id, i) }, { taskId: id, stepId: String(i) });
        onStep(n, i);
      }
    },
    serverCpu,
    close,
  };
};

async function storeFor(
  config: ChildConfig,
  emit: (event: Record<string, unknown>) => void,
): Promise<{ store: OnceStore; tool: AnyTool; serverCpu: CpuMeter; close(): Promise<void> }> {
  if (config.side === "once-redis") {
    const { store, cpu, close } = await redisStore(config);
    return { store, tool: chargeTool(config.providerUrl), serverCpu: cpu, close };
  }
  const postgres = required(config.postgres, "postgres");
  // One connection per call in flight, and a few for heartbeats (a shared server allows 100 in all).
  const pool = new pg.Pool({ connectionString: postgres.url, max: config.concurrency + 10 });
  pool.on("error", () => {});
  const store = await PostgresStore.create({ pool, checks: false });
  const backends = postgresBackendsCpu(postgres.url, postgres.database);
  const close = async () => {
    await backends.close();
    await pool.end();
  };
  if (config.side === "once-transactional") {
    await pool.query(`create table if not exists ${EFFECTS_TABLE} (order_id text not null)`);
    const tool = transactionalChargeTool(config.effectMs, (order) => {
      if (config.mode !== "cost") emit({ type: "effect", orderId: order });
    });
    return { store, tool, serverCpu: backends, close };
  }
  return { store, tool: chargeTool(config.providerUrl), serverCpu: backends, close };
}

/** RedisStore on the bench's Redis, and the server's CPU read on a client of its own (INFO never waits behind the store). */
async function redisStore(config: ChildConfig) {
  const { host, port, prefix } = required(config.redis, "redis");
  const redis = new Redis({ host, port });
  const probe = new Redis({ host, port });
  const store = await RedisStore.create({ redis, prefix, checks: false });
  return {
    store,
    cpu: counterMeter(() => redisCpuSeconds(probe)),
    async close() {
      await probe.quit();
      await redis.quit();
    },
  };
}

/**
 * once on BullMQ: each step a job through a `Dispatcher`, run by an `OnceWorker`, both on Redis (the queue and
 * RedisStore). `serve`: the worker alone (the kill runs drive the dispatcher from the parent, so what is killed
 * is the process that runs the steps).
 */
export const bullmqRunner: RunnerFactory = async (config, onStep) => {
  const { host, port } = required(config.redis, "redis");
  const bull = required(config.bullmq, "bullmq");
  const { store, cpu, close } = await redisStore(config);
  const tool = chargeTool(config.providerUrl);
  const connection = new Redis({ host, port, maxRetriesPerRequest: null });
  const settings = workerSettings(config);
  const worker = await OnceWorker.create({
    queueName: bull.queueName,
    connection,
    store,
    tools: [tool],
    concurrency: Math.max(1, config.concurrency),
    ...(config.leaseMs ? { leaseMs: config.leaseMs } : {}),
    workerOptions: settings.workerOptions,
  });
  const driver = config.mode === "serve" ? undefined : await bullmqDriver(config, connection, store, tool);
  return {
    async runTask(n, k) {
      if (!driver) throw new Error("a serving worker runs no tasks of its own");
      await driver.runTask(n, k, onStep);
    },
    serverCpu: cpu,
    async close() {
      await driver?.close();
      await worker.close();
      await connection.quit();
      await close();
    },
  };
};

/** The BullMQ worker settings both sides of once-bullmq are checked against (BullMQ's own defaults unless set). */
export function workerSettings(config: ChildConfig) {
  const bull = required(config.bullmq, "bullmq");
  const lock = bull.lockDurationMs === undefined ? {} : { lockDuration: bull.lockDurationMs };
  const stalled = bull.stalledIntervalMs === undefined ? {} : { stalledInterval: bull.stalledIntervalMs };
  return {
    workerOptions: { prefix: bull.prefix, maxStalledCount: 100, ...lock, ...stalled },
    dispatcher: {
      ...(config.leaseMs ? { leaseMs: config.leaseMs } : {}),
      ...(bull.lockDurationMs === undefined ? {} : { lockDurationMs: bull.lockDurationMs }),
      ...(bull.stalledIntervalMs === undefined ? {} : { stalledIntervalMs: bull.stalledIntervalMs }),
    },
  };
}

/** The orchestrator's side of once-bullmq: one dispatcher call per step, each step after the one before. */
export async function bullmqDriver(
  config: ChildConfig,
  connection: Redis,
  store: OnceStore,
  tool: AnyTool,
): Promise<{
  runTask(n: number, k: number, onStep: (task: number, step: number) => void): Promise<void>;
  close(): Promise<void>;
}> {
  const bull = required(config.bullmq, "bullmq");
  const queue = new Queue(bull.queueName, { connection, prefix: bull.prefix });
  const dispatcher = await Dispatcher.create({
    queue,
    store,
    tools: [tool],
    jobOptions: { removeOnComplete: true, removeOnFail: true },
    worker: workerSettings(config).dispatcher,
  });
  return {
    async runTask(n, k, onStep) {
      const id = taskId(config.runId, n);
      for (let i = 0; i < k; i++) {
        await dispatcher.call(tool, { orderId: orderId(id, i) }, { taskId: id, stepId: String(i) });
        onStep(n, i);
      }
    },
    async close() {
      await dispatcher.close();
      await queue.close();
    },
  };
}

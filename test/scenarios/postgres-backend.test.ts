// The Dispatcher and OnceWorker on BullMQ's PostgreSQL backend (`createPostgresBackend`) with a PostgresStore,
// and mixed: the queue on Redis, the store on PostgreSQL. Each test has its own schemas (BullMQ's and once's)
// and queue, removed after it.

import { Dispatcher, type DispatcherOptions, OnceWorker } from "@once/bullmq";
import { defineTool } from "@once/core";
import { PostgresStore, transactionalTool } from "@once/postgres";
import { postgresUrl, randomPrefix, randomSchema, redisUrl } from "@once/support";
import { createPostgresBackend, Queue } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";

let pool: pg.Pool;
const schemas: string[] = [];

beforeAll(() => {
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 10 });
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

function schemaFor(label: string): string {
  const schema = randomSchema(label);
  schemas.push(schema);
  return schema;
}

/** A charge whose every run is counted here, and an order written in the store's database. */
function tools(storeSchema: string) {
  const charges: string[] = [];
  const charge = defineTool({
    name: "charge_card",
    kind: "effect",
    input: z.object({ amount: z.number().int() }),
    output: z.object({ chargeId: z.string() }),
    run: async ({ amount }, ctx) => {
      charges.push(ctx.key);
      await new Promise((resolve) => setTimeout(resolve, 50));
      return { chargeId: `ch_${amount}_${ctx.fence}` };
    },
  });
  const order = transactionalTool({
    name: "create_order",
    input: z.object({ sku: z.string() }),
    output: z.object({ orderId: z.string() }),
    run: async ({ sku }, ctx) => {
      const { rows } = await ctx.transaction.query<{ id: string }>(
        `insert into "${storeSchema}".orders (call_key, sku) values ($1, $2) returning id`,
        [ctx.key, sku],
      );
      return { orderId: String(rows[0]?.id) };
    },
  });
  return { charges, charge, order };
}

async function exercise(
  queue: DispatcherOptions["queue"],
  store: PostgresStore,
  worker: OnceWorker,
  kit: ReturnType<typeof tools>,
) {
  const dispatcher = await Dispatcher.create({ queue, store, tools: [kit.charge, kit.order] });
  try {
    const step = { taskId: "task-1", stepId: "charge" };
    const [a, b] = await Promise.all([
      dispatcher.call(kit.charge, { amount: 1999 }, step),
      dispatcher.call(kit.charge, { amount: 1999 }, step),
    ]);
    expect(a.result).toEqual({ chargeId: "ch_1999_1" });
    expect(b.result).toEqual(a.result);
    expect([a.replayed, b.replayed].sort()).toEqual([false, true]);
    const again = await dispatcher.call(kit.charge, { amount: 1999 }, step);
    expect(again).toMatchObject({ result: a.result, replayed: true, enqueues: 0 });
    expect(kit.charges).toHaveLength(1);

    const first = await dispatcher.call(kit.order, { sku: "sku-1" }, { taskId: "task-1", stepId: "order" });
    const second = await dispatcher.call(kit.order, { sku: "sku-1" }, { taskId: "task-1", stepId: "order" });
    expect(second).toMatchObject({ result: first.result, replayed: true });
    const { rows } = await pool.query(`select count(*)::int as n from "${store.schema}".orders`);
    expect(rows[0].n).toBe(1);
    expect(await store.get(first.key as string)).toMatchObject({ state: "done", tool: "create_order" });
  } finally {
    await dispatcher.close();
    await worker.close();
  }
}

async function postgresStore(label: string): Promise<PostgresStore> {
  const store = await PostgresStore.create({ pool, schema: schemaFor(label) });
  await pool.query(
    `create table "${store.schema}".orders (id bigserial primary key, call_key text not null, sku text not null)`,
  );
  return store;
}

describe("BullMQ's PostgreSQL backend", () => {
  it("runs the queue and the store on PostgreSQL: one charge, one order, replays", async () => {
    const store = await postgresStore("pg_store");
    const connection = { connectionString: postgresUrl(), schema: schemaFor("pg_queue"), migrate: true };
    const queue = new Queue("calls", { connection }, createPostgresBackend);
    await queue.waitUntilReady();
    const kit = tools(store.schema);
    const worker = await OnceWorker.create({
      queueName: "calls",
      connection,
      backend: createPostgresBackend,
      store,
      tools: [kit.charge, kit.order],
      concurrency: 4,
    });
    try {
      await exercise(queue, store, worker, kit);
    } finally {
      await queue.close();
    }
  });

  it("mixed: the queue on Redis, the store on PostgreSQL", async () => {
    const store = await postgresStore("mixed_store");
    const redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const prefix = randomPrefix("mixed").replace(/:$/, "");
    const queue = new Queue("calls", { connection: redis, prefix });
    const kit = tools(store.schema);
    const worker = await OnceWorker.create({
      queueName: "calls",
      connection: redis,
      store,
      tools: [kit.charge, kit.order],
      workerOptions: { prefix },
    });
    try {
      await exercise(queue, store, worker, kit);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      await redis.quit();
    }
  });
});

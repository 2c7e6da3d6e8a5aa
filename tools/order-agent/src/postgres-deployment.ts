import type { OnceStore } from "@once/core";
import { PostgresStore } from "@once/postgres";
import type pg from "pg";
import { type Counters, CountingStore } from "./counting-store.js";
import { type Order, type OrderBook, type OrderStatus, orderSchema } from "./order-book.js";

/**
 * Where one deployment (one demo run, one test) keeps everything on PostgreSQL: once's records, the orders,
 * the counters and the orchestrator's journal in one schema, and BullMQ's queue in a schema beside it.
 * Dropping both removes the deployment.
 */
export interface PostgresLayout {
  /** The PostgresStore's schema; the orders, stats and journal tables are in it too. */
  schema: string;
  /** BullMQ's schema (its Postgres backend's `schema`). */
  bullSchema: string;
}

const SCHEMA = /^[a-z_][a-z0-9_]{0,50}$/;

/** The layout under `schema` (a lower-case identifier of at most 51 characters). */
export function postgresLayout(schema: string): PostgresLayout {
  if (!SCHEMA.test(schema))
    throw new Error(`invalid schema ${JSON.stringify(schema)}: lower-case letters, digits and _, at most 51`);
  return { schema, bullSchema: `${schema}_bull` };
}

/** Creates the store's schema (migrated) and the order agent's tables; safe to run from every process. */
export async function preparePostgresDeployment(pool: pg.Pool, layout: PostgresLayout): Promise<void> {
  await PostgresStore.create({ pool, schema: layout.schema, checks: false });
  const s = `"${layout.schema}"`;
  // Under a lock: two processes running `create table if not exists` at once can collide in the catalog.
  const client = await pool.connect();
  try {
    await client.query("begin");
    await client.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [
      `order-agent:${layout.schema}`,
    ]);
    await client.query(`
      create table if not exists ${s}.orders (order_id text primary key, status text not null,
        amount integer not null, currency text not null, email text not null);
      create table if not exists ${s}.stats (name text primary key, value bigint not null);
      create table if not exists ${s}.journal (task_id text not null, n integer not null, step jsonb not null,
        primary key (task_id, n));`);
    await client.query("commit");
  } catch (error) {
    await client.query("rollback").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** The order agent's dedup store on PostgreSQL, counted if asked. The schema must be prepared. */
export async function openPostgresOrderStore(options: {
  pool: pg.Pool;
  layout: PostgresLayout;
  retentionMs?: number;
  countOutcomes?: boolean;
}): Promise<OnceStore> {
  const store = await PostgresStore.create({
    pool: options.pool,
    schema: options.layout.schema,
    ...(options.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
  });
  return options.countOutcomes
    ? CountingStore.wrap(store, new PostgresCounters(options.pool, options.layout))
    : store;
}

/** Orders in a table, shared by every worker process. */
export class PostgresOrderBook implements OrderBook {
  readonly #pool: pg.Pool;
  readonly #table: string;

  constructor(pool: pg.Pool, layout: PostgresLayout) {
    this.#pool = pool;
    this.#table = `"${layout.schema}".orders`;
  }

  async create(order: Order): Promise<boolean> {
    const o = orderSchema.parse(order);
    const { rowCount } = await this.#pool.query(
      `insert into ${this.#table} values ($1, $2, $3, $4, $5) on conflict (order_id) do nothing`,
      [o.orderId, o.status, o.amount, o.currency, o.email],
    );
    return rowCount === 1;
  }

  async get(orderId: string): Promise<Order | undefined> {
    const { rows } = await this.#pool.query(`select * from ${this.#table} where order_id = $1`, [orderId]);
    return rows[0] === undefined ? undefined : toOrder(rows[0]);
  }

  async setStatus(orderId: string, status: OrderStatus): Promise<Order | undefined> {
    const { rows } = await this.#pool.query(
      `update ${this.#table} set status = $2 where order_id = $1 returning *`,
      [orderId, status],
    );
    return rows[0] === undefined ? undefined : toOrder(rows[0]);
  }
}

function toOrder(row: { order_id: string; status: string; amount: number; currency: string; email: string }) {
  return orderSchema.parse({ ...row, orderId: row.order_id });
}

/** Counters in a table, shared by every process of a run: a SIGKILLed worker's counts survive it. */
export class PostgresCounters implements Counters {
  readonly #pool: pg.Pool;
  readonly #table: string;

  constructor(pool: pg.Pool, layout: PostgresLayout) {
    this.#pool = pool;
    this.#table = `"${layout.schema}".stats`;
  }

  async increment(field: string): Promise<void> {
    await this.#pool.query(
      `insert into ${this.#table} values ($1, 1) on conflict (name) do update set value = ${this.#table}.value + 1`,
      [field],
    );
  }

  /** Every counter, as numbers. */
  async read(): Promise<Record<string, number>> {
    const { rows } = await this.#pool.query<{ name: string; value: string }>(`select * from ${this.#table}`);
    return Object.fromEntries(rows.map((row) => [row.name, Number(row.value)]));
  }
}

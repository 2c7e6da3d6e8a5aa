// Transactional effects on PostgreSQL: a tool whose effect is a write to the store's own database commits it
// in one transaction with its record's `done`. Unit-level behaviour in one process, then worker processes
// SIGKILLed mid-transaction over 1,000 calls: 0 duplicate rows, 0 unknown, no reconcile hook.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Dispatcher, type DispatcherOptions } from "@once/bullmq";
import { MemoryStore, TransactionStoreError } from "@once/core";
import { InProcess } from "@once/engine";
import { PostgresStore, transactionalTool } from "@once/postgres";
import { NodeChild, postgresUrl, randomSchema } from "@once/support";
import { createPostgresBackend, Queue } from "bullmq";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { KILL_TEST_BULLMQ, orderTransactionTool } from "../fixtures/order-transaction-tool.js";

const WORKER = fileURLToPath(new URL("../fixtures/transactional-worker.ts", import.meta.url));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let pool: pg.Pool;
const schemas: string[] = [];

async function freshSchema(label: string): Promise<{ schema: string; store: PostgresStore }> {
  const schema = randomSchema(label);
  schemas.push(schema);
  const store = await PostgresStore.create({ pool, schema, retentionMs: 3_600_000 });
  await pool.query(
    `create table "${schema}".orders (id bigserial primary key, call_key text not null, n integer not null, pid integer)`,
  );
  await pool.query(`create table "${schema}".accounts (id integer primary key, balance integer not null)`);
  await pool.query(`insert into "${schema}".accounts select g, 0 from generate_series(0, 9) g`);
  return { schema, store };
}

beforeAll(() => {
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 10 });
});

afterAll(async () => {
  await NodeChild.stopAll();
  for (const schema of schemas) await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

function orderTool(schema: string, fail?: () => Error | undefined) {
  return transactionalTool({
    name: "create_order",
    input: z.object({ n: z.number().int() }),
    output: z.object({ orderId: z.string() }),
    classifyError: (error) => ((error as Error).name === "DeclinedError" ? "terminal" : "unknown"),
    run: async ({ n }, ctx) => {
      const { rows } = await ctx.transaction.query<{ id: string }>(
        `insert into "${schema}".orders (call_key, n) values ($1, $2) returning id`,
        [ctx.key, n],
      );
      const error = fail?.();
      if (error) throw error;
      return { orderId: String(rows[0]?.id) };
    },
  });
}

/** The index of the first worker to print `in_transaction` from now on; undefined after `timeoutMs`. */
function nextInside(workers: readonly NodeChild[], timeoutMs: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const offs: (() => void)[] = [];
    const settle = (index: number | undefined) => {
      clearTimeout(timer);
      for (const off of offs) off();
      resolve(index);
    };
    const timer = setTimeout(() => settle(undefined), timeoutMs);
    workers.forEach((worker, index) => {
      offs.push(
        worker.onEvent((event) => {
          if (event.type === "in_transaction") settle(index);
        }),
      );
    });
  });
}

const count = async (schema: string, where = "true") =>
  Number((await pool.query(`select count(*) as n from "${schema}".orders where ${where}`)).rows[0].n);

describe("a transactional tool in one process", () => {
  it("commits the order with its record: the second call replays and writes nothing", async () => {
    const { schema, store } = await freshSchema("tx_once");
    const tool = orderTool(schema);
    const runner = new InProcess({ store, tools: [tool] });
    const first = await runner.call(tool, { n: 1 }, { taskId: "t", stepId: "s" });
    expect(first).toMatchObject({ outcome: "executed", replayed: false });
    const second = await runner.call(tool, { n: 1 }, { taskId: "t", stepId: "s" });
    expect(second).toMatchObject({ outcome: "replay", replayed: true, result: first.result });
    expect(await count(schema)).toBe(1);
    expect(await store.get(first.key as string)).toMatchObject({ state: "done", phase: "prepare" });
  });

  it("rolls the order back when run fails, never marks it unknown, and the retry writes it once", async () => {
    const { schema, store } = await freshSchema("tx_retry");
    let failures = 2;
    const tool = orderTool(schema, () => (failures-- > 0 ? new Error("socket hang up") : undefined));
    const runner = new InProcess({ store, tools: [tool], attempts: 3, backoffMs: 1 });
    const answer = await runner.call(tool, { n: 2 }, { taskId: "t", stepId: "s" });
    expect(answer.outcome).toBe("executed");
    expect(await count(schema)).toBe(1);
    expect((await store.get(answer.key as string))?.claims).toBe(3);
  });

  it("stores a terminal failure with nothing written", async () => {
    const { schema, store } = await freshSchema("tx_terminal");
    const declined = Object.assign(new Error("declined"), { name: "DeclinedError" });
    const tool = orderTool(schema, () => declined);
    const runner = new InProcess({ store, tools: [tool] });
    await expect(runner.call(tool, { n: 3 }, { taskId: "t", stepId: "s" })).rejects.toMatchObject({
      code: "ONCE_CALL_FAILED",
    });
    expect(await count(schema)).toBe(0);
  });

  it("refuses a store without transactions, and a store of another database", async () => {
    const { schema, store } = await freshSchema("tx_refuse");
    expect(() => new InProcess({ store: new MemoryStore(), tools: [orderTool(schema)] })).toThrow(
      TransactionStoreError,
    );
    const elsewhere = transactionalTool({
      name: "credit_account",
      database: "ledger",
      input: z.object({}),
      output: z.object({}),
      run: () => ({}),
    });
    const error = (() => {
      try {
        new InProcess({ store, tools: [elsewhere] });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(TransactionStoreError);
    expect((error as Error).message).toContain('"ledger"');
    expect((error as Error).message).toContain(JSON.stringify(store.database));
  });
});

interface KillRun {
  kills: number;
  rolledBack: number;
  states: { state: string; n: string }[];
  duplicates: unknown[];
  orders: number;
  credited: number;
  outcomes: Map<string, number>;
  errors: unknown[];
}

/**
 * 1,000 calls of `create_order` by three worker processes; 40 times a worker is SIGKILLed right after its
 * transaction wrote an order (the credit and the record's `done` not yet), and another starts in its place.
 * `in-process`: each worker runs every call itself through InProcess. `bullmq`: OnceWorkers on BullMQ's
 * PostgreSQL backend, fed by a Dispatcher here.
 */
async function killRun(mode: "in-process" | "bullmq", label: string): Promise<KillRun> {
  const CALLS = 1_000;
  const WORKERS = 3;
  const { schema, store } = await freshSchema(label);
  const bullSchema = `${schema}_bull`;
  schemas.push(bullSchema);
  const dir = mkdtempSync(path.join(os.tmpdir(), "once-tx-kill-"));
  const killPhase = path.join(dir, "killing");
  writeFileSync(killPhase, "");
  const env = {
    ...process.env,
    POSTGRES_URL: postgresUrl(),
    TX_MODE: mode,
    TX_SCHEMA: schema,
    TX_BULL_SCHEMA: bullSchema,
    TX_QUEUE: "orders",
    TX_CALLS: String(CALLS),
    TX_KILL_PHASE_FILE: killPhase,
    // Three BullMQ workers run 24 calls at once: a wider window keeps their calls going through 40 kills.
    TX_KILL_WINDOW_MS: mode === "bullmq" ? "150,350" : "20,60",
  };
  const outcomes = new Map<string, number>();
  const count = (outcome: string) => outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
  const errors: unknown[] = [];
  const start = () =>
    NodeChild.start({
      script: WORKER,
      nodeArgs: ["--import", "tsx"],
      env,
      onEvent: (event) => {
        if (event.type === "call") count(String(event.outcome));
        if (event.type === "error") errors.push(event);
      },
    });

  // The BullMQ side: the queue (its schema migrated before any worker starts) and a Dispatcher on it.
  let dispatched: Promise<unknown> = Promise.resolve();
  let queue: DispatcherOptions["queue"] | undefined;
  let dispatcher: Dispatcher | undefined;
  if (mode === "bullmq") {
    const connection = { connectionString: postgresUrl(), schema: bullSchema, migrate: true };
    queue = new Queue("orders", { connection }, createPostgresBackend);
    await queue.waitUntilReady();
    const tool = orderTransactionTool({ schema, leaseMs: 1_000 });
    dispatcher = await Dispatcher.create({
      queue,
      store,
      tools: [tool],
      timeoutMs: 10_000,
      retries: 30,
      jobOptions: {
        attempts: KILL_TEST_BULLMQ.attempts,
        backoff: { type: "fixed", delay: KILL_TEST_BULLMQ.backoffMs },
        removeOnComplete: true,
      },
      worker: {
        leaseMs: 1_000,
        lockDurationMs: KILL_TEST_BULLMQ.lockDurationMs,
        stalledIntervalMs: KILL_TEST_BULLMQ.stalledIntervalMs,
      },
    });
    let next = 0;
    const lane = async () => {
      while (next < CALLS) {
        const n = next++;
        try {
          const answer = await dispatcher?.call(
            tool,
            { n, account: n % 10 },
            { taskId: `order-${n}`, stepId: "create" },
          );
          count(answer?.replayed ? "replayed" : "ran");
        } catch (error) {
          errors.push({ n, name: (error as Error).name, message: (error as Error).message });
        }
      }
    };
    dispatched = Promise.all(Array.from({ length: 50 }, lane));
  }

  const workers = Array.from({ length: WORKERS }, start);
  const done = async () =>
    Number(
      (await pool.query(`select count(*) as n from "${schema}".records where state = 'done'`)).rows[0].n,
    );
  let kills = 0;
  const deadline = Date.now() + 200_000;
  try {
    // 40 times: wait for a worker to be inside a transaction, SIGKILL it there and start another in its
    // place. The workers widen that window while the kill-phase file exists, so the calls outlast the kills;
    // then they finish.
    while (kills < 40 && Date.now() < deadline && (await done()) < CALLS) {
      await sleep(20 + Math.floor(Math.random() * 100));
      const i = await nextInside(workers, 10_000);
      if (i === undefined) continue;
      await (workers[i] as NodeChild).kill("SIGKILL");
      kills += 1;
      workers[i] = start();
    }
    rmSync(dir, { recursive: true, force: true });
    await dispatched;
    while ((await done()) < CALLS && Date.now() < deadline) await sleep(200);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await Promise.all(workers.map((w) => w.stop()));
    await dispatcher?.close();
    await queue?.close();
  }

  const { rows: states } = await pool.query<{ state: string; n: string }>(
    `select state, count(*) as n from "${schema}".records group by state order by state`,
  );
  const { rows: duplicates } = await pool.query(
    `select call_key, count(*) from "${schema}".orders group by call_key having count(*) > 1`,
  );
  const { rows: seq } = await pool.query<{ max: string | null; n: string }>(
    `select max(id) as max, count(*) as n from "${schema}".orders`,
  );
  const { rows: balance } = await pool.query<{ sum: string }>(
    `select sum(balance) as sum from "${schema}".accounts`,
  );
  // Every insert that was rolled back (a kill mid-transaction, a lost fence) left a gap in the sequence.
  const rolledBack = Number(seq[0]?.max ?? 0) - Number(seq[0]?.n ?? 0);
  console.log(
    `transactional kill test (${mode}): ${CALLS} calls, ${WORKERS} workers, ${kills} SIGKILLs, ${rolledBack} order inserts rolled back, ` +
      `records ${JSON.stringify(Object.fromEntries(states.map((r) => [r.state, Number(r.n)])))}, ` +
      `call outcomes ${JSON.stringify(Object.fromEntries(outcomes))}, ${duplicates.length} duplicate orders, ${errors.length} errors`,
  );
  return {
    kills,
    rolledBack,
    states,
    duplicates,
    orders: Number(seq[0]?.n),
    credited: Number(balance[0]?.sum),
    outcomes,
    errors,
  };
}

describe("workers SIGKILLed mid-transaction", () => {
  for (const mode of ["in-process", "bullmq"] as const) {
    it(`${mode}: 1,000 calls, 40 SIGKILLs mid-transaction; every order exactly once, every record done, none unknown`, {
      timeout: 240_000,
    }, async () => {
      const run = await killRun(mode, `tx_kill_${mode === "bullmq" ? "bull" : "inproc"}`);
      expect(run.kills).toBeGreaterThanOrEqual(20);
      expect(run.states).toEqual([{ state: "done", n: "1000" }]);
      expect(run.duplicates).toEqual([]);
      expect(run.orders).toBe(1_000);
      expect(run.credited).toBe(1_000);
      expect(run.rolledBack).toBeGreaterThan(0);
      expect(run.outcomes.get("reconciled") ?? 0).toBe(0);
      expect(run.errors).toEqual([]);
    });
  }
});

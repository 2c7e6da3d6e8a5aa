// Transactional effects on PostgreSQL: a tool whose effect is a write to the store's own database commits it
// in one transaction with its record's `done`. Unit-level behaviour in one process, then worker processes
// SIGKILLed mid-transaction over 1,000 calls: 0 duplicate rows, 0 unknown, no reconcile hook.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { InProcess } from "@once/bullmq";
import { MemoryStore, TransactionStoreError } from "@once/core";
import { PostgresStore, transactionalTool } from "@once/postgres";
import { NodeChild, postgresUrl, randomSchema } from "@once/support";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";

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

/** Resolves true at the child's next event of this type (not one it printed before), false after `timeoutMs`. */
function nextEvent(child: NodeChild, type: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      off();
      resolve(false);
    }, timeoutMs);
    const off = child.onEvent((event) => {
      if (event.type !== type) return;
      clearTimeout(timer);
      off();
      resolve(true);
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

describe("workers SIGKILLed mid-transaction", () => {
  it("1,000 calls: every order exactly once, every record done, none unknown", {
    timeout: 240_000,
  }, async () => {
    const CALLS = 1_000;
    const WORKERS = 3;
    const { schema } = await freshSchema("tx_kill");
    const dir = mkdtempSync(path.join(os.tmpdir(), "once-tx-kill-"));
    const killPhase = path.join(dir, "killing");
    writeFileSync(killPhase, "");
    const env = {
      ...process.env,
      POSTGRES_URL: postgresUrl(),
      TX_SCHEMA: schema,
      TX_CALLS: String(CALLS),
      TX_KILL_PHASE_FILE: killPhase,
    };
    const outcomes = new Map<string, number>();
    const errors: unknown[] = [];
    const start = () =>
      NodeChild.start({
        script: WORKER,
        nodeArgs: ["--import", "tsx"],
        env,
        onEvent: (event) => {
          if (event.type === "call")
            outcomes.set(String(event.outcome), (outcomes.get(String(event.outcome)) ?? 0) + 1);
          if (event.type === "error") errors.push(event);
        },
      });
    const workers = Array.from({ length: WORKERS }, start);
    const done = async () =>
      Number(
        (await pool.query(`select count(*) as n from "${schema}".records where state = 'done'`)).rows[0].n,
      );
    let kills = 0;
    const deadline = Date.now() + 200_000;
    // 40 times: pick a worker, wait for it to be inside a transaction (its order written, its credit and its
    // record's `done` not), SIGKILL it there and start another in its place. Then let them finish (the
    // workers widen the window while the kill-phase file exists, so the calls outlast the kills).
    while (kills < 40 && Date.now() < deadline && (await done()) < CALLS) {
      await sleep(20 + Math.floor(Math.random() * 100));
      const i = Math.floor(Math.random() * WORKERS);
      const worker = workers[i] as NodeChild;
      const inside = await nextEvent(worker, "in_transaction", 10_000);
      if (!inside) continue;
      await worker.kill("SIGKILL");
      kills += 1;
      workers[i] = start();
    }
    rmSync(dir, { recursive: true, force: true });
    while ((await done()) < CALLS && Date.now() < deadline) await sleep(200);
    await Promise.all(workers.map((w) => w.stop()));

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
      `transactional kill test: ${CALLS} calls, ${WORKERS} workers, ${kills} SIGKILLs, ${rolledBack} order inserts rolled back, ` +
        `records ${JSON.stringify(Object.fromEntries(states.map((r) => [r.state, Number(r.n)])))}, ` +
        `call outcomes ${JSON.stringify(Object.fromEntries(outcomes))}, ${duplicates.length} duplicate orders`,
    );
    expect(kills).toBeGreaterThanOrEqual(20);
    expect(states).toEqual([{ state: "done", n: String(CALLS) }]);
    expect(duplicates).toEqual([]);
    expect(Number(seq[0]?.n)).toBe(CALLS);
    expect(Number(balance[0]?.sum)).toBe(CALLS);
    expect(rolledBack).toBeGreaterThan(0);
    expect(outcomes.get("reconciled") ?? 0).toBe(0);
    expect(errors).toEqual([]);
  });
});

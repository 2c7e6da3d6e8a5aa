// The server ends a session the store has checked out — pg_terminate_backend, or the idle-in-transaction
// timeout the store sets from the lease — while other calls are in flight in the same process. That one call
// fails as StoreUnavailableError, and the process and its other calls go on; the same for the migration's
// session. Run in a child process, since an unhandled 'error' event from a checked-out client ends the whole
// process.

import { fileURLToPath } from "node:url";
import { StoreUnavailableError } from "@once/core";
import { NodeChild, pollUntil, postgresUrl, randomSchema } from "@once/support";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresStore, SCHEMA_VERSION } from "../src/index.js";

const CHILD = fileURLToPath(new URL("./fixtures/session-end-process.ts", import.meta.url));

let pool: pg.Pool;
const schemas: string[] = [];

beforeAll(() => {
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
});

afterAll(async () => {
  await NodeChild.stopAll();
  for (const schema of schemas) await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

function startChild(schema: string, mode: string): NodeChild {
  return NodeChild.start({
    script: CHILD,
    nodeArgs: ["--import", "tsx"],
    env: { ...process.env, SESSION_END_SCHEMA: schema, SESSION_END_MODE: mode },
  });
}

/** Waits for the child's exit and requires it to have exited 0 after its last event, `done`. */
async function expectDone(child: NodeChild, mode: string): Promise<void> {
  const [code, signal] = await child.exited;
  expect({ code, signal, last: child.events.at(-1) }, child.stderr()).toEqual({
    code: 0,
    signal: null,
    last: { type: "done", mode },
  });
}

async function freshSchema(label: string): Promise<string> {
  const schema = randomSchema(label);
  schemas.push(schema);
  await PostgresStore.create({ pool, schema });
  await pool.query(`create table "${schema}".effects (id bigserial primary key, key text not null)`);
  return schema;
}

describe("a session the server ends under a checked-out client", () => {
  const cases = [
    { mode: "terminate", causeCode: "57P01" },
    { mode: "idle-timeout", causeCode: "25P03" },
  ] as const;
  for (const { mode, causeCode } of cases) {
    it(`${mode}: that call fails as StoreUnavailableError (${causeCode}); the process and its other calls go on`, {
      timeout: 60_000,
    }, async () => {
      const schema = await freshSchema(`session_${mode}`);
      const child = startChild(schema, mode);
      const inside = await child.waitFor("inside");
      if (mode === "terminate") {
        const { rows } = await pool.query("select pg_terminate_backend($1) as ended", [inside.pid]);
        expect(rows[0].ended).toBe(true);
      }
      await expectDone(child, mode);

      const victim = child.all("victim");
      expect(victim).toEqual([
        expect.objectContaining({
          name: StoreUnavailableError.name,
          code: "ONCE_STORE_UNAVAILABLE",
          causeCode,
        }),
      ]);
      expect(child.all("victim-retry")).toEqual([{ type: "victim-retry", outcome: "ok" }]);

      // The other calls ran beside it, before and after the session ended: each committed once.
      const calls = child.all("call");
      expect(calls.length).toBeGreaterThanOrEqual(8);
      expect(calls.filter((c) => c.outcome !== "ok" || c.state !== "done")).toEqual([]);

      // Nothing ran twice: one effect row per key, the victim's from its retry (its first one rolled back).
      const { rows } = await pool.query<{ key: string; n: string }>(
        `select key, count(*) as n from "${schema}".effects group by key`,
      );
      const effects = new Map(rows.map((r) => [r.key, Number(r.n)]));
      expect([...effects.values()].filter((n) => n !== 1)).toEqual([]);
      expect(effects.size).toBe(calls.length + 1);
      const { rows: states } = await pool.query<{ state: string; n: string }>(
        `select state, count(*) as n from "${schema}".records group by state`,
      );
      expect(states).toEqual([{ state: "done", n: String(calls.length + 1) }]);
    });
  }

  it("migration: the migration fails as StoreUnavailableError (57P01); the process goes on and migrates", {
    timeout: 60_000,
  }, async () => {
    const schema = randomSchema("session_migration");
    schemas.push(schema);
    // The migration's advisory lock, held here: the child's migration waits on it, in a query.
    const holder = await pool.connect();
    let child: NodeChild | undefined;
    try {
      await holder.query("select pg_advisory_lock(hashtextextended($1, 0))", [`once:${schema}.`]);
      child = startChild(schema, "migration");
      let pid: number | undefined;
      const waiting = await pollUntil(
        async () => {
          const { rows } = await pool.query<{ pid: number }>(
            "select pid from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock'",
            [`session-end ${schema}`],
          );
          pid = rows[0]?.pid;
          return pid !== undefined;
        },
        { timeoutMs: 20_000 },
      );
      expect(waiting, child.stderr()).toBe(true);
      await pool.query("select pg_terminate_backend($1)", [pid]);
      await child.waitFor("migration");
    } finally {
      await holder.query("select pg_advisory_unlock_all()");
      holder.release();
    }
    await expectDone(child, "migration");
    expect(child.all("migration")).toEqual([
      expect.objectContaining({ name: StoreUnavailableError.name, causeCode: "57P01" }),
    ]);
    // A fresh schema: the retry applies every migration, from the first.
    const every = Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1);
    expect(child.all("migration-retry")).toEqual([{ type: "migration-retry", applied: every }]);
  });
});

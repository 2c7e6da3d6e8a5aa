import { randomBytes } from "node:crypto";
import { type ClaimRequest, StoreUnavailableError } from "@once/core";
import { describeStoreConformance } from "@once/core/testing";
import { pollUntil, postgresUrl, randomSchema } from "@once/support";
import pg from "pg";
import * as vitest from "vitest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  PostgresConfigError,
  PostgresOperatorStore,
  PostgresQueryError,
  PostgresSchemaError,
  PostgresStore,
  PostgresVersionError,
  RECORD_LAYOUT,
  SCHEMA_VERSION,
} from "../src/index.js";
import { migrations } from "../src/migrations.js";
import { namesFor } from "../src/names.js";

// Long enough that a record outlives any test.
const RETENTION_MS = 10 * 60 * 1000;

function request(key: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { key, fingerprint: "fp", tool: "charge_card", phase: "prepare", leaseMs: 10_000, ...overrides };
}

function randomKey(): string {
  return randomBytes(32).toString("hex");
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let pool: pg.Pool;
const schemas: string[] = [];

/** A schema of this test's own, dropped after the file. */
function schemaFor(label: string): string {
  const schema = randomSchema(label);
  schemas.push(schema);
  return schema;
}

beforeAll(() => {
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 20 });
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

describeStoreConformance(
  vitest,
  "PostgresStore",
  async ({ retentionMs = RETENTION_MS, keepTaskIdentity }) => {
    const schema = randomSchema("conformance");
    const store = await PostgresStore.create({
      pool,
      schema,
      retentionMs,
      ...(keepTaskIdentity === undefined ? {} : { keepTaskIdentity }),
    });
    return {
      store,
      retentionMs,
      teardown: async () => {
        await pool.query(`drop schema if exists "${schema}" cascade`);
      },
    };
  },
);

describe("PostgresStore", () => {
  it("keeps one row per key in <schema>.<prefix>records, with the database's clock", async () => {
    const schema = schemaFor("layout");
    const store = await PostgresStore.create({ pool, schema, tablePrefix: "agent_", retentionMs: 60_000 });
    expect(store.database).toBe((await pool.query("select current_database() as d")).rows[0].d);
    const key = randomKey();
    const { rows: before } = await pool.query<{ now: string }>(
      "select floor(extract(epoch from clock_timestamp()) * 1000)::bigint as now",
    );
    const claim = await store.claim(request(key, { leaseMs: 5_000 }));
    if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
    expect(claim.token).toMatch(/^1\.[0-9a-f]{16}$/);
    const serverNow = Number(before[0]?.now);
    expect(claim.leaseUntil - 5_000).toBeGreaterThanOrEqual(serverNow);
    expect(claim.leaseUntil - 5_000).toBeLessThan(serverNow + 1_000);

    const { rows } = await pool.query(`select * from "${schema}"."agent_records" where key = $1`, [key]);
    expect(rows[0]).toMatchObject({
      state: "claimed",
      phase: "prepare",
      fence: "1",
      owner: claim.token,
      fp: "fp",
    });
    const expiresIn = Number(rows[0].expires_at) - serverNow;
    expect(expiresIn).toBeGreaterThan(55_000);
    expect(expiresIn).toBeLessThanOrEqual(61_000);
  });

  it("records its schema version, and migrating again applies nothing", async () => {
    const schema = schemaFor("version");
    const first = await PostgresStore.create({ pool, schema });
    const every = Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1);
    expect(first.migration).toEqual({ from: 0, to: SCHEMA_VERSION, applied: every });
    const second = await PostgresStore.create({ pool, schema });
    expect(second.migration).toEqual({ from: SCHEMA_VERSION, to: SCHEMA_VERSION, applied: [] });
    const { rows } = await pool.query(`select version, description from "${schema}".migrations`);
    expect(rows).toHaveLength(SCHEMA_VERSION);
  });

  it("migrates a fresh schema from two processes at once: one waits for the other, neither fails", async () => {
    const schema = schemaFor("race");
    // Two pools: two sessions, as two processes would have.
    const pools = [1, 2, 3, 4].map(() => new pg.Pool({ connectionString: postgresUrl(), max: 2 }));
    try {
      const stores = await Promise.all(pools.map((p) => PostgresStore.create({ pool: p, schema })));
      const applied = stores.map((s) => s.migration?.applied ?? []);
      expect(applied.filter((a) => a.length > 0)).toEqual([
        Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
      ]);
      expect(applied.filter((a) => a.length === 0)).toHaveLength(3);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it("refuses a schema newer than this build, and an unmigrated one with migrate: false", async () => {
    const schema = schemaFor("newer");
    await expect(PostgresStore.create({ pool, schema, migrate: false })).rejects.toBeInstanceOf(
      PostgresSchemaError,
    );
    await PostgresStore.create({ pool, schema });
    await pool.query(
      `insert into "${schema}".migrations (version, description) values (99, 'from the future')`,
    );
    const error = await PostgresStore.create({ pool, schema }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PostgresSchemaError);
    expect((error as Error).message).toContain("version 99");
    await expect(PostgresStore.create({ pool, schema, migrate: false })).rejects.toBeInstanceOf(
      PostgresSchemaError,
    );
  });

  it("refuses a schema or prefix that is not an identifier, before touching the database", async () => {
    for (const schema of ['once"; drop table x; --', "Once", "1once", "", "a".repeat(64), "once-store"]) {
      const error = await PostgresStore.create({ pool, schema }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PostgresConfigError);
      expect((error as PostgresConfigError).setting).toBe("schema");
    }
    const error = await PostgresStore.create({ pool, schema: "once", tablePrefix: "x y" }).catch((e) => e);
    expect((error as PostgresConfigError).setting).toBe("tablePrefix");
  });

  it("treats an expired record as absent everywhere, and sweeps it in batches", async () => {
    const schema = schemaFor("sweep");
    const store = await PostgresStore.create({ pool, schema, retentionMs: 200 });
    const keys = Array.from({ length: 25 }, randomKey);
    const tokens = new Map<string, string>();
    for (const key of keys) {
      const claim = await store.claim(request(key));
      if (claim.outcome === "acquired") tokens.set(key, claim.token);
    }
    await sleep(300);
    const key = keys[0] as string;
    expect(await store.get(key)).toBeUndefined();
    expect(await store.complete(key, tokens.get(key) as string, "1")).toEqual({ outcome: "lost" });
    const count = async () =>
      Number((await pool.query(`select count(*) as n from "${schema}".records`)).rows[0].n);
    expect(await count()).toBe(25);
    expect(await store.sweep({ batchSize: 10 })).toEqual({ deleted: 25, batches: 3, tasks: 0 });
    expect(await count()).toBe(0);
    expect(await store.sweep()).toEqual({ deleted: 0, batches: 1, tasks: 0 });
  });

  it("surfaces a corrupt record as a bug (PostgresQueryError), never as unavailability", async () => {
    const schema = schemaFor("corrupt");
    const store = await PostgresStore.create({ pool, schema });
    const key = randomKey();
    await store.claim(request(key));
    await pool.query(`alter table "${schema}".records drop constraint records_state_check`);
    await pool.query(`update "${schema}".records set state = 'bogus' where key = $1`, [key]);
    const error = await store.claim(request(key)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PostgresQueryError);
    expect((error as Error).message).toContain("bogus");
  });

  it("refuses a row of a newer layout wherever it is read: RecordLayoutError naming both numbers, nothing changed", async () => {
    const schema = schemaFor("newer_layout");
    const store = await PostgresStore.create({ pool, schema });
    const operator = await PostgresOperatorStore.create({ pool, schema });
    const newer = RECORD_LAYOUT + 1;
    const settled = async (settle: (key: string, token: string) => Promise<unknown>) => {
      const key = randomKey();
      const claim = await store.claim(request(key));
      if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
      await settle(key, claim.token);
      return key;
    };
    const keys = [
      await settled((key, token) => store.complete(key, token, '{"id":1}')),
      await settled((key, token) => store.failTerminal(key, token, { name: "Error", message: "declined" })),
    ];
    await pool.query(`update "${schema}".records set layout = $1`, [newer]);
    const row = (key: string) => pool.query(`select * from "${schema}".records where key = $1`, [key]);
    for (const key of keys) {
      const before = (await row(key)).rows;
      const refused = {
        name: "RecordLayoutError",
        code: "ONCE_RECORD_LAYOUT",
        key,
        layout: newer,
        knownLayout: RECORD_LAYOUT,
        message: `@once/postgres record ${key} was written by layout ${newer}, this reader knows up to ${RECORD_LAYOUT}: upgrade it; nothing was read or run`,
      };
      await expect(store.claim(request(key))).rejects.toMatchObject(refused);
      await expect(store.get(key)).rejects.toMatchObject(refused);
      await expect(operator.get(key)).rejects.toMatchObject(refused);
      expect((await row(key)).rows).toEqual(before);
    }
    await expect(operator.list({ limit: 10 })).rejects.toMatchObject({ code: "ONCE_RECORD_LAYOUT" });
    await expect(operator.count()).rejects.toMatchObject({ code: "ONCE_RECORD_LAYOUT" });
  });

  it("reads a row written before rows had a layout (schema version 1) as it always did", async () => {
    const schema = schemaFor("layout_v1");
    const names = namesFor(schema, "");
    const [v1] = migrations(names);
    // The schema as the first release left it: its ledger, version 1, and a record its functions wrote.
    await pool.query(`create schema "${schema}"`);
    await pool.query(
      `create table "${schema}".migrations (version integer primary key, description text not null, applied_at timestamptz not null default now())`,
    );
    await pool.query(v1?.sql ?? "");
    await pool.query(`insert into "${schema}".migrations (version, description) values (1, $1)`, [
      v1?.description,
    ]);
    const key = randomKey();
    const claim = await pool.query(
      `select * from "${schema}".claim($1, 'fp', 'charge_card', 'effect', 10000, 600000, 'abc', '')`,
      [key],
    );
    await pool.query(`select * from "${schema}".complete($1, $2, '{"id":1}', 600000)`, [
      key,
      claim.rows[0].token,
    ]);

    const store = await PostgresStore.create({ pool, schema });
    expect(store.migration).toMatchObject({ from: 1, applied: [2, 3, 4, 5] });
    expect(await store.claim(request(key))).toMatchObject({
      outcome: "replay",
      result: '{"id":1}',
      fence: 1,
    });
    expect(await store.get(key)).toMatchObject({ state: "done", result: '{"id":1}' });
    const { rows } = await pool.query(`select layout from "${schema}".records where key = $1`, [key]);
    expect(rows).toEqual([{ layout: 1 }]);
  });

  it("rejects a lease that is not a positive integer before talking to PostgreSQL", async () => {
    const store = await PostgresStore.create({ pool, schema: schemaFor("lease"), checks: false });
    await expect(store.claim(request(randomKey(), { leaseMs: 1.5 }))).rejects.toBeInstanceOf(RangeError);
    await expect(store.heartbeat(randomKey(), "1.a", 0)).rejects.toBeInstanceOf(RangeError);
  });

  it("refuses a server older than PostgreSQL 13 with PostgresVersionError, naming both versions", async () => {
    // A real server answers for everything but its version: what an old server would say.
    const old = new pg.Pool({ connectionString: postgresUrl(), max: 2 });
    const query = old.query.bind(old) as (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
    (old as unknown as { query: unknown }).query = async (text: string, values?: unknown[]) => {
      const result = await query(text, values);
      if (text.includes("server_version_num"))
        for (const row of result.rows) Object.assign(row, { version_num: "120019", version: "12.19" });
      return result;
    };
    try {
      const error = await PostgresStore.create({ pool: old, schema: schemaFor("old") }).catch((e) => e);
      expect(error).toBeInstanceOf(PostgresVersionError);
      expect(error).toMatchObject({
        code: "ONCE_POSTGRES_VERSION",
        serverVersion: "12.19",
        minimumMajor: 13,
      });
      expect((error as Error).message).toContain("12.19");
    } finally {
      await old.end();
    }
  });

  it("reports what the start-up checks judged, and what they cannot see", async () => {
    const store = await PostgresStore.create({ pool, schema: schemaFor("report") });
    expect(store.report?.versionNum).toBeGreaterThanOrEqual(130000);
    expect(store.report?.checks.map((c) => c.check)).toEqual([
      "version",
      "recovery",
      "synchronous_commit",
      "fsync",
      "isolation",
      "privileges",
    ]);
    expect(store.report?.problems).toEqual([]);
    expect(store.report?.unchecked.join(" ")).toContain("synchronous_standby_names");
  });

  it("fails closed with StoreUnavailableError when the server is not there", async () => {
    const dead = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/postgres" });
    dead.on("error", () => {});
    try {
      const error = await PostgresStore.create({ pool: dead, timeoutMs: 1_000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toContain("start-up checks");
    } finally {
      await dead.end();
    }
  });
});

describe("checkouts", () => {
  it("gives a client the pool hands over late back to it: a transaction that stopped waiting leaks nothing", async () => {
    const small = new pg.Pool({ connectionString: postgresUrl(), max: 1 });
    try {
      const store = await PostgresStore.create({ pool: small, schema: schemaFor("late"), timeoutMs: 300 });
      const key = randomKey();
      const claim = await store.claim(request(key));
      if (claim.outcome !== "acquired") throw new Error(claim.outcome);
      // The pool's one connection, held here: the transaction's checkout waits for it, then gives up.
      const held = await small.connect();
      let ran = false;
      const work = async () => {
        ran = true;
        return "1";
      };
      const error = await store
        .completeInTransaction(key, claim.token, work, { leaseMs: 10_000 })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(ran).toBe(false);
      // Released, it goes to the checkout that gave up, which must hand it straight back.
      held.release();
      expect(await pollUntil(() => small.idleCount === 1, { timeoutMs: 5_000 })).toBe(true);
      expect(await store.complete(key, claim.token, "1")).toMatchObject({ outcome: "ok" });
    } finally {
      await small.end();
    }
  });
});

/**
 * Counts the queries the store's pool sends on its connections: each is one round trip to the server (pg
 * sends a query's parse, bind and execute together and waits once).
 */
function countingPool(): { pool: pg.Pool; sent: string[] } {
  const sent: string[] = [];
  const counted = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
  counted.on("connect", (client) => {
    const clientQuery = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: unknown }).query = (...args: unknown[]) => {
      sent.push(String(typeof args[0] === "string" ? args[0] : (args[0] as { text: string }).text));
      return clientQuery(...args);
    };
  });
  return { pool: counted, sent };
}

describe("round trips", () => {
  it("costs exactly one query per transition, replay and read, cancel and task read included", async () => {
    const { pool: counted, sent } = countingPool();
    const schema = schemaFor("trips");
    try {
      const store = await PostgresStore.create({ pool: counted, schema });
      const trips = async (action: () => Promise<unknown>) => {
        sent.length = 0;
        await action();
        return sent.length;
      };
      const key = randomKey();
      let token = "";
      expect(
        await trips(async () => {
          const claim = await store.claim(request(key));
          if (claim.outcome !== "acquired") throw new Error(claim.outcome);
          token = claim.token;
        }),
      ).toBe(1);
      expect(await trips(() => store.heartbeat(key, token, 10_000))).toBe(1);
      expect(await trips(() => store.beginEffect(key, token))).toBe(1);
      expect(await trips(() => store.complete(key, token, '{"id":"ch_1"}'))).toBe(1);
      expect(await trips(() => store.claim(request(key)))).toBe(1);
      expect(await trips(() => store.get(key))).toBe(1);

      const other = randomKey();
      const claim = await store.claim(request(other));
      if (claim.outcome !== "acquired") throw new Error(claim.outcome);
      expect(await trips(() => store.markUnknown(other, claim.token))).toBe(1);
      const reconcile = await store.claim(request(other));
      if (reconcile.outcome !== "reconcile") throw new Error(reconcile.outcome);
      expect(await trips(() => store.giveUp(other, reconcile.token))).toBe(1);
      expect(
        await trips(() =>
          store.resolve(other, { decision: { as: "not_applied" }, by: "ops", why: "checked" }),
        ),
      ).toBe(1);

      // A task: a claim naming it, the cancel (whatever it reaches) and the read of its records.
      const task = { namespace: "trips", taskId: `task-${randomKey().slice(0, 8)}` };
      for (const stepId of ["a", "b", "c"])
        expect(await trips(() => store.claim(request(randomKey(), { task: { ...task, stepId } })))).toBe(1);
      expect(await trips(() => store.cancelTask(task, { by: "ops", why: "trips" }))).toBe(1);
      expect(await trips(() => store.readTask(task))).toBe(1);

      // A transactional effect: begin, the effect's own statements, complete, commit.
      const tx = randomKey();
      const txClaim = await store.claim(request(tx));
      if (txClaim.outcome !== "acquired") throw new Error(txClaim.outcome);
      expect(
        await trips(() =>
          store.completeInTransaction(
            tx,
            txClaim.token,
            async (client) => {
              await client.query("select 1");
              return "1";
            },
            { leaseMs: 10_000 },
          ),
        ),
      ).toBe(4);
    } finally {
      await counted.end();
    }
  });
});

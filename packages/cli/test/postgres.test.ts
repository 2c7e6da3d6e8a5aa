// inspect, list, resolve, stats and doctor against a PostgresStore (--postgres-url), with records made by the
// store's own transitions, in a schema of this file's own.

import type { RecordState } from "@once/core";
import { PostgresStore, SCHEMA_VERSION } from "@once/postgres";
import { postgresUrl, randomSchema } from "@once/support";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonOf, runOnce } from "./run-once.js";
import { RESULT, seedEveryState } from "./seed-records.js";

const STATES: RecordState[] = ["claimed", "reconciling", "released", "done", "failed", "unknown"];

let pool: pg.Pool;
let store: PostgresStore;
let keys: Record<RecordState, string>;
const schema = randomSchema("cli");

const on = () => ["--postgres-url", postgresUrl(), "--schema", schema];

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
  store = await PostgresStore.create({ pool, schema, retentionMs: 10 * 60 * 1000 });
  keys = await seedEveryState(store);
});

afterAll(async () => {
  await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

describe("once against a PostgresStore", () => {
  it.each(STATES)("inspect shows a %s record", async (state) => {
    const run = await runOnce(["inspect", keys[state], ...on()]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^state +${state} — `, "m"));
    expect(run.stdout).toMatch(new RegExp(`^stored +${schema}\\.records key ${keys[state]}$`, "m"));
  });

  it("inspect says where it looked when there is no record, and exits 1", async () => {
    const run = await runOnce(["inspect", "0".repeat(64), ...on()]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`in schema ${schema}`);
  });

  it("list filters by state, and reads every record", async () => {
    const run = await runOnce(["list", "--state", "unknown,done", "--json", ...on()]);
    expect(run.code).toBe(0);
    const listed = jsonOf<{ complete: boolean; records: { key: string; state: string }[] }>(run);
    expect(listed.complete).toBe(true);
    expect(listed.records.map((r) => r.key).sort()).toEqual([keys.unknown, keys.done].sort());
    const table = await runOnce(["list", ...on()]);
    expect(table.stdout).toContain(`6 records in schema ${schema} (every record read)`);
  });

  it("stats counts every state", async () => {
    const run = await runOnce(["stats", "--json", ...on()]);
    expect(run.code).toBe(0);
    const stats = jsonOf<{ records: number; byState: Record<string, number> }>(run);
    expect(stats.records).toBe(6);
    expect(stats.byState).toEqual({
      claimed: 1,
      reconciling: 1,
      released: 1,
      done: 1,
      failed: 1,
      unknown: 1,
      awaiting_approval: 0,
      approved: 0,
      cancelled: 0,
    });
  });

  it("resolve settles an unknown record as applied, and refuses anything else", async () => {
    const refused = await runOnce([
      "resolve",
      keys.done,
      "--applied",
      "--result",
      RESULT,
      "--why",
      "x",
      "--yes",
      ...on(),
    ]);
    expect(refused.code).toBe(1);
    const run = await runOnce([
      "resolve",
      keys.unknown,
      "--applied",
      "--result",
      RESULT,
      "--why",
      "found it in the ledger",
      "--by",
      "ops",
      "--yes",
      ...on(),
    ]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(await store.get(keys.unknown)).toMatchObject({
      state: "done",
      result: RESULT,
      resolution: { as: "applied", by: "ops", why: "found it in the ledger" },
    });
  });

  it("doctor judges the database and the store's schema, and says what it cannot see", async () => {
    const run = await runOnce(["doctor", ...on()]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^version +ok +PostgreSQL 1\d/m);
    expect(run.stdout).toMatch(
      new RegExp(`^schema +ok +schema once_test_cli_\\w+ at version ${SCHEMA_VERSION}$`, "m"),
    );
    expect(run.stdout).toContain("Not checked (cannot be seen from a connection):");
    const json = jsonOf<{ ok: boolean; findings: { check: string }[] }>(
      await runOnce(["doctor", "--json", ...on()]),
    );
    expect(json.ok).toBe(true);
  });

  it("refuses --prefix with --postgres-url, and a URL that is not PostgreSQL's", async () => {
    expect((await runOnce(["list", ...on(), "--prefix", "x:"])).code).toBe(2);
    expect((await runOnce(["list", "--postgres-url", "redis://127.0.0.1:6379"])).code).toBe(2);
    const missing = await runOnce(["list", "--postgres-url", postgresUrl(), "--schema", "no_such_schema"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("version 0");
  });
});

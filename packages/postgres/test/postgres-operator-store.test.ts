import { randomBytes } from "node:crypto";
import type { Ownership } from "@once/core";
import { postgresUrl, randomSchema } from "@once/support";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresOperatorStore, PostgresStore } from "../src/index.js";

const RESULT = '{"chargeId":"ch_1"}';

let pool: pg.Pool;
let store: PostgresStore;
let operator: PostgresOperatorStore;
const schema = randomSchema("operator");
const done: string[] = [];
const unknown: string[] = [];

async function claim(key: string, tool: string): Promise<Ownership> {
  const outcome = await store.claim({
    key,
    fingerprint: `fp-${key}`,
    tool,
    phase: "effect",
    leaseMs: 60_000,
  });
  if (!("token" in outcome)) throw new Error(`claim of ${key} gave ${outcome.outcome}`);
  return outcome as Ownership;
}

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
  store = await PostgresStore.create({ pool, schema, retentionMs: 10 * 60 * 1000 });
  for (let i = 0; i < 7; i++) {
    const key = randomBytes(32).toString("hex");
    const owner = await claim(key, "charge_card");
    await store.complete(key, owner.token, RESULT);
    done.push(key);
  }
  for (let i = 0; i < 3; i++) {
    const key = randomBytes(32).toString("hex");
    const owner = await claim(key, "send_email");
    await store.markUnknown(key, owner.token, { name: "TimeoutError", message: "socket timeout" });
    unknown.push(key);
  }
  operator = await PostgresOperatorStore.create({ pool, schema });
});

afterAll(async () => {
  await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

describe("PostgresOperatorStore", () => {
  it("refuses a schema that was never migrated", async () => {
    await expect(PostgresOperatorStore.create({ pool, schema: randomSchema("missing") })).rejects.toThrow();
  });

  it("lists every record in pages, with a cursor, and none twice", async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await operator.list({ limit: 3, ...(cursor === undefined ? {} : { cursor }) });
      expect(page.records.length).toBeLessThanOrEqual(3);
      seen.push(...page.records.map((r) => r.key));
      cursor = page.cursor;
      pages++;
    } while (cursor !== undefined && pages < 10);
    expect(seen.sort()).toEqual([...done, ...unknown].sort());
  });

  it("filters by state and tool, and bounds what a page looks at", async () => {
    const page = await operator.list({ states: ["unknown"], tools: ["send_email"], limit: 100 });
    expect(page.records.map((r) => r.key).sort()).toEqual([...unknown].sort());
    expect(page.cursor).toBeUndefined();
    const bounded = await operator.list({ states: ["failed"], limit: 100, maxExamined: 4 });
    expect(bounded.records).toEqual([]);
    expect(bounded.examined).toBe(4);
    expect(bounded.cursor).toBeDefined();
  });

  it("counts by state and tool, and says when it sampled", async () => {
    const counts = await operator.count();
    expect(counts.records).toBe(10);
    expect(counts.sampled).toBe(false);
    expect(counts.byState.done).toBe(7);
    expect(counts.byState.unknown).toBe(3);
    expect(counts.byTool.send_email?.unknown).toBe(3);
    expect(counts.totalKeys).toBe(10);
    const sample = await operator.count({ sample: 4 });
    expect(sample.records).toBe(4);
    expect(sample.sampled).toBe(true);
  });

  it("resolves an unknown record, fenced, and refuses one that is not unknown", async () => {
    const key = unknown[0] as string;
    const before = await operator.get(key);
    const resolved = await operator.resolve(key, {
      decision: { as: "applied", result: RESULT },
      by: "ops",
      why: "found in the ledger",
    });
    expect(resolved.outcome).toBe("resolved");
    expect(resolved.record).toMatchObject({ state: "done", result: RESULT });
    expect(resolved.outcome === "resolved" && resolved.fence).toBe((before?.fence ?? 0) + 1);
    const refused = await operator.resolve(done[0] as string, {
      decision: { as: "not_applied" },
      by: "ops",
      why: "x",
    });
    expect(refused.outcome).toBe("refused");
    const stale = await operator.resolve(unknown[1] as string, {
      decision: { as: "not_applied" },
      by: "ops",
      why: "x",
      expectFence: 999,
    });
    expect(stale).toMatchObject({ outcome: "refused" });
  });
});

// Approvals on PostgreSQL beyond the conformance suite: a row asked about is at layout 2 (one never asked about
// stays at 1), and the operator's approve / deny through PostgresOperatorStore — fenced, bound to the
// fingerprint, refused with a named error and the row unchanged.

import { randomBytes } from "node:crypto";
import { type ClaimRequest, DecisionRefusedError } from "@once/core";
import { postgresUrl, randomSchema } from "@once/support";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresOperatorStore, PostgresStore, RECORD_LAYOUT } from "../src/index.js";

let pool: pg.Pool;
let store: PostgresStore;
let operator: PostgresOperatorStore;
const schema = randomSchema("approvals");

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
  store = await PostgresStore.create({ pool, schema, retentionMs: 10 * 60 * 1000 });
  operator = await PostgresOperatorStore.create({ pool, schema });
});

afterAll(async () => {
  await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

function request(key: string): ClaimRequest {
  return { key, fingerprint: "fp-a", tool: "charge_card", phase: "prepare", leaseMs: 10_000 };
}

async function pending(): Promise<string> {
  const key = randomBytes(32).toString("hex");
  const claim = await store.claim(request(key));
  if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
  expect((await store.requestApproval(key, claim.token, { reason: "over 100", ttlMs: 60_000 })).outcome).toBe(
    "ok",
  );
  return key;
}

async function row(key: string): Promise<Record<string, unknown> | undefined> {
  const { rows } = await pool.query(`select * from "${schema}".records where key = $1`, [key]);
  return rows[0];
}

describe("approvals on PostgreSQL", () => {
  it("a row asked about is at layout 2; one never asked about stays at 1", async () => {
    expect(RECORD_LAYOUT).toBeGreaterThanOrEqual(2);
    const key = await pending();
    expect(await row(key)).toMatchObject({
      state: "awaiting_approval",
      apr_reason: "over 100",
      layout: 2,
      owner: null,
    });
    const plain = randomBytes(32).toString("hex");
    await store.claim(request(plain));
    expect(await row(plain)).toMatchObject({ layout: 1 });
  });

  it("approve and deny through the operator store; refusals are DecisionRefusedError and change nothing", async () => {
    const missing = randomBytes(32).toString("hex");
    await expect(operator.approve(missing, { by: "alice" })).rejects.toBeInstanceOf(DecisionRefusedError);
    expect(await row(missing)).toBeUndefined();

    const key = await pending();
    const before = await row(key);
    await expect(operator.approve(key, { by: " " })).rejects.toThrow(/say who decides/);
    await expect(operator.approve(key, { by: "alice", fingerprint: "fp-b" })).rejects.toThrow(
      /not the record's/,
    );
    await expect(operator.deny(key, { by: "bob", expectFence: 9 })).rejects.toThrow(/moved on/);
    expect(await row(key)).toEqual(before);

    const approved = await operator.approve(key, { by: "alice", why: "checked" });
    expect(approved.record).toMatchObject({
      state: "approved",
      approval: { decision: { as: "approved", by: "alice", why: "checked" } },
    });
    const after = await row(key);
    await expect(operator.deny(key, { by: "bob" })).rejects.toThrow(/already approved by alice/);
    expect(await row(key)).toEqual(after);
    expect(await store.claim(request(key))).toMatchObject({ outcome: "acquired", approved: true });

    const other = await pending();
    const denied = await operator.deny(other, { by: "bob", why: "over the limit" });
    expect(denied.record).toMatchObject({ state: "failed", error: { code: "denied" } });
  });
});

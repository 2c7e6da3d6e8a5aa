// `once approve` and `once deny` against real stores (Redis and PostgreSQL), with records made by the stores'
// own transitions: a pending request decided once, every refusal exit 1 with the record unchanged.

import { randomBytes } from "node:crypto";
import type { ApprovalStore } from "@once/core";
import { PostgresStore } from "@once/postgres";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, postgresUrl, randomPrefix, randomSchema, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonOf, runOnce } from "./run-once.js";

const RETENTION_MS = 10 * 60 * 1000;
const prefix = randomPrefix("cli-approvals");
const schema = randomSchema("cli_approvals");
let redis: Redis;
let pool: pg.Pool;
const stores: { name: string; store: ApprovalStore; args: string[] }[] = [];

beforeAll(async () => {
  redis = new Redis(redisUrl());
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
  stores.push(
    {
      name: "redis",
      store: await RedisStore.create({ redis, prefix, retentionMs: RETENTION_MS }),
      args: ["--redis-url", redisUrl(), "--prefix", prefix],
    },
    {
      name: "postgres",
      store: await PostgresStore.create({ pool, schema, retentionMs: RETENTION_MS }),
      args: ["--postgres-url", postgresUrl(), "--schema", schema],
    },
  );
});

afterAll(async () => {
  await cleanupPrefix(redis, prefix);
  await redis.quit();
  await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

async function pending(store: ApprovalStore): Promise<string> {
  const key = randomBytes(32).toString("hex");
  const claim = await store.claim({
    key,
    fingerprint: "fp-a",
    tool: "refund",
    phase: "prepare",
    leaseMs: 10_000,
  });
  if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
  await store.requestApproval(key, claim.token, { reason: "refund over 100", ttlMs: 60_000 });
  return key;
}

describe.each(["redis", "postgres"])("once approve / deny on %s", (name) => {
  const target = () => stores.find((s) => s.name === name) as (typeof stores)[number];

  it("approve: decided once, who and why kept; inspect shows the request and the decision", async () => {
    const { store, args } = target();
    const key = await pending(store);
    const shown = await runOnce(["inspect", key, ...args]);
    expect(shown.stdout).toMatch(/^approval +asked .*: refund over 100$/m);
    expect(shown.stdout).toContain(`once approve ${key}`);
    const run = await runOnce([
      "approve",
      key,
      "--by",
      "alice",
      "--why",
      "checked",
      "--yes",
      "--json",
      ...args,
    ]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(jsonOf(run)).toMatchObject({ key, decided: true, as: "approved" });
    expect(await store.get(key)).toMatchObject({
      state: "approved",
      approval: { decision: { as: "approved", by: "alice", why: "checked" } },
    });
    const again = await runOnce(["deny", key, "--by", "bob", "--why", "late", "--yes", ...args]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already approved by alice/);
    expect((await store.get(key))?.state).toBe("approved");
  });

  it("deny: the call fails for good with the denial", async () => {
    const { store, args } = target();
    const key = await pending(store);
    const run = await runOnce(["deny", key, "--by", "bob", "--why", "over the limit", "--yes", ...args]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^denied .* → failed/);
    expect(await store.get(key)).toMatchObject({ state: "failed", error: { code: "denied" } });
  });

  it("refuses, exit 1 and nothing changed: no record, another fingerprint, a record not awaiting approval", async () => {
    const { store, args } = target();
    const missing = randomBytes(32).toString("hex");
    const none = await runOnce(["approve", missing, "--why", "x", "--yes", ...args]);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/no record for key/);

    const key = await pending(store);
    const before = await store.get(key);
    const wrong = await runOnce(["approve", key, "--fingerprint", "fp-b", "--why", "x", "--yes", ...args]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/not the record's/);
    const { ttlMs: _a, ...was } = before ?? {};
    const { ttlMs: _b, ...now } = (await store.get(key)) ?? {};
    expect(now).toEqual(was);

    const usage = await runOnce(["approve", key, "--yes", ...args]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--why is required/);
  });
});

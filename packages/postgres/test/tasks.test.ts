// Tasks on PostgreSQL beyond the conformance suite: a cancel racing claims from several connections, the
// migration from schema version 3 with rows written before, the rows a cancel leaves (layouts, identities),
// the sweep of expired task rows, and cancel / task through PostgresOperatorStore.

import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import {
  CancelRefusedError,
  type ClaimOutcome,
  type ClaimRequest,
  DEFAULT_RETENTION_MS,
  deriveKey,
  deriveTaskKey,
  type TaskIdentity,
  type WriteOutcome,
} from "@once/core";
import { pollUntil, postgresUrl, randomSchema } from "@once/support";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresOperatorStore, PostgresStore, RECORD_LAYOUT, SCHEMA_VERSION } from "../src/index.js";
import { migrations } from "../src/migrations.js";
import { namesFor } from "../src/names.js";

const RETENTION_MS = 10 * 60 * 1000;
const by = "ops@example.com";
const why = "the customer withdrew the order";

let pool: pg.Pool;
const schemas: string[] = [];

/** A schema of this test's own, dropped after the file. */
function schemaFor(label: string): string {
  const schema = randomSchema(label);
  schemas.push(schema);
  return schema;
}

beforeAll(() => {
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 8 });
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function newTask(label: string) {
  const ref = { namespace: label, taskId: `task-${randomBytes(8).toString("hex")}` };
  const step = (n: number): TaskIdentity => ({ ...ref, stepId: `step-${n}` });
  return { ref, step, key: (n: number) => deriveKey(step(n)) };
}

function request(key: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { key, fingerprint: "fp", tool: "charge_card", phase: "prepare", leaseMs: 30_000, ...overrides };
}

async function rowOf(schema: string, key: string): Promise<Record<string, unknown> | undefined> {
  return (await pool.query(`select * from "${schema}".records where key = $1`, [key])).rows[0];
}

describe("a cancel racing claims", () => {
  it("grants no claim and begins no effect after cancelTask resolved, with claims from sixteen connections of four pools", async () => {
    const schema = schemaFor("task_race");
    await PostgresStore.create({ pool, schema, retentionMs: RETENTION_MS });
    // Four pools of four connections: the claims and the cancel reach the server as from four processes.
    const pools = [1, 2, 3, 4].map(() => new pg.Pool({ connectionString: postgresUrl(), max: 4 }));
    try {
      const stores = await Promise.all(
        pools.map((p) => PostgresStore.create({ pool: p, schema, migrate: false, checks: false })),
      );
      const task = newTask("race");
      interface Attempt {
        key: string;
        sentAt: number;
        claim: ClaimOutcome["outcome"];
        effectSentAt?: number;
        effect?: WriteOutcome["outcome"];
      }
      const attempts: Attempt[] = [];
      let next = 0;
      let stop = false;
      // Each worker claims new steps of the task one after another, and begins the effect of each it is
      // granted, as an engine would: until a while after the cancel returned.
      const worker = async (store: PostgresStore) => {
        while (!stop) {
          const n = next++;
          const key = task.key(n);
          const attempt: Attempt = { key, sentAt: performance.now(), claim: "conflict" };
          const claim = await store.claim(request(key, { task: task.step(n) }));
          attempt.claim = claim.outcome;
          attempts.push(attempt);
          if (claim.outcome === "acquired") {
            attempt.effectSentAt = performance.now();
            attempt.effect = (await store.beginEffect(key, claim.token)).outcome;
          }
        }
      };
      const workers = stores.flatMap((store) => [1, 2, 3, 4].map(() => worker(store)));
      // Enough claims on each side of the cancel, however loaded the machine.
      await pollUntil(() => attempts.length >= 50, { timeoutMs: 20_000 });
      await sleep(100);
      const outcome = await (stores[0] as PostgresStore).cancelTask(task.ref, { by, why });
      const resolvedAt = performance.now();
      await pollUntil(() => attempts.filter((a) => a.sentAt > resolvedAt).length >= 50, {
        timeoutMs: 20_000,
      });
      stop = true;
      await Promise.all(workers);

      expect(outcome.outcome).toBe("cancelled");
      const granted = attempts.filter((a) => a.claim === "acquired");
      const after = attempts.filter((a) => a.sentAt > resolvedAt);
      // Both sides of the cancel were exercised.
      expect(granted.length).toBeGreaterThan(10);
      expect(after.length).toBeGreaterThan(10);
      // Every claim sent after the cancel resolved was refused; every claim answered is one of the two.
      expect(after.every((a) => a.claim === "cancelled")).toBe(true);
      expect(attempts.every((a) => a.claim === "acquired" || a.claim === "cancelled")).toBe(true);
      expect(granted.every((a) => a.sentAt < resolvedAt)).toBe(true);
      // An effect begun is one the cancel found running; every other grant the cancel stopped, so its
      // beginEffect was lost: no effect began after the cancel resolved.
      const begun = granted.filter((a) => a.effect === "ok");
      const stoppedByCancel = granted.filter((a) => a.effect === "lost");
      expect(begun.length + stoppedByCancel.length).toBe(granted.length);
      expect(begun.every((a) => (a.effectSentAt ?? Number.POSITIVE_INFINITY) < resolvedAt)).toBe(true);
      expect(
        granted.filter((a) => (a.effectSentAt ?? 0) > resolvedAt).every((a) => a.effect === "lost"),
      ).toBe(true);
      expect([...outcome.running].sort()).toEqual(begun.map((a) => a.key).sort());
      expect([...outcome.stopped].sort()).toEqual(stoppedByCancel.map((a) => a.key).sort());
      // The records say the same, and a claim of any step now is refused.
      const store = stores[0] as PostgresStore;
      const read = await store.readTask(task.ref);
      expect(read.cancellation).toEqual(outcome.cancellation);
      expect(read.records.map((r) => r.key).sort()).toEqual(granted.map((a) => a.key).sort());
      for (const record of read.records) {
        expect(record.cancellation).toEqual(outcome.cancellation);
        expect(record.state).toBe(outcome.running.includes(record.key) ? "claimed" : "cancelled");
      }
      for (const n of [0, 1, next, next + 1])
        expect((await store.claim(request(task.key(n), { task: task.step(n) }))).outcome).toBe("cancelled");
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });
});

describe("the migration to schema version 4", () => {
  it("migrates a schema at version 3 with rows in it: they read as before, a claim files them, a cancel reaches them", async () => {
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(4);
    const schema = schemaFor("task_v3");
    const names = namesFor(schema, "");
    const q = (name: string) => `"${schema}".${name}`;
    // The schema as the previous release left it: its ledger, versions 1 to 3, and records its functions wrote.
    await pool.query(`create schema "${schema}"`);
    await pool.query(
      `create table ${q("migrations")} (version integer primary key, description text not null, applied_at timestamptz not null default now())`,
    );
    for (const migration of migrations(names).filter((m) => m.version <= 3)) {
      await pool.query(migration.sql);
      await pool.query(`insert into ${q("migrations")} (version, description) values ($1, $2)`, [
        migration.version,
        migration.description,
      ]);
    }
    const task = newTask("v3");
    const claimV3 = async (key: string, phase: string, leaseMs: number) =>
      (
        await pool.query(`select * from ${q("claim")}($1, 'fp', 'charge_card', $2, $3, 600000, $4, '')`, [
          key,
          phase,
          leaseMs,
          randomBytes(8).toString("hex"),
        ])
      ).rows[0] as { code: number; token: string };
    const [done, unknown, prepare, asked] = [1, 2, 3, 4].map(task.key) as [string, string, string, string];
    const doneClaim = await claimV3(done, "effect", 10_000);
    await pool.query(`select * from ${q("complete")}($1, $2, '{"id":1}', 600000)`, [done, doneClaim.token]);
    const unknownClaim = await claimV3(unknown, "effect", 10_000);
    await pool.query(`select * from ${q("mark_unknown")}($1, $2, '', 600000)`, [unknown, unknownClaim.token]);
    // A prepare-phase owner whose lease has run out: the next claim takes it over.
    await claimV3(prepare, "prepare", 1);
    const askedClaim = await claimV3(asked, "prepare", 10_000);
    await pool.query(`select * from ${q("request_approval")}($1, $2, 'over 100', 600000, 600000)`, [
      asked,
      askedClaim.token,
    ]);
    const before = (await pool.query(`select * from ${q("records")} order by key`)).rows;

    const store = await PostgresStore.create({ pool, schema, retentionMs: RETENTION_MS });
    expect(store.migration).toEqual({ from: 3, to: SCHEMA_VERSION, applied: [4, 5] });
    // Every row as it was, its new columns empty.
    const migrated = (await pool.query(`select * from ${q("records")} order by key`)).rows;
    expect(migrated).toHaveLength(before.length);
    migrated.forEach((row, i) => {
      expect(row).toMatchObject(before[i]);
      expect(row).toMatchObject({ ns: null, task_id: null, step_id: null, task_key: null, filed: null });
      expect(row.cancel_at).toBeNull();
    });
    expect(await store.get(done)).toMatchObject({ state: "done", result: '{"id":1}', fence: 1 });
    expect((await store.get(done))?.task).toBeUndefined();
    expect(await store.get(asked)).toMatchObject({
      state: "awaiting_approval",
      approval: { reason: "over 100" },
    });
    expect(await store.claim(request(done))).toMatchObject({ outcome: "replay", result: '{"id":1}' });
    // Nothing was filed under a task before: the task has no records yet.
    expect((await store.readTask(task.ref)).records).toEqual([]);

    // A process of the previous build still calls the claim with eight arguments: it works, naming no task.
    const fresh = randomBytes(32).toString("hex");
    expect((await claimV3(fresh, "prepare", 10_000)).code).toBe(1);
    expect(await rowOf(schema, fresh)).toMatchObject({ state: "claimed", task_key: null });

    // Claims naming the task file the rows written before, in the order of these claims.
    await sleep(5);
    expect(await store.claim(request(prepare, { task: task.step(3) }))).toMatchObject({
      outcome: "takeover",
    });
    expect(await store.claim(request(unknown, { phase: "effect", task: task.step(2) }))).toMatchObject({
      outcome: "reconcile",
      from: "unknown",
    });
    expect(await store.claim(request(done, { task: task.step(1) }))).toMatchObject({ outcome: "replay" });
    expect(await store.claim(request(asked, { task: task.step(4) }))).toMatchObject({
      outcome: "awaiting_approval",
    });
    const read = await store.readTask(task.ref);
    expect(read.records.map((r) => r.key)).toEqual([prepare, unknown, done, asked]);
    expect(read.records.map((r) => r.task)).toEqual([3, 2, 1, 4].map(task.step));

    const outcome = await store.cancelTask(task.ref, { by, why });
    expect(outcome).toMatchObject({ outcome: "cancelled", stopped: [prepare, asked], running: [unknown] });
    // A row the cancel reached is at layout 3; the others keep theirs.
    expect(RECORD_LAYOUT).toBe(3);
    expect(await rowOf(schema, prepare)).toMatchObject({ state: "cancelled", layout: 3, cancel_by: by });
    expect(await rowOf(schema, asked)).toMatchObject({
      state: "cancelled",
      layout: 3,
      apr_reason: "over 100",
    });
    expect(await rowOf(schema, unknown)).toMatchObject({ state: "reconciling", layout: 3, cancel_by: by });
    expect(await rowOf(schema, done)).toMatchObject({ state: "done", layout: 1, cancel_by: null });
    expect(await rowOf(schema, fresh)).toMatchObject({ state: "claimed", layout: 1 });
  });
});

describe("the rows of a task", () => {
  it("keeps the identity on the task's row and its records, or only keys with keepTaskIdentity false", async () => {
    for (const keepTaskIdentity of [true, false]) {
      const schema = schemaFor("task_rows");
      const store = await PostgresStore.create({ pool, schema, retentionMs: RETENTION_MS, keepTaskIdentity });
      const task = newTask("rows");
      await store.claim(request(task.key(1), { task: task.step(1) }));
      await store.claim(request(task.key(2), { task: task.step(2) }));
      await store.cancelTask(task.ref, { by, why });
      const { rows: tasks } = await pool.query(`select * from "${schema}".tasks`);
      expect(tasks).toHaveLength(1);
      expect(tasks[0]).toMatchObject({
        task_key: deriveTaskKey(task.ref),
        namespace: keepTaskIdentity ? "rows" : null,
        task_id: keepTaskIdentity ? task.ref.taskId : null,
        cancel_by: by,
        cancel_why: why,
      });
      const { rows } = await pool.query(
        `select key, ns, task_id, step_id, task_key, filed from "${schema}".records order by filed`,
      );
      expect(rows.map((r) => r.key)).toEqual([task.key(1), task.key(2)]);
      for (const [i, row] of rows.entries()) {
        expect(row.task_key).toBe(deriveTaskKey(task.ref));
        expect(row).toMatchObject(
          keepTaskIdentity
            ? { ns: "rows", task_id: task.ref.taskId, step_id: `step-${i + 1}` }
            : { ns: null, task_id: null, step_id: null },
        );
      }
    }
  });

  it("sweeps a task's row once its retention ran out, and the task starts over", async () => {
    const schema = schemaFor("task_sweep");
    const store = await PostgresStore.create({ pool, schema, retentionMs: 200 });
    const task = newTask("sweep");
    await store.cancelTask(task.ref, { by, why });
    expect((await store.claim(request(task.key(1), { task: task.step(1) }))).outcome).toBe("cancelled");
    await sleep(300);
    expect(await store.sweep()).toEqual({ deleted: 0, batches: 1, tasks: 1 });
    expect((await pool.query(`select count(*)::int as n from "${schema}".tasks`)).rows[0].n).toBe(0);
    expect((await store.readTask(task.ref)).cancellation).toBeUndefined();
    expect((await store.claim(request(task.key(1), { task: task.step(1) }))).outcome).toBe("acquired");
  });
});

describe("PostgresOperatorStore and tasks", () => {
  it("cancels a task with the longest retention of its records, reads it, and refuses a cancel without `by`", async () => {
    const schema = schemaFor("task_operator");
    const store = await PostgresStore.create({ pool, schema, retentionMs: RETENTION_MS });
    const operator = await PostgresOperatorStore.create({ pool, schema });
    const task = newTask("operator");
    const first = await store.claim(request(task.key(1), { task: task.step(1) }));
    if (first.outcome !== "acquired") throw new Error(first.outcome);
    await store.beginEffect(task.key(1), first.token);
    await store.claim(request(task.key(2), { task: task.step(2) }));

    await expect(operator.cancel(task.ref, { by: " ", why })).rejects.toBeInstanceOf(CancelRefusedError);
    expect((await operator.task(task.ref)).cancellation).toBeUndefined();

    const outcome = await operator.cancel(task.ref, { by, why });
    expect(outcome).toMatchObject({ outcome: "cancelled", running: [task.key(1)], stopped: [task.key(2)] });
    const read = await operator.task(task.ref);
    expect(read).toMatchObject({ ...task.ref, cancellation: outcome.cancellation });
    expect(read.records.map((r) => [r.key, r.state])).toEqual([
      [task.key(1), "claimed"],
      [task.key(2), "cancelled"],
    ]);
    // The store's retention (10 minutes), not the operator's default (24 hours).
    const { rows } = await pool.query(
      `select expires_at - "${schema}".now_ms() as left from "${schema}".tasks`,
    );
    expect(Number(rows[0].left)).toBeGreaterThan(RETENTION_MS - 60_000);
    expect(Number(rows[0].left)).toBeLessThan(DEFAULT_RETENTION_MS / 2);
    expect(await operator.cancel(task.ref, { by: "someone-else", why: "again" })).toMatchObject({
      outcome: "already_cancelled",
      cancellation: outcome.cancellation,
    });
    // The operator's counts know the new state.
    expect((await operator.count()).byState.cancelled).toBe(1);
  });
});

describe("the migration to schema version 5 (liveness per process)", () => {
  it("migrates a schema at version 4 with a live claim in it: the claim holds its lease as before, and claims name entries since", async () => {
    const schema = schemaFor("live_v4");
    const names = namesFor(schema, "");
    const q = (name: string) => `"${schema}".${name}`;
    await pool.query(`create schema "${schema}"`);
    await pool.query(
      `create table ${q("migrations")} (version integer primary key, description text not null, applied_at timestamptz not null default now())`,
    );
    for (const migration of migrations(names).filter((m) => m.version <= 4)) {
      await pool.query(migration.sql);
      await pool.query(`insert into ${q("migrations")} (version, description) values ($1, $2)`, [
        migration.version,
        migration.description,
      ]);
    }
    // A claim of the previous release: twelve arguments, no liveness entry, a long lease.
    const held = randomBytes(32).toString("hex");
    const claimV4 = async (key: string) =>
      (
        await pool.query(
          `select * from ${q("claim")}($1, 'fp', 'charge_card', 'effect', 60000, 600000, $2, '', null, null, null, null)`,
          [key, randomBytes(8).toString("hex")],
        )
      ).rows[0] as { code: number; token: string };
    expect((await claimV4(held)).code).toBe(1);

    const store = await PostgresStore.create({ pool, schema, retentionMs: RETENTION_MS });
    expect(store.migration).toEqual({ from: 4, to: SCHEMA_VERSION, applied: [5] });
    expect(await store.get(held)).toMatchObject({ state: "claimed", fence: 1 });
    expect((await store.get(held))?.liveness).toBeUndefined();
    // Its owner named no entry: only its lease says it is alive, as before.
    expect(await store.claim(request(held))).toMatchObject({ outcome: "in_flight", fence: 1 });
    // A process of the previous build still claims with twelve arguments: it works, naming no entry.
    expect((await claimV4(randomBytes(32).toString("hex"))).code).toBe(1);

    const id = randomBytes(8).toString("hex");
    expect(await store.openLiveness(id, 10_000)).toBe(true);
    const named = randomBytes(32).toString("hex");
    expect(await store.claim(request(named, { liveness: id }))).toMatchObject({ outcome: "acquired" });
    expect(await store.get(named)).toMatchObject({ liveness: id });
    await store.endLiveness(id);
    expect(await store.claim(request(named))).toMatchObject({ outcome: "takeover", fence: 2 });
  });
});

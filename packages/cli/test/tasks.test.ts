// `once task`, `once cancel` and what `once inspect` shows of a task, against real stores (Redis, a Redis
// Cluster, where a task's entry and its records are in different slots, and PostgreSQL), with every record made by the stores' own transitions: a task's calls in step order, one cancel
// that stops what had not started and tells what was running, every refusal exit 1 with nothing changed.

import { randomBytes } from "node:crypto";
import { deriveKey, type OnceRecord, type TaskIdentity, type TaskStore } from "@once/core";
import { PostgresStore } from "@once/postgres";
import { RedisStore } from "@once/redis";
import {
  cleanupPrefix,
  clusterNodes,
  postgresUrl,
  randomPrefix,
  randomSchema,
  redisUrl,
} from "@once/support";
import { Cluster, Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonOf, runOnce, runOnceInTerminal } from "./run-once.js";

const RETENTION_MS = 10 * 60 * 1000;
const TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const prefix = randomPrefix("cli-tasks");
const schema = randomSchema("cli_tasks");
const clusterPrefix = randomPrefix("cli-tasks-cluster");
let redis: Redis;
let cluster: Cluster;
let pool: pg.Pool;
const stores: { name: string; store: TaskStore & Pick<RedisStore, "requestApproval">; args: string[] }[] = [];

beforeAll(async () => {
  redis = new Redis(redisUrl());
  cluster = new Cluster(clusterNodes());
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
  stores.push(
    {
      name: "cluster",
      store: await RedisStore.create({ redis: cluster, prefix: clusterPrefix, retentionMs: RETENTION_MS }),
      args: [
        "--cluster",
        clusterNodes()
          .map((n) => `${n.host}:${n.port}`)
          .join(","),
        "--prefix",
        clusterPrefix,
      ],
    },
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
  await cleanupPrefix(cluster, clusterPrefix);
  await cluster.quit();
  await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

interface SeededTask {
  taskId: string;
  namespace: string;
  /** The task's calls by step, in the order they were claimed. */
  keys: { search: string; refund: string; charge: string; email: string };
  /** The owner of the charge, whose effect is under way. */
  chargeToken: string;
}

/**
 * One task of four calls, each claimed with its task: a search done, a refund waiting for approval, a charge
 * whose effect is under way, an email released before its effect.
 */
async function seedTask(
  store: (typeof stores)[number]["store"],
  namespace = "checkout",
): Promise<SeededTask> {
  const taskId = `order-${randomBytes(4).toString("hex")}`;
  const claim = async (stepId: string, tool: string, phase: "prepare" | "effect", trace?: string) => {
    const task: TaskIdentity = { namespace, taskId, stepId };
    const key = deriveKey(task);
    const outcome = await store.claim({
      key,
      fingerprint: `fp-${stepId}`,
      tool,
      phase,
      leaseMs: 60_000,
      task,
      ...(trace === undefined ? {} : { trace }),
    });
    if (!("token" in outcome)) throw new Error(`claim of ${stepId} gave ${outcome.outcome}`);
    return { key, token: outcome.token };
  };
  const ok = (outcome: { outcome: string }, what: string) => {
    if (outcome.outcome !== "ok") throw new Error(`${what}: ${JSON.stringify(outcome)}`);
  };
  const search = await claim("search", "search_flights", "effect", TRACE);
  ok(await store.complete(search.key, search.token, JSON.stringify({ flights: 3 })), "complete");
  const refund = await claim("refund", "refund_order", "prepare");
  ok(
    await store.requestApproval(refund.key, refund.token, { reason: "refund over 100 EUR", ttlMs: 60_000 }),
    "requestApproval",
  );
  const charge = await claim("charge", "charge_card", "effect");
  const email = await claim("email", "send_email", "prepare");
  ok(await store.release(email.key, email.token), "release");
  return {
    taskId,
    namespace,
    keys: { search: search.key, refund: refund.key, charge: charge.key, email: email.key },
    chargeToken: charge.token,
  };
}

/** A record as it is, without its time to live (which runs down between two reads). */
async function unchanged(store: TaskStore, key: string): Promise<Omit<OnceRecord, "ttlMs"> | undefined> {
  const record = await store.get(key);
  if (record === undefined) return undefined;
  const { ttlMs: _ttl, ...rest } = record;
  return rest;
}

describe.each(["redis", "cluster", "postgres"])("once task / once cancel on %s", (name) => {
  const target = () => stores.find((s) => s.name === name) as (typeof stores)[number];

  it("task: every call in step order with state, tool, outcome, approval and trace link; --json the same", async () => {
    const { store, args } = target();
    const seeded = await seedTask(store);
    const run = await runOnce([
      "task",
      seeded.taskId,
      "--namespace",
      "checkout",
      "--jaeger-url",
      "http://localhost:16686",
      ...args,
    ]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const lines = run.stdout.split("\n");
    expect(lines[0]).toBe(`task ${seeded.taskId} (namespace checkout): 4 calls`);
    expect(lines[1]).toBe("not cancelled");
    const rows = lines.filter((line) => /^\s*\d+ /.test(line));
    expect(rows.map((row) => row.trim().split(/\s+/).slice(0, 4))).toEqual([
      ["1", "search", "done", "search_flights"],
      ["2", "refund", "awaiting_approval", "refund_order"],
      ["3", "charge", "claimed", "charge_card"],
      ["4", "email", "released", "send_email"],
    ]);
    expect(rows[0]).toContain('{"flights":3}');
    expect(rows[0]).toContain("http://localhost:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736");
    expect(rows[1]).toContain("asked: refund over 100 EUR; expires ");
    expect(rows[3]).toContain(seeded.keys.email);
    expect(run.stdout).toContain(`once cancel --task ${seeded.taskId} --namespace checkout --why`);

    const json = jsonOf<{ found: boolean; records: (OnceRecord & { traceUrl?: string })[] }>(
      await runOnce(["task", seeded.taskId, "--namespace", "checkout", "--json", ...args]),
    );
    expect(json.found).toBe(true);
    expect(json.records.map((r) => [r.key, r.task?.stepId])).toEqual([
      [seeded.keys.search, "search"],
      [seeded.keys.refund, "refund"],
      [seeded.keys.charge, "charge"],
      [seeded.keys.email, "email"],
    ]);

    // Another namespace is another task: nothing known of it, exit 1.
    const other = await runOnce(["task", seeded.taskId, ...args]);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain(`no call filed under task "${seeded.taskId}" (namespace default)`);
  });

  it("cancel: what had not started is cancelled, the running effect is told at its heartbeat, the rest is left", async () => {
    const { store, args } = target();
    const seeded = await seedTask(store);
    const done = await unchanged(store, seeded.keys.search);
    const run = await runOnce([
      "cancel",
      "--task",
      seeded.taskId,
      "--namespace",
      "checkout",
      "--by",
      "alice",
      "--why",
      "the customer cancelled the order",
      "--yes",
      "--json",
      ...args,
    ]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const answer = jsonOf<{ cancelled: boolean; stopped: string[]; running: string[] }>(run);
    expect(answer.cancelled).toBe(true);
    expect(answer.stopped.sort()).toEqual([seeded.keys.refund, seeded.keys.email].sort());
    expect(answer.running).toEqual([seeded.keys.charge]);

    const cancellation = { by: "alice", why: "the customer cancelled the order", at: expect.any(Number) };
    expect(await store.get(seeded.keys.refund)).toMatchObject({ state: "cancelled", cancellation });
    expect(await store.get(seeded.keys.email)).toMatchObject({ state: "cancelled", cancellation });
    expect(await store.get(seeded.keys.charge)).toMatchObject({ state: "claimed", cancellation });
    expect(await unchanged(store, seeded.keys.search)).toEqual(done);
    const beat = await store.heartbeat(seeded.keys.charge, seeded.chargeToken, 60_000);
    expect(beat).toMatchObject({ outcome: "ok", cancelRequested: true });

    const shown = await runOnce(["task", seeded.taskId, "--namespace", "checkout", ...args]);
    expect(shown.code).toBe(0);
    expect(shown.stdout.split("\n")[1]).toMatch(
      /^CANCELLED by alice at \S+Z \(\S+ ago\): the customer cancelled the order$/,
    );
    expect(shown.stdout).toMatch(
      /^2 +refund +cancelled +refund_order +never ran +asked: refund over 100 EUR +- /m,
    );
    expect(shown.stdout).toMatch(/^3 +charge +claimed +charge_card +told to stop \(task cancelled\) /m);
    expect(shown.stdout).not.toContain("once cancel --task");

    // inspect shows the call's task and the cancellation it carries.
    const inspected = await runOnce(["inspect", seeded.keys.refund, ...args]);
    expect(inspected.code).toBe(0);
    expect(inspected.stdout).toMatch(
      new RegExp(`^task +namespace checkout, task ${seeded.taskId}, step refund$`, "m"),
    );
    expect(inspected.stdout).toMatch(
      /^cancellation +task cancelled by alice at \S+Z \(\S+ ago\): the customer cancelled the order$/m,
    );
    expect(inspected.stdout).toContain(`its task: once task ${seeded.taskId} --namespace checkout`);
  });

  it("refuses, exit 1 and nothing changed: a task cancelled before keeps the first cancel's who and why", async () => {
    const { store, args } = target();
    const seeded = await seedTask(store);
    const first = await runOnce([
      "cancel",
      ...["--task", seeded.taskId, "--namespace", "checkout", "--by", "alice", "--why", "first", "--yes"],
      ...args,
    ]);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`cancelled task ${seeded.taskId} (namespace checkout), by alice: first`);
    const refund = await unchanged(store, seeded.keys.refund);
    const again = await runOnce([
      "cancel",
      ...["--task", seeded.taskId, "--namespace", "checkout", "--by", "bob", "--why", "second", "--yes"],
      ...args,
    ]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(
      new RegExp(
        `^refused: task "${seeded.taskId}" was already cancelled by alice at \\S+Z \\(\\S+ ago\\): first\\. Nothing changed$`,
        "m",
      ),
    );
    expect(await unchanged(store, seeded.keys.refund)).toEqual(refund);
    const read = await store.readTask({ namespace: "checkout", taskId: seeded.taskId });
    expect(read.cancellation).toMatchObject({ by: "alice", why: "first" });
  });

  it("asks on a terminal, showing what the cancel does: anything but yes changes nothing, yes cancels", async () => {
    const { store, args } = target();
    const seeded = await seedTask(store);
    const before = await unchanged(store, seeded.keys.refund);
    const command = (answer: string) =>
      runOnceInTerminal(
        [
          "cancel",
          "--task",
          seeded.taskId,
          "--namespace",
          "checkout",
          "--by",
          "alice",
          "--why",
          "stop",
          ...args,
        ],
        `${answer}\n`,
      );
    const declined = await command("no");
    expect(declined.output).toContain(
      `task ${seeded.taskId} (namespace checkout): 4 calls (1 done, 1 awaiting_approval, 1 claimed, 1 released)`,
    );
    expect(declined.output).toContain(`Cancel task ${seeded.taskId}? Type yes to go on:`);
    expect(declined.output).toContain("not cancelled: not confirmed. Nothing changed");
    expect(declined.code).toBe(1);
    expect(await unchanged(store, seeded.keys.refund)).toEqual(before);
    expect(
      (await store.readTask({ namespace: "checkout", taskId: seeded.taskId })).cancellation,
    ).toBeUndefined();

    const accepted = await command("yes");
    expect(accepted.code).toBe(0);
    expect((await store.get(seeded.keys.refund))?.state).toBe("cancelled");
  });

  it("bad usage exits 2 and touches nothing: no --why, no --yes without a terminal, a task id that is not a key part", async () => {
    const { store, args } = target();
    const seeded = await seedTask(store);
    const before = await unchanged(store, seeded.keys.email);
    const noWhy = await runOnce([
      "cancel",
      "--task",
      seeded.taskId,
      "--namespace",
      "checkout",
      "--yes",
      ...args,
    ]);
    expect(noWhy.code).toBe(2);
    expect(noWhy.stderr).toMatch(/--why is required/);
    const noYes = await runOnce([
      "cancel",
      ...["--task", seeded.taskId, "--namespace", "checkout", "--why", "x"],
      ...args,
    ]);
    expect(noYes.code).toBe(2);
    expect(noYes.stderr).toMatch(/pass --yes to cancel without asking/);
    const blankBy = await runOnce([
      "cancel",
      ...["--task", seeded.taskId, "--namespace", "checkout", "--why", "x", "--by", " ", "--yes"],
      ...args,
    ]);
    expect(blankBy.code).toBe(2);
    const badId = await runOnce(["cancel", "--task", "a\u0007b", "--why", "x", "--yes", ...args]);
    expect(badId.code).toBe(2);
    expect(badId.stderr).toMatch(/invalid taskId: must not contain control characters/);
    const noTask = await runOnce(["cancel", "--why", "x", "--yes", ...args]);
    expect(noTask.code).toBe(2);
    expect(noTask.stderr).toMatch(/which task\?/);
    expect(await unchanged(store, seeded.keys.email)).toEqual(before);
    const read = await store.readTask({ namespace: "checkout", taskId: seeded.taskId });
    expect(read.cancellation).toBeUndefined();
  });
});

// The Redis-facing commands against the Redis Cluster that @once/support/global-setup starts.

import type { RecordState } from "@once/core";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, clusterNodes, randomPrefix } from "@once/support";
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonOf, runOnce } from "./run-once.js";
import { seedEveryState, seedRecord } from "./seed-records.js";

const RETENTION_MS = 10 * 60 * 1000;

let cluster: Cluster;
let store: RedisStore;
let keys: Record<RecordState, string>;
const extra: string[] = [];
const nodes = () =>
  clusterNodes()
    .map((n) => `${n.host}:${n.port}`)
    .join(",");
const on = () => ["--cluster", nodes(), "--prefix", store.prefix];

beforeAll(async () => {
  cluster = new Cluster(clusterNodes());
  store = await RedisStore.create({
    redis: cluster,
    prefix: randomPrefix("cli-cluster"),
    retentionMs: RETENTION_MS,
  });
  keys = await seedEveryState(store);
  for (let i = 0; i < 40; i++) extra.push(await seedRecord(store, "done", "send_email"));
});

afterAll(async () => {
  await cleanupPrefix(cluster, store.prefix);
  await cluster.quit();
});

describe("on a Redis Cluster", () => {
  it("the records are spread over every master (so a scan of one would miss some)", async () => {
    const masters = cluster.nodes("master");
    expect(masters.length).toBe(3);
    for (const master of masters) {
      let cursor = "0";
      let found = 0;
      do {
        const [next, some] = await master.scan(cursor, "MATCH", `${store.prefix}*`, "COUNT", 1000);
        cursor = next;
        found += some.length;
      } while (cursor !== "0");
      expect(found).toBeGreaterThan(0);
    }
  });

  it("list scans every master", async () => {
    const run = await runOnce(["list", "--limit", "1000", ...on(), "--json"]);
    expect(run.code).toBe(0);
    const out = jsonOf<{ complete: boolean; records: { key: string }[] }>(run);
    expect(out.complete).toBe(true);
    expect(new Set(out.records.map((r) => r.key))).toEqual(new Set([...Object.values(keys), ...extra]));

    const unknown = await runOnce(["list", "--state", "unknown", ...on()]);
    expect(unknown.code).toBe(0);
    expect(unknown.stdout).toMatch(new RegExp(`^${keys.unknown} +unknown +effect `, "m"));
    expect(unknown.stdout).toContain("1 record (state unknown)");
  });

  it("stats counts across every master", async () => {
    const run = await runOnce(["stats", ...on(), "--json"]);
    expect(run.code).toBe(0);
    expect(jsonOf(run)).toMatchObject({
      sampled: false,
      records: 46,
      byState: { claimed: 1, reconciling: 1, released: 1, done: 41, failed: 1, unknown: 1 },
      byTool: { send_email: { done: 40 } },
    });
    const table = await runOnce(["stats", ...on()]);
    expect(table.stdout).toContain("every record read: 46 records");
  });

  it("inspect reads the record from the master that holds it", async () => {
    for (const state of ["done", "unknown", "reconciling"] as const) {
      const run = await runOnce(["inspect", keys[state], ...on()]);
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(new RegExp(`^state +${state} — `, "m"));
    }
  });

  it("resolve refuses a record that is not unknown and leaves it as it was", async () => {
    const before = await cluster.getBuffer(store.prefix + keys.done);
    const run = await runOnce(["resolve", keys.done, "--not-applied", "--why", "w", "--yes", ...on()]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("refused: the record is done, not unknown");
    expect(await cluster.getBuffer(store.prefix + keys.done)).toEqual(before);
  });

  it("resolve --yes resolves an unknown record: done, fence + 1, who and why kept", async () => {
    const key = await seedRecord(store, "unknown");
    const before = await store.get(key);
    const run = await runOnce([
      "resolve",
      key,
      ...[
        "--applied",
        "--result",
        '{"chargeId":"ch_c1"}',
        "--why",
        "seen at the provider",
        "--by",
        "bob",
        "--yes",
      ],
      ...on(),
    ]);
    expect(run.code).toBe(0);
    expect(await store.get(key)).toMatchObject({
      state: "done",
      fence: (before?.fence ?? 0) + 1,
      result: '{"chargeId":"ch_c1"}',
      resolution: { as: "applied", by: "bob", why: "seen at the provider" },
    });
    await cluster.del(store.prefix + key);
  });

  it("reads REDIS_CLUSTER_NODES when no --cluster is given", async () => {
    const run = await runOnce(["list", "--state", "unknown", "--prefix", store.prefix, "--json"], {
      env: { REDIS_CLUSTER_NODES: nodes() },
    });
    expect(run.code).toBe(0);
    expect(jsonOf<{ records: { key: string }[] }>(run).records.map((r) => r.key)).toEqual([keys.unknown]);
  });

  it("refuses (exit 2) a plain --redis-url that points at a cluster node: it would see one master's keys", async () => {
    const [first] = clusterNodes();
    const url = `redis://${first?.host}:${first?.port}`;
    for (const command of [["list"], ["stats"], ["inspect", keys.done]]) {
      const run = await runOnce([...command, "--redis-url", url, "--prefix", store.prefix]);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(
        `is a node of a Redis Cluster: pass --cluster ${first?.host}:${first?.port}`,
      );
    }
  });

  it("doctor checks every master and names each problem with its fix", async () => {
    const run = await runOnce(["doctor", "--cluster", nodes()]);
    expect(run.stdout).toContain("(Redis Cluster, 3 masters)");
    expect(run.stdout).toMatch(/^cluster +cluster +ok +Redis Cluster, 3 masters, cluster_state ok$/m);
    for (const master of cluster.nodes("master")) {
      const at = `${master.options.host}:${master.options.port}`;
      expect(run.stdout).toMatch(new RegExp(`^${at} +maxmemory-policy +ok +noeviction$`, "m"));
      expect(run.stdout).toMatch(new RegExp(`^${at} +clock +ok +server clock [+-]`, "m"));
    }
    // The test cluster runs without persistence (appendonly no, no RDB): a restart loses every record.
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/Problems that can cause duplicates \(3\):/);
    expect(run.stdout).toContain("fix: CONFIG SET appendonly yes");
    const json = jsonOf<{ ok: boolean; cluster: boolean; findings: { check: string; status: string }[] }>(
      await runOnce(["doctor", "--cluster", nodes(), "--json"]),
    );
    expect(json).toMatchObject({ ok: false, cluster: true });
    expect(json.findings.filter((f) => f.check === "appendonly" && f.status === "fail")).toHaveLength(3);
  });

  it("doctor on a cluster node reached as a plain server: exit 1, says to use --cluster", async () => {
    const [first] = clusterNodes();
    const run = await runOnce(["doctor", "--redis-url", `redis://${first?.host}:${first?.port}`]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(
      /cluster +FAIL +this server is a Redis Cluster node reached as a plain server/,
    );
    expect(run.stdout).toContain(`fix: connect with --cluster ${first?.host}:${first?.port}`);
    expect(run.stdout).toContain("RedisStore.create would REFUSE this Redis (cluster)");
  });
});

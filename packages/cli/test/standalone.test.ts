// Every Redis-facing command against the shared standalone Redis, with records made by RedisStore.

import type { RecordState } from "@once/core";
import { deriveKey } from "@once/core";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonOf, runOnce, runOnceInTerminal } from "./run-once.js";
import { RESULT, randomKey, seedEveryState, seedRecord } from "./seed-records.js";

const RETENTION_MS = 10 * 60 * 1000;
const STATES: RecordState[] = ["claimed", "reconciling", "released", "done", "failed", "unknown"];
const _sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let redis: Redis;
const prefixes: string[] = [];

beforeAll(() => {
  redis = new Redis(redisUrl());
});

afterAll(async () => {
  for (const prefix of prefixes) await cleanupPrefix(redis, prefix);
  await redis.quit();
});

async function freshStore(label: string): Promise<RedisStore> {
  const prefix = randomPrefix(label);
  prefixes.push(prefix);
  return RedisStore.create({ redis, prefix, retentionMs: RETENTION_MS });
}

function on(store: RedisStore): string[] {
  return ["--redis-url", redisUrl(), "--prefix", store.prefix];
}

interface ListJson {
  complete: boolean;
  records: { key: string; state: RecordState; tool: string }[];
}

describe.concurrent("inspect", () => {
  let store: RedisStore;
  let keys: Record<RecordState, string>;

  beforeAll(async () => {
    store = await freshStore("cli-inspect");
    keys = await seedEveryState(store);
  });

  it.each(STATES)("shows a %s record: state, phase, fence, lease, claims, tool, times", async (state) => {
    const key = keys[state];
    const run = await runOnce(["inspect", key, ...on(store)]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const record = await store.get(key);
    expect(run.stdout).toMatch(new RegExp(`^state +${state} — `, "m"));
    expect(run.stdout).toMatch(new RegExp(`^phase +${record?.phase}$`, "m"));
    expect(run.stdout).toMatch(new RegExp(`^fence +${record?.fence}$`, "m"));
    expect(run.stdout).toMatch(new RegExp(`^claims +${record?.claims}$`, "m"));
    expect(run.stdout).toMatch(/^tool +charge_card$/m);
    expect(run.stdout).toMatch(/^created +\d{4}-\d\d-\d\dT.* ago\)$/m);
    expect(run.stdout).toMatch(/^expires +in \d+m/m);
    expect(run.stdout).toMatch(
      state === "claimed" || state === "reconciling" ? /^lease +\d+(\.\d)?s left$/m : /^lease +-$/m,
    );
  });

  it("shows the stored result, the stored error, and what to do about an unknown record", async () => {
    const done = await runOnce(["inspect", keys.done, ...on(store)]);
    expect(done.stdout).toContain(`result       ${RESULT}`);
    const failed = await runOnce(["inspect", keys.failed, ...on(store)]);
    expect(failed.stdout).toContain("error        CardDeclined: card declined (card_declined)");
    const unknown = await runOnce(["inspect", keys.unknown, ...on(store)]);
    expect(unknown.stdout).toContain("error        TimeoutError: socket timeout");
    expect(unknown.stdout).toContain(
      `once resolve ${keys.unknown} --prefix ${store.prefix} --applied --result '<json>'`,
    );
  });

  it("prints the whole record with --json", async () => {
    const run = await runOnce(["inspect", keys.done, ...on(store), "--json"]);
    expect(run.code).toBe(0);
    const out = jsonOf<{ found: boolean; redisKey: string; record: Record<string, unknown> }>(run);
    const record = await store.get(keys.done);
    expect(out.found).toBe(true);
    expect(out.redisKey).toBe(store.prefix + keys.done);
    expect(out.record).toMatchObject({ ...record, ttlMs: expect.any(Number) });
    expect(out.record.result).toBe(RESULT);
  });

  it("finds the record by job id, by Redis key, and by task and step", async () => {
    const byJobId = await runOnce(["inspect", `once-${keys.unknown}`, ...on(store)]);
    expect(byJobId.stdout).toMatch(/^state +unknown/m);
    const byRedisKey = await runOnce(["inspect", store.prefix + keys.unknown, ...on(store)]);
    expect(byRedisKey.stdout).toMatch(/^state +unknown/m);

    const key = deriveKey({ namespace: "checkout", taskId: "order-1042", stepId: "charge" });
    const claim = await store.claim({
      key,
      fingerprint: "fp",
      tool: "charge_card",
      phase: "effect",
      leaseMs: 60_000,
    });
    expect(claim.outcome).toBe("acquired");
    const run = await runOnce([
      "inspect",
      ...["--task", "order-1042", "--step", "charge", "--namespace", "checkout"],
      ...on(store),
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^key +${key}$`, "m"));
    expect(run.stdout).toContain("namespace checkout, task order-1042, step charge");
  });

  it("exits 1 when there is no record", async () => {
    const key = randomKey();
    const run = await runOnce(["inspect", key, ...on(store)]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`no record for key ${key}`);
    const json = await runOnce(["inspect", key, ...on(store), "--json"]);
    expect(json.code).toBe(1);
    expect(jsonOf(json)).toMatchObject({ key, found: false });
  });

  it("reads REDIS_URL when no --redis-url is given", async () => {
    const run = await runOnce(["inspect", keys.done, "--prefix", store.prefix], {
      env: { REDIS_URL: redisUrl() },
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^state +done/m);
  });
});

describe.concurrent("list", () => {
  let store: RedisStore;
  let keys: Record<RecordState, string>;
  let email: string;

  beforeAll(async () => {
    store = await freshStore("cli-list");
    keys = await seedEveryState(store);
    email = await seedRecord(store, "done", "send_email");
    await redis.set(`${store.prefix}not-a-record`, "x");
  });

  it("lists every record in a table, and says the scan was complete", async () => {
    const run = await runOnce(["list", ...on(store)]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^KEY +STATE +PHASE +FENCE +TOOL +UPDATED +LEASE +CLAIMS$/m);
    for (const state of STATES) expect(run.stdout).toMatch(new RegExp(`^${keys[state]} +${state} `, "m"));
    expect(run.stdout).toContain(`7 records under "${store.prefix}" (every key scanned)`);
    expect(run.stdout).toContain("1 key under the prefix is not a once record (skipped)");
  });

  it("filters by state (repeated or comma-separated) and by tool", async () => {
    const unknown = jsonOf<ListJson>(await runOnce(["list", "--state", "unknown", ...on(store), "--json"]));
    expect(unknown.records.map((r) => r.key)).toEqual([keys.unknown]);

    const live = jsonOf<ListJson>(
      await runOnce(["list", "--state", "claimed,reconciling", ...on(store), "--json"]),
    );
    expect(live.records.map((r) => r.key).sort()).toEqual([keys.claimed, keys.reconciling].sort());

    const ended = jsonOf<ListJson>(
      await runOnce([
        "list",
        "--state",
        "failed",
        "--state",
        "done",
        "--tool",
        "charge_card",
        ...on(store),
        "--json",
      ]),
    );
    expect(ended.records.map((r) => r.key).sort()).toEqual([keys.done, keys.failed].sort());

    const emails = jsonOf<ListJson>(await runOnce(["list", "--tool", "send_email", ...on(store), "--json"]));
    expect(emails.records).toEqual([
      expect.objectContaining({ key: email, state: "done", tool: "send_email" }),
    ]);
  });

  it("stops at --limit and says there are more", async () => {
    const run = await runOnce(["list", "--limit", "2", ...on(store)]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("the first 2 records SCAN found");
    expect(run.stdout).toContain("there are more (raise --limit)");
    const json = jsonOf<ListJson & { limit: number }>(
      await runOnce(["list", "--limit", "2", ...on(store), "--json"]),
    );
    expect(json.records).toHaveLength(2);
    expect(json.complete).toBe(false);
    expect(json.limit).toBe(2);
  });
});

describe("list --older-than", () => {
  it("keeps the records whose last transition is older, by the server's clock", async () => {
    const aging = await freshStore("cli-older");
    const old = await seedRecord(aging, "unknown");
    const recent = await seedRecord(aging, "unknown");
    // Age the old record by an hour on the server's clock, so no pause of a busy machine can blur the line.
    const [seconds = 0] = await redis.time();
    // updated_at is the fifth field of a record of layout 6, after its layout (lua/includes/record.lua in
    // @once/redis).
    await redis.eval(
      "local a = cmsgpack.unpack(redis.call('GET', KEYS[1])); a[6] = tonumber(ARGV[1]); " +
        "redis.call('SET', KEYS[1], cmsgpack.pack(a), 'KEEPTTL')",
      1,
      `${aging.prefix}${old}`,
      Number(seconds) * 1000 - 3_600_000,
    );
    const json = await runOnce(["list", "--older-than", "30m", ...on(aging), "--json"]);
    expect(json.code).toBe(0);
    const out = jsonOf<ListJson & { serverTime: number }>(json);
    expect(out.records.map((r) => r.key)).toEqual([old]);

    const run = await runOnce(["list", "--older-than", "30m", ...on(aging)]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(old);
    expect(run.stdout).toContain("1 record (unchanged for 30m or more)");

    const all = jsonOf<ListJson>(await runOnce(["list", ...on(aging), "--json"]));
    expect(all.records.map((r) => r.key).sort()).toEqual([old, recent].sort());
    const none = jsonOf<ListJson>(await runOnce(["list", "--older-than", "2h", ...on(aging), "--json"]));
    expect(none.records).toEqual([]);
  });
});

describe.concurrent("stats", () => {
  let store: RedisStore;

  beforeAll(async () => {
    store = await freshStore("cli-stats");
    await seedEveryState(store);
    await seedEveryState(store, "send_email");
    await seedRecord(store, "unknown", "send_email");
  });

  it("--json counts by state and by tool, from a complete scan", async () => {
    const run = await runOnce(["stats", ...on(store), "--json"]);
    expect(run.code).toBe(0);
    const stats = jsonOf<Record<string, unknown>>(run);
    expect(stats).toMatchObject({
      sampled: false,
      records: 13,
      byState: { claimed: 2, reconciling: 2, released: 2, done: 2, failed: 2, unknown: 3 },
      byTool: {
        charge_card: { claimed: 1, reconciling: 1, released: 1, done: 1, failed: 1, unknown: 1 },
        send_email: { claimed: 1, reconciling: 1, released: 1, done: 1, failed: 1, unknown: 2 },
      },
      oldestUnknownMs: expect.any(Number),
    });
    expect(stats.dbsize).toBeGreaterThanOrEqual(13);
  });

  it("prints tables, and says when it only sampled", async () => {
    const full = await runOnce(["stats", ...on(store)]);
    expect(full.code).toBe(0);
    expect(full.stdout).toContain("every record read: 13 records");
    expect(full.stdout).toMatch(/^unknown +3 +23\.1%$/m);
    expect(full.stdout).toMatch(/^send_email +7 +1 +1 +1 +1 +1 +2 +0 +0 +0$/m);
    expect(full.stdout).toContain("3 unknown (the oldest unchanged for");

    const sampled = await runOnce(["stats", "--sample", "5", ...on(store)]);
    expect(sampled.code).toBe(0);
    expect(sampled.stdout).toMatch(/sampled 5 of ~\d+ keys \(DBSIZE counts every key in the database/);
    expect(sampled.stdout).toContain("the counts below are of the sample");
    const json = jsonOf<{ sampled: boolean; records: number }>(
      await runOnce(["stats", "--sample", "5", ...on(store), "--json"]),
    );
    expect(json).toMatchObject({ sampled: true, records: 5 });
  });
});

describe.concurrent("resolve", () => {
  let store: RedisStore;

  beforeAll(async () => {
    store = await freshStore("cli-resolve");
  });

  /** The record exactly as Redis holds it: its bytes, and whether its TTL was refreshed. */
  async function raw(key: string) {
    return { bytes: await redis.getBuffer(store.prefix + key), pttl: await redis.pttl(store.prefix + key) };
  }

  it.each(STATES.filter((s) => s !== "unknown"))(
    "refuses a %s record (exit 1) and leaves it exactly as it was",
    async (state) => {
      const key = await seedRecord(store, state);
      const before = await raw(key);
      const run = await runOnce([
        "resolve",
        key,
        ...["--applied", "--result", '{"chargeId":"ch_x"}', "--why", "trying", "--yes"],
        ...on(store),
      ]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(`refused: the record is ${state}, not unknown`);
      const after = await raw(key);
      expect(after.bytes).toEqual(before.bytes);
      expect(after.pttl).toBeLessThanOrEqual(before.pttl);
    },
  );

  it("refuses a key with no record (exit 1)", async () => {
    const run = await runOnce(["resolve", randomKey(), "--not-applied", "--why", "w", "--yes", ...on(store)]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("no record for key");
  });

  it("--applied --yes: done with the result, fence + 1, who and why kept, retention kept", async () => {
    const key = await seedRecord(store, "unknown");
    const before = await store.get(key);
    const run = await runOnce([
      "resolve",
      key,
      ...["--applied", "--result", '{ "chargeId": "ch_42" }'],
      ...["--why", "charge ch_42 found in the provider's dashboard", "--by", "alice@example.com", "--yes"],
      ...on(store),
    ]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      `resolved ${key}: applied → done (fence ${before?.fence} → ${(before?.fence ?? 0) + 1})`,
    );

    const after = await store.get(key);
    expect(after).toMatchObject({
      state: "done",
      fence: (before?.fence ?? 0) + 1,
      result: '{"chargeId":"ch_42"}',
      resolution: {
        as: "applied",
        by: "alice@example.com",
        why: "charge ch_42 found in the provider's dashboard",
      },
    });
    expect(after?.resolution?.at).toBeGreaterThanOrEqual(before?.updatedAt ?? 0);
    // The record keeps the retention it was written with, not a CLI default.
    expect(after?.ttlMs).toBeGreaterThan(RETENTION_MS - 30_000);
    expect(after?.ttlMs).toBeLessThanOrEqual(RETENTION_MS);

    const replay = await store.claim({
      key,
      fingerprint: `fp-${key}`,
      tool: "charge_card",
      phase: "effect",
      leaseMs: 1_000,
    });
    expect(replay).toMatchObject({ outcome: "replay", result: '{"chargeId":"ch_42"}' });
  });

  it("--not-applied --yes: released, and the next claim acquires it", async () => {
    const key = await seedRecord(store, "unknown");
    const before = await store.get(key);
    const run = await runOnce([
      "resolve",
      key,
      "--not-applied",
      "--why",
      "no charge at the provider",
      "--yes",
      ...on(store),
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("the next attempt of this step runs the effect again");
    const after = await store.get(key);
    expect(after).toMatchObject({
      state: "released",
      fence: (before?.fence ?? 0) + 1,
      resolution: { as: "not_applied" },
    });
    expect(after?.resolution?.by).toMatch(/.+@.+/);
    const claim = await store.claim({
      key,
      fingerprint: `fp-${key}`,
      tool: "charge_card",
      phase: "effect",
      leaseMs: 1_000,
    });
    expect(claim).toMatchObject({ outcome: "acquired", fence: (before?.fence ?? 0) + 2 });
  });

  it("--failed --yes: failed with the error, replayed to the next claim", async () => {
    const key = await seedRecord(store, "unknown");
    const run = await runOnce([
      "resolve",
      key,
      ...["--failed", "--error", "card declined", "--error-code", "card_declined"],
      ...["--why", "provider says declined", "--yes", "--json"],
      ...on(store),
    ]);
    expect(run.code).toBe(0);
    expect(jsonOf(run)).toMatchObject({ key, resolved: true, as: "failed", record: { state: "failed" } });
    const claim = await store.claim({
      key,
      fingerprint: `fp-${key}`,
      tool: "charge_card",
      phase: "effect",
      leaseMs: 1_000,
    });
    expect(claim).toMatchObject({
      outcome: "replay_error",
      error: { name: "Error", message: "card declined", code: "card_declined" },
    });
  });

  it("--json says why it refused", async () => {
    const key = await seedRecord(store, "done");
    const run = await runOnce([
      "resolve",
      key,
      "--not-applied",
      "--why",
      "w",
      "--yes",
      "--json",
      ...on(store),
    ]);
    expect(run.code).toBe(1);
    expect(jsonOf(run)).toMatchObject({
      key,
      resolved: false,
      reason: expect.stringContaining("not unknown"),
    });
  });

  it("with --tools, refuses a result the tool's output schema rejects (exit 2, unchanged)", async () => {
    const key = await seedRecord(store, "unknown");
    const before = await raw(key);
    const tools = ["--tools", "test/fixtures/clean-tools.mjs"];
    const bad = await runOnce([
      "resolve",
      key,
      ...["--applied", "--result", '{"id":"ch_1"}', "--why", "w", "--yes", ...tools],
      ...on(store),
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--result does not match charge_card's output schema: chargeId: /);
    expect((await raw(key)).bytes).toEqual(before.bytes);

    const good = await runOnce([
      "resolve",
      key,
      ...["--applied", "--result", '{"chargeId":"ch_1"}', "--why", "w", "--yes", ...tools],
      ...on(store),
    ]);
    expect(good.code).toBe(0);
    expect(await store.get(key)).toMatchObject({ state: "done", result: '{"chargeId":"ch_1"}' });
  });

  it("asks on a terminal: anything but yes leaves the record, yes resolves it", async () => {
    const key = await seedRecord(store, "unknown");
    const before = await raw(key);
    // `script` gives the child a real terminal; what we pipe in is typed at its prompt.
    const command = (answer: string) =>
      runOnceInTerminal(
        ["resolve", key, "--not-applied", "--why", "checked the provider", ...on(store)],
        `${answer}\n`,
      );
    const declined = await command("no");
    expect(declined.output).toContain(
      "resolve as NOT APPLIED: the key is released and the next attempt RUNS THE EFFECT AGAIN",
    );
    expect(declined.output).toContain("Type yes to go on:");
    expect(declined.output).toContain("not resolved: not confirmed");
    expect(declined.code).toBe(1);
    expect((await raw(key)).bytes).toEqual(before.bytes);

    const accepted = await command("yes");
    expect(accepted.code).toBe(0);
    expect(await store.get(key)).toMatchObject({ state: "released" });
  });
});

// The durability option against a real primary and replica, each a redis-server of its own: transitions are
// confirmed by WAIT in the same round trip; a claim no replica confirms runs nothing and is handed back; bad
// settings are refused at start with the numbers in the message.

import { StoreUnavailableError } from "@once/core";
import { describeStoreConformance } from "@once/core/testing";
import { cleanupPrefix, type RedisServerHandle, randomPrefix, startRedisServer } from "@once/support";
import { Redis } from "ioredis";
import * as vitest from "vitest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisConfigError, RedisStore } from "../src/index.js";
import { storedRecord, writeLaterRecord } from "./support/stored-record.js";

let primary: RedisServerHandle;
let replica: RedisServerHandle;
let redis: Redis;
const replicaClients: Redis[] = [];

beforeAll(async () => {
  primary = await startRedisServer({ appendonly: true, appendfsync: "always" });
  replica = await startRedisServer({ extraArgs: ["--replicaof", "127.0.0.1", String(primary.port)] });
  redis = new Redis(primary.url, { maxRetriesPerRequest: null });
  await replicaOnline();
}, 30_000);

/** Until the primary sees its replica synced and acknowledging (it is not, while the first sync runs). */
async function replicaOnline(): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (/slave0:.*state=online/.test(await redis.info("replication"))) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("the replica did not come online within 10 s");
}
afterAll(async () => {
  redis.disconnect();
  for (const client of replicaClients) client.disconnect();
  await replica?.stop();
  await primary?.stop();
});

let serial = 0;
const claimOf = (key: string) => ({
  key,
  fingerprint: "fp",
  tool: "charge",
  phase: "effect" as const,
  leaseMs: 10_000,
});

// Every transition and outcome holds the same with its writes confirmed by a replica.
describeStoreConformance(
  vitest,
  "RedisStore with durability { replicas: 1 }",
  async ({ retentionMs = 600_000, keepTaskIdentity }) => {
    const prefix = randomPrefix("durable");
    const store = await RedisStore.create({
      redis,
      prefix,
      retentionMs,
      ...(keepTaskIdentity === undefined ? {} : { keepTaskIdentity }),
      durability: { replicas: 1, timeoutMs: 1_000 },
    });
    return {
      store,
      retentionMs,
      teardown: async () => {
        await cleanupPrefix(redis, prefix);
      },
    };
  },
);

describe("RedisStore durability", () => {
  it("confirms each transition on the replica: the record is there when the call returns", async () => {
    const store = await RedisStore.create({ redis, durability: { replicas: 1, timeoutMs: 1_000 } });
    const key = `k${++serial}`;
    const claim = await store.claim(claimOf(key));
    expect(claim.outcome).toBe("acquired");
    if (claim.outcome !== "acquired") return;
    expect((await store.complete(key, claim.token, '"ok"')).outcome).toBe("ok");
    const onReplica = new Redis(replica.url);
    replicaClients.push(onReplica);
    expect((await storedRecord(onReplica, `once:${key}`))?.fields.state).toBe("done");
  });

  it("a claim no replica confirms in time runs nothing: StoreUnavailableError, and the key is handed back", async () => {
    const store = await RedisStore.create({ redis, durability: { replicas: 1, timeoutMs: 200 } });
    const key = `k${++serial}`;
    process.kill(replica.pid, "SIGSTOP"); // frozen: connected, never acknowledging
    try {
      const claim = store.claim(claimOf(key));
      await expect(claim).rejects.toThrow(StoreUnavailableError);
      await expect(claim).rejects.toThrow(
        "claim (acknowledged by 0 of the 1 replicas required within 200 ms)",
      );
    } finally {
      process.kill(replica.pid, "SIGCONT");
      await replicaOnline();
    }
    // Released as not applied: the next attempt acquires at once instead of waiting out the lease.
    expect((await store.get(key))?.state).toBe("released");
    expect((await store.claim(claimOf(key))).outcome).toBe("acquired");
  });

  it("a liveness entry is confirmed on the replica when opened and renewed; unconfirmed, opening it fails closed", async () => {
    const store = await RedisStore.create({ redis, durability: { replicas: 1, timeoutMs: 200 } });
    const id = `live${++serial}`;
    expect(await store.openLiveness(id, 10_000)).toBe(true);
    const onReplica = new Redis(replica.url);
    replicaClients.push(onReplica);
    // There when open returns: a failover to this replica keeps the entry its claims name.
    expect(await onReplica.pttl(`once:live:${id}`)).toBeGreaterThan(0);
    expect(await store.renewLiveness(id, 10_000)).toBe(true);
    process.kill(replica.pid, "SIGSTOP"); // frozen: connected, never acknowledging
    try {
      // Unconfirmed, no claim may name it: the engine claims only on an entry that was confirmed.
      await expect(store.openLiveness(`live${++serial}`, 10_000)).rejects.toThrow(
        "liveness (acknowledged by 0 of the 1 replicas required within 200 ms)",
      );
      await expect(store.renewLiveness(id, 10_000)).rejects.toThrow(StoreUnavailableError);
    } finally {
      process.kill(replica.pid, "SIGCONT");
      await replicaOnline();
    }
  });

  it("a claim refused for the record's layout fails with RecordLayoutError, also unconfirmed: nothing was taken", async () => {
    const store = await RedisStore.create({ redis, durability: { replicas: 1, timeoutMs: 200 } });
    const key = `k${++serial}`;
    await redis.hset(`once:${key}`, {
      state: "done",
      fp: "fp",
      tool: "charge",
      fence: 1,
      result: "1",
      layout: 99,
    });
    await redis.pexpire(`once:${key}`, 60_000);
    process.kill(replica.pid, "SIGSTOP"); // frozen: connected, never acknowledging
    try {
      await expect(store.claim(claimOf(key))).rejects.toMatchObject({
        code: "ONCE_RECORD_LAYOUT",
        layout: 99,
      });
    } finally {
      process.kill(replica.pid, "SIGCONT");
      await replicaOnline();
    }
    expect(await redis.hgetall(`once:${key}`)).toMatchObject({ state: "done", fence: "1", layout: "99" });
    // And a later build's record in this layout's form.
    await writeLaterRecord(redis, `once:${key}`, 99);
    await expect(store.claim(claimOf(key))).rejects.toMatchObject({ code: "ONCE_RECORD_LAYOUT", layout: 99 });
  });

  it("a settle no replica confirms waits for the store's timeout, then fails: the call is not answered", async () => {
    const store = await RedisStore.create({
      redis,
      timeoutMs: 600,
      durability: { replicas: 1, timeoutMs: 100 },
    });
    const key = `k${++serial}`;
    const claim = await store.claim(claimOf(key));
    if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
    process.kill(replica.pid, "SIGSTOP"); // frozen: connected, never acknowledging
    const started = performance.now();
    try {
      await expect(store.complete(key, claim.token, '"ok"')).rejects.toThrow(
        "complete (acknowledged by 0 of the 1 replicas required within 600 ms)",
      );
    } finally {
      process.kill(replica.pid, "SIGCONT");
      await replicaOnline();
    }
    // It waited again (several WAITs of 100 ms), not just once.
    expect(performance.now() - started).toBeGreaterThanOrEqual(400);
  });

  it("a task's claim and its cancel are confirmed too: unconfirmed, the claim is handed back and the cancel fails", async () => {
    const store = await RedisStore.create({
      redis,
      timeoutMs: 600,
      durability: { replicas: 1, timeoutMs: 150 },
    });
    const task = { namespace: "durable", taskId: `task-${++serial}` };
    const key = `k${++serial}`;
    const step = { ...task, stepId: "charge" };
    process.kill(replica.pid, "SIGSTOP"); // frozen: connected, never acknowledging
    try {
      await expect(store.claim({ ...claimOf(key), task: step })).rejects.toThrow(
        "claim-filed (acknowledged by 0 of the 1 replicas required within 150 ms)",
      );
      // The cancel's answer says no effect starts: without a replica's copy it is not given.
      await expect(store.cancelTask(task, { by: "ops", why: "withdrawn" })).rejects.toThrow(
        "cancel-task (acknowledged by 0 of the 1 replicas required within 600 ms)",
      );
    } finally {
      process.kill(replica.pid, "SIGCONT");
      await replicaOnline();
    }
    expect((await store.get(key))?.state).toBe("released");
    // Cancelled again once the replica is back: the first cancel's who and why, and its visits finished now.
    const again = await store.cancelTask(task, { by: "someone-else", why: "again" });
    expect(again).toMatchObject({
      outcome: "already_cancelled",
      cancellation: { by: "ops", why: "withdrawn" },
    });
    expect(await store.get(key)).toMatchObject({ state: "cancelled", cancellation: { by: "ops" } });
    const onReplica = new Redis(replica.url);
    replicaClients.push(onReplica);
    expect((await storedRecord(onReplica, `once:${key}`))?.fields.state).toBe("cancelled");
    expect((await store.claim({ ...claimOf(key), task: step })).outcome).toBe("cancelled");
  });

  it("refuses at start: more replicas than connected, a zero or negative timeout, fsync on a Redis without WAITAOF", async () => {
    const create = (durability: { replicas: number; timeoutMs: number; fsync?: boolean }) =>
      RedisStore.create({ redis, durability });
    await expect(create({ replicas: 2, timeoutMs: 100 })).rejects.toThrow(RedisConfigError);
    await expect(create({ replicas: 2, timeoutMs: 100 })).rejects.toThrow(
      `durability.replicas is 2, but 127.0.0.1:${primary.port} has 1 replica connected`,
    );
    await expect(create({ replicas: 1, timeoutMs: 0 })).rejects.toThrow(
      "durability.timeoutMs must be a positive integer, got 0",
    );
    await expect(create({ replicas: -1, timeoutMs: 100 })).rejects.toThrow(
      "durability.replicas must be a positive integer, got -1",
    );
    const version = (await redis.info("server")).match(/redis_version:(\S+)/)?.[1] ?? "";
    const [major = 0, minor = 0] = version.split(".").map(Number);
    if (major > 7 || (major === 7 && minor >= 2)) return; // WAITAOF exists: nothing to refuse
    await expect(create({ replicas: 1, timeoutMs: 100, fsync: true })).rejects.toThrow(
      `needs WAITAOF, which Redis has from 7.2 (and every Valkey); 127.0.0.1:${primary.port} runs Redis ${version}`,
    );
  });
});

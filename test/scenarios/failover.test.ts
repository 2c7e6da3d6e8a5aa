// Failover: the store, the Dispatcher and an OnceWorker on a replicated Redis — Sentinel-managed (a
// primary, two replicas, three Sentinels) or a Cluster with a replica per master — whose primary is
// SIGKILLed while calls are in flight. Nothing of the application is restarted: the same clients follow
// the promotion (ioredis asks the Sentinels, or the Cluster, where the primary went) and the calls go on.
// With `durability: { replicas: 1 }` no claim is acted on before a replica has it; on one host no replica
// lags, so the promoted one knows every claim whose effect ran and the provider records each charge once.
// (Replicas that fall behind are the chaos suite's failover mode, where durability counts every replica.)

import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { Dispatcher, OnceWorker } from "@once/bullmq";
import { deriveKey } from "@once/core";
import { type LedgerSnapshot, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import {
  awaitClusterFailover,
  clusterQueuePrefix,
  killClusterNode,
  ownedClusterDir,
  restartClusterNode,
  type SentinelTopology,
  startRedisCluster,
  startSentinelTopology,
  stopRedisCluster,
} from "@once/support";
import { Queue } from "bullmq";
import { Cluster, Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { chargeTools } from "../fixtures/tools.js";

/** Calls started before the kill, and after the promotion; more start every CALL_EVERY_MS in between. */
const BEFORE_KILL = 15;
const AFTER_PROMOTION = 15;
const CALL_EVERY_MS = 100;
/** Longer than a failover, so that a healthy worker keeps its jobs through one. */
const LOCK_MS = 5_000;
const DURABILITY = { replicas: 1, timeoutMs: 1_000 };
const TEST_TIMEOUT_MS = 120_000;

type Client = Redis | Cluster;

interface Replicated {
  /** A client of the topology: one for the dispatcher's side, one for the worker's. */
  connect(): Client;
  queuePrefix: string;
  /** SIGKILLs the primary serving the queue; resolves once a replica took its place (and it is back as one). */
  failOver(client: Client): Promise<{ killed: number; promoted: string }>;
}

interface Outcome {
  /** What the provider recorded, and the result each call was given. */
  ledger: LedgerSnapshot;
  results: { orderId: string; chargeId: string; at: number }[];
  failover: { killed: number; promoted: string; from: number; to: number };
  states: (string | undefined)[];
}

/**
 * Runs charges through one dispatcher and one worker, started one every CALL_EVERY_MS, while `target` fails
 * over; stops all it started after.
 */
async function chargeThroughFailover(target: Replicated): Promise<Outcome> {
  const dispatcherRedis = target.connect();
  const workerRedis = target.connect();
  const payments = await startPaymentsServer({ latency: { fixedMs: 20 } });
  const queueName = `failover-${randomBytes(4).toString("hex")}`;
  const storePrefix = `failover:${randomBytes(4).toString("hex")}:`;
  const tools = chargeTools({ paymentsUrl: payments.url });
  const queue = new Queue(queueName, { connection: dispatcherRedis, prefix: target.queuePrefix });
  queue.on("error", () => {});
  let worker: OnceWorker | undefined;
  let dispatcher: Dispatcher | undefined;
  try {
    const store = await RedisStore.create({
      redis: dispatcherRedis,
      prefix: storePrefix,
      durability: DURABILITY,
    });
    const workerStore = await RedisStore.create({
      redis: workerRedis,
      prefix: storePrefix,
      durability: DURABILITY,
    });
    worker = await OnceWorker.create({
      queueName,
      connection: workerRedis,
      store: workerStore,
      tools: tools.all,
      concurrency: 8,
      workerOptions: {
        prefix: target.queuePrefix,
        lockDuration: LOCK_MS,
        stalledInterval: 2_000,
        // A failover can stall a job more than once; every re-run is safe.
        maxStalledCount: 100,
      },
    });
    worker.worker.on("error", () => {});
    const ready = await Dispatcher.create({
      queue,
      store,
      tools: tools.all,
      timeoutMs: 5_000,
      retries: 0,
      worker: { lockDurationMs: LOCK_MS, stalledIntervalMs: 2_000 },
    });
    dispatcher = ready;

    // Like any orchestrator: a call that could not be answered (the store away, a job lost with its
    // primary, a timeout) is asked again with the same step, so the same key.
    const results: Outcome["results"] = [];
    const drive = async (i: number) => {
      const orderId = `order-${i}`;
      const step = { taskId: "failover", stepId: `charge-${i}` };
      for (const deadline = Date.now() + 60_000; ; ) {
        try {
          const { result } = await ready.call(tools.chargeCustomer, { orderId, amount: 100 + i }, step);
          results.push({ orderId, chargeId: result.chargeId, at: Date.now() });
          return;
        } catch (error) {
          if (Date.now() > deadline) throw error;
          await sleep(200);
        }
      }
    };

    const calls: Promise<void>[] = [];
    const launch = async (count: number) => {
      for (let n = 0; n < count; n++) {
        calls.push(drive(calls.length));
        await sleep(CALL_EVERY_MS);
      }
    };
    await launch(BEFORE_KILL);
    const from = Date.now();
    let failedOver = false;
    const failing = target.failOver(dispatcherRedis).finally(() => {
      failedOver = true;
    });
    while (!failedOver) await launch(1);
    const { killed, promoted } = await failing;
    const to = Date.now();
    await launch(AFTER_PROMOTION);
    await Promise.all(calls);
    const states = await Promise.all(
      calls.map(async (_, i) => {
        const record = await store.get(deriveKey({ taskId: "failover", stepId: `charge-${i}` }));
        return record?.state;
      }),
    );
    return { ledger: payments.ledger(), results, failover: { killed, promoted, from, to }, states };
  } finally {
    await dispatcher?.close().catch(() => {});
    await worker?.close(true).catch(() => {});
    await queue.close().catch(() => {});
    dispatcherRedis.disconnect();
    workerRedis.disconnect();
    await payments.close();
  }
}

function expectEveryChargeOnce(outcome: Outcome): void {
  const { ledger, results, failover, states } = outcome;
  const charges = ledger.charges;
  const calls = states.length;
  expect(calls).toBeGreaterThan(BEFORE_KILL + AFTER_PROMOTION);
  expect(results).toHaveLength(calls);
  expect(charges.total).toBe(calls);
  expect(charges.duplicates).toBe(0);
  for (let i = 0; i < calls; i++) expect(charges.byOrder[`order-${i}`]).toBe(1);
  expect(new Set(results.map((r) => r.chargeId)).size).toBe(calls);
  expect(states.every((state) => state === "done")).toBe(true);
  // Calls were answered after the promotion, by the same dispatcher and worker on the new primary.
  expect(results.filter((r) => r.at > failover.to).length).toBeGreaterThan(0);
}

describe("failover under Sentinel: a primary SIGKILLed while calls are in flight", () => {
  let topology: SentinelTopology | undefined;
  afterAll(() => topology?.stop());

  it("the dispatcher and the worker follow the promoted replica; every charge once", {
    timeout: TEST_TIMEOUT_MS,
  }, async () => {
    const sentinels = await startSentinelTopology({ appendonly: true });
    topology = sentinels;
    const outcome = await chargeThroughFailover({
      connect: () => {
        const client = new Redis({
          sentinels: [...sentinels.sentinelAddresses],
          name: sentinels.name,
          maxRetriesPerRequest: null,
        });
        client.on("error", () => {});
        return client;
      },
      queuePrefix: "bull-failover",
      async failOver() {
        const old = await sentinels.primary();
        await sentinels.kill(old);
        const promoted = await sentinels.awaitPromotion(old);
        return { killed: old.port, promoted: promoted.url };
      },
    });
    expect(outcome.failover.promoted).not.toBe(`redis://127.0.0.1:${outcome.failover.killed}`);
    expectEveryChargeOnce(outcome);
  });
});

describe("failover in a Redis Cluster: the master of the queue's slot SIGKILLed while calls are in flight", () => {
  const { home, dir } = ownedClusterDir();
  afterAll(async () => {
    await stopRedisCluster(dir);
    rmSync(home, { recursive: true, force: true });
  });

  it("the dispatcher and the worker follow the promoted replica; every charge once", {
    timeout: TEST_TIMEOUT_MS,
  }, async () => {
    const cluster = await startRedisCluster(dir, {
      replicasPerMaster: 1,
      nodeTimeoutMs: 1_000,
      appendonly: true,
    });
    const queuePrefix = clusterQueuePrefix("failover");
    const outcome = await chargeThroughFailover({
      connect: () => {
        const client = new Cluster(
          cluster.ports.map((port) => ({ host: "127.0.0.1", port })),
          { redisOptions: { maxRetriesPerRequest: null } },
        );
        client.on("error", () => {});
        return client;
      },
      queuePrefix,
      async failOver(client) {
        // The master BullMQ's keys live on: the queue itself must move to the promoted replica.
        const slot = Number(await (client as Cluster).cluster("KEYSLOT", queuePrefix));
        const master = (client as Cluster).slots[slot]?.[0];
        const killed = Number(master?.split(":").at(-1));
        await killClusterNode(dir, killed);
        const masters = await awaitClusterFailover(dir, killed);
        // Back as the new master's replica: with one replica per master, its shard confirms writes again.
        await restartClusterNode(dir, killed);
        return { killed, promoted: masters.join(",") };
      },
    });
    expectEveryChargeOnce(outcome);
  });
});

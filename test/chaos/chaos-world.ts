// The services one chaos run starts for itself, before any worker or orchestrator: its Redis (chaos-redis.ts:
// one server with the AOF on, or a Sentinel- or Cluster-managed set of primaries and replicas), TCP proxies
// for each side to reach every Redis node through, with `--store postgres` a PostgreSQL server of its own (and
// a proxy for each side), the payments stand-in in a process of its own, and the suite's own connection to
// look at the queue and the store. `stop()` ends all of them.

import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PostgresStore } from "@once/postgres";
import { type PostgresServerHandle, startPostgresServer } from "@once/support";
import { Queue } from "bullmq";
import type { Cluster, Redis } from "ioredis";
import pg from "pg";
import { CHAOS_TIMING } from "./chaos-config.js";
import { type ChaosRedis, type ChaosTopology, startChaosRedis } from "./chaos-redis.js";
import type { ChaosStoreLocation } from "./chaos-store.js";
import { type PaymentsProcess, startPaymentsProcess } from "./payments-process.js";
import { connectRedis } from "./redis-target.js";
import { RoleWatch } from "./role-watch.js";
import { ProxyGroup, TcpProxy } from "./tcp-proxy.js";

export interface ChaosWorld {
  readonly redis: ChaosRedis;
  /** Every data node's role over the run (replicated topologies: one node alone is always the master). */
  readonly roles: RoleWatch | undefined;
  /** The workers reach Redis through these: the faults cut their connections. */
  readonly workerProxies: ProxyGroup;
  readonly orchestratorProxies: ProxyGroup;
  readonly payments: PaymentsProcess;
  /** The suite's own connection to Redis, past the proxies. */
  readonly inspector: Redis | Cluster;
  /** The run's queue, seen from the suite: the drain waits for it to empty. */
  readonly inspectQueue: Queue;
  /** Key prefix of the store's records (on Redis). */
  readonly storePrefix: string;
  /** Where the records are: `redis`, or `postgres` on the run's own PostgreSQL server. */
  readonly storeKind: "redis" | "postgres";
  /** The run's PostgreSQL (store `postgres`): the server, the proxy of each side, the store's schema. */
  readonly postgres?: ChaosPostgres;
  /** Where a side's store is, as its config says it. */
  storeLocation(side: "worker" | "orchestrator"): ChaosStoreLocation;
  readonly queueName: string;
  readonly queuePrefix: string;
  /** The orchestrator's plan, its progress journal, and the file that tells it the faults are over. */
  readonly planFile: string;
  readonly progressFile: string;
  readonly faultsOverFile: string;
  stop(): Promise<void>;
}

export interface ChaosPostgres {
  readonly server: PostgresServerHandle;
  readonly workerProxy: TcpProxy;
  readonly orchestratorProxy: TcpProxy;
  readonly schema: string;
}

/** Starts the services of the run of `seed`; if one fails to start, stops those already started. */
export async function startWorld(options: {
  seed: number;
  topology: ChaosTopology;
  fsync: "always" | "everysec";
  store?: "redis" | "postgres";
}): Promise<ChaosWorld> {
  const { seed, topology, fsync } = options;
  const storeKind = options.store ?? "redis";
  let postgres: ChaosPostgres | undefined;
  const dir = mkdtempSync(path.join(os.tmpdir(), "once-chaos-"));
  const queueName = `chaos-${seed}`;
  // On a Cluster, BullMQ's keys of one queue must share a slot: the hash tag puts them on one master.
  const queuePrefix = topology === "cluster" ? "{chaos-bull}" : "chaos-bull";
  let redis: ChaosRedis | undefined;
  let workerProxies: ProxyGroup | undefined;
  let orchestratorProxies: ProxyGroup | undefined;
  let payments: PaymentsProcess | undefined;
  let inspector: Redis | Cluster | undefined;
  let inspectQueue: Queue | undefined;
  let roles: RoleWatch | undefined;
  const stop = async () => {
    roles?.stop();
    await inspectQueue?.close().catch(() => {});
    inspector?.disconnect();
    await workerProxies?.close().catch(() => {});
    await orchestratorProxies?.close().catch(() => {});
    await payments?.stop().catch(() => {});
    await redis?.stop().catch(() => {});
    await postgres?.workerProxy.close().catch(() => {});
    await postgres?.orchestratorProxy.close().catch(() => {});
    await postgres?.server.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    redis = await startChaosRedis(topology, fsync);
    workerProxies = await ProxyGroup.start(redis.nodes);
    orchestratorProxies = await ProxyGroup.start(redis.nodes);
    payments = await startPaymentsProcess({ ...CHAOS_TIMING.latency, seed });
    inspector = connectRedis(redis.target(), { maxRetriesPerRequest: null });
    inspector.on("error", () => {});
    inspectQueue = new Queue(queueName, { connection: inspector, prefix: queuePrefix });
    inspectQueue.on("error", () => {});
    if (topology !== "standalone") roles = new RoleWatch(redis.nodes.map((node) => node.port));
    if (storeKind === "postgres") postgres = await startChaosPostgres(seed);
    const pgAt = postgres;
    return {
      redis,
      roles,
      workerProxies,
      orchestratorProxies,
      payments,
      inspector,
      inspectQueue,
      storePrefix: `chaos:${seed}:`,
      storeKind,
      ...(pgAt === undefined ? {} : { postgres: pgAt }),
      storeLocation: (side) =>
        pgAt === undefined
          ? { kind: "redis" }
          : {
              kind: "postgres",
              url: `postgres://postgres@127.0.0.1:${(side === "worker" ? pgAt.workerProxy : pgAt.orchestratorProxy).port}/postgres`,
              schema: pgAt.schema,
            },
      queueName,
      queuePrefix,
      planFile: path.join(dir, "plan.json"),
      progressFile: path.join(dir, "progress.jsonl"),
      faultsOverFile: path.join(dir, "faults-over"),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The run's PostgreSQL: a server of its own, the store's schema migrated, a proxy for each side. */
async function startChaosPostgres(seed: number): Promise<ChaosPostgres> {
  const server = await startPostgresServer();
  const schema = `chaos_${seed}`;
  try {
    const pool = new pg.Pool({ connectionString: server.url, max: 2 });
    try {
      await PostgresStore.create({ pool, schema });
    } finally {
      await pool.end();
    }
    const workerProxy = await TcpProxy.start(server.port);
    const orchestratorProxy = await TcpProxy.start(server.port);
    return { server, workerProxy, orchestratorProxy, schema };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

// The Redis of one chaos run, in one of three topologies, behind one interface: how the processes reach it,
// where its records are, and how a fault kills it.
// - standalone: one redis-server with its AOF, killed and restarted on it (the `fsync` runs).
// - sentinel: a primary, two replicas and three Sentinels (@once/support's startSentinelTopology).
// - cluster: three masters with a replica each (@once/support's startRedisCluster).
// In the last two a kill SIGKILLs a primary and waits for a replica's promotion: what the primary had
// acknowledged but not yet replicated is gone, which is what `durability` exists to prevent.

import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  awaitClusterFailover,
  clusterMasters,
  killClusterNode,
  pollUntil,
  type RedisServerHandle,
  restartClusterNode,
  startRedisCluster,
  startRedisServer,
  startSentinelTopology,
  stopRedisCluster,
} from "@once/support";
import { AofTail } from "./aof-tail.js";
import type { Fault } from "./fault-schedule.js";
import type { RedisTarget } from "./redis-target.js";
import type { ProxyGroup } from "./tcp-proxy.js";

export type ChaosTopology = "standalone" | "sentinel" | "cluster";

export type RedisKill = Extract<Fault, { kind: "kill-redis" | "kill-primary" }>;

/** What a kill did, for the fault's note. */
export interface KillFacts {
  /** The node killed, and the one serving its data once the kill is over (the same one, restarted, standalone). */
  killed: string;
  serving: string;
  /** AOF bytes dropped (an emulated OS crash). */
  droppedBytes?: number;
}

export interface ChaosRedis {
  readonly topology: ChaosTopology;
  /** Every data node's port: each has a proxy per side of the run. */
  readonly nodePorts: readonly number[];
  /** How a client reaches Redis: through `proxies`, or directly without (the suite's own look). */
  target(proxies?: ProxyGroup): RedisTarget;
  /** The URL of every master now: together they hold every record. */
  masters(): Promise<string[]>;
  /**
   * Kills Redis as `fault` says and resolves once it serves again: standalone, a SIGKILL (and the AOF's tail
   * dropped, for an emulated OS crash) and a restart on the AOF; replicated, a SIGKILL of a primary and a
   * replica's promotion.
   */
  kill(fault: RedisKill, killAt: number): Promise<KillFacts>;
  /** After a kill, once the suite has looked at what was kept: the killed primary comes back as a replica. */
  rejoin(): Promise<void>;
  stop(): Promise<void>;
}

const HOST = "127.0.0.1";
const url = (port: number) => `redis://${HOST}:${port}`;

/** Starts the run's Redis in `topology`; with `fsync` the standalone server's AOF policy. */
export async function startChaosRedis(
  topology: ChaosTopology,
  fsync: "always" | "everysec",
): Promise<ChaosRedis> {
  switch (topology) {
    case "standalone":
      return startStandalone(fsync);
    case "sentinel":
      return startSentinel();
    case "cluster":
      return startCluster();
  }
}

async function startStandalone(fsync: "always" | "everysec"): Promise<ChaosRedis> {
  const redis = await startRedisServer({
    appendonly: true,
    appendfsync: fsync,
    // One growing AOF file: no rewrite mid-run, so an emulated crash can cut its tail.
    extraArgs: ["--auto-aof-rewrite-percentage", "0"],
  });
  const aof = new AofTail(redis.dir);
  return {
    topology: "standalone",
    nodePorts: [redis.port],
    target: (proxies) => ({ kind: "standalone", url: proxies ? proxies.proxyOf(redis.port).url : redis.url }),
    masters: async () => [redis.url],
    async kill(fault, killAt) {
      await redis.kill("SIGKILL");
      // What an OS crash under `everysec` may lose: the writes of the last second never reached the disk.
      const droppedBytes =
        fault.kind === "kill-redis" && fault.dropLastMs !== undefined
          ? aof.dropSince(killAt - fault.dropLastMs)
          : undefined;
      await redis.restart();
      return {
        killed: redis.url,
        serving: redis.url,
        ...(droppedBytes === undefined ? {} : { droppedBytes }),
      };
    },
    rejoin: async () => {},
    async stop() {
      aof.stop();
      await redis.stop();
    },
  };
}

// Failovers in seconds, not Sentinel's default 30 s; the AOF as in production (everysec).
const SENTINEL_OPTIONS = { appendonly: true, downAfterMs: 1_000, failoverTimeoutMs: 2_000 } as const;

async function startSentinel(): Promise<ChaosRedis> {
  const topology = await startSentinelTopology(SENTINEL_OPTIONS);
  let down: RedisServerHandle | undefined;
  return {
    topology: "sentinel",
    nodePorts: topology.nodes.map((node) => node.port),
    target: (proxies) => ({
      kind: "sentinel",
      name: topology.name,
      sentinels: [...topology.sentinelAddresses],
      natMap: proxies?.natMap ?? {},
    }),
    masters: async () => [(await topology.primary()).url],
    async kill() {
      const primary = await topology.primary();
      await topology.kill(primary);
      down = primary;
      const promoted = await topology.awaitPromotion(primary);
      return { killed: primary.url, serving: promoted.url };
    },
    async rejoin() {
      if (down) await topology.restartAsReplica(down);
      down = undefined;
    },
    stop: () => topology.stop(),
  };
}

async function startCluster(): Promise<ChaosRedis> {
  const home = mkdtempSync(path.join(os.tmpdir(), "once-chaos-cluster-"));
  const dir = path.join(home, "cluster");
  const stop = async () => {
    await stopRedisCluster(dir);
    rmSync(home, { recursive: true, force: true });
  };
  let ports: number[];
  try {
    ({ ports } = await startRedisCluster(dir, {
      replicasPerMaster: 1,
      nodeTimeoutMs: 1_000,
      appendonly: true,
    }));
  } catch (error) {
    await stop();
    throw error;
  }
  const currentMasters = async () => {
    let masters: number[] | undefined;
    const agreed = async () => {
      masters = await clusterMasters(dir);
      return masters !== undefined;
    };
    await pollUntil(agreed, { timeoutMs: 15_000 });
    if (!masters) throw new Error(`the nodes of the cluster in ${dir} do not agree on its masters`);
    return masters;
  };
  let down: number | undefined;
  return {
    topology: "cluster",
    nodePorts: ports,
    target: (proxies) => ({
      kind: "cluster",
      // Seeded with the proxies themselves: a client that starts over from its seed nodes goes through them too.
      nodes: ports.map((port) => ({ host: HOST, port: proxies ? proxies.proxyOf(port).port : port })),
      natMap: proxies?.natMap ?? {},
    }),
    masters: async () => (await currentMasters()).map(url),
    async kill(fault) {
      const masters = await currentMasters();
      const victim = masters[(fault.kind === "kill-primary" ? fault.pick : 0) % masters.length] as number;
      await killClusterNode(dir, victim);
      down = victim;
      const after = await awaitClusterFailover(dir, victim);
      const promoted = after.find((port) => !masters.includes(port));
      return {
        killed: url(victim),
        serving: promoted === undefined ? after.map(url).join(",") : url(promoted),
      };
    },
    async rejoin() {
      if (down !== undefined) await restartClusterNode(dir, down);
      down = undefined;
    },
    stop,
  };
}

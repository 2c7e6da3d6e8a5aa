// The Redis of one chaos run, in one of three topologies, behind one interface: how the processes reach it,
// where its records are, and how a fault kills it.
// - standalone: one redis-server with its AOF, killed and restarted on it (the `fsync` runs).
// - sentinel: a primary, two replicas and three Sentinels (@once/support's startSentinelTopology).
// - cluster: three masters with a replica each (@once/support's startRedisCluster).
// In the last two a kill SIGKILLs a primary and waits for a replica's promotion: what the primary had
// acknowledged but its replicas had not received is gone, which is what `durability` exists to prevent.
// A SIGKILL alone loses nothing a replica was sent (the kernel still delivers it), so each node there
// announces a link proxy of the suite's (`announcePort`): its replicas, the Sentinels and any client that
// Redis points at it reach it through that link, and a kill can first stall the primary's link and then
// drop what it held back — a primary that dies with its replicas behind.

import { rmSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import {
  awaitClusterFailover,
  clusterMasters,
  killClusterNode,
  ownedClusterDir,
  pollUntil,
  type RedisServerHandle,
  restartClusterNode,
  type SentinelTopology,
  startRedisCluster,
  startRedisServer,
  startSentinelTopology,
  stopRedisCluster,
} from "@once/support";
import { AofTail } from "./aof-tail.js";
import type { Fault } from "./fault-schedule.js";
import type { RedisTarget } from "./redis-target.js";
import { type ProxyGroup, TcpProxy } from "./tcp-proxy.js";

export type ChaosTopology = "standalone" | "sentinel" | "cluster";

/**
 * The replicas of each primary: `durability.replicas` must be all of them for a failover to keep every
 * confirmed write. Sentinel promotes the replica whose offset looked best when it last asked (INFO, every
 * 1 to 10 s), not the one that confirmed the write; a Cluster's master has only the one.
 */
export const REPLICAS_PER_PRIMARY: Readonly<Record<ChaosTopology, number>> = {
  standalone: 0,
  sentinel: 2,
  cluster: 1,
};

export type RedisKill = Extract<Fault, { kind: "kill-redis" | "kill-primary" }>;

/** What a kill did, for the fault's note. */
export interface KillFacts {
  /** When the SIGKILL was sent: what Redis had acknowledged before it is what must survive. */
  killedAt: number;
  /** The node killed, and the one serving its data once the kill is over (itself restarted, standalone). */
  killed: string;
  serving: string;
  /** AOF bytes dropped (an emulated OS crash). */
  droppedBytes?: number;
}

export interface ChaosRedis {
  readonly topology: ChaosTopology;
  /** Every data node: its port, and the one Redis names it by (its link's). Each has a proxy per side. */
  readonly nodes: readonly { port: number; announced: number }[];
  /** How a client reaches Redis: through `proxies`, or directly without (the suite's own look). */
  target(proxies?: ProxyGroup): RedisTarget;
  /** The URL of every master now: together they hold every record. */
  masters(): Promise<string[]>;
  /**
   * Kills Redis as `fault` says and resolves once it serves again: standalone, a SIGKILL (and the AOF's tail
   * dropped, for an emulated OS crash) and a restart on the AOF; replicated, a SIGKILL of a primary (its
   * replication stalled `lagMs` first) and a replica's promotion.
   */
  kill(fault: RedisKill): Promise<KillFacts>;
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
    nodes: [{ port: redis.port, announced: redis.port }],
    target: (proxies) => ({ kind: "standalone", url: proxies ? proxies.proxyOf(redis.port).url : redis.url }),
    masters: async () => [redis.url],
    async kill(fault) {
      const killedAt = Date.now();
      await redis.kill("SIGKILL");
      // What an OS crash under `everysec` may lose: the writes of the last second never reached the disk.
      const droppedBytes =
        fault.kind === "kill-redis" && fault.dropLastMs !== undefined
          ? aof.dropSince(killedAt - fault.dropLastMs)
          : undefined;
      await redis.restart();
      const facts = { killedAt, killed: redis.url, serving: redis.url };
      return droppedBytes === undefined ? facts : { ...facts, droppedBytes };
    },
    rejoin: async () => {},
    async stop() {
      aof.stop();
      await redis.stop();
    },
  };
}

/** The link proxy in front of each node of a replicated topology, by the node's port. */
class NodeLinks {
  readonly #byNode = new Map<number, TcpProxy>();

  /** For `announcePort`: starts the node's link and answers its port. */
  readonly announce = async (port: number): Promise<number> => {
    const link = await TcpProxy.start(port);
    this.#byNode.set(port, link);
    return link.port;
  };

  announced(port: number): number {
    return this.#byNode.get(port)?.port ?? port;
  }

  /**
   * SIGKILLs the node on `port` by `kill`, its link first held back for `lagMs` (its replicas fall that far
   * behind), then cut: what the link held back dies with the node. The link is open again after. Resolves
   * with when the SIGKILL went out.
   */
  async killBehind(port: number, lagMs: number | undefined, kill: () => Promise<void>): Promise<number> {
    const link = this.#byNode.get(port);
    if (lagMs) {
      link?.hold(true);
      await sleep(lagMs);
    }
    const killedAt = Date.now();
    await kill();
    link?.cut();
    link?.hold(false);
    return killedAt;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#byNode.values()].map((link) => link.close()));
  }
}

const lagOf = (fault: RedisKill) => (fault.kind === "kill-primary" ? fault.lagMs : undefined);

// Failovers in seconds, not Sentinel's default 30 s, but a primary must be silent for 2 s before it is
// deemed down: on a loaded two-core machine a fresh primary can miss a 1 s deadline, and a live primary
// failed over loses what it takes meanwhile. failover-timeout well above the 2 s the Sentinels take to
// hear of a new configuration: with less, a second Sentinel starts its own failover of the same primary.
// The AOF as in production (everysec).
const SENTINEL_OPTIONS = {
  replicas: REPLICAS_PER_PRIMARY.sentinel,
  appendonly: true,
  downAfterMs: 2_000,
  failoverTimeoutMs: 5_000,
} as const;

async function startSentinel(): Promise<ChaosRedis> {
  const links = new NodeLinks();
  let topology: SentinelTopology;
  try {
    topology = await startSentinelTopology({ ...SENTINEL_OPTIONS, announcePort: links.announce });
  } catch (error) {
    await links.close();
    throw error;
  }
  let down: RedisServerHandle | undefined;
  return {
    topology: "sentinel",
    nodes: topology.nodes.map((node) => ({ port: node.port, announced: topology.announcedPort(node) })),
    target: (proxies) => ({
      kind: "sentinel",
      name: topology.name,
      sentinels: [...topology.sentinelAddresses],
      natMap: proxies?.natMap ?? {},
    }),
    masters: async () => [(await topology.primary()).url],
    async kill(fault) {
      const primary = await topology.primary();
      const killedAt = await links.killBehind(primary.port, lagOf(fault), () => topology.kill(primary));
      down = primary;
      const promoted = await topology.awaitPromotion(primary);
      return { killedAt, killed: primary.url, serving: promoted.url };
    },
    async rejoin() {
      if (down) await topology.restartAsReplica(down);
      down = undefined;
    },
    async stop() {
      await topology.stop();
      await links.close();
    },
  };
}

async function startCluster(): Promise<ChaosRedis> {
  const { home, dir } = ownedClusterDir();
  const links = new NodeLinks();
  const stop = async () => {
    await stopRedisCluster(dir);
    await links.close();
    rmSync(home, { recursive: true, force: true });
  };
  let ports: number[];
  try {
    ({ ports } = await startRedisCluster(dir, {
      replicasPerMaster: REPLICAS_PER_PRIMARY.cluster,
      // As the Sentinels' 2 s: a live master a loaded machine delays must not be failed over.
      nodeTimeoutMs: 2_000,
      appendonly: true,
      announcePort: links.announce,
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
    nodes: ports.map((port) => ({ port, announced: links.announced(port) })),
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
      const killedAt = await links.killBehind(victim, lagOf(fault), () => killClusterNode(dir, victim));
      down = victim;
      const after = await awaitClusterFailover(dir, victim);
      const promoted = after.find((port) => !masters.includes(port));
      return {
        killedAt,
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

// A throwaway Sentinel-managed Redis for the failover tests: a primary, its replicas and the Sentinels that
// watch them, each a redis-server process of its own (children of this process, see redis-server.ts) on a
// free port, in one temp dir. A failover moves the primary's role, not the processes: the topology keeps
// every process it started by handle, so `stop()` stops exactly those whatever their roles are by then.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "./free-port.js";
import { pollUntil } from "./poll-until.js";
import type { RedisNodeAddress } from "./redis-address.js";
import { redisCommand } from "./redis-command.js";
import { infoField, replicaInSync } from "./redis-info.js";
import { type RedisServerHandle, startRedisServer } from "./redis-server.js";

const HOST = "127.0.0.1";

export interface SentinelTopologyOptions {
  /** The name the Sentinels know the primary by (ioredis' `name`). Default `once`. */
  name?: string;
  /** Replicas of the primary. Default 2. */
  replicas?: number;
  /** Sentinels. Default 3. */
  sentinels?: number;
  /** Sentinels that must agree the primary is down before one of them fails it over. Default 2. */
  quorum?: number;
  /** How long the primary must be silent before a Sentinel deems it down. Default 1000 ms. */
  downAfterMs?: number;
  /**
   * Sentinel's failover-timeout: how long a failover may take, and twice it the pause before a Sentinel
   * that voted in one failover starts one of its own. Default 5000 ms: well above the 2 s the Sentinels take
   * to hear of a new configuration (their hello period), else a second Sentinel promotes another replica of
   * the same primary, and what the first promoted one took is lost when it is made a replica again.
   */
  failoverTimeoutMs?: number;
  /** The data nodes' AOF (default off) and its fsync policy (default `everysec`). */
  appendonly?: boolean;
  appendfsync?: "always" | "everysec" | "no";
  /** More arguments for every data node. */
  extraArgs?: readonly string[];
  /**
   * Where a data node says it is (`replica-announce-port`), given its own port: the Sentinels, its
   * replicas and the clients the Sentinels answer reach it there. A caller's proxy in front of the node
   * can so hold back or cut its replication. Default: its own port.
   */
  announcePort?: (port: number) => number | Promise<number>;
}

export interface SentinelTopology {
  readonly name: string;
  /** Every data node started, the first one the first primary; roles change with failovers. */
  readonly nodes: readonly RedisServerHandle[];
  readonly sentinels: readonly RedisServerHandle[];
  /** Where the Sentinels listen: ioredis' `new Redis({ sentinels, name })`. */
  readonly sentinelAddresses: readonly RedisNodeAddress[];
  /** The port a data node is known by (see `announcePort`): what the Sentinels name as the primary. */
  announcedPort(node: RedisServerHandle): number;
  /** The data node a quorum of Sentinels names the primary now. Throws while they do not agree. */
  primary(): Promise<RedisServerHandle>;
  /** SIGKILLs a data node (the primary, for a failover) and resolves once it is gone; its dir stays. */
  kill(node: RedisServerHandle): Promise<void>;
  /**
   * Resolves with the new primary once a quorum of Sentinels names a node other than `old` and that node
   * says it is a master; throws after `timeoutMs` (default 30 s).
   */
  awaitPromotion(old: RedisServerHandle, options?: { timeoutMs?: number }): Promise<RedisServerHandle>;
  /**
   * Starts a stopped or killed data node again as a replica of the current primary, so that a later
   * failover has somewhere to go; resolves once its link to the primary is up.
   */
  restartAsReplica(node: RedisServerHandle): Promise<void>;
  /** Stops every process it started (the Sentinels first, so none fails over meanwhile), removes its dir. */
  stop(): Promise<void>;
}

/** The primary one Sentinel names, from INFO sentinel (`master0:name=…,status=ok,address=host:port,…`). */
async function namedPrimary(sentinel: RedisServerHandle, name: string): Promise<number | undefined> {
  const info = await redisCommand(HOST, sentinel.port, ["INFO", "sentinel"]).catch(() => null);
  for (const line of (info ?? "").split("\n")) {
    const fields = new Map(
      line
        .replace(/^master\d+:/, "")
        .split(",")
        .map((pair) => pair.trim().split("=") as [string, string]),
    );
    if (fields.get("name") !== name) continue;
    const port = Number(fields.get("address")?.split(":").at(-1));
    return Number.isInteger(port) ? port : undefined;
  }
  return undefined;
}

async function role(node: RedisServerHandle): Promise<string | undefined> {
  const info = await redisCommand(HOST, node.port, ["INFO", "replication"]).catch(() => null);
  return infoField(info, "role");
}

/**
 * Starts a primary, its replicas and the Sentinels, and resolves once every Sentinel sees the primary, all
 * replicas and all the other Sentinels. If anything fails to start, stops what did and throws.
 */
export async function startSentinelTopology(
  options: SentinelTopologyOptions = {},
): Promise<SentinelTopology> {
  const name = options.name ?? "once";
  const replicaCount = options.replicas ?? 2;
  const sentinelCount = options.sentinels ?? 3;
  const quorum = options.quorum ?? 2;
  const dir = mkdtempSync(path.join(os.tmpdir(), "once-sentinel-"));
  const nodes: RedisServerHandle[] = [];
  const sentinels: RedisServerHandle[] = [];
  const announced = new Map<RedisServerHandle, number>();
  const announcedPort = (node: RedisServerHandle) => announced.get(node) ?? node.port;

  const stop = async () => {
    // Sentinels first: with the data nodes going down one by one, they would start failovers.
    await Promise.all(sentinels.map((sentinel) => sentinel.stop()));
    await Promise.all(nodes.map((node) => node.stop()));
    rmSync(dir, { recursive: true, force: true });
  };

  const startNode = async (extraArgs: readonly string[]) => {
    const nodeDir = path.join(dir, `node-${nodes.length + 1}`);
    mkdirSync(nodeDir);
    // The port is picked here, not by startRedisServer: the node must be told where it is announced.
    const port = await freePort();
    const announce = options.announcePort === undefined ? port : await options.announcePort(port);
    const node = await startRedisServer({
      port,
      dir: nodeDir,
      appendonly: options.appendonly ?? false,
      appendfsync: options.appendfsync ?? "everysec",
      extraArgs: [
        // A replica's full sync starts at once, not after the 5 s Redis waits for more replicas to join it.
        "--repl-diskless-sync-delay",
        "0",
        ...(announce === port
          ? []
          : ["--replica-announce-ip", HOST, "--replica-announce-port", String(announce)]),
        ...(options.extraArgs ?? []),
        ...extraArgs,
      ],
    });
    announced.set(node, announce);
    nodes.push(node);
    return node;
  };

  const primary = async (): Promise<RedisServerHandle> => {
    const named = await Promise.all(
      sentinels.filter((s) => s.running).map((sentinel) => namedPrimary(sentinel, name)),
    );
    const votes = new Map<number, number>();
    for (const port of named) if (port !== undefined) votes.set(port, (votes.get(port) ?? 0) + 1);
    const [port] = [...votes].find(([, n]) => n >= quorum) ?? [];
    const node = nodes.find((candidate) => announcedPort(candidate) === port);
    if (!node) throw new Error(`the Sentinels do not agree on a primary (they name ${named.join(", ")})`);
    return node;
  };

  try {
    const first = await startNode([]);
    for (let k = 0; k < replicaCount; k++) {
      await startNode(["--replicaof", HOST, String(announcedPort(first))]);
    }
    for (let k = 0; k < sentinelCount; k++) {
      const sentinelDir = path.join(dir, `sentinel-${k + 1}`);
      mkdirSync(sentinelDir);
      const configFile = path.join(sentinelDir, "sentinel.conf");
      writeFileSync(
        configFile,
        [
          `sentinel monitor ${name} ${HOST} ${announcedPort(first)} ${quorum}`,
          `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1_000}`,
          `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 5_000}`,
          `sentinel parallel-syncs ${name} 1`,
          "",
        ].join("\n"),
      );
      sentinels.push(await startRedisServer({ dir: sentinelDir, configFile, extraArgs: ["--sentinel"] }));
    }
    // Sentinels find the replicas through the primary, and each other through its hello channel.
    const everyoneSeen = async () => {
      for (const sentinel of sentinels) {
        const info = await redisCommand(HOST, sentinel.port, ["INFO", "sentinel"]).catch(() => null);
        const wanted = `address=${HOST}:${announcedPort(first)},slaves=${replicaCount},sentinels=${sentinelCount}`;
        if (!info?.includes(`status=ok,${wanted}`)) return false;
      }
      return (await Promise.all(nodes.slice(1).map((node) => replicaInSync(node.port)))).every(Boolean);
    };
    if (!(await pollUntil(everyoneSeen, { timeoutMs: 30_000, intervalMs: 100 }))) {
      throw new Error(`the Sentinels did not see ${replicaCount} replicas and each other within 30 s`);
    }
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    name,
    nodes,
    sentinels,
    sentinelAddresses: sentinels.map((sentinel) => ({ host: HOST, port: sentinel.port })),
    announcedPort,
    primary,
    kill: (node) => node.kill("SIGKILL"),
    async awaitPromotion(old, { timeoutMs = 30_000 } = {}) {
      let promoted: RedisServerHandle | undefined;
      const done = await pollUntil(
        async () => {
          const now = await primary().catch(() => undefined);
          if (now === undefined || now === old || (await role(now)) !== "master") return false;
          promoted = now;
          return true;
        },
        { timeoutMs, intervalMs: 50 },
      );
      if (!done || !promoted) {
        throw new Error(`no primary other than ${old.url} was promoted within ${timeoutMs} ms`);
      }
      return promoted;
    },
    async restartAsReplica(node) {
      const current = await primary();
      if (current === node) throw new Error(`${node.url} is the primary: there is nothing to replicate`);
      await node.restart({ extraArgs: ["--replicaof", HOST, String(announcedPort(current))] });
      if (!(await pollUntil(() => replicaInSync(node.port), { timeoutMs: 30_000, intervalMs: 100 }))) {
        throw new Error(`${node.url} did not sync with the primary ${current.url} within 30 s`);
      }
    },
    stop,
  };
}

import { Cluster, Redis } from "ioredis";
import type { CliIo } from "./cli-io.js";
import { CommandFailedError, UsageError } from "./errors.js";
import type { ParsedOptions } from "./parse-command-line.js";
import { REDIS_URL, storeUrlLabel } from "./store-url.js";

export interface NodeAddress {
  host: string;
  port: number;
}

/** Where the store lives: one server, or a Cluster's seed nodes. `label` says which, for messages. */
export type RedisTarget =
  | { cluster: false; url: string; label: string }
  | { cluster: true; nodes: NodeAddress[]; label: string };

const DEFAULT_URL = "redis://127.0.0.1:6379";
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * Where to connect: `--redis-url` or `--cluster` if given (not both), else REDIS_CLUSTER_NODES or REDIS_URL
 * (not both), else redis://127.0.0.1:6379.
 */
export function redisTarget(options: ParsedOptions, env: NodeJS.ProcessEnv): RedisTarget {
  const url = options.string("redis-url");
  const cluster = options.string("cluster");
  if (url !== undefined && cluster !== undefined) {
    throw new UsageError("give --redis-url or --cluster, not both");
  }
  if (url !== undefined) return standalone(url, "--redis-url");
  if (cluster !== undefined) return clusterOf(cluster, "--cluster");
  const envUrl = nonEmpty(env.REDIS_URL);
  const envNodes = nonEmpty(env.REDIS_CLUSTER_NODES);
  if (envUrl !== undefined && envNodes !== undefined) {
    throw new UsageError(
      "both REDIS_URL and REDIS_CLUSTER_NODES are set: choose one with --redis-url <url> or --cluster <host:port,…>",
    );
  }
  if (envNodes !== undefined) return clusterOf(envNodes, "REDIS_CLUSTER_NODES");
  return standalone(envUrl ?? DEFAULT_URL, "REDIS_URL");
}

/** The store's key prefix: --prefix, default "once:". */
export function storePrefix(options: ParsedOptions): string {
  return options.string("prefix") ?? "once:";
}

/**
 * Connects, runs `use`, and closes the connection whatever happens. A Redis that does not answer within
 * 5 s is a CommandFailedError (exit 1) naming where we tried; nothing is retried behind the operator's back.
 */
export async function withRedis<T>(
  target: RedisTarget,
  use: (client: Redis | Cluster) => Promise<T>,
): Promise<T> {
  const client = target.cluster
    ? new Cluster(target.nodes, {
        lazyConnect: true,
        clusterRetryStrategy: () => null,
        enableReadyCheck: true,
        redisOptions: { connectTimeout: CONNECT_TIMEOUT_MS, maxRetriesPerRequest: 1 },
      })
    : new Redis(target.url, {
        lazyConnect: true,
        connectTimeout: CONNECT_TIMEOUT_MS,
        maxRetriesPerRequest: 1,
        retryStrategy: () => null,
      });
  let lastError: unknown;
  // ioredis reports connection trouble as events too; the rejected connect() below says it once.
  client.on("error", (error: unknown) => {
    lastError = error;
  });
  try {
    await connect(client);
  } catch (error) {
    client.disconnect();
    const reason = (lastError ?? error) as Error;
    throw new CommandFailedError(`cannot reach Redis at ${target.label}: ${reason.message}`, {
      cause: error,
    });
  }
  try {
    return await use(client);
  } finally {
    await client.quit().catch(() => client.disconnect());
  }
}

/**
 * A client for a process that stays up (`once console`): it reconnects on its own, every 200 ms more up to
 * 2 s between tries, and fails a command at once while it is disconnected rather than queue it, so a page
 * can say the store is unreachable. `onState` hears when Redis stops and starts answering, once each.
 */
export function openRedis(
  target: RedisTarget,
  onState: (up: boolean, reason?: string) => void,
): Redis | Cluster {
  const retry = (times: number) => Math.min(times * 200, 2_000);
  const client = target.cluster
    ? new Cluster(target.nodes, {
        clusterRetryStrategy: retry,
        enableOfflineQueue: false,
        redisOptions: { connectTimeout: CONNECT_TIMEOUT_MS, maxRetriesPerRequest: 1 },
      })
    : new Redis(target.url, {
        connectTimeout: CONNECT_TIMEOUT_MS,
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
        retryStrategy: retry,
      });
  let up: boolean | undefined;
  const changed = (now: boolean, reason?: string) => {
    if (up === now) return;
    up = now;
    onState(now, reason);
  };
  client.on("ready", () => changed(true));
  client.on("error", (error: Error) => changed(false, error.message));
  client.on("close", () => {
    if (up === true) changed(false, "the connection closed");
  });
  return client;
}

/**
 * Refuses a plain client pointed at one node of a Redis Cluster: it would see (and SCAN) that node's keys
 * only, and hit MOVED for the rest.
 */
export async function assertNotClusterNode(client: Redis | Cluster, target: RedisTarget) {
  if (client.isCluster || target.cluster) return;
  const info = await (client as Redis).info("cluster").catch(() => "");
  if (/^cluster_enabled:1\s*$/m.test(info)) {
    const { host, port } = (client as Redis).options;
    throw new UsageError(
      `${target.label} is a node of a Redis Cluster: pass --cluster ${host ?? "127.0.0.1"}:${port ?? 6379} ` +
        "(or set REDIS_CLUSTER_NODES) so that every master is read",
    );
  }
}

/** `true` when stdin is a terminal a person can answer on. */
export function interactive(io: CliIo): boolean {
  return io.stdin.isTTY === true;
}

async function connect(client: Redis | Cluster): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      client.connect(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)),
          CONNECT_TIMEOUT_MS,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function standalone(url: string, source: string): RedisTarget {
  return { cluster: false, url, label: storeUrlLabel(url, source, REDIS_URL) };
}

function clusterOf(value: string, source: string): RedisTarget {
  const nodes: NodeAddress[] = [];
  for (const raw of value.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const colon = entry.lastIndexOf(":");
    const host = entry.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
    const port = Number(entry.slice(colon + 1));
    if (colon <= 0 || host === "" || !Number.isInteger(port) || port <= 0 || port > 65535) {
      throw new UsageError(
        `${source}: ${JSON.stringify(entry)} is not host:port (expected e.g. 127.0.0.1:7000,127.0.0.1:7001)`,
      );
    }
    nodes.push({ host, port });
  }
  if (nodes.length === 0) throw new UsageError(`${source} lists no host:port`);
  return { cluster: true, nodes, label: `cluster ${nodes.map((n) => `${n.host}:${n.port}`).join(",")}` };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

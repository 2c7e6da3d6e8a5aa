/** Host and port of a Redis node, in the shape ioredis' `new Cluster(nodes)` accepts. */
export interface RedisNodeAddress {
  host: string;
  port: number;
}

/** What a `redis://` or `rediss://` URL says about where the server is and how to log in. */
export interface RedisUrlParts extends RedisNodeAddress {
  /** `redis:` or `rediss:` (TLS). */
  protocol: string;
  username?: string;
  password?: string;
}

/** The shared standalone Redis every suite may use: `REDIS_URL`, else `redis://127.0.0.1:6379`. */
export function redisUrl(): string {
  return process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
}

/** Splits a Redis URL; host 127.0.0.1 and port 6379 where it names none. Throws on a malformed URL. */
export function parseRedisUrl(url: string): RedisUrlParts {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`not a valid Redis URL: ${JSON.stringify(url)}`);
  }
  return {
    protocol: parsed.protocol,
    host: parsed.hostname.replace(/^\[(.*)\]$/, "$1") || "127.0.0.1",
    port: parsed.port ? Number(parsed.port) : 6379,
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
  };
}

/** Parses `host:port,host:port,…` (IPv6 hosts in brackets, e.g. `[::1]:7000`). */
export function parseNodeList(value: string): RedisNodeAddress[] {
  const nodes: RedisNodeAddress[] = [];
  for (const raw of value.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const colon = entry.lastIndexOf(":");
    const host = entry.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
    const port = Number(entry.slice(colon + 1));
    if (colon <= 0 || host === "" || !Number.isInteger(port) || port <= 0 || port > 65535) {
      throw new Error(`invalid Redis node address ${JSON.stringify(entry)} in ${JSON.stringify(value)}`);
    }
    nodes.push({ host, port });
  }
  if (nodes.length === 0) throw new Error(`no Redis node addresses in ${JSON.stringify(value)}`);
  return nodes;
}

/**
 * The Redis Cluster's seed nodes, from `REDIS_CLUSTER_NODES` (`127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`).
 * The global setup (`@once/support/global-setup`) sets it, starting a cluster, unless it is already set.
 */
export function clusterNodes(): RedisNodeAddress[] {
  const value = process.env.REDIS_CLUSTER_NODES;
  if (value === undefined || value.trim() === "") {
    throw new Error(
      "REDIS_CLUSTER_NODES is not set. Add the shared global setup to this package's vitest config " +
        '(packageTestConfig({ globalSetup: ["@once/support/global-setup"] })), or start a cluster ' +
        "yourself: `node scripts/redis-cluster.mjs start --dir .cluster` and export the line it prints.",
    );
  }
  return parseNodeList(value);
}

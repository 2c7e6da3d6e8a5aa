import { replicasShortfall } from "./check-durability.js";
import type { NodeFacts } from "./inspect-node.js";
import { MIN_REDIS_VERSION, olderThan } from "./redis-version.js";

/**
 * How strictly to judge: `startup` is what RedisStore.create refuses and warns about; `production` (what
 * `once doctor` applies) also fails what loses records in a crash or a restart, and judges memory.
 */
export type CheckLevel = "startup" | "production";

/** `fail` can cause duplicates; `warn` deserves a look. */
export type CheckStatus = "ok" | "warn" | "fail";

/** One thing checked on one server (or, with node `cluster`, across the masters of a cluster). */
export interface RedisCheck {
  node: string;
  /** What was checked: a setting (`maxmemory-policy`, `appendfsync`, …) or `version`, `role`, `cluster`. */
  check: string;
  status: CheckStatus;
  detail: string;
  /** What to change, when there is something to change. */
  fix?: string;
}

/** What the rules judge a server against (with `timeoutMs`, diagnoseRedis's options). */
export interface NodeCheckOptions {
  /** Accept a `maxmemory-policy` other than `noeviction` (an evicted record can repeat an effect). Default false. */
  allowEviction?: boolean;
  /** Default `startup`. */
  level?: CheckLevel;
  /** The store's durability (RedisStore's option): judged against the replicas each master has connected. */
  durability?: { replicas: number };
}

/** A check as the rules give it: `lead`, when set, opens its one-line message (see diagnoseRedis). */
export interface NodeCheck extends RedisCheck {
  lead?: string;
}

const MEMORY_WARN_RATIO = 0.9;
const LOST = "each lost record lets a retry repeat its effect";
const AOF_FIX =
  "CONFIG SET appendonly yes and CONFIG SET appendfsync everysec (or always), and the same in redis.conf";

/**
 * Judges one server. The rules are the same at every level but two: what loses records in a crash or a
 * restart fails in production and is only a warning at start-up (a developer's or a CI's Redis without
 * persistence is still a working store), and memory is judged in production only.
 */
export function nodeChecks(facts: NodeFacts, cluster: boolean, options: NodeCheckOptions): NodeCheck[] {
  const production = options.level === "production";
  const durability: CheckStatus = production ? "fail" : "warn";
  const { report, info, config, infoDenied, configDenied } = facts;
  const checks: NodeCheck[] = [];
  const add = (check: string, status: CheckStatus, detail: string, fix?: string, lead?: string) =>
    checks.push({
      node: report.node,
      check,
      status,
      detail,
      ...(fix === undefined ? {} : { fix }),
      ...(lead === undefined ? {} : { lead }),
    });

  const { version, server } = report;
  if (version === undefined) {
    add(
      "version",
      "warn",
      `${infoDenied === undefined ? "INFO has no version" : `INFO is not permitted (${infoDenied})`}: ` +
        "the Redis version could not be verified (once needs 6.2 or later)",
      "allow INFO for once's user, and run Redis 6.2+ or Valkey",
    );
  } else if (server === "redis" && olderThan(version, MIN_REDIS_VERSION)) {
    add(
      "version",
      "fail",
      `Redis ${version} is older than 6.2: once's scripts need 6.2 or later`,
      "upgrade to Redis 6.2+ or Valkey",
    );
  } else {
    add("version", "ok", `${server === "valkey" ? "Valkey" : "Redis"} ${version}`);
  }

  const role = info?.get("role");
  if (role === "slave" && !cluster) {
    add(
      "role",
      "fail",
      "a read-only replica: every claim would fail with READONLY",
      "connect to the master (or through Sentinel)",
    );
  } else if (role !== undefined) {
    add("role", "ok", role === "slave" ? "replica" : role);
  }

  if (role === "master") replicaChecks(facts, options, add);

  if (!cluster && info?.get("cluster_enabled") === "1") {
    add(
      "cluster",
      "fail",
      "this server is a Redis Cluster node reached as a plain server: only this node's keys are seen, others fail with MOVED",
      `connect with --cluster ${report.node} (or REDIS_CLUSTER_NODES) in once's CLI, and with ioredis' ` +
        "Cluster client (`new Cluster([...])`) in your app",
    );
  } else if (!cluster && info !== undefined) {
    add("cluster", "ok", "standalone");
  }

  const policy = report.maxmemoryPolicy;
  if (configDenied !== undefined) {
    add(
      "config",
      "warn",
      `CONFIG GET is not permitted (${configDenied}): ` +
        `${policy === undefined ? "" : "maxmemory-policy was read from INFO instead; "}` +
        "appendfsync and RDB save points could not be verified",
      "allow CONFIG GET for once's user, or check these settings where your provider shows them",
    );
  }
  if (policy === undefined) {
    add(
      "maxmemory-policy",
      "warn",
      "maxmemory-policy could not be verified; make sure it is noeviction, or Redis may evict records and a " +
        "retry would repeat their effects (neither CONFIG GET nor INFO is permitted)",
    );
  } else if (policy === "noeviction") {
    add("maxmemory-policy", "ok", "noeviction");
  } else if (options.allowEviction) {
    add(
      "maxmemory-policy",
      "warn",
      `${policy} and allowEviction is set: an evicted record lets a retry repeat its effect`,
    );
  } else {
    add(
      "maxmemory-policy",
      "fail",
      `${policy}: Redis may evict once's records (they all have a TTL, so volatile-* policies evict them too), ` +
        "and an evicted record lets a retry repeat its effect",
      "CONFIG SET maxmemory-policy noeviction, and set maxmemory-policy noeviction in redis.conf; or pass " +
        "allowEviction: true to RedisStore.create to accept the risk",
    );
  }

  // With noeviction a full Redis refuses writes: claims fail closed (no duplicates, and no progress).
  const used = Number(info?.get("used_memory") ?? Number.NaN);
  const maxmemory = Number(config?.get("maxmemory") ?? info?.get("maxmemory") ?? Number.NaN);
  if (production && Number.isFinite(used)) {
    if (Number.isFinite(maxmemory) && maxmemory > 0) {
      const ratio = used / maxmemory;
      const detail = `${bytes(used)} of maxmemory ${bytes(maxmemory)} (${Math.round(ratio * 100)}%)`;
      if (ratio >= MEMORY_WARN_RATIO) {
        add(
          "memory",
          "warn",
          `${detail}: when full, Redis refuses writes and every claim fails closed`,
          "raise maxmemory or shorten the retention",
        );
      } else {
        add("memory", "ok", detail);
      }
    } else {
      add("memory", "ok", `${bytes(used)} used, no maxmemory limit`);
    }
  }

  const { appendonly, appendfsync, rdb } = report;
  if (appendonly === undefined) {
    add(
      "persistence",
      "warn",
      "appendonly could not be verified (neither CONFIG GET nor INFO is permitted): whether records survive a restart is unknown",
      "make sure appendonly is yes",
    );
  } else if (!appendonly && rdb === false) {
    add(
      "appendonly",
      durability,
      `appendonly no and no RDB save points: a Redis restart loses every record, and ${LOST}`,
      AOF_FIX,
      // The worst of these, named outright where it stands alone in a log line or an error message.
      "no persistence",
    );
  } else if (!appendonly) {
    add(
      "appendonly",
      durability,
      `appendonly no (${rdb ? `RDB save points "${config?.get("save")}"` : "RDB save points unknown"}): records ` +
        `survive a restart only as of the last RDB snapshot${rdb ? "" : ", if any"}, and ${LOST}`,
      AOF_FIX,
    );
  } else if (appendfsync === "always") {
    add("appendfsync", "ok", "appendonly yes, appendfsync always: no record is lost in a crash");
  } else if (appendfsync === "everysec") {
    add(
      "appendfsync",
      "warn",
      "appendonly yes, appendfsync everysec: a Redis crash can lose up to a second of records (a lost record lets a retry repeat its effect)",
      "appendfsync always loses none, at a latency cost; a reconcile hook on each effect tool narrows the gap",
    );
  } else if (appendfsync === "no") {
    add(
      "appendfsync",
      durability,
      "appendonly yes, appendfsync no: the OS decides when the AOF reaches the disk (often every 30 s), so a crash can lose that much of the records",
      "CONFIG SET appendfsync everysec (or always), and the same in redis.conf",
    );
  } else {
    add(
      "appendfsync",
      "warn",
      `appendonly yes, appendfsync ${appendfsync ?? "unknown"}`,
      "make sure appendfsync is everysec or always",
    );
  }
  return checks;
}

const LAG_WARN_S = 1;

/**
 * A master's replicas, their lag, `min-replicas-to-write`, and whether the store's durability can be met.
 * Replication is asynchronous: without durability, a claim the master acknowledged and never sent on is
 * gone after a failover, and the next attempt runs the effect again.
 */
function replicaChecks(
  facts: NodeFacts,
  options: NodeCheckOptions,
  add: (check: string, status: CheckStatus, detail: string, fix?: string) => void,
): void {
  const { info, config } = facts;
  const connected = Number(info?.get("connected_slaves") ?? 0);
  const replicas = Array.from({ length: connected }, (_, i) => parseReplica(info?.get(`slave${i}`)));
  const required = options.durability?.replicas;
  const durabilityFix =
    "durability: { replicas: 1, timeoutMs: 100 } on RedisStore.create (once doctor --replicas 1)";
  if (connected === 0) {
    add(
      "replicas",
      "ok",
      "none connected: the records live on this server alone (its AOF is what keeps them)",
    );
  } else {
    const lags = replicas.map((r) => `${r.address} ${r.state}, lag ${r.lag ?? "?"} s`).join("; ");
    const behind = replicas.filter((r) => r.state !== "online" || (r.lag ?? 0) > LAG_WARN_S);
    if (behind.length > 0)
      add(
        "replicas",
        "warn",
        `${connected} connected (${lags}): ${behind.length} not online or more than ${LAG_WARN_S} s behind`,
        "look at the replica's link (INFO replication on it) before relying on it in a failover",
      );
    else add("replicas", "ok", `${connected} connected (${lags})`);
  }
  if (required !== undefined) {
    const shortfall = replicasShortfall(facts.report.node, connected, required);
    if (shortfall !== undefined)
      add("durability", "fail", shortfall, "connect the replicas, or lower durability.replicas");
    else
      add(
        "durability",
        "ok",
        `${required} of ${connected} replicas confirm each transition before an effect runs and before it is settled`,
      );
  } else if (connected > 0) {
    add(
      "durability",
      "warn",
      "replication is asynchronous and the store does not wait for it: a claim this master acknowledged and " +
        "never sent on is gone after a failover, and the next attempt runs the effect again",
      durabilityFix,
    );
  }
  const minToWrite = config?.get("min-replicas-to-write");
  if (connected > 0 && minToWrite === "0")
    add(
      "min-replicas-to-write",
      required === undefined ? "warn" : "ok",
      required === undefined
        ? "0: a master cut off from its replicas keeps accepting claims that a failover will discard"
        : "0: a master cut off from its replicas accepts writes, but the store's durability runs no effect on one unconfirmed",
      ...(required === undefined
        ? ["CONFIG SET min-replicas-to-write 1 (and min-replicas-max-lag 10), or the store's durability"]
        : []),
    );
  else if (minToWrite !== undefined && minToWrite !== "0")
    add(
      "min-replicas-to-write",
      "ok",
      `${minToWrite}: the master refuses writes with fewer replicas in reach`,
    );
}

/** `ip=10.0.0.2,port=6380,state=online,offset=123,lag=0` → its parts. */
function parseReplica(line: string | undefined): { address: string; state: string; lag?: number } {
  const fields = new Map((line ?? "").split(",").map((pair) => pair.split("=") as [string, string]));
  const lag = fields.get("lag");
  return {
    address: `${fields.get("ip") ?? "?"}:${fields.get("port") ?? "?"}`,
    state: fields.get("state") ?? "unknown",
    ...(lag === undefined ? {} : { lag: Number(lag) }),
  };
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

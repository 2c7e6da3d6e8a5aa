import { withTimeout } from "@once/core/store-kit";
import type { Cluster, Redis } from "ioredis";
import { ReplyError } from "ioredis";
import { RedisConfigError } from "./errors.js";
import { nodeAddress } from "./node-address.js";
import { parseInfo } from "./parse-info.js";
import { olderThan } from "./redis-version.js";
import { toStoreError } from "./to-store-error.js";
import { waitUntilReady } from "./wait-until-ready.js";

/** The oldest Redis with `WAITAOF`. Any Valkey has it. */
const WAITAOF_SINCE = [7, 2] as const;

/**
 * Refuses, before the first claim, a durability that the servers cannot give: on every master, fewer replicas
 * connected than `replicas`, `fsync` on a Redis without `WAITAOF`, or a server that refuses the command (an
 * ACL, a managed Redis that renamed it). Each RedisConfigError names the node and both numbers or the version.
 */
export async function checkDurability(
  redis: Redis | Cluster,
  durability: { replicas: number; fsync?: boolean },
  timeoutMs: number,
): Promise<void> {
  const operation = "the durability check";
  await waitUntilReady(redis, timeoutMs, operation);
  const masters = redis.isCluster ? (redis as Cluster).nodes("master") : [redis as Redis];
  try {
    await withTimeout(Promise.all(masters.map((node) => checkNode(node, durability))), timeoutMs, "Redis");
  } catch (error) {
    throw toStoreError(operation, error);
  }
}

/** Why `required` replicas cannot confirm a write on a master with `connected`, or undefined when they can. */
export function replicasShortfall(address: string, connected: number, required: number): string | undefined {
  if (connected >= required) return undefined;
  return (
    `durability.replicas is ${required}, but ${address} has ${connected} replica${connected === 1 ? "" : "s"} ` +
    "connected: no write could be confirmed, so no effect would ever run"
  );
}

async function checkNode(node: Redis, { replicas, fsync }: { replicas: number; fsync?: boolean }) {
  const address = nodeAddress(node);
  const info = parseInfo(await node.info());
  const connected = Number(info.get("connected_slaves") ?? 0);
  const shortfall = replicasShortfall(address, connected, replicas);
  if (shortfall !== undefined)
    throw new RedisConfigError(
      "durability.replicas",
      `${shortfall}. Connect the replicas, or lower durability.replicas`,
    );
  const valkey = info.get("valkey_version") !== undefined || info.get("server_name") === "valkey";
  const version = info.get("redis_version") ?? "unknown";
  if (fsync && !valkey && olderThan(version, WAITAOF_SINCE)) {
    throw new RedisConfigError(
      "durability.fsync",
      `durability.fsync needs WAITAOF, which Redis has from 7.2 (and every Valkey); ${address} runs Redis ${version}. ` +
        "Upgrade, or drop fsync (replicas then confirm receipt, not a write to disk)",
    );
  }
  if (fsync && info.get("aof_enabled") !== "1") {
    throw new RedisConfigError(
      "durability.fsync",
      `durability.fsync waits for the AOF fsync, but ${address} has appendonly no: CONFIG SET appendonly yes`,
    );
  }
  try {
    // Nothing to wait for: an answer at once, or the refusal.
    if (fsync) await node.call("WAITAOF", 0, 0, 0);
    else await node.wait(0, 0);
  } catch (error) {
    if (!(error instanceof ReplyError)) throw error;
    throw new RedisConfigError(
      "durability",
      `${address} refuses ${fsync ? "WAITAOF" : "WAIT"} (${(error as Error).message}): durability needs it; ` +
        "allow it for once's user, or drop the durability option",
      { cause: error },
    );
  }
}

import type { Cluster, Redis } from "ioredis";
import { type CheckRedisOptions, diagnoseRedis, type RedisReport } from "./diagnose-redis.js";
import { RedisConfigError } from "./errors.js";

/**
 * Checks that Redis can keep once's promises: runs {@link diagnoseRedis} at `options.level` (default
 * `startup`: an evicting maxmemory-policy unless allowed, Redis older than 6.2, a replica, a cluster node
 * reached without a Cluster client) and refuses with RedisConfigError, naming the first failed check's
 * setting, when any check failed. Resolves with the report, whose warnings say how records can be lost.
 */
export async function checkRedis(
  redis: Redis | Cluster,
  options: CheckRedisOptions = {},
): Promise<RedisReport> {
  const report = await diagnoseRedis(redis, options);
  const failed = report.checks.find((check) => check.status === "fail");
  if (failed !== undefined) throw new RedisConfigError(failed.check, report.problems.join("\n"));
  return report;
}

import { StoreUnavailableError } from "@once/core";
import { withTimeout } from "@once/core/store-kit";
import type { Cluster, Redis } from "ioredis";
import { inspectNode, type NodeFacts, type RedisNodeReport } from "./inspect-node.js";
import { type NodeCheck, type NodeCheckOptions, nodeChecks, type RedisCheck } from "./node-checks.js";
import { olderThan, versionParts } from "./redis-version.js";
import { toStoreError } from "./to-store-error.js";
import { waitUntilReady } from "./wait-until-ready.js";

/** What diagnoseRedis and checkRedis judge against, and how long they wait. */
export interface CheckRedisOptions extends NodeCheckOptions {
  /** How long to wait for Redis before failing with StoreUnavailableError. Default 5000 ms. */
  timeoutMs?: number;
}

/**
 * The report. On a cluster the top-level settings are those every master shares (undefined, with a
 * warning, where they differ) and `version` is the oldest.
 */
export interface RedisReport extends Omit<RedisNodeReport, "node" | "server"> {
  cluster: boolean;
  nodes: RedisNodeReport[];
  /** Every check, node by node, in a fixed order. */
  checks: RedisCheck[];
  /** One line for each check that failed: what checkRedis refuses with. */
  problems: string[];
  /** One line for each check that warned. */
  warnings: string[];
}

/**
 * Judges every setting of Redis that decides whether once can keep its promises, on every master of a
 * Cluster, at the given level. Never throws for a setting (see checkRedis); StoreUnavailableError when Redis
 * does not answer.
 */
export async function diagnoseRedis(
  redis: Redis | Cluster,
  options: CheckRedisOptions = {},
): Promise<RedisReport> {
  const timeoutMs = options.timeoutMs ?? 5_000;
  const operation = options.level === "production" ? "production checks" : "start-up checks";
  await waitUntilReady(redis, timeoutMs, operation);
  const cluster = redis.isCluster;
  const nodes = cluster ? (redis as Cluster).nodes("master") : [redis as Redis];
  if (nodes.length === 0) {
    throw new StoreUnavailableError(operation, { cause: new Error("the Cluster client knows no master") });
  }
  let inspected: NodeFacts[];
  try {
    inspected = await withTimeout(Promise.all(nodes.map((node) => inspectNode(node))), timeoutMs, "Redis");
  } catch (error) {
    throw toStoreError(operation, error);
  }

  const checks = inspected.flatMap((facts) => nodeChecks(facts, cluster, options));
  const reports = inspected.map((facts) => facts.report);
  const shared = <K extends "maxmemoryPolicy" | "appendonly" | "appendfsync" | "rdb">(setting: K) => {
    const values = new Set(reports.map((r) => r[setting]));
    if (values.size > 1) {
      checks.push({
        node: "cluster",
        check: setting,
        status: "warn",
        detail: `the masters differ in ${setting}: ${[...values].map(String).join(", ")}`,
      });
    }
    return values.size === 1 ? reports[0]?.[setting] : undefined;
  };
  const version = reports
    .map((r) => r.version)
    .filter((v) => v !== undefined)
    .reduce<string | undefined>(
      (oldest, v) => (oldest === undefined || olderThan(v, versionParts(oldest)) ? v : oldest),
      undefined,
    );
  return {
    ...(version === undefined ? {} : { version }),
    ...defined("maxmemoryPolicy", shared("maxmemoryPolicy")),
    ...defined("appendonly", shared("appendonly")),
    ...defined("appendfsync", shared("appendfsync")),
    ...defined("rdb", shared("rdb")),
    cluster,
    nodes: reports,
    checks: checks.map(({ lead: _, ...check }) => check),
    problems: checks.filter((c) => c.status === "fail").map(line),
    warnings: checks.filter((c) => c.status === "warn").map(line),
  };
}

/** A check as one line of a log or an error message, where no table gives it columns. */
function line(check: NodeCheck): string {
  const lead = check.lead === undefined ? "" : `${check.lead} — `;
  const fix = check.fix === undefined ? "" : `. Fix: ${check.fix}`;
  return `${check.node} ${check.check}: ${lead}${check.detail}${fix}`;
}

function defined<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

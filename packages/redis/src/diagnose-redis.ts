import { StoreUnavailableError } from "@once/core";
import type { Cluster, Redis } from "ioredis";
import { inspectNode, type NodeFacts, type RedisNodeReport } from "./inspect-node.js";
import { type NodeCheck, nodeChecks } from "./node-checks.js";
import { olderThan, versionParts } from "./redis-version.js";
import { toStoreError } from "./to-store-error.js";
import { waitUntilReady } from "./wait-until-ready.js";
import { withTimeout } from "./with-timeout.js";

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

export interface CheckRedisOptions {
  /** Accept a `maxmemory-policy` other than `noeviction` (an evicted record can repeat an effect). Default false. */
  allowEviction?: boolean;
  /** How long to wait for Redis before failing with StoreUnavailableError. Default 5000 ms. */
  timeoutMs?: number;
  /** Default `startup`. */
  level?: CheckLevel;
  /** The store's durability (RedisStore's option): judged against the replicas each master has connected. */
  durability?: { replicas: number };
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
    inspected = await withTimeout(Promise.all(nodes.map((node) => inspectNode(node))), timeoutMs);
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

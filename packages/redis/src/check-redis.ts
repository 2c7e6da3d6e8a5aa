import { StoreUnavailableError } from "@once/core";
import { type Cluster, type Redis, ReplyError } from "ioredis";
import { RedisConfigError } from "./errors.js";
import { parseInfo } from "./parse-info.js";
import { toStoreError } from "./to-store-error.js";
import { waitUntilReady } from "./wait-until-ready.js";
import { withTimeout } from "./with-timeout.js";

export interface CheckRedisOptions {
  /** Accept a `maxmemory-policy` other than `noeviction` (an evicted record can repeat an effect). Default false. */
  allowEviction?: boolean;
  /** How long to wait for Redis before failing with StoreUnavailableError. Default 5000 ms. */
  timeoutMs?: number;
}

/** What one Redis server (a standalone server, or one master of a cluster) said about itself. */
export interface RedisNodeReport {
  /** `host:port`. */
  node: string;
  server: "redis" | "valkey";
  /** Undefined when INFO is not permitted. */
  version?: string;
  /** Undefined when neither CONFIG GET nor INFO is permitted. */
  maxmemoryPolicy?: string;
  appendonly?: boolean;
  /** Undefined when CONFIG GET is not permitted. */
  appendfsync?: string;
  /** Whether RDB save points are configured; undefined when CONFIG GET is not permitted. */
  rdb?: boolean;
}

/**
 * The start-up report. On a cluster the top-level settings are those every master shares (undefined,
 * with a warning, where they differ) and `version` is the oldest.
 */
export interface RedisReport extends Omit<RedisNodeReport, "node" | "server"> {
  cluster: boolean;
  nodes: RedisNodeReport[];
  warnings: string[];
}

interface Problem {
  setting: string;
  message: string;
}

const OPERATION = "start-up checks";
const MIN_VERSION = [6, 2] as const;

/**
 * Checks that Redis can keep once's promises: refuses (RedisConfigError) an evicting maxmemory-policy
 * unless allowed, Redis older than 6.2, a replica, and a cluster node reached without a Cluster client; reports
 * persistence, with a warning for each way records can be lost. Checks every master of a Cluster.
 */
export async function checkRedis(
  redis: Redis | Cluster,
  options: CheckRedisOptions = {},
): Promise<RedisReport> {
  const timeoutMs = options.timeoutMs ?? 5_000;
  await waitUntilReady(redis, timeoutMs, OPERATION);
  const cluster = redis.isCluster;
  const nodes = cluster ? (redis as Cluster).nodes("master") : [redis as Redis];
  if (nodes.length === 0) {
    throw new StoreUnavailableError(OPERATION, { cause: new Error("the Cluster client knows no master") });
  }
  let inspected: Inspection[];
  try {
    inspected = await withTimeout(Promise.all(nodes.map((node) => inspect(node))), timeoutMs);
  } catch (error) {
    throw toStoreError(OPERATION, error);
  }

  const warnings: string[] = [];
  const problems: Problem[] = [];
  for (const { report, info, configDenied, infoDenied } of inspected) {
    const at = report.node;
    if (infoDenied !== undefined) {
      warnings.push(
        `${at}: INFO is not permitted (${infoDenied}): the Redis version could not be verified (once needs 6.2 or later)`,
      );
    }
    if (configDenied !== undefined) {
      warnings.push(
        `${at}: CONFIG GET is not permitted (${configDenied}): ` +
          (report.maxmemoryPolicy === undefined
            ? "maxmemory-policy could not be verified; make sure it is noeviction, or Redis may evict records and a retry would repeat their effects. "
            : "maxmemory-policy was read from INFO instead. ") +
          "appendfsync and RDB save points could not be verified",
      );
    }
    if (report.version !== undefined && report.server === "redis" && older(report.version, MIN_VERSION)) {
      problems.push({
        setting: "version",
        message: `${at}: Redis ${report.version} is too old: once needs Redis 6.2 or later (or Valkey); upgrade the server`,
      });
    }
    if (!cluster && info?.get("cluster_enabled") === "1") {
      problems.push({
        setting: "cluster",
        message:
          `${at}: this server is a Redis Cluster node but the client is a plain Redis client: keys in other ` +
          "slots would fail with MOVED. Connect with ioredis `new Cluster([...])`",
      });
    }
    if (!cluster && info?.get("role") === "slave") {
      problems.push({
        setting: "role",
        message:
          `${at}: this server is a read-only replica, so every claim would fail with READONLY. ` +
          "Connect to the master (or through Sentinel)",
      });
    }
    const policy = report.maxmemoryPolicy;
    if (policy !== undefined && policy !== "noeviction") {
      if (options.allowEviction) {
        warnings.push(
          `${at}: maxmemory-policy is ${policy} and allowEviction is set: an evicted record lets a retry repeat its effect`,
        );
      } else {
        problems.push({
          setting: "maxmemory-policy",
          message:
            `${at}: maxmemory-policy is ${policy}, so Redis may evict once's records (all of them expire, so ` +
            "volatile-* policies evict them too), and an evicted record lets a retry repeat its effect. Fix: " +
            "`CONFIG SET maxmemory-policy noeviction` (and set it in redis.conf), or pass allowEviction: true " +
            "to accept the risk",
        });
      }
    }
    warnings.push(...persistenceWarnings(report));
  }
  if (problems.length > 0) {
    throw new RedisConfigError(problems[0]?.setting ?? "redis", problems.map((p) => p.message).join("\n"));
  }

  const reports = inspected.map((i) => i.report);
  const shared = <K extends "maxmemoryPolicy" | "appendonly" | "appendfsync" | "rdb">(setting: K) => {
    const values = new Set(reports.map((r) => r[setting]));
    if (values.size > 1)
      warnings.push(`the masters differ in ${setting}: ${[...values].map(String).join(", ")}`);
    return values.size === 1 ? reports[0]?.[setting] : undefined;
  };
  const version = reports
    .map((r) => r.version)
    .filter((v) => v !== undefined)
    .reduce<string | undefined>(
      (oldest, v) => (oldest === undefined || older(v, parse(oldest)) ? v : oldest),
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
    warnings,
  };
}

interface Inspection {
  report: RedisNodeReport;
  info?: Map<string, string>;
  infoDenied?: string;
  configDenied?: string;
}

async function inspect(node: Redis): Promise<Inspection> {
  const address = node.options.path ?? `${node.options.host ?? "127.0.0.1"}:${node.options.port ?? 6379}`;
  const inspection: Inspection = { report: { node: address, server: "redis" } };
  const { report } = inspection;

  try {
    const info = parseInfo(await node.info());
    inspection.info = info;
    const valkey = info.get("valkey_version");
    if (valkey !== undefined || info.get("server_name") === "valkey") report.server = "valkey";
    const version = valkey ?? info.get("redis_version");
    if (version !== undefined) report.version = version;
    const policy = info.get("maxmemory_policy");
    if (policy !== undefined) report.maxmemoryPolicy = policy;
    const aof = info.get("aof_enabled");
    if (aof !== undefined) report.appendonly = aof === "1";
  } catch (error) {
    inspection.infoDenied = deniedReason(error);
  }

  // CONFIG GET one parameter at a time: several in one call needs Redis 7.
  try {
    const config = new Map<string, string>();
    for (const name of ["maxmemory-policy", "appendonly", "appendfsync", "save"]) {
      const pair = (await node.config("GET", name)) as unknown[];
      if (typeof pair[1] === "string") config.set(name, pair[1]);
    }
    const policy = config.get("maxmemory-policy");
    if (policy !== undefined) report.maxmemoryPolicy = policy;
    const appendonly = config.get("appendonly");
    if (appendonly !== undefined) report.appendonly = appendonly === "yes";
    const appendfsync = config.get("appendfsync");
    if (appendfsync !== undefined) report.appendfsync = appendfsync;
    const save = config.get("save");
    if (save !== undefined) report.rdb = save.trim() !== "";
  } catch (error) {
    inspection.configDenied = deniedReason(error);
  }
  return inspection;
}

/** The reply's text when Redis refused the command (renamed, ACL); rethrows anything else (an outage). */
function deniedReason(error: unknown): string {
  if (error instanceof ReplyError) return (error as Error).message;
  throw error;
}

function persistenceWarnings(report: RedisNodeReport): string[] {
  const at = report.node;
  const lost = "a lost record lets a retry repeat its effect";
  if (report.appendonly === true) {
    if (report.appendfsync === "everysec") {
      return [
        `${at}: appendonly yes with appendfsync everysec: a Redis crash can lose up to a second of records (${lost}); appendfsync always loses none, at a latency cost`,
      ];
    }
    if (report.appendfsync === "no") {
      return [
        `${at}: appendfsync no: the OS decides when the AOF reaches the disk (often every 30 s), so a crash can lose that much of the records (${lost}); use everysec or always`,
      ];
    }
    return [];
  }
  if (report.appendonly === false) {
    if (report.rdb === false) {
      return [
        `${at}: no persistence (appendonly no, no RDB save points): a Redis restart loses every record (${lost}); set appendonly yes`,
      ];
    }
    return [
      `${at}: appendonly no: records survive a restart only as of the last RDB snapshot, if any (${lost}); set appendonly yes`,
    ];
  }
  return [];
}

function parse(version: string): number[] {
  return version.split(".").map((part) => Number.parseInt(part, 10) || 0);
}

/** True when `version` is older than `than` (compared part by part). */
function older(version: string, than: readonly number[]): boolean {
  const parts = parse(version);
  for (let i = 0; i < than.length; i++) {
    const a = parts[i] ?? 0;
    const b = than[i] ?? 0;
    if (a !== b) return a < b;
  }
  return false;
}

function defined<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

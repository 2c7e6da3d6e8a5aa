import { type Redis, ReplyError } from "ioredis";
import { nodeAddress } from "./node-address.js";
import { parseInfo } from "./parse-info.js";

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

/** Everything the checks judge about one server: its report, and the INFO and CONFIG it came from. */
export interface NodeFacts {
  report: RedisNodeReport;
  /** INFO's fields; undefined when INFO is not permitted (`infoDenied` says why). */
  info?: Map<string, string>;
  infoDenied?: string;
  /** The CONFIG GET values once reads; undefined when CONFIG GET is not permitted (`configDenied` says why). */
  config?: Map<string, string>;
  configDenied?: string;
}

const CONFIG_READ = [
  "maxmemory-policy",
  "maxmemory",
  "appendonly",
  "appendfsync",
  "save",
  "min-replicas-to-write",
] as const;

/** Reads INFO and CONFIG from one server. A command an ACL or a rename forbids is noted, not thrown. */
export async function inspectNode(node: Redis): Promise<NodeFacts> {
  const facts: NodeFacts = { report: { node: nodeAddress(node), server: "redis" } };
  const { report } = facts;

  try {
    const info = parseInfo(await node.info());
    facts.info = info;
    const valkey = info.get("valkey_version");
    if (valkey !== undefined || info.get("server_name") === "valkey") report.server = "valkey";
    const version = valkey ?? info.get("redis_version");
    if (version !== undefined) report.version = version;
    const policy = info.get("maxmemory_policy");
    if (policy !== undefined) report.maxmemoryPolicy = policy;
    const aof = info.get("aof_enabled");
    if (aof !== undefined) report.appendonly = aof === "1";
  } catch (error) {
    facts.infoDenied = deniedReason(error);
  }

  // CONFIG GET one parameter at a time: several in one call needs Redis 7.
  try {
    const config = new Map<string, string>();
    for (const name of CONFIG_READ) {
      const pair = (await node.config("GET", name)) as unknown[];
      if (typeof pair[1] === "string") config.set(name, pair[1]);
    }
    facts.config = config;
    const policy = config.get("maxmemory-policy");
    if (policy !== undefined) report.maxmemoryPolicy = policy;
    const appendonly = config.get("appendonly");
    if (appendonly !== undefined) report.appendonly = appendonly === "yes";
    const appendfsync = config.get("appendfsync");
    if (appendfsync !== undefined) report.appendfsync = appendfsync;
    const save = config.get("save");
    if (save !== undefined) report.rdb = save.trim() !== "";
  } catch (error) {
    facts.configDenied = deniedReason(error);
  }
  return facts;
}

/** The reply's text when Redis refused the command (renamed, ACL); rethrows anything else (an outage). */
function deniedReason(error: unknown): string {
  if (error instanceof ReplyError) return (error as Error).message;
  throw error;
}

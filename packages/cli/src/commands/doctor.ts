import { checkRedis, parseInfo, RedisConfigError, SCRIPT_VERSION, scriptDigests } from "@once/redis";
import type { Cluster, Redis } from "ioredis";
import { ReplyError } from "ioredis";
import type { Command } from "../command.js";
import { formatDuration } from "../durations.js";
import { ExitCode } from "../exit-code.js";
import { CONNECTION_OPTIONS } from "../options.js";
import { jsonText } from "../record-view.js";
import { type RedisTarget, redisTarget, withRedis } from "../redis-connection.js";
import { renderTable } from "../render-table.js";

type Status = "ok" | "warn" | "fail";

/** One thing doctor looked at on one node. `fail` can cause duplicates (exit 1); `warn` deserves a look. */
export interface Finding {
  node: string;
  check: string;
  status: Status;
  detail: string;
  /** What to change, for `warn` and `fail`. */
  fix?: string;
}

const MIN_VERSION = [6, 2];
const SKEW_WARN_MS = 1_000;
const MEMORY_WARN_RATIO = 0.9;

/** `once doctor`: every Redis setting that decides whether once can keep its promises. */
export const doctorCommand: Command = {
  name: "doctor",
  summary: "check Redis: version, maxmemory-policy, persistence, cluster, clock, script cache",
  usage: ["doctor [options]"],
  options: [...CONNECTION_OPTIONS],
  details:
    "Checks every master (on a Cluster) and says what it found. Exit 1 when a setting can cause duplicates — " +
    "an evicting maxmemory-policy, no AOF (a restart or crash loses records), appendfsync no, Redis older than " +
    "6.2, a replica or a cluster node reached as a plain server — naming the setting and the fix. " +
    "appendfsync everysec, clock skew over 1 s, and memory over 90% of maxmemory are warnings (exit 0). " +
    "It also says whether RedisStore.create would accept this Redis. --prefix is accepted and unused.",
  examples: ["once doctor", "once doctor --cluster 10.0.0.5:7000,10.0.0.6:7000 --json"],
  async run({ io, options }) {
    const target = redisTarget(options, io.env);
    return withRedis(target, async (redis) => {
      const findings = await diagnose(redis, target);
      const startup = await startupCheck(redis);
      const problems = findings.filter((f) => f.status === "fail");
      const warnings = findings.filter((f) => f.status === "warn");
      const ok = problems.length === 0 && startup.ok;
      if (options.flag("json")) {
        io.stdout.write(
          jsonText({ target: target.label, cluster: target.cluster, ok, findings, startupCheck: startup }),
        );
        return ok ? ExitCode.ok : ExitCode.problem;
      }
      const masters = new Set(findings.map((f) => f.node).filter((n) => n !== "cluster"));
      const out = [
        `once doctor: ${target.label} (${target.cluster ? `Redis Cluster, ${masters.size} masters` : "standalone"})`,
        "",
        renderTable(
          ["node", "check", "status", "detail"],
          findings.map((f) => [f.node, f.check, f.status === "ok" ? "ok" : f.status.toUpperCase(), f.detail]),
          { maxCellWidth: 90 },
        ),
        "",
        startup.ok
          ? `RedisStore.create would start on this Redis${startup.warnings.length > 0 ? ` (with ${startup.warnings.length} warning${startup.warnings.length === 1 ? "" : "s"})` : ""}`
          : `RedisStore.create would REFUSE this Redis (${startup.setting}): ${startup.message}`,
      ];
      if (problems.length > 0) {
        out.push("", `Problems that can cause duplicates (${problems.length}):`);
        for (const p of problems) out.push(`  ${p.node} ${p.check}: ${p.detail}`, `    fix: ${p.fix ?? "-"}`);
      }
      if (warnings.length > 0) {
        out.push("", `Warnings (${warnings.length}):`);
        for (const w of warnings)
          out.push(`  ${w.node} ${w.check}: ${w.detail}`, ...(w.fix ? [`    fix: ${w.fix}`] : []));
      }
      out.push(
        "",
        ok
          ? `no problems${warnings.length > 0 ? `, ${warnings.length} warning${warnings.length === 1 ? "" : "s"}` : ""}`
          : `${problems.length} problem${problems.length === 1 ? "" : "s"}: exit 1`,
      );
      io.stdout.write(`${out.join("\n")}\n`);
      return ok ? ExitCode.ok : ExitCode.problem;
    });
  },
};

async function diagnose(redis: Redis | Cluster, target: RedisTarget): Promise<Finding[]> {
  const masters = redis.isCluster ? (redis as Cluster).nodes("master") : [redis as Redis];
  const digests = await scriptDigests();
  const findings: Finding[] = [];
  for (const node of masters)
    findings.push(
      ...(await diagnoseNode(
        node,
        redis.isCluster,
        digests.map((d) => d.sha1),
      )),
    );
  if (redis.isCluster) findings.push(...(await diagnoseCluster(redis as Cluster)));
  else if (target.cluster) {
    findings.push({ node: "cluster", check: "cluster", status: "fail", detail: "expected a Cluster client" });
  }
  return findings;
}

async function diagnoseNode(node: Redis, cluster: boolean, shas: readonly string[]): Promise<Finding[]> {
  const at = `${node.options.host ?? "127.0.0.1"}:${node.options.port ?? 6379}`;
  const findings: Finding[] = [];
  const add = (check: string, status: Status, detail: string, fix?: string) =>
    findings.push({ node: at, check, status, detail, ...(fix === undefined ? {} : { fix }) });

  const info = await denied(async () => parseInfo(await node.info()));
  const config = await denied(async () => {
    // One parameter per CONFIG GET: several at once needs Redis 7.
    const values = new Map<string, string>();
    for (const name of ["maxmemory-policy", "maxmemory", "appendonly", "appendfsync", "save"]) {
      const pair = (await node.config("GET", name)) as unknown[];
      if (typeof pair[1] === "string") values.set(name, pair[1]);
    }
    return values;
  });
  const infoOf = (field: string) => (info.ok ? info.value.get(field) : undefined);
  const configOf = (name: string) => (config.ok ? config.value.get(name) : undefined);

  // Version.
  const valkey = infoOf("valkey_version");
  const version = valkey ?? infoOf("redis_version");
  if (version === undefined) {
    add(
      "version",
      "warn",
      `unknown: INFO is not permitted (${info.ok ? "no version field" : info.reason})`,
      "allow INFO for the once user, and run Redis 6.2+ or Valkey",
    );
  } else if (valkey === undefined && older(version, MIN_VERSION)) {
    add(
      "version",
      "fail",
      `Redis ${version} is older than 6.2: once's scripts need 6.2 or later`,
      "upgrade to Redis 6.2+ or Valkey",
    );
  } else {
    add("version", "ok", `${valkey === undefined ? "Redis" : "Valkey"} ${version}`);
  }

  // Role and topology.
  const role = infoOf("role");
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
  if (!cluster && infoOf("cluster_enabled") === "1") {
    add(
      "cluster",
      "fail",
      "this server is a Redis Cluster node reached as a plain server: only this node's keys are seen, others fail with MOVED",
      `connect with --cluster ${at} (or REDIS_CLUSTER_NODES), and with ioredis' Cluster client in your app`,
    );
  } else if (!cluster) {
    add("cluster", "ok", "standalone");
  }

  // maxmemory-policy: an evicted record is a duplicate waiting to happen.
  const policy = configOf("maxmemory-policy") ?? infoOf("maxmemory_policy");
  if (policy === undefined) {
    add(
      "maxmemory-policy",
      "warn",
      `unknown: CONFIG GET and INFO are not permitted`,
      "make sure it is noeviction",
    );
  } else if (policy !== "noeviction") {
    add(
      "maxmemory-policy",
      "fail",
      `${policy}: Redis may evict once's records (they all have a TTL, so volatile-* policies evict them too), and an evicted record lets a retry repeat its effect`,
      "CONFIG SET maxmemory-policy noeviction, and set maxmemory-policy noeviction in redis.conf",
    );
  } else {
    add("maxmemory-policy", "ok", "noeviction");
  }

  // Memory: with noeviction a full Redis refuses writes, so claims fail closed (no duplicates, no progress).
  const maxmemory = Number(configOf("maxmemory") ?? infoOf("maxmemory") ?? Number.NaN);
  const used = Number(infoOf("used_memory") ?? Number.NaN);
  if (Number.isFinite(used)) {
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

  findings.push(...persistence(at, configOf, infoOf, config.ok ? undefined : config.reason));
  findings.push(await clock(node, at));

  // Script cache: informational — ioredis loads a missing script on first use (EVALSHA, then EVAL).
  try {
    const exists = (await node.script("EXISTS", ...shas)) as number[];
    const cached = exists.filter((e) => Number(e) === 1).length;
    add(
      "scripts",
      "ok",
      cached === shas.length
        ? `all ${shas.length} once ${SCRIPT_VERSION} scripts cached`
        : `${cached} of ${shas.length} once ${SCRIPT_VERSION} scripts cached; the rest load on first use`,
    );
  } catch (error) {
    if (!(error instanceof ReplyError)) throw error;
    add(
      "scripts",
      "warn",
      `SCRIPT EXISTS is not permitted (${(error as Error).message})`,
      "allow EVAL, EVALSHA and SCRIPT for the once user",
    );
  }
  return findings;
}

function persistence(
  at: string,
  configOf: (name: string) => string | undefined,
  infoOf: (field: string) => string | undefined,
  configDenied: string | undefined,
): Finding[] {
  const finding = (check: string, status: Status, detail: string, fix?: string): Finding => ({
    node: at,
    check,
    status,
    detail,
    ...(fix === undefined ? {} : { fix }),
  });
  const appendonly =
    configOf("appendonly") ??
    (infoOf("aof_enabled") === undefined ? undefined : infoOf("aof_enabled") === "1" ? "yes" : "no");
  const appendfsync = configOf("appendfsync");
  const save = configOf("save");
  const aofFix =
    "CONFIG SET appendonly yes and CONFIG SET appendfsync everysec (or always), and the same in redis.conf";
  if (appendonly === undefined) {
    return [
      finding(
        "persistence",
        "warn",
        `unknown: CONFIG GET is not permitted (${configDenied ?? "?"})`,
        "make sure appendonly is yes",
      ),
    ];
  }
  if (appendonly === "no") {
    const rdb =
      save === undefined
        ? "unknown"
        : save.trim() === ""
          ? "no RDB save points"
          : `RDB save points "${save}"`;
    return [
      finding(
        "appendonly",
        "fail",
        save !== undefined && save.trim() === ""
          ? "appendonly no and no RDB save points: a Redis restart loses every record, and each lost record lets a retry repeat its effect"
          : `appendonly no (${rdb}): a crash loses every record written since the last snapshot, and each lost record lets a retry repeat its effect`,
        aofFix,
      ),
    ];
  }
  if (appendfsync === "always")
    return [finding("appendfsync", "ok", "appendonly yes, appendfsync always: no record is lost in a crash")];
  if (appendfsync === "everysec") {
    return [
      finding(
        "appendfsync",
        "warn",
        "appendonly yes, appendfsync everysec: a Redis crash can lose up to a second of records (a lost record lets a retry repeat its effect)",
        "appendfsync always loses none, at a latency cost; a reconcile hook on each effect tool narrows the gap",
      ),
    ];
  }
  if (appendfsync === "no") {
    return [
      finding(
        "appendfsync",
        "fail",
        "appendonly yes, appendfsync no: the OS decides when the AOF reaches the disk (often 30 s), so a crash can lose that much of the records",
        "CONFIG SET appendfsync everysec (or always), and the same in redis.conf",
      ),
    ];
  }
  return [
    finding(
      "appendfsync",
      "warn",
      `appendonly yes, appendfsync ${appendfsync ?? "unknown"}`,
      "make sure appendfsync is everysec or always",
    ),
  ];
}

/** The server's clock against this machine's, from the fastest of three round trips. */
async function clock(node: Redis, at: string): Promise<Finding> {
  let best: { skew: number; rtt: number } | undefined;
  for (let i = 0; i < 3; i++) {
    // performance.now() for sub-millisecond round trips; timeOrigin puts it on the wall clock.
    const before = performance.timeOrigin + performance.now();
    const [seconds, micros] = (await node.time()) as [string | number, string | number];
    const after = performance.timeOrigin + performance.now();
    const server = Number(seconds) * 1000 + Number(micros) / 1000;
    const sample = { skew: server - (before + after) / 2, rtt: after - before };
    if (best === undefined || sample.rtt < best.rtt) best = sample;
  }
  const { skew, rtt } = best ?? { skew: 0, rtt: 0 };
  const shown = millis(Math.abs(skew));
  const sign = skew < 0 && shown !== "0.0ms" ? "-" : "+";
  const detail = `server clock ${sign}${shown} from this machine (±${millis(rtt / 2)})`;
  if (Math.abs(skew) > SKEW_WARN_MS) {
    return {
      node: at,
      check: "clock",
      status: "warn",
      detail:
        `${detail}. Leases are judged by Redis' own clock, so client skew is harmless, but a server whose clock is ` +
        "off judges leases written by another after a failover, and times shown by once are off by as much",
      fix: "run NTP (chrony, systemd-timesyncd) on the Redis hosts",
    };
  }
  return { node: at, check: "clock", status: "ok", detail };
}

async function diagnoseCluster(cluster: Cluster): Promise<Finding[]> {
  const findings: Finding[] = [];
  const [first] = cluster.nodes("master");
  if (first !== undefined) {
    const info = await denied(async () => parseInfo(String(await first.cluster("INFO"))));
    const state = info.ok ? info.value.get("cluster_state") : undefined;
    findings.push(
      state === "ok"
        ? {
            node: "cluster",
            check: "cluster",
            status: "ok",
            detail: `Redis Cluster, ${cluster.nodes("master").length} masters, cluster_state ok`,
          }
        : {
            node: "cluster",
            check: "cluster",
            status: "warn",
            detail: `cluster_state ${state ?? "unknown"}: claims on uncovered slots fail closed (CLUSTERDOWN)`,
            fix: "bring the failing masters back, or fail over to their replicas",
          },
    );
  }
  // Clocks of every node, replicas included: after a failover a replica's clock judges the old master's leases.
  const replicas = cluster.nodes("slave");
  for (const replica of replicas) {
    const at = `${replica.options.host ?? "127.0.0.1"}:${replica.options.port ?? 6379}`;
    const finding = await clock(replica, at).catch(
      (error: unknown): Finding => ({
        node: at,
        check: "clock",
        status: "warn",
        detail: `replica unreachable: ${(error as Error).message}`,
      }),
    );
    findings.push({ ...finding, check: "clock (replica)" });
  }
  return findings;
}

interface StartupCheck {
  ok: boolean;
  setting?: string;
  message?: string;
  warnings: string[];
}

/** What RedisStore.create's own check says: the verdict a worker gets at start. */
async function startupCheck(redis: Redis | Cluster): Promise<StartupCheck> {
  try {
    const report = await checkRedis(redis);
    return { ok: true, warnings: report.warnings };
  } catch (error) {
    if (error instanceof RedisConfigError) {
      return { ok: false, setting: error.setting, message: error.message.split("\n")[0] ?? "", warnings: [] };
    }
    return { ok: false, setting: "connection", message: (error as Error).message, warnings: [] };
  }
}

type Denied<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Runs a read that an ACL or a renamed command may forbid; any other error propagates. */
async function denied<T>(read: () => Promise<T>): Promise<Denied<T>> {
  try {
    return { ok: true, value: await read() };
  } catch (error) {
    if (error instanceof ReplyError) return { ok: false, reason: (error as Error).message };
    throw error;
  }
}

function older(version: string, than: readonly number[]): boolean {
  const parts = version.split(".").map((p) => Number.parseInt(p, 10) || 0);
  for (let i = 0; i < than.length; i++) {
    const a = parts[i] ?? 0;
    const b = than[i] ?? 0;
    if (a !== b) return a < b;
  }
  return false;
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

/** `0.4ms`, `12ms`, `3.2s`: sub-millisecond precision where it means something. */
function millis(ms: number): string {
  return ms < 10 ? `${ms.toFixed(1)}ms` : formatDuration(ms);
}

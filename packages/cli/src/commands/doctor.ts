import {
  checkDurability,
  checkRedis,
  diagnoseRedis,
  nodeAddress,
  parseInfo,
  type RedisCheck,
  RedisConfigError,
  SCRIPT_VERSION,
  scriptDigests,
} from "@once/redis";
import type { Cluster, Redis } from "ioredis";
import { ReplyError } from "ioredis";
import type { Command } from "../command.js";
import { formatDuration } from "../durations.js";
import { ExitCode } from "../exit-code.js";
import { CONNECTION_OPTIONS } from "../options.js";
import { positiveInteger } from "../positive-integer.js";
import { jsonText } from "../record-view.js";
import { redisTarget, withRedis } from "../redis-connection.js";
import { renderTable } from "../render-table.js";
import { storeSelected } from "../store-session.js";
import { doctorPostgres } from "./doctor-postgres.js";

/**
 * One thing doctor looked at on one node: a check of the store's own at its production level, or one of
 * doctor's (clock, scripts, cluster state). `fail` can cause duplicates (exit 1); `warn` deserves a look.
 */
type Finding = RedisCheck;

const SKEW_WARN_MS = 1_000;

/** `once doctor`: every Redis setting that decides whether once can keep its promises. */
export const doctorCommand: Command = {
  name: "doctor",
  summary: "check Redis: version, maxmemory-policy, persistence, replicas, cluster, clock, script cache",
  usage: ["doctor [options]"],
  options: [...CONNECTION_OPTIONS, "replicas"],
  details:
    "Checks every master (on a Cluster) and says what it found. Exit 1 when a setting can cause duplicates — " +
    "an evicting maxmemory-policy, no AOF (a restart or crash loses records), appendfsync no, Redis older than " +
    "6.2, a replica or a cluster node reached as a plain server — naming the setting and the fix. " +
    "appendfsync everysec, clock skew over 1 s, and memory over 90% of maxmemory are warnings (exit 0). " +
    "On a master with replicas it shows each one's state and lag and min-replicas-to-write, and warns that a " +
    "failover can lose acknowledged claims unless the store waits for replicas; with --replicas n it judges " +
    "that durability instead (fewer than n replicas connected is a problem). " +
    "It also says whether RedisStore.create would accept this Redis. --prefix is accepted and unused. " +
    "With --postgres-url it checks a PostgresStore's database instead: the version (13 or newer), a " +
    "read-write primary, synchronous_commit, fsync, the isolation level, privileges, the store's schema " +
    "version, expired rows not yet swept and the clock, and names what it cannot see from a connection.",
  examples: [
    "once doctor",
    "once doctor --replicas 1",
    "once doctor --cluster 10.0.0.5:7000,10.0.0.6:7000 --json",
    "once doctor --postgres-url postgres://once@db:5432/app --schema once",
  ],
  async run({ io, options }) {
    if (storeSelected(options) === "postgres") return doctorPostgres(options, io);
    const target = redisTarget(options, io.env);
    const replicasText = options.string("replicas");
    const durability =
      replicasText === undefined ? undefined : { replicas: positiveInteger("--replicas", replicasText) };
    return withRedis(target, async (redis) => {
      const findings = await diagnose(redis, durability);
      const startup = await startupCheck(redis, durability);
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

/**
 * The store's checks at the production level, each master's followed by doctor's own for it (clock,
 * script cache), then the cluster's.
 */
async function diagnose(redis: Redis | Cluster, durability?: { replicas: number }): Promise<Finding[]> {
  const report = await diagnoseRedis(redis, { level: "production", ...(durability ? { durability } : {}) });
  const byNode = new Map<string, Finding[]>();
  for (const check of report.checks) byNode.set(check.node, [...(byNode.get(check.node) ?? []), check]);
  const shas = (await scriptDigests()).map((d) => d.sha1);
  const findings: Finding[] = [];
  for (const master of redis.isCluster ? (redis as Cluster).nodes("master") : [redis as Redis]) {
    const at = nodeAddress(master);
    findings.push(...(byNode.get(at) ?? []), await clock(master, at), await scripts(master, at, shas));
    byNode.delete(at);
  }
  findings.push(...[...byNode.values()].flat());
  if (redis.isCluster) findings.push(...(await diagnoseCluster(redis as Cluster)));
  return findings;
}

/** Informational: ioredis loads a missing script on first use (EVALSHA, then EVAL). */
async function scripts(node: Redis, at: string, shas: readonly string[]): Promise<Finding> {
  try {
    const exists = (await node.script("EXISTS", ...shas)) as number[];
    const cached = exists.filter((e) => Number(e) === 1).length;
    return {
      node: at,
      check: "scripts",
      status: "ok",
      detail:
        cached === shas.length
          ? `all ${shas.length} once ${SCRIPT_VERSION} scripts cached`
          : `${cached} of ${shas.length} once ${SCRIPT_VERSION} scripts cached; the rest load on first use`,
    };
  } catch (error) {
    if (!(error instanceof ReplyError)) throw error;
    return {
      node: at,
      check: "scripts",
      status: "warn",
      detail: `SCRIPT EXISTS is not permitted (${(error as Error).message})`,
      fix: "allow EVAL, EVALSHA and SCRIPT for the once user",
    };
  }
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
    const at = nodeAddress(replica);
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

/** What RedisStore.create's own checks say (with the durability asked for): the verdict a worker gets at start. */
async function startupCheck(
  redis: Redis | Cluster,
  durability?: { replicas: number },
): Promise<StartupCheck> {
  try {
    const report = await checkRedis(redis);
    if (durability) await checkDurability(redis, durability, 5_000);
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

/** `0.4ms`, `12ms`, `3.2s`: sub-millisecond precision where it means something. */
function millis(ms: number): string {
  return ms < 10 ? `${ms.toFixed(1)}ms` : formatDuration(ms);
}

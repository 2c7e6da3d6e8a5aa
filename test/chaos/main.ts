// `pnpm test:chaos` (long, on demand): `node --import tsx chaos/main.ts [--seed N] [--short] [--calls N]
// [--rate N] [--fsync always|everysec|both] [--transport guarded|fetch] [--store redis|postgres]
// [--failover sentinel|cluster [--durability off|replicas|both] [--replicas N]]`. With `--store postgres`
// once's records are on a PostgreSQL server the run starts for itself (initdb, pg_ctl on a free port), the
// queue stays on Redis, and the Redis kill becomes a crash-restart of that server; it does not combine with
// `--failover`. The seed also comes from CHAOS_SEED;
// without one a fresh seed is drawn and printed, and passing it back reruns the same plan and fault schedule.
//
// On one Redis (the default), prints the figures of each run and ends with the summary line of the
// `appendfsync always` run; exits 1 if that run broke a guarantee. The `everysec` run is measured and
// reported, never failed: it may lose records.
//
// With `--failover`, Redis is a primary with replicas behind Sentinel, or a Cluster of three masters with a
// replica each, and the faults SIGKILL primaries for a replica to be promoted (no fsync runs then: the
// nodes run `everysec`). The run with durability off is measured and reported: what a failover loses
// (asynchronous replication) and the duplicates it causes. The run with durability on — `replicas` every
// replica of a primary (Sentinel 2, Cluster 1) — must hold every guarantee; its summary line comes last, and
// the exit code is its verdict. `--replicas N` asks fewer: measured and reported, since a failover may then
// promote a replica that did not confirm a write.

import { parseArgs } from "node:util";
import { freshAuthorityLocation } from "./authority/authority-store.js";
import { authoritySummary, authorityVerdict, runAuthority } from "./authority/run-authority.js";
import { type ChaosProfile, LONG, LONG_FAILOVER, SHORT, SHORT_FAILOVER, verdict } from "./chaos-profile.js";
import { type ChaosTopology, REPLICAS_PER_PRIMARY } from "./chaos-redis.js";
import { describeReport, summaryLine } from "./describe-report.js";
import { randomSeed } from "./random.js";
import { runChaos } from "./run-chaos.js";

// `pnpm test:chaos -- --seed N` hands the script a literal "--" first: skip it.
const args = process.argv.slice(2);
const { values } = parseArgs({
  args: args[0] === "--" ? args.slice(1) : args,
  options: {
    seed: { type: "string" },
    short: { type: "boolean", default: false },
    calls: { type: "string" },
    rate: { type: "string" },
    fsync: { type: "string", default: "both" },
    transport: { type: "string", default: "guarded" },
    failover: { type: "string" },
    durability: { type: "string", default: "both" },
    replicas: { type: "string" },
    store: { type: "string", default: "redis" },
  },
});
const transport = values.transport as "guarded" | "fetch";
const store = values.store as "redis" | "postgres";
if (store !== "redis" && store !== "postgres") throw new Error("--store must be redis or postgres");
if (transport !== "guarded" && transport !== "fetch") throw new Error("--transport must be guarded or fetch");
const failover = values.failover;
if (failover !== undefined && failover !== "sentinel" && failover !== "cluster")
  throw new Error("--failover must be sentinel or cluster");
if (failover !== undefined && store === "postgres")
  throw new Error(
    "--store postgres and --failover do not combine: a failover run measures what a replicated Redis keeps of the records, and with --store postgres they are not on Redis",
  );
if (!["off", "replicas", "both"].includes(values.durability))
  throw new Error("--durability must be off, replicas or both");
const seedText = values.seed ?? process.env.CHAOS_SEED;
const seed = seedText === undefined ? randomSeed() : Number(seedText);
if (!Number.isSafeInteger(seed) || seed < 0)
  throw new Error(`--seed must be a non-negative integer, got ${seedText}`);
const base = failover ? (values.short ? SHORT_FAILOVER : LONG_FAILOVER) : values.short ? SHORT : LONG;
const profile: ChaosProfile = {
  ...base,
  ...(values.calls === undefined ? {} : { calls: Number(values.calls) }),
  ...(values.rate === undefined ? {} : { rate: Number(values.rate) }),
};

/** One run to make: its settings, and whether its verdict counts (else it is measured and reported). */
interface Variant {
  topology: ChaosTopology;
  fsync: "always" | "everysec";
  durabilityReplicas: number;
  judged: boolean;
  emulatedCrash: boolean;
}
const allReplicas = failover ? REPLICAS_PER_PRIMARY[failover] : 0;
const replicas = values.replicas === undefined ? allReplicas : Number(values.replicas);
if (failover && (!Number.isInteger(replicas) || replicas < 1 || replicas > allReplicas))
  throw new Error(`--replicas must be between 1 and ${allReplicas}, got ${values.replicas}`);
const variants: Variant[] = failover
  ? (values.durability === "both" ? [0, replicas] : [values.durability === "replicas" ? replicas : 0]).map(
      (durabilityReplicas) => ({
        topology: failover,
        fsync: "everysec",
        durabilityReplicas,
        judged: durabilityReplicas === allReplicas,
        emulatedCrash: false,
      }),
    )
  : // With the store on PostgreSQL, Redis holds only the queue: its everysec run measures nothing about records.
    (store === "postgres"
      ? (["always"] as const)
      : values.fsync === "both"
        ? (["always", "everysec"] as const)
        : [values.fsync as "always" | "everysec"]
    ).map((fsync) => ({
      topology: "standalone",
      fsync,
      durabilityReplicas: 0,
      judged: fsync === "always",
      // The everysec run adds an emulated OS crash to its SIGKILL: SIGKILL alone cannot lose what Redis wrote.
      emulatedCrash: fsync === "everysec",
    }));

// Ctrl-C: exit through the 'exit' hooks, which kill every process this run started.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130));

const otherLines: string[] = [];
let failed = false;
let judgedLine: string | undefined;
for (const variant of variants) {
  const report = await runChaos({
    seed,
    transport,
    topology: variant.topology,
    store,
    fsync: variant.fsync,
    durabilityReplicas: variant.durabilityReplicas,
    calls: profile.calls,
    rate: profile.rate,
    faults: { ...profile.faults, emulatedCrash: variant.emulatedCrash },
  });
  for (const line of describeReport(report)) process.stdout.write(`${line}\n`);
  process.stdout.write(`${JSON.stringify({ ...report, faults: undefined, duplicateDetails: undefined })}\n`);
  if (variant.judged) {
    const failures = verdict(report, profile);
    for (const failure of failures) process.stdout.write(`FAILED: ${failure}\n`);
    failed ||= failures.length > 0;
    judgedLine = summaryLine(report);
  } else {
    otherLines.push(summaryLine(report));
  }
}
if (!failover) {
  const { location, remove } = freshAuthorityLocation(store);
  try {
    const report = await runAuthority({
      seed,
      location,
      tasks: values.short ? 40 : 200,
      durationMs: values.short ? 12_000 : 40_000,
      kills: values.short ? 4 : 12,
      approvalTtlMs: 4_000,
      log: (line) => process.stdout.write(`${line}\n`),
    });
    for (const detail of report.details.slice(0, 20)) process.stdout.write(`  ${detail}\n`);
    process.stdout.write(`${JSON.stringify({ ...report, details: undefined })}\n`);
    const failures = authorityVerdict(report);
    for (const failure of failures) process.stdout.write(`FAILED: ${failure}\n`);
    failed ||= failures.length > 0;
    otherLines.push(authoritySummary(report));
  } finally {
    await remove();
  }
}
for (const line of otherLines) process.stdout.write(`${line}\n`);
const rerun = [
  `--seed ${seed}`,
  ...(store === "postgres" ? ["--store postgres"] : []),
  ...(failover ? [`--failover ${failover}`] : []),
  ...(failover && values.durability !== "both" ? [`--durability ${values.durability}`] : []),
  ...(values.replicas === undefined ? [] : [`--replicas ${values.replicas}`]),
  ...(values.short ? ["--short"] : []),
  ...(values.calls === undefined ? [] : [`--calls ${values.calls}`]),
  ...(values.rate === undefined ? [] : [`--rate ${values.rate}`]),
];
process.stdout.write(`rerun: pnpm test:chaos -- ${rerun.join(" ")}\n`);
if (judgedLine) process.stdout.write(`${judgedLine}\n`);
process.exit(failed ? 1 : 0);

// `pnpm test:chaos` (long, on demand): `node --import tsx chaos/main.ts [--seed N] [--short] [--calls N]
// [--rate N] [--fsync always|everysec|both] [--transport guarded|fetch] [--store redis|postgres]`. With
// `--store postgres` once's records are on a PostgreSQL server the run starts for itself (initdb, pg_ctl on a
// free port), the queue stays on Redis, and the Redis kill becomes a crash-restart of that server. The seed also comes from CHAOS_SEED;
// without one a fresh seed is drawn and printed, and passing it back reruns the same plan and fault schedule.
// Prints the figures of each run and ends with the summary line of the `appendfsync always` run; exits 1 if
// that run broke a guarantee. The `everysec` run is measured and reported, never failed: it may lose records.

import { parseArgs } from "node:util";
import { type ChaosProfile, LONG, SHORT, verdict } from "./chaos-profile.js";
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
    store: { type: "string", default: "redis" },
  },
});
const transport = values.transport as "guarded" | "fetch";
const store = values.store as "redis" | "postgres";
if (store !== "redis" && store !== "postgres") throw new Error("--store must be redis or postgres");
if (transport !== "guarded" && transport !== "fetch") throw new Error("--transport must be guarded or fetch");
const seedText = values.seed ?? process.env.CHAOS_SEED;
const seed = seedText === undefined ? randomSeed() : Number(seedText);
if (!Number.isSafeInteger(seed) || seed < 0)
  throw new Error(`--seed must be a non-negative integer, got ${seedText}`);
const base = values.short ? SHORT : LONG;
const profile: ChaosProfile = {
  ...base,
  ...(values.calls === undefined ? {} : { calls: Number(values.calls) }),
  ...(values.rate === undefined ? {} : { rate: Number(values.rate) }),
};
// With the store on PostgreSQL, Redis holds only the queue: its everysec run measures nothing about records.
const variants =
  store === "postgres"
    ? (["always"] as const)
    : values.fsync === "both"
      ? (["always", "everysec"] as const)
      : [values.fsync as "always" | "everysec"];

// Ctrl-C: exit through the 'exit' hooks, which kill every process this run started.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130));

const lines: string[] = [];
let failed = false;
let finalLine: string | undefined;
for (const fsync of variants) {
  const report = await runChaos({
    seed,
    transport,
    store,
    fsync,
    calls: profile.calls,
    rate: profile.rate,
    // The everysec run adds an emulated OS crash to its SIGKILL: SIGKILL alone cannot lose what Redis wrote.
    faults: { ...profile.faults, emulatedCrash: fsync === "everysec" },
  });
  for (const line of describeReport(report)) process.stdout.write(`${line}\n`);
  process.stdout.write(`${JSON.stringify({ ...report, faults: undefined, duplicateDetails: undefined })}\n`);
  if (fsync === "always") {
    const failures = verdict(report, profile);
    for (const failure of failures) process.stdout.write(`FAILED: ${failure}\n`);
    failed ||= failures.length > 0;
    finalLine = summaryLine(report);
  } else {
    lines.push(summaryLine(report).replace(/^chaos:/, "chaos[everysec]:"));
  }
}
for (const line of lines) process.stdout.write(`${line}\n`);
process.stdout.write(
  `rerun: pnpm test:chaos --seed ${seed}${store === "postgres" ? " --store postgres" : ""}\n`,
);
if (finalLine) process.stdout.write(`${finalLine}\n`);
process.exit(failed ? 1 : 0);

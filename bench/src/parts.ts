import { deriveKey, fingerprint } from "@once/core";
import type { Redis } from "ioredis";
import type { BenchContext, OnceBuild } from "./bench-context.js";
import type { CpuProfile } from "./profiler.js";
import { redisCpuSeconds } from "./server-stats.js";
import { median, round } from "./stats.js";
import { compareWorkers, type WorkerSide } from "./throughput.js";
import { INPUT, RESULT_100, TOOL_NAME } from "./workload.js";

/** The parts of a job's Node CPU, in the order the table shows them. */
export const PARTS = [
  "job-data parse",
  "key (derive, check)",
  "fingerprint",
  "input/output validation",
  "lease (timer, signal)",
  "spans and metrics",
  "result serialisation",
  "store calls: commands built and written",
  "the flow's own code",
  "ioredis: replies read (every client)",
  "BullMQ (its code and commands)",
  "promise machinery (microtasks)",
  "garbage collection",
  "other (Node internals)",
] as const;
export type Part = (typeof PARTS)[number];

/**
 * once's own modules (of the current build, or of a --baseline copy anywhere under bench/), by file name;
 * bullmq's are in node_modules.
 */
const OURS =
  /\/(packages\/[\w-]+\/dist|bench\/(?:[\w.-]+\/)+(?:redis|bullmq)|node_modules\/@once\/[\w-]+\/dist)\/([\w-]+)\.js$/;

/** The file name of a module of once's (see {@link OURS}), undefined for any other module. */
export function onceFile(url: string): string | undefined {
  return OURS.exec(url)?.[2];
}

/** The part a frame of once's (or the bench's floor processor) belongs to; undefined for a frame of no part. */
export function partOf(fn: string, url: string): Part | undefined {
  if (url.endsWith("/bench/dist/throughput.js")) return "store calls: commands built and written";
  if (url.includes("@opentelemetry/api")) return "spans and metrics";
  const file = onceFile(url);
  if (file === undefined) return undefined;
  switch (file) {
    case "wire":
      return "job-data parse";
    case "key":
      return "key (derive, check)";
    case "fingerprint":
      return "fingerprint";
    case "tool":
      return "input/output validation";
    case "lease":
      return "lease (timer, signal)";
    case "telemetry":
      return "spans and metrics";
    case "redis-store":
    case "load-scripts":
    case "with-timeout":
    case "owner-token":
    case "script-names":
      return "store calls: commands built and written";
  }
  if (fn === "checkedStep") return "key (derive, check)";
  if (fn === "#context") return "lease (timer, signal)";
  if (fn === "#trace") return "spans and metrics";
  if (fn === "toJson" || fn === "#storable") return "result serialisation";
  return "the flow's own code";
}

/** A sample with no frame of once's: where its leaf is. */
export function leafPart(fn: string, url: string, stack: readonly string[]): Part | "profiler" {
  if (fn === "(garbage collector)") return "garbage collection";
  if (stack.some((u) => u.startsWith("node:inspector")) || url.startsWith("node:inspector"))
    return "profiler";
  if (fn === "runMicrotasks" || fn === "processTicksAndRejections") return "promise machinery (microtasks)";
  // BullMQ itself, in node_modules (not @once/bullmq, whose frames have parts of their own).
  if (stack.some((u) => u.includes("node_modules/bullmq/dist/"))) return "BullMQ (its code and commands)";
  if (stack.some((u) => u.includes("/ioredis/"))) return "ioredis: replies read (every client)";
  return "other (Node internals)";
}

/**
 * Node CPU per job by part (`parts`; `classify` names a frame's part, `leaf` a sample's with no part above it),
 * from one profile of a run that used `cpuUsPerJob` of Node CPU per job: each sample
 * goes to the part of the nearest frame of once's code above it (a zod frame under `parseInput` is validation,
 * an ioredis frame under a store call is that call), else to where its leaf is. Parts are shares of the
 * samples times the measured CPU (a sample's time delta is wall time, which a starved process stretches); the
 * profiler's own share is left out.
 */
export function partsOf<P extends string>(
  profile: CpuProfile,
  cpuUsPerJob: number,
  parts: readonly P[],
  classify: (fn: string, url: string) => P | undefined,
  leaf: (fn: string, url: string, stack: readonly string[]) => P | "profiler",
): Record<P, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const hits = new Map<number, number>();
  for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
  const counts = Object.fromEntries(parts.map((p) => [p, 0])) as Record<P, number>;
  let all = 0;
  for (const [id, n] of hits) {
    const sampled = byId.get(id);
    const name = sampled?.callFrame.functionName;
    if (!sampled || name === "(idle)" || name === "(program)") continue;
    all += n;
    let part: P | "profiler" | undefined;
    const stack: string[] = [];
    for (let at: number | undefined = id; at !== undefined && part === undefined; at = parent.get(at)) {
      const frame = byId.get(at)?.callFrame;
      if (!frame) break;
      stack.push(frame.url);
      part = classify(frame.functionName, frame.url);
    }
    part ??= leaf(sampled.callFrame.functionName, sampled.callFrame.url, stack);
    if (part !== "profiler") counts[part] += n;
  }
  const perSample = all === 0 ? 0 : cpuUsPerJob / all;
  return Object.fromEntries(parts.map((p) => [p, counts[p] * perSample])) as Record<P, number>;
}

/** Redis' cost of one script call: CPU of the server per call, and the script's own time (commandstats). */
export interface ScriptCost {
  redisCpuUs: number;
  /** `usec_per_call` of EVALSHA while only this script ran: the script's body, without reading and replying. */
  scriptUs: number;
}

export interface PartsFigures {
  jobs: number;
  /** Node CPU per job by part and side (median over rounds), µs, while profiled. */
  nodeUs: Record<string, Record<Part, number>>;
  /** Redis cost per call of each script, by build, and of the floor's bare EVALSHA with a claim's commands built up on it. */
  scripts: Record<string, Record<string, ScriptCost>>;
}

/**
 * The per-part table: the floor and every build's first run profiled in interleaved rounds, and the Redis cost
 * of each script a first run and a replay send, measured alone.
 */
export async function measureParts(
  ctx: BenchContext,
  settings: { jobs: number; rounds: number },
): Promise<PartsFigures> {
  const profiles = new Map<string, Record<Part, number>[]>();
  const sides: WorkerSide[] = [{ name: "floor", floorScripts: 2 }];
  for (const build of ctx.builds) sides.push({ name: build.label, build });
  await compareWorkers(ctx, {
    sides,
    concurrency: 50,
    jobs: settings.jobs,
    rounds: settings.rounds,
    onProfile: (side, jobs, profile, usage) => {
      const list = profiles.get(side) ?? [];
      list.push(partsOf(profile, (usage.nodeCpu * usage.seconds * 1e6) / jobs, PARTS, partOf, leafPart));
      profiles.set(side, list);
    },
  });
  const nodeUs: Record<string, Record<Part, number>> = {};
  for (const [side, list] of profiles) {
    nodeUs[side] = Object.fromEntries(PARTS.map((p) => [p, round(median(list.map((r) => r[p])))])) as Record<
      Part,
      number
    >;
  }
  // Each script alone, builds interleaved round by round (keys fresh each round), medians over the rounds.
  const measured: Record<string, Record<string, ScriptCost>>[] = [];
  const redis = ctx.target.connect();
  try {
    for (let r = 0; r < settings.rounds; r++) {
      const one: Record<string, Record<string, ScriptCost>> = {};
      one.floor = await floorScriptCosts(ctx, redis, settings.jobs, r);
      const builds = r % 2 === 0 ? ctx.builds : [...ctx.builds].reverse();
      for (const build of builds) one[build.label] = await scriptCosts(ctx, redis, build, settings.jobs, r);
      measured.push(one);
    }
  } finally {
    await redis.quit();
  }
  const scripts: Record<string, Record<string, ScriptCost>> = {};
  for (const side of ["floor", ...ctx.builds.map((b) => b.label)]) {
    const costs: Record<string, ScriptCost> = {};
    for (const script of Object.keys(measured[0]?.[side] ?? {})) {
      const of = (pick: (c: ScriptCost) => number) =>
        round(median(measured.map((m) => (m[side]?.[script] ? pick(m[side][script]) : Number.NaN))));
      costs[script] = { redisCpuUs: of((c) => c.redisCpuUs), scriptUs: of((c) => c.scriptUs) };
    }
    scripts[side] = costs;
  }
  return { jobs: settings.jobs, nodeUs, scripts };
}

/** Runs `op` for 0..n-1, 50 at a time, and reads what Redis spent on it. */
async function redisCost(
  ctx: BenchContext,
  n: number,
  op: (i: number) => Promise<unknown>,
): Promise<ScriptCost> {
  const before = await evalshaStats(ctx.probe);
  const cpuBefore = await redisCpuSeconds(ctx.probe);
  for (let i = 0; i < n; i += 50)
    await Promise.all(Array.from({ length: Math.min(50, n - i) }, (_, j) => op(i + j)));
  const cpu = (await redisCpuSeconds(ctx.probe)) - cpuBefore;
  const after = await evalshaStats(ctx.probe);
  return {
    redisCpuUs: round((cpu * 1e6) / n),
    scriptUs: round((after.usec - before.usec) / Math.max(1, after.calls - before.calls)),
  };
}

async function evalshaStats(redis: Redis): Promise<{ calls: number; usec: number }> {
  const text = await redis.info("commandstats");
  const match = /^cmdstat_evalsha:calls=(\d+),usec=(\d+)/m.exec(text);
  return { calls: Number(match?.[1] ?? 0), usec: Number(match?.[2] ?? 0) };
}

/**
 * A fresh claim's commands added to the bare script one at a time, each a script run alone like the others:
 * what reading the server's clock, reading a record, writing one and giving it an expiry cost in any script
 * (the same fields and values as the claim's; complete runs the same kinds of command).
 */
const CLAIM_BUILT_UP: readonly [string, string][] = [
  ["bare EVALSHA", ""],
  ["+ TIME", "redis.call('TIME')"],
  [
    "+ HMGET of 10 fields",
    "redis.call('HMGET', KEYS[1], 'state', 'phase', 'fence', 'lease_until', 'fp', 'tool', 'result', 'error', " +
      "'trace', 'result2')",
  ],
  [
    "+ HSET of 13 fields",
    "redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'tool', 'charge_card', 'fence', 1, 'claims', 1, 'created_at', " +
      "1764590000000, 'state', 'claimed', 'phase', 'effect', 'owner', '1.0123456789abcdef', 'lease_until', " +
      "1764590030000, 'updated_at', 1764590000000)",
  ],
  ["+ PEXPIRE", "redis.call('PEXPIRE', KEYS[1], 86400000)"],
];

/** The floor's script, and the claim's commands built up on it (see {@link CLAIM_BUILT_UP}). */
async function floorScriptCosts(
  ctx: BenchContext,
  redis: Redis,
  n: number,
  round: number,
): Promise<Record<string, ScriptCost>> {
  const costs: Record<string, ScriptCost> = {};
  const print = fingerprint(TOOL_NAME, INPUT);
  let body = "";
  for (const [i, [name, command]] of CLAIM_BUILT_UP.entries()) {
    body += command === "" ? "" : `${command} `;
    const sha = String(await redis.script("LOAD", `${body}return 1`));
    const prefix = `${ctx.prefix}floor${i}r${round}:`;
    costs[name] = await redisCost(ctx, n, (k) => redis.evalsha(sha, 1, `${prefix}${k}`, print));
  }
  return costs;
}

/** A first run's claim and complete, and a replay's claim, each measured over `n` keys of their own. */
async function scriptCosts(
  ctx: BenchContext,
  redis: Redis,
  build: OnceBuild,
  n: number,
  round: number,
): Promise<Record<string, ScriptCost>> {
  const prefix = `${ctx.prefix}parts${ctx.builds.indexOf(build)}r${round}:`;
  const store = await build.RedisStore.create({ redis: redis as never, prefix, checks: false });
  const print = fingerprint(TOOL_NAME, INPUT);
  const result = JSON.stringify(RESULT_100);
  const keys = Array.from({ length: n }, (_, i) =>
    deriveKey({ namespace: "bench", taskId: prefix, stepId: String(i) }),
  );
  const tokens: string[] = [];
  const claim = (key: string) =>
    store.claim({ key, fingerprint: print, tool: TOOL_NAME, phase: "effect", leaseMs: 30_000 });
  const claimCost = await redisCost(ctx, n, async (i) => {
    const c = await claim(keys[i] as string);
    if (c.outcome !== "acquired") throw new Error(`parts: claim ${c.outcome}`);
    tokens[i] = c.token;
  });
  const completeCost = await redisCost(ctx, n, (i) =>
    store.complete(keys[i] as string, tokens[i] as string, result),
  );
  const replayCost = await redisCost(ctx, n, async (i) => {
    const c = await claim(keys[i] as string);
    if (c.outcome !== "replay") throw new Error(`parts: replay ${c.outcome}`);
  });
  return { claim: claimCost, complete: completeCost, "claim (replay)": replayCost };
}

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import type { BenchContext } from "../bench-context.js";
import { leafPart, onceFile, PARTS, partOf, partsOf } from "../parts.js";
import { findPostgres } from "../postgres.js";
import type { CpuProfile } from "../profiler.js";
import { median } from "../stats.js";
import { type CostCell, runCostCell, SideUnavailableError, tasksFor } from "./cost.js";
import { type KillFigures, runKills } from "./kills.js";
import type { CostResult, KGrowth, PeerSide } from "./protocol.js";
import { type PeerProvider, startPeerProvider } from "./provider.js";
import { type PeerServers, peerServers, REQUIRES } from "./sides.js";

export const PEER_KS = [1, 10, 100, 1_000] as const;
export const PEER_CONCURRENCY = [1, 50] as const;

export interface PeersSettings {
  sides: readonly PeerSide[];
  /** Rounds of every cell; sides interleaved within a cell, the first side rotating. */
  rounds: number;
  effectMs: number;
  quick: boolean;
  /** Kill runs: tasks of `killSteps` steps, one kill each. */
  kills: number;
  killSteps: number;
  killLeaseMs: number;
  /** A cost run's timed window ends here at the latest. */
  budgetMs: number;
  /** How long each cost run warms up (untimed) before its window. */
  warmUpMs: number;
  /** Profiled rounds of bare and once-redis for the part table (0: none). */
  partsRounds: number;
}

/** One cell's figures for one side: medians over its rounds, and every round. */
export interface CellFigures {
  stepsPerSec: number;
  addedP50Ms: number;
  addedP99Ms: number;
  nodeCpuUsPerStep: number;
  serverCpuUsPerStep: number;
  steps: number;
  tasks: number;
  /** Some round's window ended at the budget with tasks unfinished. */
  truncated: boolean;
  rounds: RoundFigures[];
}

export interface RoundFigures {
  stepsPerSec: number;
  addedP50Ms: number;
  addedP99Ms: number;
  nodeCpuUsPerStep: number;
  serverCpuUsPerStep: number;
  steps: number;
  tasks: number;
  truncated: boolean;
  growth?: KGrowth;
}

export type NotRun = { notRun: string };
export type Cell = CellFigures | NotRun;

export interface SideFigures {
  requires: string;
  byK: Record<string, { c1: Cell; c50: Cell }>;
  /** From the 1,000-step task at concurrency 1 (its median round): the last steps against the first. */
  kGrowth?: KGrowth;
  kills: KillFigures | NotRun;
}

/** Node CPU per step by part (the bench's part table), profiled on one cell: where once's cost over bare goes. */
export interface PeerParts {
  k: number;
  concurrency: number;
  rounds: number;
  /** µs per step by part, medians over the rounds, by side. */
  bySide: Record<string, Record<PeerPart, number>>;
}

export interface PeersFigures {
  effectMs: number;
  rounds: number;
  budgetMs: number;
  warmUpMs: number;
  postgres: { server: string; source: string };
  /** Tasks per cost run, by `k<K>c<concurrency>`. */
  tasks: Record<string, number>;
  killLeaseMs: number;
  loadAverage: { start: number[]; end: number[] };
  sides: Record<string, SideFigures | NotRun>;
  parts?: PeerParts;
}

export const isNotRun = (value: unknown): value is NotRun =>
  typeof value === "object" && value !== null && "notRun" in value;

/**
 * The peers section: every side on every cell (K steps per task, 1 or 50 tasks in flight), each run in a
 * child process of its own against one provider, sides interleaved cell by cell; then each side's kill runs.
 * A side whose engine cannot start here is "not run" with the reason, and the rest goes on.
 */
export async function comparePeers(ctx: BenchContext, settings: PeersSettings): Promise<PeersFigures> {
  const loadStart = os.loadavg().map((l) => Number(l.toFixed(2)));
  const found = await findPostgres();
  const provider = await startPeerProvider(settings.effectMs);
  const servers = peerServers(ctx, found.url);
  const unavailable = new Map<PeerSide, string>();
  const results = new Map<string, CostResult[]>();
  const failures = new Map<string, string>();
  const cells: CostCell[] = [];
  for (const concurrency of PEER_CONCURRENCY)
    for (const k of PEER_KS)
      cells.push({
        k,
        concurrency,
        tasks: tasksFor(k, concurrency, settings.quick),
        budgetMs: settings.budgetMs,
        warmUpMs: settings.warmUpMs,
      });
  const cellKey = (side: PeerSide, cell: { k: number; concurrency: number }) =>
    `${side} k${cell.k} c${cell.concurrency}`;
  let serial = 0;
  try {
    const server = await serverVersion(found.url);
    ctx.log(`peers: PostgreSQL ${server} (${found.source}), provider holds ${settings.effectMs} ms`);
    for (let round = 0; round < settings.rounds; round++) {
      for (const [index, cell] of cells.entries()) {
        const order = rotate(settings.sides, round + index);
        for (const side of order) {
          if (unavailable.has(side) || failures.has(cellKey(side, cell))) continue;
          const tag = `p${Date.now().toString(36)}${serial++}`;
          const started = performance.now();
          try {
            const result = await runCostCell(servers, provider, side, cell, tag, settings.effectMs);
            const list = results.get(cellKey(side, cell)) ?? [];
            list.push(result);
            results.set(cellKey(side, cell), list);
            ctx.log(
              `peers: round ${round + 1}, ${cellKey(side, cell)}: ${Math.round(result.steps / result.seconds)} steps/s` +
                `${result.truncated ? ` (budget: ${result.steps} steps)` : ""} in ${Math.round((performance.now() - started) / 1000)} s`,
            );
          } catch (error) {
            const message = error instanceof Error ? error.message : String(error);
            if (error instanceof SideUnavailableError) unavailable.set(side, message);
            else failures.set(cellKey(side, cell), message);
            ctx.log(`peers: ${cellKey(side, cell)} not run: ${message.split("\n")[0]}`);
          }
        }
      }
    }
    const sides: Record<string, SideFigures | NotRun> = {};
    for (const side of settings.sides) {
      const why = unavailable.get(side);
      if (why && ![...results.keys()].some((key) => key.startsWith(`${side} `))) {
        sides[side] = { notRun: why };
        continue;
      }
      const byK: SideFigures["byK"] = {};
      let kGrowth: KGrowth | undefined;
      for (const k of PEER_KS) {
        const of = (concurrency: number): Cell => {
          const key = cellKey(side, { k, concurrency });
          const list = results.get(key);
          if (!list?.length) return { notRun: failures.get(key) ?? why ?? "not run" };
          return cellFigures(list);
        };
        byK[String(k)] = { c1: of(1), c50: of(50) };
      }
      const long = results.get(cellKey(side, { k: 1_000, concurrency: 1 }));
      if (long?.length) kGrowth = medianRound(long).growth;
      let kills: KillFigures | NotRun;
      if (side === "bare") kills = { notRun: "no engine: nothing resumes a killed loop" };
      else if (why) kills = { notRun: why };
      else {
        ctx.log(
          `peers: ${side}, ${settings.kills} kills (tasks of ${settings.killSteps} steps, one kill each)`,
        );
        try {
          kills = await runKills(
            servers,
            provider,
            side,
            {
              tasks: settings.kills,
              k: settings.killSteps,
              effectMs: settings.effectMs,
              leaseMs: settings.killLeaseMs,
              stallMs: 90_000,
            },
            `k${Date.now().toString(36)}${serial++}`,
          );
          ctx.log(
            `peers: ${side}: ${kills.kills} kills, ${kills.effectsMade}/${kills.effectsExpected} effects, ` +
              `${kills.duplicates} duplicates, ${kills.lost} lost, recovery p50 ${Math.round(kills.recoveryMsP50)} ms`,
          );
        } catch (error) {
          kills = { notRun: error instanceof Error ? error.message : String(error) };
          ctx.log(`peers: ${side} kills not run: ${kills.notRun.split("\n")[0]}`);
        }
      }
      sides[side] = { requires: REQUIRES[side], byK, ...(kGrowth ? { kGrowth } : {}), kills };
    }
    const parts = await profileParts(
      servers,
      provider,
      settings,
      unavailable,
      () => `q${Date.now().toString(36)}${serial++}`,
      ctx.log,
    ).catch((error: unknown) => {
      ctx.log(
        `peers: no part table: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`,
      );
      return undefined;
    });
    return {
      ...(parts ? { parts } : {}),
      effectMs: settings.effectMs,
      rounds: settings.rounds,
      budgetMs: settings.budgetMs,
      warmUpMs: settings.warmUpMs,
      postgres: { server, source: found.source },
      tasks: Object.fromEntries(cells.map((c) => [`k${c.k}c${c.concurrency}`, c.tasks])),
      killLeaseMs: settings.killLeaseMs,
      loadAverage: { start: loadStart, end: os.loadavg().map((l) => Number(l.toFixed(2))) },
      sides,
    };
  } finally {
    await provider.close();
    await found.stop();
  }
}

/** The part of a peers step's Node CPU that is its effect: the POST, its answer read, and its headers built. */
export const EFFECT_PART = "the effect: the POST and its answer";
export const PEER_PARTS = [EFFECT_PART, ...PARTS] as const;
export type PeerPart = (typeof PEER_PARTS)[number];

/**
 * The bench's part of a frame, with the step's effect as a part of its own: a frame of the effect's module
 * (effect.ts) is the effect, and so is `fetchWithKey`'s wrapper, through which once's step makes the same
 * POST (so once's effect includes the two headers and the signal it adds; its lease check stays the lease).
 */
function peerPartOf(fn: string, url: string): PeerPart | undefined {
  if (url.endsWith("/bench/dist/peers/effect.js") || onceFile(url) === "fetch-with-key") return EFFECT_PART;
  return partOf(fn, url);
}

/** The sides the part table compares: once in process on Redis against the same POSTs with no engine. */
const PART_SIDES: readonly PeerSide[] = ["bare", "once-redis"];

/**
 * The part table for once in process: bare and once-redis on one cell (100-step tasks, 50 in flight),
 * profiled with V8's sampling profiler in interleaved rounds, each sample put in a part as `--only parts` does
 * (parts.ts) and scaled to the run's measured Node CPU per step.
 */
async function profileParts(
  servers: PeerServers,
  provider: PeerProvider,
  settings: PeersSettings,
  unavailable: ReadonlyMap<PeerSide, string>,
  tag: () => string,
  log: (message: string) => void,
): Promise<PeerParts | undefined> {
  const sides = PART_SIDES.filter((s) => settings.sides.includes(s) && !unavailable.has(s));
  if (settings.partsRounds === 0 || sides.length < PART_SIDES.length) return undefined;
  const cell: CostCell = {
    k: 100,
    concurrency: 50,
    tasks: tasksFor(100, 50, settings.quick),
    budgetMs: settings.budgetMs,
    warmUpMs: settings.warmUpMs,
  };
  const dir = mkdtempSync(path.join(os.tmpdir(), "peers-profiles-"));
  const measured = new Map<PeerSide, Record<PeerPart, number>[]>();
  try {
    for (let round = 0; round < settings.partsRounds; round++) {
      for (const side of rotate(sides, round)) {
        const file = path.join(dir, `${side}-${round}.cpuprofile`);
        const result = await runCostCell(servers, provider, side, cell, tag(), settings.effectMs, file);
        const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
        const list = measured.get(side) ?? [];
        list.push(
          partsOf(profile, result.nodeCpuUs / Math.max(1, result.steps), PEER_PARTS, peerPartOf, leafPart),
        );
        measured.set(side, list);
        log(
          `peers: parts, round ${round + 1}, ${side}: ${Math.round(result.nodeCpuUs / result.steps)} µs of Node CPU per step`,
        );
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const bySide: Record<string, Record<PeerPart, number>> = {};
  for (const [side, list] of measured)
    bySide[side] = Object.fromEntries(PEER_PARTS.map((p) => [p, median(list.map((r) => r[p]))])) as Record<
      PeerPart,
      number
    >;
  return { k: cell.k, concurrency: cell.concurrency, rounds: settings.partsRounds, bySide };
}

function roundFigures(r: CostResult): RoundFigures {
  const per = (total: number) => (r.steps === 0 ? Number.NaN : total / r.steps);
  return {
    stepsPerSec: r.steps / r.seconds,
    addedP50Ms: r.addedP50Ms,
    addedP99Ms: r.addedP99Ms,
    nodeCpuUsPerStep: per(r.nodeCpuUs),
    serverCpuUsPerStep: per(r.serverCpuUs),
    steps: r.steps,
    tasks: r.tasks,
    truncated: r.truncated,
    ...(r.growth ? { growth: r.growth } : {}),
  };
}

/** Medians over the rounds of each figure. */
function cellFigures(list: readonly CostResult[]): CellFigures {
  const rounds = list.map(roundFigures);
  const of = (pick: (r: RoundFigures) => number) => median(rounds.map(pick));
  return {
    stepsPerSec: of((r) => r.stepsPerSec),
    addedP50Ms: of((r) => r.addedP50Ms),
    addedP99Ms: of((r) => r.addedP99Ms),
    nodeCpuUsPerStep: of((r) => r.nodeCpuUsPerStep),
    serverCpuUsPerStep: of((r) => r.serverCpuUsPerStep),
    steps: of((r) => r.steps),
    tasks: of((r) => r.tasks),
    truncated: rounds.some((r) => r.truncated),
    rounds,
  };
}

/** The round of median steps/s. */
function medianRound(list: readonly CostResult[]): CostResult {
  const sorted = [...list].sort((a, b) => a.steps / a.seconds - b.steps / b.seconds);
  return sorted[Math.floor((sorted.length - 1) / 2)] as CostResult;
}

function rotate<T>(items: readonly T[], by: number): T[] {
  const n = items.length;
  return items.map((_, i) => items[(i + by) % n] as T);
}

async function serverVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  try {
    return String((await client.query("select current_setting('server_version') as v")).rows[0]?.v);
  } finally {
    await client.end().catch(() => {});
  }
}

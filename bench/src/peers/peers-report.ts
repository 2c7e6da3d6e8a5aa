import type { KillFigures } from "./kills.js";
import {
  type Cell,
  type CellFigures,
  isNotRun,
  PEER_KS,
  PEER_PARTS,
  type PeersFigures,
  type SideFigures,
} from "./peers.js";
import type { KGrowth, PeerSide } from "./protocol.js";

/** A goal as the report's goal table shows it. */
interface Goal {
  target: string;
  measured: string;
  met: boolean;
}

const ONCE_SIDES: readonly PeerSide[] = ["once-redis", "once-postgres", "once-bullmq", "once-transactional"];
const ENGINES: readonly PeerSide[] = ["dbos", "restate", "workflow"];

const fixed = (v: number | undefined, digits: number) =>
  v === undefined || !Number.isFinite(v) ? "-" : v.toFixed(digits);
const whole = (v: number | undefined) =>
  v === undefined || !Number.isFinite(v) ? "-" : Math.round(v).toLocaleString("en-US");

function sideOf(peers: PeersFigures, side: string): SideFigures | undefined {
  const s = peers.sides[side];
  return s === undefined || isNotRun(s) ? undefined : s;
}

function cellOf(peers: PeersFigures, side: string, k: number, c: 1 | 50): CellFigures | undefined {
  const cell = sideOf(peers, side)?.byK[String(k)]?.[c === 1 ? "c1" : "c50"];
  return cell === undefined || isNotRun(cell) ? undefined : cell;
}

/** The step's wall time (the provider's latency and what the side adds), last window over first. */
export function growthRatios(g: KGrowth, effectMs: number): { latency: number; cpu: number } {
  return {
    latency: (g.lastAddedMs + effectMs) / (g.firstAddedMs + effectMs),
    cpu: g.lastNodeCpuUs / g.firstNodeCpuUs,
  };
}

/** The issue's goals for the peers section, judged on this run's figures. */
export function peersGoals(peers: PeersFigures): Record<string, Goal> {
  const goals: Record<string, Goal> = {};
  const others = Object.keys(peers.sides).filter((s) => s !== "once-redis" && s !== "bare");
  const missed: string[] = [];
  let judged = 0;
  for (const k of PEER_KS) {
    for (const c of [1, 50] as const) {
      const once = cellOf(peers, "once-redis", k, c);
      if (!once) continue;
      judged++;
      const faster = others.filter(
        (side) => (cellOf(peers, side, k, c)?.stepsPerSec ?? 0) > once.stepsPerSec,
      );
      const nearer = others.filter(
        (side) => (cellOf(peers, side, k, c)?.addedP50Ms ?? Number.POSITIVE_INFINITY) < once.addedP50Ms,
      );
      if (faster.length + nearer.length > 0)
        missed.push(
          `K=${k} c${c}: ${[...(faster.length ? [`steps/s ${faster.join(" ")}`] : []), ...(nearer.length ? [`p50 ${nearer.join(" ")}`] : [])].join(", ")}`,
        );
    }
  }
  if (judged > 0)
    goals.peersOnceRedisFirst = {
      target: "once-redis: most steps/s, least added p50, every K and c",
      measured:
        missed.length === 0
          ? `first in all ${judged} cells`
          : `${judged - missed.length} of ${judged} cells; ${missed.join("; ")}`,
      met: missed.length === 0,
    };
  const behind: string[] = [];
  let bull = 0;
  for (const k of PEER_KS) {
    const once = cellOf(peers, "once-bullmq", k, 50);
    if (!once) continue;
    bull++;
    for (const side of ENGINES) {
      const other = cellOf(peers, side, k, 50);
      if (other && other.stepsPerSec >= once.stepsPerSec)
        behind.push(`K=${k}: ${side} ${whole(other.stepsPerSec)} vs ${whole(once.stepsPerSec)}`);
    }
  }
  if (bull > 0)
    goals.peersBullmqAheadAtC50 = {
      target: "once-bullmq ahead of every engine at c50",
      measured: behind.length === 0 ? "ahead everywhere" : behind.join("; "),
      met: behind.length === 0,
    };
  const over: string[] = [];
  const server: string[] = [];
  let nodeMet = true;
  let serverMet = true;
  for (const k of PEER_KS) {
    const once = cellOf(peers, "once-redis", k, 50);
    const bare = cellOf(peers, "bare", k, 50);
    if (!once || !bare) continue;
    const extra = once.nodeCpuUsPerStep - bare.nodeCpuUsPerStep;
    over.push(`K=${k}: ${whole(extra)}`);
    nodeMet &&= extra <= 120;
    server.push(`K=${k}: ${whole(once.serverCpuUsPerStep)}`);
    serverMet &&= once.serverCpuUsPerStep <= 60;
  }
  if (over.length > 0) {
    goals.peersNodeCpuOverBare = {
      target: "once-redis c50: <= 120 us Node CPU/step over bare",
      measured: over.join(", "),
      met: nodeMet,
    };
    goals.peersServerCpu = {
      target: "once-redis c50: <= 60 us Redis CPU/step",
      measured: server.join(", "),
      met: serverMet,
    };
  }
  const flat: string[] = [];
  let flatMet = true;
  for (const side of ONCE_SIDES) {
    const g = sideOf(peers, side)?.kGrowth;
    if (!g) continue;
    const r = growthRatios(g, peers.effectMs);
    flat.push(`${side}: ${fixed(r.latency, 2)} / ${fixed(r.cpu, 2)}`);
    flatMet &&= r.latency <= 1.1 && r.cpu <= 1.1;
  }
  if (flat.length > 0)
    goals.peersFlatInK = {
      target: "once: 1,000-step task, last steps within 10 % of the first (time / CPU)",
      measured: flat.join(", "),
      met: flatMet,
    };
  const dups: string[] = [];
  let dupsMet = true;
  for (const side of ONCE_SIDES) {
    const kills = sideOf(peers, side)?.kills;
    if (!kills || isNotRun(kills)) continue;
    dups.push(`${side}: ${kills.duplicates}`);
    dupsMet &&= kills.duplicates === 0 && kills.lost === 0;
  }
  if (dups.length > 0)
    goals.peersNoDuplicates = {
      target: "0 duplicates (and 0 lost) after kills, every once side",
      measured: dups.join(", "),
      met: dupsMet,
    };
  return goals;
}

type Table = (headers: string[], rows: (string | number)[][]) => string;

const cellText = (cell: Cell | undefined, pick: (c: CellFigures) => string) =>
  cell === undefined ? "-" : isNotRun(cell) ? "not run" : `${pick(cell)}${cell.truncated ? "*" : ""}`;

/** The peers section of the printed report. */
export function peersTables(peers: PeersFigures, table: Table): string[] {
  const out: string[] = [];
  const sides = Object.keys(peers.sides);
  out.push(
    "",
    `Peers: tasks of K steps, each step one POST the provider holds ${peers.effectMs} ms; ` +
      `medians of ${peers.rounds} round(s); load average ${peers.loadAverage.start.join(" ")} at the start, ` +
      `${peers.loadAverage.end.join(" ")} at the end; * = window ended at the ${peers.budgetMs / 1000} s budget`,
  );
  for (const [name, side] of Object.entries(peers.sides))
    if (isNotRun(side)) out.push(`  ${name}: not run: ${side.notRun.split("\n")[0]}`);
  for (const c of [1, 50] as const) {
    out.push(
      "",
      `Peers at ${c === 1 ? "one task" : "50 tasks"} in flight: steps/s | added p50 / p99 ms | Node / server CPU us per step`,
    );
    const rows: (string | number)[][] = [];
    for (const side of sides) {
      const s = sideOf(peers, side);
      if (!s) continue;
      for (const k of PEER_KS) {
        const cell = s.byK[String(k)]?.[c === 1 ? "c1" : "c50"];
        rows.push([
          k === 1 ? side : "",
          String(k),
          cellText(cell, (x) => whole(x.stepsPerSec)),
          cellText(cell, (x) => `${fixed(x.addedP50Ms, 2)} / ${fixed(x.addedP99Ms, 1)}`),
          cellText(cell, (x) => `${whole(x.nodeCpuUsPerStep)} / ${whole(x.serverCpuUsPerStep)}`),
        ]);
      }
    }
    out.push(table(["side", "K", "steps/s", "added p50 / p99", "CPU us node / server"], rows));
  }
  out.push(
    "",
    "Peers, how a step's cost grows along a 1,000-step task (one in flight): first tenth vs last tenth, medians",
  );
  out.push(
    table(
      [
        "side",
        "steps",
        "added ms first / last",
        "step time last / first",
        "Node CPU us first / last",
        "CPU last / first",
      ],
      sides.flatMap((side) => {
        const g = sideOf(peers, side)?.kGrowth;
        if (!g) return [];
        const r = growthRatios(g, peers.effectMs);
        return [
          [
            side,
            String(g.lastStep + 1),
            `${fixed(g.firstAddedMs, 2)} / ${fixed(g.lastAddedMs, 2)}`,
            fixed(r.latency, 2),
            `${whole(g.firstNodeCpuUs)} / ${whole(g.lastNodeCpuUs)}`,
            fixed(r.cpu, 2),
          ],
        ];
      }),
    ),
  );
  out.push(
    "",
    "Peers, kills: tasks of 10 steps against a provider that honours no key, SIGKILLed once each inside a step",
  );
  out.push(
    table(
      ["side", "kills", "effects made / expected", "duplicates", "lost", "recovery p50 / p99 ms"],
      sides.flatMap((side) => {
        const kills = sideOf(peers, side)?.kills as KillFigures | { notRun: string } | undefined;
        if (!kills) return [];
        if (isNotRun(kills)) return [[side, "-", `not run: ${kills.notRun.split("\n")[0]}`, "-", "-", "-"]];
        return [
          [
            side,
            String(kills.kills),
            `${kills.effectsMade} / ${kills.effectsExpected}`,
            String(kills.duplicates),
            String(kills.lost),
            `${whole(kills.recoveryMsP50)} / ${whole(kills.recoveryMsP99)}`,
          ],
        ];
      }),
    ),
  );
  const parts = peers.parts;
  const bare = parts?.bySide.bare;
  const once = parts?.bySide["once-redis"];
  if (parts && bare && once) {
    out.push(
      "",
      `Peers, Node CPU per step by part, us (profiled: K=${parts.k}, ${parts.concurrency} in flight, ${parts.rounds} round(s), medians)`,
    );
    const total = (r: Record<string, number>) => PEER_PARTS.reduce((a, p) => a + (r[p] ?? 0), 0);
    out.push(
      table(
        ["part", "bare", "once-redis", "once-redis - bare"],
        [
          ...PEER_PARTS.map((p) => [p, fixed(bare[p], 1), fixed(once[p], 1), fixed(once[p] - bare[p], 1)]),
          ["total", fixed(total(bare), 1), fixed(total(once), 1), fixed(total(once) - total(bare), 1)],
        ],
      ),
    );
  }
  return out;
}

import type { ModeFigures } from "./mode-figures.js";

/** One row of a side-by-side table: its label, and its cell for each mode's figures. */
export type Row<F> = [label: string, value: (figures: F) => string];

const ROWS: Row<ModeFigures>[] = [
  ["tasks (ok / failed)", (f) => `${f.tasks} (${f.tasksOk} / ${f.tasksFailed})`],
  ["tool calls", (f) => String(f.calls)],
  ["retries fired", (f) => String(f.retries)],
  [
    "charge calls that timed out",
    (f) => `${f.retriedChargeCalls} of ${f.chargeCalls} (${percent(f.retriedChargeCalls, f.chargeCalls)})`,
  ],
  ["charges expected", (f) => String(f.chargesExpected)],
  ["charges made", (f) => String(f.chargesMade)],
  ["charges duplicate", (f) => String(f.chargesDuplicate)],
  ["charges missing", (f) => String(f.chargesMissing)],
  ["emails expected / sent", (f) => `${f.emailsExpected} / ${f.emailsSent}`],
  ["duplicate emails", (f) => String(f.duplicateEmails)],
  [
    "dedup hits (queue + store)",
    (f) => `${f.dedupHits} (${f.dedupHitsByLayer.queue} + ${f.dedupHitsByLayer.store})`,
  ],
  ["calls that ran nothing (replayed)", (f) => String(f.replayedCalls)],
  ["in-flight waits", (f) => String(f.inFlightWaits)],
  [
    "reconciled (applied / not)",
    (f) => `${f.reconciled} (${f.reconciledApplied} / ${f.reconciledNotApplied})`,
  ],
  ["unknown", (f) => String(f.unknown)],
  ["workers SIGKILLed", (f) => String(f.workerKills)],
  ["p50 / p99 call latency", (f) => `${Math.round(f.p50Ms)} / ${Math.round(f.p99Ms)} ms`],
  ["calls/s", (f) => String(Math.round(f.callsPerSec))],
];

/** The modes side by side, one row per figure. */
export function formatComparison(modes: readonly ModeFigures[]): string {
  return formatTable(modes, ROWS);
}

/** Modes side by side, one column each (headed by its mode), one row per `rows` entry. */
export function formatTable<F extends { mode: string }>(
  modes: readonly F[],
  rows: readonly Row<F>[],
): string {
  const header = ["", ...modes.map((f) => f.mode)];
  const body = rows.map(([label, value]) => [label, ...modes.map(value)]);
  const widths = header.map((_, column) =>
    Math.max(...[header, ...body].map((row) => (row[column] ?? "").length)),
  );
  const line = (row: string[]) =>
    row
      .map((cell, column) =>
        column === 0 ? cell.padEnd(widths[0] ?? 0) : cell.padStart(widths[column] ?? 0),
      )
      .join("  │  ");
  const rule = widths.map((width) => "─".repeat(width)).join("──┼──");
  return [line(header), rule, ...body.map(line)].join("\n");
}

function percent(part: number, whole: number): string {
  return whole === 0 ? "–" : `${Math.round((part * 100) / whole)}%`;
}

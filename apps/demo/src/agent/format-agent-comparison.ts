import { formatTable, type Row } from "../format-comparison.js";
import type { AgentFigures } from "./agent-figures.js";

const ROWS: Row<AgentFigures>[] = [
  ["tasks (ok / failed)", (f) => `${f.tasks} (${f.tasksOk} / ${f.tasksFailed})`],
  ["orchestrator SIGKILLs", (f) => String(f.orchestratorKills)],
  ["tool calls", (f) => String(f.toolCalls)],
  ["tool calls re-sent on timeout", (f) => String(f.toolCallsResent)],
  ["charges expected / made", (f) => `${f.chargesExpected} / ${f.chargesMade}`],
  ["duplicate charges", (f) => String(f.chargesDuplicate)],
  ["orders never charged", (f) => String(f.chargesMissing)],
  ["emails expected / sent", (f) => `${f.emailsExpected} / ${f.emailsSent}`],
  ["duplicate emails", (f) => String(f.duplicateEmails)],
  ["model calls", (f) => String(f.modelCalls)],
  ["model calls repeated (tokens paid twice)", (f) => String(f.modelCallsRepeated)],
  ["model calls cut off by a kill, asked again", (f) => String(f.modelCallsCutOff)],
  ["conflicts (once errors)", (f) => String(f.conflicts)],
  ["p50 / p99 task time", (f) => `${f.p50TaskMs} / ${f.p99TaskMs} ms`],
];

/** The agent demo's modes side by side, in the order demo's layout. */
export function formatAgentComparison(modes: readonly AgentFigures[]): string {
  return formatTable(modes, ROWS);
}

import type { OrchestratorMode, TaskReport } from "./order-orchestrator.js";
import type { RunSummary } from "./run-order-tasks.js";

/** The orchestrator's side of the figures, all counted from its call results. */
export interface OrchestratorFigures {
  mode: OrchestratorMode;
  tasks: number;
  tasksOk: number;
  tasksFailed: number;
  /** Failed tasks by the error that stopped them. */
  failures: Record<string, number>;
  /** Logical tool calls (steps), however many times each was sent. */
  calls: number;
  callsByTool: Record<string, number>;
  /** Calls that timed out at least once and were sent again, by tool. */
  retriedCallsByTool: Record<string, number>;
  /** Jobs enqueued. */
  sends: number;
  /** Calls made again after a timeout or a failure. */
  retries: number;
  /** Calls answered from the store (CallResult.replayed). */
  replayedCalls: number;
  /** Tasks that decided to charge: each should produce exactly one charge. */
  chargesIntended: number;
  /** Tasks that decided to email a receipt. */
  emailsIntended: number;
  /** Per logical call, first send to answer, in ms. */
  p50Ms: number;
  p99Ms: number;
  wallMs: number;
  callsPerSec: number;
  /** Every idempotency key an effect call used (one per attempt under naive). */
  effectKeys: string[];
  /** Tasks that had retries, with their traces: the interesting ones to look at. */
  retriedTasks: { taskId: string; traceId?: string; retries: number; replayed: number }[];
  /** The trace of every task, when tracing is on. */
  traces: Record<string, string>;
}

/** Sums a run's task reports into figures. */
export function summarizeRun(run: RunSummary): OrchestratorFigures {
  const calls = run.reports.flatMap((report) => report.calls);
  const failures: Record<string, number> = {};
  for (const report of run.reports) {
    if (!report.ok) failures[report.error ?? "Error"] = (failures[report.error ?? "Error"] ?? 0) + 1;
  }
  const callsByTool: Record<string, number> = {};
  const retriedCallsByTool: Record<string, number> = {};
  for (const call of calls) {
    callsByTool[call.tool] = (callsByTool[call.tool] ?? 0) + 1;
    if (call.retries > 0) retriedCallsByTool[call.tool] = (retriedCallsByTool[call.tool] ?? 0) + 1;
  }
  const latencies = calls.map((call) => call.latencyMs).sort((a, b) => a - b);
  const tasksWith = (tool: string) =>
    new Set(calls.filter((call) => call.tool === tool).map((call) => call.taskId)).size;
  return {
    mode: run.mode,
    tasks: run.tasks,
    tasksOk: run.reports.filter((report) => report.ok).length,
    tasksFailed: run.reports.filter((report) => !report.ok).length,
    failures,
    calls: calls.length,
    callsByTool,
    retriedCallsByTool,
    sends: sum(calls.map((call) => call.sends)),
    retries: sum(calls.map((call) => call.retries)),
    replayedCalls: calls.filter((call) => call.replayed).length,
    chargesIntended: tasksWith("charge_customer"),
    emailsIntended: tasksWith("send_email"),
    p50Ms: round(percentile(latencies, 0.5)),
    p99Ms: round(percentile(latencies, 0.99)),
    wallMs: round(run.wallMs),
    callsPerSec: run.wallMs > 0 ? round((calls.length * 1000) / run.wallMs) : 0,
    effectKeys: [...new Set(calls.flatMap((call) => call.keys))],
    retriedTasks: run.reports.filter(hasRetries).map((report) => ({
      taskId: report.taskId,
      ...(report.traceId ? { traceId: report.traceId } : {}),
      retries: sum(report.calls.map((call) => call.retries)),
      replayed: report.calls.filter((call) => call.replayed).length,
    })),
    traces: Object.fromEntries(
      run.reports.flatMap((report) => (report.traceId ? [[report.taskId, report.traceId]] : [])),
    ),
  };
}

/** Nearest-rank percentile of sorted values; 0 for none. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

function hasRetries(report: TaskReport): boolean {
  return report.calls.some((call) => call.retries > 0);
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

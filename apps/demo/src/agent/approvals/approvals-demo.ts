import { writeFileSync } from "node:fs";
import { formatTable, type Row } from "../../format-comparison.js";
import { Progress } from "../../progress.js";
import type { ApprovalFigures } from "./approval-figures.js";
import { APPROVAL_THRESHOLD_CENTS } from "./charge-approval.js";
import { runApprovalsMode } from "./run-approvals-mode.js";

export interface ApprovalsDemoOptions {
  modes: readonly ("naive" | "once")[];
  redisUrl: string;
  /** Where the Redis came from, for the header. */
  redisSource: string;
  runId: string;
  tasks: number;
  timeoutMs: number;
  decisionDelayMs: number;
  latency: { p50Ms: number; p99Ms: number };
  seed: number;
  /** Write the figures here as JSON: `{ "naive": {...}, "once": {...} }`. */
  json?: string;
  signal: AbortSignal;
}

const ROWS: Row<ApprovalFigures>[] = [
  [
    "tasks (ok / failed / cancelled)",
    (f) => `${f.tasks} (${f.tasksOk} / ${f.tasksFailed} / ${f.tasksCancelled})`,
  ],
  ["orchestrator SIGKILLs", (f) => String(f.orchestratorKills)],
  ["approvals requested", (f) => String(f.approvalsRequested)],
  ["approvals asked twice", (f) => String(f.approvalsAskedTwice)],
  ["approved / denied", (f) => `${f.approvalsApproved} / ${f.approvalsDenied}`],
  ["charges made (under the threshold)", (f) => `${f.chargesMade} (${f.chargesUnderThreshold})`],
  ["emails sent", (f) => String(f.emailsSent)],
  ["effects without approval", (f) => String(f.effectsWithoutApproval)],
  ["effects per approval (max)", (f) => String(f.effectsPerApprovalMax)],
  ["effects after deny", (f) => String(f.effectsAfterDeny)],
  ["effects after cancel", (f) => String(f.effectsAfterCancel)],
  ["duplicate effects", (f) => String(f.duplicateEffects)],
  ["wall time", (f) => `${(f.wallMs / 1000).toFixed(1)} s`],
];

/** What once must hold to in this demo; each broken one is named. */
export function onceFailures(once: ApprovalFigures): string[] {
  return [
    once.approvalsAskedTwice > 0 && `${once.approvalsAskedTwice} approvals asked twice`,
    once.effectsWithoutApproval > 0 && `${once.effectsWithoutApproval} effects without approval`,
    once.effectsPerApprovalMax > 1 && `${once.effectsPerApprovalMax} effects for one approval`,
    once.effectsAfterDeny > 0 && `${once.effectsAfterDeny} effects after a deny`,
    once.effectsAfterCancel > 0 && `${once.effectsAfterCancel} effects after the cancel`,
    once.duplicateEffects > 0 && `${once.duplicateEffects} duplicate effects`,
    once.cancelledTask === null && "no task was cancelled",
  ].filter((failure) => typeof failure === "string");
}

/**
 * `pnpm demo -- --agent --approvals`: the AI SDK's loop with a charge that needs approval over a threshold,
 * naive (the SDK's own needsApproval, the decision in the messages) then once (the decision on the record),
 * each with an approver process, one task cancelled, and the orchestrator SIGKILLed while requests are pending
 * and again after the decisions. Returns the exit status: 1 when once broke any of {@link onceFailures}.
 */
export async function approvalsDemo(options: ApprovalsDemoOptions): Promise<number> {
  const out = (lines: string[]) => process.stdout.write(`${lines.join("\n")}\n`);
  out([
    `once demo --agent --approvals · run ${options.runId}`,
    `  ${options.tasks} order tasks per mode, all at once, each an AI SDK generateText loop: read the order → charge it + email the receipt → mark it paid → answer`,
    `  a charge over ${APPROVAL_THRESHOLD_CENTS} cents needs a person's approval (the model charges 1000–9999, another amount when asked again)`,
    `  the approver, a process of its own, decides ${options.decisionDelayMs} ms after it sees a request: it cancels the first task it is asked about, denies orders numbered a multiple of 3, approves the rest`,
    "  the orchestrator is SIGKILLed when every unfinished task waits for a decision, and again when the restarted one holds a decision it has not acted on; each time restarted with the unfinished tasks",
    `  tool calls re-sent after ${options.timeoutMs} ms (waits doubling to ${8 * options.timeoutMs} ms); provider latency p50 ${options.latency.p50Ms} ms, p99 ${options.latency.p99Ms} ms (seed ${options.seed}); Redis: ${options.redisUrl} (${options.redisSource})`,
    "",
  ]);
  const results: ApprovalFigures[] = [];
  for (const mode of options.modes) {
    if (options.signal.aborted) break;
    const progress = new Progress();
    try {
      results.push(
        await runApprovalsMode({
          mode,
          redisUrl: options.redisUrl,
          runId: options.runId,
          tasks: options.tasks,
          timeoutMs: options.timeoutMs,
          decisionDelayMs: options.decisionDelayMs,
          latency: options.latency,
          seed: options.seed,
          report: (event) => progress.report(event),
          signal: options.signal,
        }),
      );
    } finally {
      progress.done();
    }
  }
  if (results.length === 0) return 0;
  out([
    "",
    formatTable(results, ROWS),
    "",
    "Measured, not modelled: charges and emails by the provider's ledger after the last orchestrator exited;",
    "requests and decisions by the approver process, as it was asked and as it decided. Without approval = a",
    "charge over the threshold with no approval of that order and amount before it; per approval = charges of",
    "an approved order and amount; after deny / cancel = the order's effects made after the approver denied a",
    "request for it / after its cancel returned.",
  ]);
  let exitCode = 0;
  const once = results.find((f) => f.mode === "once");
  const failures = once ? onceFailures(once) : [];
  if (failures.length > 0) {
    out(["", `FAIL under once: ${failures.join(", ")}`]);
    exitCode = 1;
  }
  if (options.json) {
    writeFileSync(
      options.json,
      `${JSON.stringify(Object.fromEntries(results.map((f) => [f.mode, f])), null, 2)}\n`,
    );
    out([`figures written to ${options.json}`]);
  }
  return exitCode;
}

import { writeFileSync } from "node:fs";
import { Progress } from "../progress.js";
import type { AgentFigures } from "./agent-figures.js";
import { formatAgentComparison } from "./format-agent-comparison.js";
import { runAgentMode } from "./run-agent-mode.js";

export interface AgentDemoOptions {
  modes: readonly ("naive" | "once")[];
  redisUrl: string;
  /** Where the Redis came from, for the header. */
  redisSource: string;
  runId: string;
  tasks: number;
  concurrency: number;
  timeoutMs: number;
  kill: boolean;
  latency: { p50Ms: number; p99Ms: number };
  seed: number;
  /** Write the figures here as JSON: `{ "naive": {...}, "once": {...} }`. */
  json?: string;
  signal: AbortSignal;
}

/**
 * `pnpm demo -- --agent`: the AI SDK's agent loop on the same order tasks, naive then once, each with its
 * orchestrator SIGKILLed and restarted mid-run; prints the figures side by side. Returns the exit status: 1
 * when once let a duplicate effect through, asked the model again for a turn it had recorded, or met a once
 * error; 0 otherwise.
 */
export async function agentDemo(options: AgentDemoOptions): Promise<number> {
  const out = (lines: string[]) => process.stdout.write(`${lines.join("\n")}\n`);
  out([
    `once demo --agent · run ${options.runId}`,
    `  ${options.tasks} order tasks per mode, ${options.concurrency} at a time, each an AI SDK generateText loop: read the order → charge it + email the receipt → mark it paid → answer`,
    "  the model: scripted, nondeterministic (asked again, another amount and new tool-call ids); latency 5–25 ms, one call in ten ~10× slower",
    `  the orchestrator waits ${options.timeoutMs} ms for a tool call, then re-sends it (waits doubling to ${8 * options.timeoutMs} ms)${options.kill ? "; it is SIGKILLed a third and two thirds of the way through, and restarted with the unfinished tasks" : ""}`,
    `  provider latency p50 ${options.latency.p50Ms} ms, p99 ${options.latency.p99Ms} ms (seed ${options.seed}); Redis: ${options.redisUrl} (${options.redisSource})`,
    "",
  ]);

  const results: AgentFigures[] = [];
  for (const mode of options.modes) {
    if (options.signal.aborted) break;
    const progress = new Progress();
    try {
      results.push(
        await runAgentMode({
          mode,
          redisUrl: options.redisUrl,
          runId: options.runId,
          tasks: options.tasks,
          concurrency: options.concurrency,
          timeoutMs: options.timeoutMs,
          kill: options.kill,
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

  let exitCode = 0;
  if (results.length > 0) {
    out([
      "",
      formatAgentComparison(results),
      "",
      "Measured, not modelled: charges and emails by the provider's ledger, per order, after the last orchestrator",
      "exited; model calls counted by the model as it answers, per task and turn, in Redis (a kill loses none):",
      "repeated = asked again for a turn whose answer the loop had already acted on; cut off = asked again for a",
      "turn whose answer a kill cut off before the loop took it; tool calls, re-sends and once errors counted by",
      "the orchestrator in Redis; task time from a task's first start to its finish, across restarts.",
      "",
    ]);
    for (const f of results) {
      out([
        `${`${f.mode}:`.padEnd(6)} ${f.chargesMade} charges for ${f.chargesExpected} orders (${f.chargesDuplicate} duplicate), ${f.duplicateEmails} duplicate emails, ${f.modelCallsRepeated} model calls repeated.`,
      ]);
    }
    const once = results.find((f) => f.mode === "once");
    const failures = once
      ? [
          once.duplicateEffects > 0 && `${once.duplicateEffects} duplicate effects`,
          once.modelCallsRepeated > 0 && `${once.modelCallsRepeated} model calls for recorded turns`,
          once.conflicts > 0 && `${once.conflicts} once errors`,
        ].filter((failure) => typeof failure === "string")
      : [];
    if (failures.length > 0) {
      out([`FAIL under once: ${failures.join(", ")}`]);
      exitCode = 1;
    }
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

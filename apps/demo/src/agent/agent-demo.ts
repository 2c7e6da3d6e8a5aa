import { writeFileSync } from "node:fs";
import { Progress } from "../progress.js";
import type { AgentFigures } from "./agent-figures.js";
import { formatAgentComparison } from "./format-agent-comparison.js";
import { FRAMEWORKS, type FrameworkName } from "./frameworks/agent-frameworks.js";
import { runAgentMode } from "./run-agent-mode.js";

export interface AgentDemoOptions {
  /** The frameworks to run, one after another: each runs every mode. */
  frameworks: readonly FrameworkName[];
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
  /** Write the figures here as JSON, per framework: `{ "ai": { "naive": {...}, "once": {...} }, … }`. */
  json?: string;
  signal: AbortSignal;
}

/**
 * `pnpm demo -- --agent [--framework F]`: each framework's own agent loop on the same order tasks, naive then
 * once, each with its orchestrator SIGKILLed and restarted mid-run; prints each framework's figures side by
 * side. Returns the exit status: 1 when once let a duplicate effect through, asked the model again for a turn
 * it had recorded, or met a once error, on any framework; 0 otherwise.
 */
export async function agentDemo(options: AgentDemoOptions): Promise<number> {
  const out = (lines: string[]) => process.stdout.write(`${lines.join("\n")}\n`);
  out([
    `once demo --agent · run ${options.runId}`,
    `  ${options.tasks} order tasks per framework and mode, ${options.concurrency} at a time: read the order → charge it + email the receipt → mark it paid → answer`,
    `  frameworks: ${options.frameworks.map((name) => `${name} (${FRAMEWORKS[name].loop})`).join("; ")}`,
    "  the model: scripted on each framework's own mock, nondeterministic (asked again, another amount and new tool-call ids); latency 5–25 ms, one call in ten ~10× slower",
    `  the orchestrator waits ${options.timeoutMs} ms for a tool call, then re-sends it (waits doubling to ${8 * options.timeoutMs} ms)${options.kill ? "; it is SIGKILLed a third and two thirds of the way through, and restarted with the unfinished tasks" : ""}`,
    `  provider latency p50 ${options.latency.p50Ms} ms, p99 ${options.latency.p99Ms} ms (seed ${options.seed}); Redis: ${options.redisUrl} (${options.redisSource})`,
    "",
  ]);

  const byFramework = new Map<FrameworkName, AgentFigures[]>();
  for (const framework of options.frameworks) {
    const results: AgentFigures[] = [];
    for (const mode of options.modes) {
      if (options.signal.aborted) break;
      const progress = new Progress();
      try {
        results.push(
          await runAgentMode({
            framework,
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
    if (results.length > 0) byFramework.set(framework, results);
  }

  let exitCode = 0;
  const failures: string[] = [];
  for (const [framework, results] of byFramework) {
    out([``, `${framework}: ${FRAMEWORKS[framework].loop}`, formatAgentComparison(results)]);
    const once = results.find((f) => f.mode === "once");
    if (once) {
      failures.push(
        ...[
          once.duplicateEffects > 0 && `${framework}: ${once.duplicateEffects} duplicate effects`,
          once.modelCallsRepeated > 0 &&
            `${framework}: ${once.modelCallsRepeated} model calls for recorded turns`,
          once.conflicts > 0 && `${framework}: ${once.conflicts} once errors`,
        ].filter((failure) => typeof failure === "string"),
      );
    }
  }
  if (byFramework.size > 0) {
    out([
      "",
      "Measured, not modelled: charges and emails by the provider's ledger, per order, after the last orchestrator",
      "exited; model calls counted by the model as it answers, per task and turn, in Redis (a kill loses none):",
      "repeated = asked again for a turn whose answer the loop had already acted on; cut off = asked again for a",
      "turn whose answer a kill cut off before the loop took it; tool calls, re-sends and once errors counted by",
      "the orchestrator in Redis; task time from a task's first start to its finish, across restarts.",
      "",
    ]);
    for (const [framework, results] of byFramework) {
      for (const f of results) {
        out([
          `${`${framework} ${f.mode}:`.padEnd(22)} ${f.chargesMade} charges for ${f.chargesExpected} orders (${f.chargesDuplicate} duplicate), ${f.duplicateEmails} duplicate emails, ${f.modelCallsRepeated} model calls repeated.`,
        ]);
      }
    }
    if (failures.length > 0) {
      out([`FAIL under once: ${failures.join(", ")}`]);
      exitCode = 1;
    }
  }
  if (options.json) {
    const figures = Object.fromEntries(
      [...byFramework].map(([framework, results]) => [
        framework,
        Object.fromEntries(results.map((f) => [f.mode, f])),
      ]),
    );
    writeFileSync(options.json, `${JSON.stringify(figures, null, 2)}\n`);
    out([`figures written to ${options.json}`]);
  }
  return exitCode;
}

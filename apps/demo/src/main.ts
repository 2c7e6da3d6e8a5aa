// `pnpm demo [-- --agent [--approvals] --tasks 200 --workers 2 --timeout-ms 250 --kill|--no-kill --mode both|naive|once
//   --json PATH --trace --concurrency 50 --seed N --p50 50 --p99 2000 --backend redis|postgres
//   --framework F]`
// Runs the same order workload naive (a fresh key per retry, the article's WRONG example) and with once,
// each with its own payments provider, workers, queue and keys, then prints them side by side.
// `pnpm demo -- --agent [--framework ai|openai-agents|langgraph|mastra|all] […]` runs an agent framework's own
// loop instead, naive vs once, framework by framework (see agent/agent-demo.ts); `--agent --approvals` the AI
// SDK's loop with a charge that needs a person's approval (see agent/approvals/approvals-demo.ts).
// Exit 1 when once let a duplicate effect through, 2 when the demo could not run, 130 when interrupted.
import { randomBytes, randomInt } from "node:crypto";
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { formatSpanTree, type OtlpReceiver, startOtlpReceiver } from "@once/trace-receiver";
import { agentDemo } from "./agent/agent-demo.js";
import { approvalsDemo } from "./agent/approvals/approvals-demo.js";
import { FRAMEWORKS, type FrameworkName, isFrameworkName } from "./agent/frameworks/agent-frameworks.js";
import { findPostgres } from "./find-postgres.js";
import { findRedis, NoRedisError } from "./find-redis.js";
import { formatComparison } from "./format-comparison.js";
import type { ModeFigures } from "./mode-figures.js";
import { Progress } from "./progress.js";
import { InterruptedError, runMode } from "./run-mode.js";

const USAGE = `usage: pnpm demo [-- options]
  --agent            an agent framework's own loop instead of the queue: naive (plain tools, each call
                     re-sent on timeout, a task restarted from scratch after the orchestrator is
                     killed) vs once (the framework's once adapter: recorded turns replayed, tool
                     calls keyed from them); --kill SIGKILLs the orchestrator a third and two thirds
                     of the way through
  --approvals        with --agent: the AI SDK's loop with a charge over 3000 cents needing a
                     person's approval: an approver process decides (some approved, some denied,
                     one task cancelled); the orchestrator is SIGKILLed while requests are pending
                     and again after the decisions. naive: the SDK's own needsApproval, the
                     decision in the messages of the orchestrator process; once: the record's
                     (default 12 tasks)
  --decision-ms N    with --approvals: how long the approver takes to decide (default 2000)
  --framework F      with --agent: ai (default) | openai-agents | langgraph | mastra | all (each,
                     one after another)
  --tasks N          order tasks per mode (default 200; 100 with --agent)
  --workers N        worker processes (default 2; not with --agent)
  --timeout-ms N     the orchestrator's first wait per call before it re-sends; later waits
                     double, up to 8× (default 250)
  --kill / --no-kill SIGKILL worker 1 a third of the way through, then restart it (default --kill);
                     with --agent, the orchestrator, twice
  --mode M           both | naive | once (default both)
  --json PATH        write the figures as JSON: { "naive": {...}, "once": {...} }; with --agent, per
                     framework: { "ai": { "naive": {...}, "once": {...} }, ... }
  --trace            collect every process's spans in this process (an OTLP/HTTP JSON receiver the
                     children export to, instead of OTEL_EXPORTER_OTLP_ENDPOINT) and print the trace
                     tree of one task per mode (not with --agent)
  --concurrency N    tasks in flight at once (default 25; 20 with --agent)
  --seed N           seed of the provider's latency (default random)
  --p50 N --p99 N    the provider's latency quantiles in ms (default 50 and 2000)
  --backend B        redis (default) | postgres: the queue on BullMQ's PostgreSQL backend and the
                     store a PostgresStore (POSTGRES_URL, else 127.0.0.1:5432, else a throwaway server)
Tracing to Jaeger instead: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 pnpm demo`;

function usage(message: string): never {
  process.stderr.write(`demo: ${message}\n${USAGE}\n`);
  process.exit(2);
}

function parseCommandLine() {
  // `pnpm demo -- --tasks 50` hands the script a literal `--` first.
  const argv = process.argv.slice(2);
  if (argv[0] === "--") argv.shift();
  try {
    return parseArgs({
      args: argv,
      allowNegative: true,
      options: {
        agent: { type: "boolean", default: false },
        approvals: { type: "boolean", default: false },
        "decision-ms": { type: "string", default: "2000" },
        framework: { type: "string" },
        // Defaults below: they depend on --agent.
        tasks: { type: "string" },
        workers: { type: "string" },
        "timeout-ms": { type: "string", default: "250" },
        kill: { type: "boolean", default: true },
        mode: { type: "string", default: "both" },
        json: { type: "string" },
        trace: { type: "boolean", default: false },
        concurrency: { type: "string" },
        seed: { type: "string" },
        p50: { type: "string", default: "50" },
        p99: { type: "string", default: "2000" },
        backend: { type: "string", default: "redis" },
        help: { type: "boolean", short: "h", default: false },
      },
    }).values;
  } catch (error) {
    usage((error as Error).message);
  }
}

function integer(name: string, text: string | undefined, min = 1): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min)
    usage(`--${name} must be an integer ≥ ${min}, got '${text}'`);
  return value;
}

const args = parseCommandLine();
if (args.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const MODES = { both: ["naive", "once"], naive: ["naive"], once: ["once"] } as const;
const modes: readonly ("naive" | "once")[] =
  args.mode in MODES
    ? MODES[args.mode as keyof typeof MODES]
    : usage(`--mode must be both, naive or once, got '${args.mode}'`);
if (args.approvals && !args.agent) usage("--approvals is for the agent demo: add --agent");
if (args.approvals && (!args.kill || args.concurrency !== undefined))
  usage(
    "--approvals runs every task at once and kills the orchestrator twice: leave out --no-kill and --concurrency",
  );
if (args.approvals && args.framework !== undefined && args.framework !== "ai")
  usage("--approvals runs the AI SDK's loop only: leave out --framework");
if (!args.agent && args.framework !== undefined) usage("--framework is for the agent demo: add --agent");
const FRAMEWORK_CHOICES = [...Object.keys(FRAMEWORKS), "all"];
if (args.framework !== undefined && !FRAMEWORK_CHOICES.includes(args.framework))
  usage(`--framework must be one of ${FRAMEWORK_CHOICES.join(", ")}, got '${args.framework}'`);
const frameworks: FrameworkName[] =
  args.framework === "all"
    ? (Object.keys(FRAMEWORKS) as FrameworkName[])
    : [isFrameworkName(args.framework ?? "ai") ? ((args.framework ?? "ai") as FrameworkName) : "ai"];
if (args.agent && (args.workers !== undefined || args.trace))
  usage("--workers and --trace are for the queue demo: the agent demo has no workers, and no tracing");
if (args.backend !== "redis" && args.backend !== "postgres")
  usage(`--backend must be redis or postgres, got '${args.backend}'`);
if (args.agent && args.backend !== "redis")
  usage("--backend postgres is for the queue demo: the agent demo runs on Redis only");
const backend: "redis" | "postgres" = args.backend;
const settings = {
  tasks: integer("tasks", args.tasks ?? (args.approvals ? "12" : args.agent ? "100" : "200")),
  workers: integer("workers", args.workers ?? "2"),
  timeoutMs: integer("timeout-ms", args["timeout-ms"]),
  concurrency: integer("concurrency", args.concurrency ?? (args.agent ? "20" : "25")),
  seed: args.seed === undefined ? randomInt(2 ** 31) : integer("seed", args.seed, 0),
  latency: { p50Ms: integer("p50", args.p50), p99Ms: integer("p99", args.p99) },
};
if (settings.latency.p99Ms < settings.latency.p50Ms) usage("--p99 must be at least --p50");

// A closed pipe (`pnpm demo | head`) must not kill the demo before it has stopped its processes and
// deleted its keys: the rest of the output is dropped instead.
process.stdout.on("error", () => {});

const interrupted = new AbortController();
process.once("SIGINT", () => {
  process.stderr.write("\ndemo: interrupted; finishing the running tasks and cleaning up\n");
  interrupted.abort();
});

let exitCode = 0;
let receiver: OtlpReceiver | undefined;
// The Redis backend needs a Redis; the PostgreSQL backend needs nothing else.
const redis =
  backend === "redis"
    ? await findRedis().catch((error: unknown) => {
        process.stderr.write(`demo: ${error instanceof NoRedisError ? error.message : String(error)}\n`);
        process.exit(2);
      })
    : undefined;
const postgres =
  backend === "postgres"
    ? await findPostgres().catch((error: unknown) => {
        process.stderr.write(
          `demo: no PostgreSQL: ${error instanceof Error ? error.message : String(error)}\n`,
        );
        process.exit(2);
      })
    : undefined;
if (args.agent) {
  if (!redis) throw new Error("the agent demo needs Redis");
  try {
    const common = {
      modes,
      redisUrl: redis.url,
      redisSource: redis.source,
      runId: randomBytes(4).toString("hex"),
      tasks: settings.tasks,
      timeoutMs: settings.timeoutMs,
      latency: settings.latency,
      seed: settings.seed,
      ...(args.json === undefined ? {} : { json: args.json }),
      signal: interrupted.signal,
    };
    exitCode = args.approvals
      ? await approvalsDemo({ ...common, decisionDelayMs: integer("decision-ms", args["decision-ms"], 0) })
      : await agentDemo({
          ...common,
          frameworks,
          concurrency: settings.concurrency,
          kill: args.kill,
        });
    if (interrupted.signal.aborted) exitCode = 130;
  } catch (error) {
    process.stderr.write(`demo: ${error instanceof Error ? error.message : String(error)}\n`);
    exitCode = error instanceof InterruptedError ? 130 : 2;
  } finally {
    await redis.stop();
  }
  process.exit(exitCode);
}
try {
  let childEnv: NodeJS.ProcessEnv = process.env;
  let tracingNote = process.env.OTEL_EXPORTER_OTLP_ENDPOINT
    ? `spans to ${process.env.OTEL_EXPORTER_OTLP_ENDPOINT} (one trace per task)`
    : "off (--trace, or set OTEL_EXPORTER_OTLP_ENDPOINT)";
  if (args.trace) {
    receiver = await startOtlpReceiver();
    // Every child exports OTLP/HTTP JSON to the receiver in this process; the trace tree is printed at the end.
    const {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: _e,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: _p,
      ...rest
    } = process.env;
    childEnv = {
      ...rest,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    };
    tracingNote = `in-process OTLP receiver at ${receiver.url}`;
  }
  const runId = randomBytes(4).toString("hex");
  process.stdout.write(
    [
      `once demo · run ${runId}`,
      `  ${settings.tasks} tasks per mode (read order → charge → email → set status), ${settings.concurrency} at a time`,
      `  ${settings.workers} worker processes${args.kill ? ", worker 1 SIGKILLed and restarted a third of the way through" : ""}`,
      `  orchestrator waits ${settings.timeoutMs} ms for a call, then re-sends it (waits doubling to ${8 * settings.timeoutMs} ms); provider latency p50 ${settings.latency.p50Ms} ms, p99 ${settings.latency.p99Ms} ms (seed ${settings.seed})`,
      redis
        ? `  Redis: ${redis.url} (${redis.source}); tracing: ${tracingNote}`
        : `  PostgreSQL: ${postgres?.url} (${postgres?.source}): queue on BullMQ's PostgreSQL backend, store a PostgresStore; tracing: ${tracingNote}`,
      "",
    ].join("\n"),
  );

  const results: ModeFigures[] = [];
  const traced = new Map<"naive" | "once", { taskId: string; traceId: string }[]>();
  for (const mode of modes) {
    if (interrupted.signal.aborted) break;
    const progress = new Progress();
    try {
      const run = await runMode({
        mode,
        backend,
        redisUrl: redis?.url ?? "",
        ...(postgres ? { postgresUrl: postgres.url } : {}),
        runId,
        tasks: settings.tasks,
        workers: settings.workers,
        concurrency: settings.concurrency,
        workerConcurrency: 50,
        timeoutMs: settings.timeoutMs,
        kill: args.kill,
        latency: settings.latency,
        seed: settings.seed,
        childEnv,
        report: (event) => progress.report(event),
        signal: interrupted.signal,
      });
      results.push(run.figures);
      traced.set(mode, run.traceCandidates);
    } finally {
      progress.done();
    }
  }

  if (results.length > 0) {
    process.stdout.write(`\n${formatComparison(results)}\n\n`);
    process.stdout.write(
      [
        "Measured, not modelled: charges and emails by the provider's ledger (per order, after the queue drained);",
        "dedup hits = re-sends BullMQ refused because the job id existed + worker claims the store answered with",
        "a stored result; in-flight waits and reconciles counted at the store by the workers; unknown = records",
        "left unknown; latency per tool call, first send to answer, at the orchestrator.",
        "",
      ].join("\n"),
    );
    const naive = results.find((f) => f.mode === "naive");
    const once = results.find((f) => f.mode === "once");
    if (naive) {
      process.stdout.write(
        `naive: ${naive.chargesMade} charges for ${naive.chargesExpected} orders (${naive.chargesDuplicate} duplicate), ${naive.duplicateEmails} duplicate emails.\n`,
      );
    }
    if (once) {
      process.stdout.write(
        `once:  ${once.chargesMade} charges for ${once.chargesExpected} orders (${once.chargesDuplicate} duplicate), ${once.duplicateEmails} duplicate emails.\n`,
      );
      if (once.duplicateEffects > 0) {
        process.stdout.write(`FAIL: once let ${once.duplicateEffects} duplicate effects through\n`);
        exitCode = 1;
      }
    }
  }
  if (args.json) {
    const out = Object.fromEntries(results.map((f) => [f.mode, f]));
    writeFileSync(args.json, `${JSON.stringify(out, null, 2)}\n`);
    process.stdout.write(`figures written to ${args.json}\n`);
  }
  if (receiver) {
    const spans = receiver.spans;
    const count = (traceId: string, name: string) =>
      spans.filter((span) => span.traceId === traceId && span.name === name).length;
    // The story of each mode in one task: naive, a retried charge that charged twice; once, a retried
    // charge that charged once. A trace is only whole if the worker that ran the charge exported its spans
    // (a SIGKILLed one could not), so fall back to any whole trace, then to any.
    const telling = {
      naive: (traceId: string) => count(traceId, "effect charge_customer") >= 2,
      once: (traceId: string) =>
        count(traceId, "effect charge_customer") === 1 && count(traceId, "call charge_customer") >= 2,
    };
    for (const [mode, candidates] of traced) {
      const pick =
        candidates.find((c) => telling[mode](c.traceId)) ??
        candidates.find((c) => count(c.traceId, "effect charge_customer") > 0) ??
        candidates[0];
      if (!pick) continue;
      process.stdout.write(
        `\n[${mode}] trace of task ${pick.taskId}:\n${formatSpanTree(spans, pick.traceId)}\n`,
      );
    }
  }
  if (interrupted.signal.aborted) exitCode = 130;
} catch (error) {
  process.stderr.write(`demo: ${error instanceof Error ? error.message : String(error)}\n`);
  exitCode = error instanceof InterruptedError ? 130 : 2;
} finally {
  await receiver?.close();
  await redis?.stop();
  await postgres?.stop();
}
process.exit(exitCode);

// `node dist/main.js --mode once|naive [--tasks N] [--task-prefix ID] [--concurrency N] [--timeout-ms N]
//   [--step-deadline-ms N] [--redis-url URL] [--queue NAME] [--prefix P] [--seed-orders]
//   [--count-outcomes] [--lease-ms N --lock-ms N --stalled-ms N] [--retention-ms N] [--resume-gap-ms N]
//   [--summary PATH] [--events] [--postgres-url URL [--schema S]]`
// With --postgres-url everything is on PostgreSQL under schema S (default once_orders), as the workers'.
// Runs order tasks through the workers listening on the queue. stdout is JSON lines: one `task` line per
// finished task (progress), `step` lines with --events, and a last `summary` line; --summary writes the
// full figures (keys, traces) to a file. Exit 0 when every task finished, 3 when some failed (see the
// summary), 2 when it could not run. SIGTERM/SIGINT: no new tasks, running ones finish; a second signal
// exits at once (130) — the journal lets a restarted orchestrator resume with the same keys.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { startTracing } from "@once/order-agent";
import type { OrchestratorMode } from "./order-orchestrator.js";
import { runOrderTasks } from "./run-order-tasks.js";
import { summarizeRun } from "./summarize-run.js";

function fail(message: string): never {
  process.stderr.write(`orchestrator: ${message}\n`);
  process.exit(2);
}

function parseCommandLine() {
  try {
    return parseArgs({
      options: {
        mode: { type: "string", default: "once" },
        tasks: { type: "string", default: "10" },
        "task-prefix": { type: "string", default: "task" },
        concurrency: { type: "string", default: "50" },
        "timeout-ms": { type: "string", default: "1000" },
        "step-deadline-ms": { type: "string", default: "60000" },
        "redis-url": { type: "string" },
        "postgres-url": { type: "string" },
        schema: { type: "string" },
        queue: { type: "string" },
        prefix: { type: "string" },
        "seed-orders": { type: "boolean", default: false },
        "count-outcomes": { type: "boolean", default: false },
        "lease-ms": { type: "string" },
        "lock-ms": { type: "string" },
        "stalled-ms": { type: "string" },
        "retention-ms": { type: "string" },
        "resume-gap-ms": { type: "string" },
        summary: { type: "string" },
        events: { type: "boolean", default: false },
      },
    }).values;
  } catch (error) {
    fail((error as Error).message);
  }
}

function integer(name: string, text: string | undefined, min = 1): number | undefined {
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min)
    fail(`--${name} must be an integer ≥ ${min}, got '${text}'`);
  return value;
}

function emit(line: object): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

const args = parseCommandLine();
const env = process.env;
if (args.mode !== "once" && args.mode !== "naive") fail(`--mode must be once or naive, got '${args.mode}'`);
const mode: OrchestratorMode = args.mode;
const leaseMs = integer("lease-ms", args["lease-ms"] ?? env.ONCE_LEASE_MS);
const lockDurationMs = integer("lock-ms", args["lock-ms"] ?? env.ONCE_LOCK_MS);
const stalledIntervalMs = integer("stalled-ms", args["stalled-ms"] ?? env.ONCE_STALLED_MS);
const retentionMs = integer("retention-ms", args["retention-ms"] ?? env.ONCE_RETENTION_MS);
const resumeGapMs = integer("resume-gap-ms", args["resume-gap-ms"], 0);
const stop = new AbortController();
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    if (stop.signal.aborted) process.exit(130);
    stop.abort();
  });
}

// Before the dispatcher exists: once's instruments bind to the providers present when they are made.
const tracing = await startTracing({ serviceName: "once-orchestrator" });
let exitCode = 0;
try {
  const run = await runOrderTasks({
    redisUrl: args["redis-url"] ?? env.REDIS_URL ?? "redis://127.0.0.1:6379",
    queue: args.queue ?? env.ONCE_QUEUE ?? "orders",
    prefix: args.prefix ?? env.ONCE_PREFIX ?? "once:",
    mode,
    tasks: integer("tasks", args.tasks) ?? 10,
    taskPrefix: args["task-prefix"],
    concurrency: integer("concurrency", args.concurrency) ?? 50,
    timeoutMs: integer("timeout-ms", args["timeout-ms"]) ?? 1000,
    stepDeadlineMs: integer("step-deadline-ms", args["step-deadline-ms"]) ?? 60_000,
    seedOrders: args["seed-orders"],
    countOutcomes: args["count-outcomes"],
    worker: {
      ...(leaseMs === undefined ? {} : { leaseMs }),
      ...(lockDurationMs === undefined ? {} : { lockDurationMs }),
      ...(stalledIntervalMs === undefined ? {} : { stalledIntervalMs }),
    },
    ...(retentionMs === undefined ? {} : { retentionMs }),
    ...(resumeGapMs === undefined ? {} : { resumeGapMs }),
    ...(args.events ? { onStep: emit } : {}),
    onTask: (report, progress) =>
      emit({ type: "task", taskId: report.taskId, ok: report.ok, error: report.error, ...progress }),
    signal: stop.signal,
    ...(args["postgres-url"] === undefined
      ? {}
      : { postgres: { url: args["postgres-url"], schema: args.schema ?? "once_orders" } }),
  });
  const figures = summarizeRun(run);
  if (args.summary) writeFileSync(args.summary, `${JSON.stringify(figures, null, 2)}\n`);
  const { effectKeys: _keys, retriedTasks: _retried, traces: _traces, ...brief } = figures;
  emit({ type: "summary", ...brief });
  exitCode = figures.tasksFailed > 0 || stop.signal.aborted ? 3 : 0;
} catch (error) {
  process.stderr.write(
    `orchestrator: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}\n`,
  );
  exitCode = 2;
} finally {
  await tracing.shutdown();
}
process.exit(exitCode);

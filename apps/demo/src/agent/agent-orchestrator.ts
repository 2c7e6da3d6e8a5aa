// `node dist/agent/agent-orchestrator.js --framework ai|openai-agents|langgraph|mastra --mode naive|once
//   --redis-url URL --prefix P --payments-url URL --task-prefix ID --task-numbers 1,2,… [--concurrency 20]
//   [--timeout-ms 250] [--lease-ms 30000]`
// The agent demo's orchestrator process: runs the given order tasks, each the framework's own agent loop on a
// scripted order-agent model (the framework's own mock), every tool call re-sent when its wait times out.
// naive: plain tools straight to the provider; once: the loop through the framework's once adapter, on the
// store in Redis. stdout is JSON lines: `start` when a
// task starts, `task` when it finished. The demo SIGKILLs it mid-run and starts it again with the tasks not
// finished: naive starts them from scratch, once runs the same taskIds again and resumes them. Every count is
// written to Redis as it happens, so a kill loses none. Exit 0 when every task was run, 2 when it could not run.
import { parseArgs } from "node:util";
import { OnceError } from "@once/core";
import { orderFor } from "@once/orchestrator";
import { keyLayout, openOrderStore, orderAgentTools, RedisCounters, RedisOrderBook } from "@once/order-agent";
import { Redis } from "ioredis";
import { AGENT_COUNTERS, modelCallLogKey } from "./agent-keys.js";
import { FRAMEWORKS, isFrameworkName } from "./frameworks/agent-frameworks.js";
import { ModelCallLog } from "./model-call-log.js";

function fail(message: string): never {
  process.stderr.write(`agent orchestrator: ${message}\n`);
  process.exit(2);
}

function parseCommandLine() {
  try {
    return parseArgs({
      options: {
        framework: { type: "string", default: "ai" },
        mode: { type: "string" },
        "redis-url": { type: "string" },
        prefix: { type: "string" },
        "payments-url": { type: "string" },
        "task-prefix": { type: "string" },
        "task-numbers": { type: "string" },
        concurrency: { type: "string", default: "20" },
        "timeout-ms": { type: "string", default: "250" },
        "lease-ms": { type: "string", default: "30000" },
      },
    }).values;
  } catch (error) {
    fail((error as Error).message);
  }
}

function required(name: string, value: string | undefined): string {
  if (!value) fail(`--${name} is required`);
  return value;
}

function integer(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 1) fail(`--${name} must be an integer ≥ 1, got '${text}'`);
  return value;
}

const emit = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);

const args = parseCommandLine();
const mode: "naive" | "once" =
  args.mode === "naive" || args.mode === "once"
    ? args.mode
    : fail(`--mode must be naive or once, got '${args.mode}'`);
const frameworkName = args.framework;
if (!isFrameworkName(frameworkName))
  fail(`--framework must be one of ${Object.keys(FRAMEWORKS).join(", ")}, got '${frameworkName}'`);
const framework = FRAMEWORKS[frameworkName];
const layout = keyLayout(required("prefix", args.prefix));
const taskPrefix = required("task-prefix", args["task-prefix"]);
const taskNumbers = required("task-numbers", args["task-numbers"])
  .split(",")
  .map((n) => integer("task-numbers", n));
const concurrency = integer("concurrency", args.concurrency);
const timeoutMs = integer("timeout-ms", args["timeout-ms"]);
const leaseMs = integer("lease-ms", args["lease-ms"]);

const redis = new Redis(required("redis-url", args["redis-url"]), { maxRetriesPerRequest: null });
const orders = new RedisOrderBook({ redis, prefix: layout.orders });
const declared = orderAgentTools({ paymentsUrl: required("payments-url", args["payments-url"]), orders });
const counters = new RedisCounters(redis, layout.stats);
const modelCalls = new ModelCallLog(redis, modelCallLogKey(layout));
const store = mode === "once" ? await openOrderStore({ redis, layout }) : undefined;

// Awaited, so a count is in Redis before what it counts goes on; but a counter that fails to write must not
// fail the task it counts: the figures are then low, never invented.
const count = (field: string) => counters.increment(field).catch(() => {});
const isOnceError = (error: unknown): boolean =>
  OnceError.is(error) || (error instanceof Error && error.cause !== undefined && isOnceError(error.cause));

/** One order task: the framework's loop as anyone writes it, with the orchestrator's re-send around each tool call. */
async function runTask(n: number): Promise<void> {
  const taskId = `${taskPrefix}-${n}`;
  const { orderId } = orderFor(taskPrefix, n);
  emit({ type: "start", taskId, task: n });
  try {
    await framework.runTask({
      mode,
      taskId,
      orderId,
      ...(store ? { store } : {}),
      tools: declared.all,
      leaseMs,
      prompt: `Settle order ${orderId}: read it, charge the customer, email the receipt, mark it paid.`,
      answered: (turn) => modelCalls.answered(taskId, turn),
      taken: (turn) => modelCalls.taken(taskId, turn),
      resend: {
        timeoutMs,
        onCall: () => count(AGENT_COUNTERS.toolCalls),
        onResend: () => count(AGENT_COUNTERS.resends),
        onError: async (_tool, error) => {
          if (isOnceError(error)) await count(AGENT_COUNTERS.conflicts);
        },
      },
    });
    emit({ type: "task", taskId, task: n, ok: true });
  } catch (error) {
    if (isOnceError(error)) await count(AGENT_COUNTERS.conflicts);
    emit({
      type: "task",
      taskId,
      task: n,
      ok: false,
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    });
  }
}

let next = 0;
const lane = async () => {
  while (next < taskNumbers.length) await runTask(taskNumbers[next++] as number);
};
await Promise.all(Array.from({ length: Math.min(concurrency, taskNumbers.length) }, lane));
await redis.quit();
process.exit(0);

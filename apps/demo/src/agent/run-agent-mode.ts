import { fileURLToPath } from "node:url";
import { orderFor, percentile } from "@once/orchestrator";
import { keyLayout, RedisCounters, RedisOrderBook } from "@once/order-agent";
import { startPaymentsServer } from "@once/payments";
import { cleanupPrefix, NodeChild } from "@once/support";
import { Redis } from "ioredis";
import { InterruptedError, type ModeEvent } from "../run-mode.js";
import type { AgentFigures } from "./agent-figures.js";
import { AGENT_COUNTERS, modelCallLogKey } from "./agent-keys.js";
import type { FrameworkName } from "./frameworks/agent-frameworks.js";
import { ModelCallLog } from "./model-call-log.js";

const AGENT_ORCHESTRATOR_MAIN = fileURLToPath(new URL("./agent-orchestrator.js", import.meta.url));

export interface AgentModeOptions {
  framework: FrameworkName;
  mode: "naive" | "once";
  redisUrl: string;
  /** Random per run: names the keys and tasks of this run. */
  runId: string;
  tasks: number;
  /** Tasks the orchestrator runs at the same time. */
  concurrency: number;
  /** The orchestrator's first wait for a tool call before it re-sends it; later waits double, up to 8×. */
  timeoutMs: number;
  /** SIGKILL the orchestrator a third and two thirds of the way through, and restart it each time. */
  kill: boolean;
  latency: { p50Ms: number; p99Ms: number };
  seed: number;
  report: (event: ModeEvent) => void;
  /** Aborting kills the orchestrator and ends the run, measuring nothing. */
  signal?: AbortSignal;
}

/**
 * The lease of the orchestrator's calls (model turns and tool calls alike): once's default. A killed
 * orchestrator's calls are taken over when its process's liveness entry runs out (about a second), not its lease.
 */
const LEASE_MS = 30_000;

/** A line the agent orchestrator prints: a task started, or finished. */
type TaskLine = {
  type: "start" | "task";
  taskId: string;
  task: number;
  ok?: boolean;
  error?: string;
};

/**
 * One mode of the agent demo for one framework: a payments provider, the orders, and an orchestrator process
 * running the framework's loop for every order task — SIGKILLed a third and two thirds of the way through (with `kill`), each
 * time started again with the tasks it had not finished, until all are. Then the figures, counted at the
 * provider's ledger, from the Redis counts the orchestrators made, and by this process's clock.
 */
export async function runAgentMode(options: AgentModeOptions): Promise<AgentFigures> {
  const { framework, mode, report } = options;
  const layout = keyLayout(`once-demo:${options.runId}:agent-${framework}-${mode}:`);
  const taskPrefix = `agent-${framework}-${mode}-${options.runId}`;
  const label = `${framework} ${mode}`;
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  await redis.connect();
  const payments = await startPaymentsServer({ latency: options.latency, seed: options.seed });
  let orchestrator: NodeChild<TaskLine> | undefined;
  const stopOnAbort = () => void orchestrator?.kill("SIGKILL");
  options.signal?.addEventListener("abort", stopOnAbort, { once: true });
  try {
    const orders = new RedisOrderBook({ redis, prefix: layout.orders });
    for (let n = 1; n <= options.tasks; n++) await orders.create(orderFor(taskPrefix, n));

    const unfinished = new Set(Array.from({ length: options.tasks }, (_, i) => i + 1));
    // A task's time runs from its first start, in whichever orchestrator, to its finish.
    const firstStart = new Map<number, number>();
    const taskMs: number[] = [];
    let ok = 0;
    let failed = 0;
    const killAt = options.kill
      ? [1, 2].map((third) => Math.ceil((options.tasks * third) / 3)).filter((at) => at < options.tasks)
      : [];
    let kills = 0;
    const started = performance.now();
    let lastFinish = started;

    while (unfinished.size > 0) {
      if (options.signal?.aborted) throw new InterruptedError(mode);
      let killed = false;
      const onLine = (line: TaskLine, child: NodeChild<TaskLine>) => {
        const now = performance.now();
        if (line.type === "start" && !firstStart.has(line.task)) firstStart.set(line.task, now);
        if (line.type !== "task" || !unfinished.delete(line.task)) return;
        taskMs.push(now - (firstStart.get(line.task) ?? now));
        lastFinish = now;
        if (line.ok) ok++;
        else {
          failed++;
          report({ type: "note", mode: label, text: `task ${line.taskId} failed: ${line.error}` });
        }
        report({ type: "progress", mode: label, done: ok, failed, total: options.tasks });
        // Killed while the other tasks' calls are in flight: some have charged, some are mid-turn.
        const finished = ok + failed;
        const due = kills < killAt.length && finished >= (killAt[kills] as number);
        if (killed || !due || unfinished.size === 0) return;
        killed = true;
        kills++;
        void child.kill("SIGKILL");
        report({
          type: "note",
          mode: label,
          text: `SIGKILLed the orchestrator (pid ${child.pid}) after ${finished} tasks; restarting it with the ${unfinished.size} unfinished`,
        });
      };
      const child = NodeChild.start<TaskLine>({
        script: AGENT_ORCHESTRATOR_MAIN,
        args: [
          "--framework",
          framework,
          "--mode",
          mode,
          "--redis-url",
          options.redisUrl,
          "--prefix",
          layout.root,
          "--payments-url",
          payments.url,
          "--task-prefix",
          taskPrefix,
          "--task-numbers",
          [...unfinished].join(","),
          "--concurrency",
          String(options.concurrency),
          "--timeout-ms",
          String(options.timeoutMs),
          "--lease-ms",
          String(LEASE_MS),
        ],
        name: `[${framework} ${mode}] agent orchestrator`,
        onEvent: onLine,
        onOutput: (line) => process.stderr.write(`[${framework} ${mode}] agent orchestrator: ${line}\n`),
      });
      orchestrator = child;
      const [code, signal] = await child.exited;
      if (options.signal?.aborted) throw new InterruptedError(mode);
      if (killed) continue;
      if (code !== 0) throw new Error(`the ${mode} agent orchestrator failed (${signal ?? `exit ${code}`})`);
      if (unfinished.size > 0)
        throw new Error(`the ${mode} agent orchestrator exited with ${unfinished.size} tasks not run`);
    }

    const ledger = payments.ledger();
    const counts = await new RedisCounters(redis, layout.stats).read();
    const answers = await new ModelCallLog(redis, modelCallLogKey(layout)).read();
    const sorted = taskMs.sort((a, b) => a - b);
    return {
      framework,
      mode,
      tasks: options.tasks,
      tasksOk: ok,
      tasksFailed: failed,
      orchestratorKills: kills,
      toolCalls: counts[AGENT_COUNTERS.toolCalls] ?? 0,
      toolCallsResent: counts[AGENT_COUNTERS.resends] ?? 0,
      chargesExpected: options.tasks,
      chargesMade: ledger.charges.total,
      chargesDuplicate: ledger.charges.duplicates,
      chargesMissing: options.tasks - Object.keys(ledger.charges.byOrder).length,
      emailsExpected: options.tasks,
      emailsSent: ledger.emails.total,
      duplicateEmails: ledger.emails.duplicates,
      duplicateEffects: ledger.charges.duplicates + ledger.emails.duplicates,
      modelCalls: answers.answers,
      modelCallsRepeated: answers.repeated,
      modelCallsCutOff: answers.cutOff,
      conflicts: counts[AGENT_COUNTERS.conflicts] ?? 0,
      p50TaskMs: Math.round(percentile(sorted, 0.5)),
      p99TaskMs: Math.round(percentile(sorted, 0.99)),
      wallMs: Math.round(lastFinish - started),
    };
  } finally {
    options.signal?.removeEventListener("abort", stopOnAbort);
    await orchestrator?.kill("SIGKILL");
    await payments.close();
    await cleanupPrefix(redis, layout.root);
    await redis.quit();
  }
}

import { fileURLToPath } from "node:url";
import { orderFor } from "@once/orchestrator";
import { keyLayout, RedisOrderBook } from "@once/order-agent";
import { PaymentsClient, startPaymentsServer } from "@once/payments";
import { cleanupPrefix, NodeChild } from "@once/support";
import { Redis } from "ioredis";
import { InterruptedError, type ModeEvent } from "../../run-mode.js";
import { type ApprovalFigures, type ApproverLine, countApprovals } from "./approval-figures.js";

const ORCHESTRATOR_MAIN = fileURLToPath(new URL("./approvals-orchestrator.js", import.meta.url));
const APPROVER_MAIN = fileURLToPath(new URL("./approver.js", import.meta.url));

export interface ApprovalsModeOptions {
  mode: "naive" | "once";
  redisUrl: string;
  /** Random per run: names the keys and tasks of this run. */
  runId: string;
  tasks: number;
  /** The orchestrator's first wait for a tool call before it re-sends it; later waits double, up to 8×. */
  timeoutMs: number;
  /** How long the approver takes to decide a request, from when it first saw it. */
  decisionDelayMs: number;
  latency: { p50Ms: number; p99Ms: number };
  seed: number;
  report: (event: ModeEvent) => void;
  /** Aborting kills the orchestrator and the approver and ends the run, measuring nothing. */
  signal?: AbortSignal;
}

type OrchestratorLine = {
  type: "start" | "waiting" | "decision" | "task";
  taskId: string;
  task: number;
  outcome?: "ok" | "failed" | "cancelled";
  error?: string;
};

/**
 * One mode of the approvals demo: a payments provider, the orders, the approver process, and an orchestrator
 * process running every order task — SIGKILLed first when every unfinished task waits for a decision (at the
 * latest at the approver's first decision), then again as soon as the approver has decided every request it
 * was asked, each time started again with the tasks it had not finished, until all are. Then the figures, from
 * the provider's ledger and the approver's lines.
 */
export async function runApprovalsMode(options: ApprovalsModeOptions): Promise<ApprovalFigures> {
  const { mode, report } = options;
  const layout = keyLayout(`once-demo:${options.runId}:approvals-${mode}:`);
  const taskPrefix = `approvals-${mode}-${options.runId}`;
  const label = `approvals ${mode}`;
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  await redis.connect();
  const payments = await startPaymentsServer({ latency: options.latency, seed: options.seed });
  let orchestrator: NodeChild<OrchestratorLine> | undefined;
  let approver: NodeChild<ApproverLine> | undefined;
  const stopOnAbort = () => {
    void orchestrator?.kill("SIGKILL");
    void approver?.kill("SIGKILL");
  };
  options.signal?.addEventListener("abort", stopOnAbort, { once: true });
  try {
    const orders = new RedisOrderBook({ redis, prefix: layout.orders });
    for (let n = 1; n <= options.tasks; n++) await orders.create(orderFor(taskPrefix, n));

    const unfinished = new Set(Array.from({ length: options.tasks }, (_, i) => i + 1));
    const outcomes = { ok: 0, failed: 0, cancelled: 0 };
    let kills = 0;
    /** Requests asked and not decided yet, at the approver; decisions made since the last kill. */
    const undecided = new Set<string>();
    let decidedSinceKill = 0;
    /** Requests still undecided when the first kill came (none: every one was decided before it). */
    let undecidedAtKill = 0;
    /** The running orchestrator has printed something: it is under way. */
    let underWay = false;
    let kill: (() => void) | undefined;
    // Killed after the decisions (those made since the first kill; or, when the approver had decided every
    // request before it, as soon as the restarted orchestrator is under way), before it has acted on all.
    const killAfterDecisions = () => {
      if (kills === 1 && underWay && undecided.size === 0 && (decidedSinceKill > 0 || undecidedAtKill === 0))
        kill?.();
    };

    approver = await NodeChild.startReady<ApproverLine>({
      script: APPROVER_MAIN,
      args: [
        "--mode",
        mode,
        "--redis-url",
        options.redisUrl,
        "--prefix",
        layout.root,
        "--task-prefix",
        taskPrefix,
        "--delay-ms",
        String(options.decisionDelayMs),
      ],
      name: `[${label}] approver`,
      ready: "ready",
      onEvent: (line) => {
        if (line.type === "asked") undecided.add(line.id);
        if (line.type === "decided" || line.type === "cancelled") {
          undecided.delete(line.id);
          decidedSinceKill++;
          report({
            type: "note",
            mode: label,
            text:
              line.type === "cancelled"
                ? `approver cancelled task ${line.taskId} (${line.outcome})`
                : `approver ${line.decision} ${line.amount} cents for ${line.orderId}`,
          });
        }
        if (line.type === "error") report({ type: "note", mode: label, text: `approver: ${line.error}` });
        // On a slow machine a task may still be on its way to its request when the first decision comes: the
        // first kill comes then at the latest, while the other requests are pending.
        if (kills === 0 && (line.type === "decided" || line.type === "cancelled")) kill?.();
        else killAfterDecisions();
      },
      onOutput: (text) => process.stderr.write(`[${label}] approver: ${text}\n`),
    });

    const started = performance.now();
    let lastFinish = started;
    while (unfinished.size > 0) {
      if (options.signal?.aborted) throw new InterruptedError(mode);
      const waiting = new Set<number>();
      let killed = false;
      underWay = false;
      const onLine = (line: OrchestratorLine) => {
        underWay = true;
        if (line.type === "waiting") waiting.add(line.task);
        if (line.type === "task" && unfinished.delete(line.task)) {
          waiting.delete(line.task);
          lastFinish = performance.now();
          outcomes[line.outcome ?? "failed"]++;
          if (line.outcome === "failed")
            report({ type: "note", mode: label, text: `task ${line.taskId} failed: ${line.error}` });
          report({
            type: "progress",
            mode: label,
            done: outcomes.ok + outcomes.cancelled,
            failed: outcomes.failed,
            total: options.tasks,
          });
        }
        // Killed while every unfinished task waits for a person: the requests are pending.
        if (kills === 0 && waiting.size > 0 && [...unfinished].every((n) => waiting.has(n))) kill?.();
        // Killed again as the restarted orchestrator holds a decision it has not acted on: its own word, so the
        // kill cannot come too late, as it can when the approver's word arrives after the tasks finished.
        else if (kills === 1 && line.type === "decision") kill?.();
        else killAfterDecisions();
      };
      const child = NodeChild.start<OrchestratorLine>({
        script: ORCHESTRATOR_MAIN,
        args: [
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
          "--timeout-ms",
          String(options.timeoutMs),
        ],
        name: `[${label}] orchestrator`,
        onEvent: onLine,
        onOutput: (text) => process.stderr.write(`[${label}] orchestrator: ${text}\n`),
      });
      orchestrator = child;
      kill = () => {
        if (killed || unfinished.size === 0) return;
        killed = true;
        kills++;
        decidedSinceKill = 0;
        if (kills === 1) undecidedAtKill = undecided.size;
        void child.kill("SIGKILL");
        report({
          type: "note",
          mode: label,
          text: `SIGKILLed the orchestrator (pid ${child.pid}) ${kills === 1 ? `while ${undecided.size} requests were pending` : "after the approver's decisions"}; restarting it with the ${unfinished.size} unfinished tasks`,
        });
      };
      const [code, signal] = await child.exited;
      kill = undefined;
      if (options.signal?.aborted) throw new InterruptedError(mode);
      if (killed) continue;
      if (code !== 0)
        throw new Error(`the ${mode} approvals orchestrator failed (${signal ?? `exit ${code}`})`);
      if (unfinished.size > 0)
        throw new Error(`the ${mode} approvals orchestrator exited with ${unfinished.size} tasks not run`);
    }
    await approver.stop();

    const client = new PaymentsClient(payments.url);
    const ledger = { charges: await client.findCharges(), emails: await client.findEmails() };
    return {
      mode,
      tasks: options.tasks,
      tasksOk: outcomes.ok,
      tasksFailed: outcomes.failed,
      tasksCancelled: outcomes.cancelled,
      orchestratorKills: kills,
      ...countApprovals(ledger, approver.events),
      wallMs: Math.round(lastFinish - started),
    };
  } finally {
    options.signal?.removeEventListener("abort", stopOnAbort);
    await orchestrator?.kill("SIGKILL");
    await approver?.kill("SIGKILL");
    await payments.close();
    await cleanupPrefix(redis, layout.root);
    await redis.quit();
  }
}

// `node dist/agent/approvals/approvals-orchestrator.js --mode naive|once --redis-url URL --prefix P
//   --payments-url URL --task-prefix ID --task-numbers 1,2,… [--timeout-ms 250]`
// The approvals demo's orchestrator: each order task is an AI SDK generateText loop whose charge needs a
// person's approval over the threshold, every tool call re-sent when its wait times out. When the loop stops on
// a tool-approval-request, the task waits for the decision, then runs the loop again on the conversation with
// the SDK's tool-approval-response, as the AI SDK's docs show.
// naive: the SDK's own needsApproval; the request is sent to the approver, the decision comes back by the SDK's
// approvalId and is kept where the docs keep it, in the messages, in this process; a cancel is heard on a
// channel and aborts the loop (abortSignal). A restarted process starts its tasks again from the first message.
// once: @once/ai's onceTask — needsApproval and the request are the record's, the decision is read from the
// record, a cancel is the task's (operator cancel). A restarted process runs the same taskIds again.
// stdout is JSON lines: `start`, `waiting` (the task waits for a decision), `decision` (it has one, and has not
// acted on it yet), `task` (finished: ok, failed or cancelled). Exit 0 when every task was run, 2 when it could not run.
import { parseArgs } from "node:util";
import { onceTask } from "@once/ai";
import { OnceError } from "@once/core";
import { orderFor } from "@once/orchestrator";
import {
  keyLayout,
  openOrderStore,
  orderAgentModel,
  orderAgentTools,
  RedisOrderBook,
} from "@once/order-agent";
import { generateText, type ModelMessage, stepCountIs, type Tool, type ToolApprovalResponse, tool } from "ai";
import { Redis } from "ioredis";
import { runPlain } from "../plain-tools.js";
import { resendOnTimeout } from "../resend-on-timeout.js";
import { type NaiveApprovalRequest, naiveApprovalKeys } from "./approval-keys.js";
import { chargeApproval, withChargeApproval } from "./charge-approval.js";

function fail(message: string): never {
  process.stderr.write(`approvals orchestrator: ${message}\n`);
  process.exit(2);
}

const { values: args } = (() => {
  try {
    return parseArgs({
      options: {
        mode: { type: "string" },
        "redis-url": { type: "string" },
        prefix: { type: "string" },
        "payments-url": { type: "string" },
        "task-prefix": { type: "string" },
        "task-numbers": { type: "string" },
        "timeout-ms": { type: "string", default: "250" },
      },
    });
  } catch (error) {
    fail((error as Error).message);
  }
})();
const mode = args.mode === "naive" || args.mode === "once" ? args.mode : fail("--mode must be naive or once");
const required = (name: string, value: string | undefined): string => value || fail(`--${name} is required`);
const integer = (name: string, text: string): number => {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 1) fail(`--${name} must be an integer ≥ 1, got '${text}'`);
  return value;
};
const layout = keyLayout(required("prefix", args.prefix));
const taskPrefix = required("task-prefix", args["task-prefix"]);
const taskNumbers = required("task-numbers", args["task-numbers"])
  .split(",")
  .map((n) => integer("task-numbers", n));
const timeoutMs = integer("timeout-ms", args["timeout-ms"]);
const redisUrl = required("redis-url", args["redis-url"]);

const emit = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
const orders = new RedisOrderBook({ redis, prefix: layout.orders });
const declared = orderAgentTools({ paymentsUrl: required("payments-url", args["payments-url"]), orders });
const store = mode === "once" ? await openOrderStore({ redis, layout }) : undefined;
const naiveKeys = naiveApprovalKeys(layout);
const POLL_MS = 100;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// naive: a cancel reaches the loops of this process only, through their AbortControllers.
const running = new Map<string, AbortController>();
if (mode === "naive") {
  const listener = new Redis(redisUrl, { maxRetriesPerRequest: null });
  await listener.subscribe(naiveKeys.cancels);
  listener.on("message", (_channel, taskId: string) => running.get(taskId)?.abort(new Error("cancelled")));
}

/** The orchestrator's re-send around each tool's execute; needsApproval and the rest as they are. */
function resent(tools: Record<string, Tool>): Record<string, Tool> {
  return Object.fromEntries(
    Object.entries(tools).map(([name, t]) => [
      name,
      t.execute ? { ...t, execute: resendOnTimeout(name, t.execute, { timeoutMs }) } : t,
    ]),
  );
}

/** naive's tools: the plain tools, the charge with the AI SDK's own needsApproval from the same policy. */
function naiveTools(taskId: string): Record<string, Tool> {
  return Object.fromEntries(
    declared.all.map((once) => [
      once.name,
      tool({
        ...(once.description === undefined ? {} : { description: once.description }),
        inputSchema: once.input,
        ...(once.name === "charge_customer"
          ? {
              needsApproval: (input: { orderId: string; amount: number }) =>
                chargeApproval(input) !== undefined,
            }
          : {}),
        execute: (input: unknown, { toolCallId }: { toolCallId: string }) =>
          runPlain(once, taskId, toolCallId, input),
      } as Tool),
    ]),
  );
}

/** naive: the decision the approver sent back for this approvalId (this process asked; a new one asks anew). */
async function naiveDecision(request: NaiveApprovalRequest, signal: AbortSignal): Promise<boolean> {
  await redis.rpush(naiveKeys.requests, JSON.stringify(request));
  for (;;) {
    signal.throwIfAborted();
    const answer = await redis.hget(naiveKeys.answers, request.approvalId);
    if (answer !== null) return answer === "approved";
    await sleep(POLL_MS);
  }
}

/**
 * once: the record's decision — approved (or already run), or not (denied, expired, cancelled). With no request
 * found for the call, the app says yes: the call itself then answers from the record.
 */
async function recordDecision(key: string | undefined): Promise<boolean> {
  if (key === undefined || store === undefined) return true;
  for (;;) {
    const record = await store.get(key);
    if (record?.state !== "awaiting_approval")
      return record?.state === "approved" || record?.state === "done";
    await sleep(POLL_MS);
  }
}

async function runTask(n: number): Promise<void> {
  const taskId = `${taskPrefix}-${n}`;
  const { orderId } = orderFor(taskPrefix, n);
  const cancel = new AbortController();
  running.set(taskId, cancel);
  emit({ type: "start", taskId, task: n });
  try {
    const agent = orderAgentModel(orderId);
    // At the engine's default leases: a killed orchestrator's calls are taken over when its process's liveness
    // entry runs out (about a second); a lease bounds only an orchestrator alive but stalled.
    const task = store && onceTask({ taskId, store, tools: withChargeApproval(declared) });
    const tools = resent(task ? task.tools : naiveTools(taskId));
    let messages: ModelMessage[] = [
      {
        role: "user",
        content: `Settle order ${orderId}: read it, charge the customer, email the receipt, mark it paid.`,
      },
    ];
    for (;;) {
      const result = await generateText({
        model: task ? task.model(agent.model) : agent.model,
        tools,
        ...(task ? { toolApproval: task.toolApproval } : {}),
        stopWhen: stepCountIs(10),
        messages,
        abortSignal: cancel.signal,
      });
      const requests = result.content.flatMap((part) =>
        part.type === "tool-approval-request" ? [part] : [],
      );
      if (requests.length === 0) break;
      const responses: ToolApprovalResponse[] = [];
      for (const request of requests) {
        emit({ type: "waiting", taskId, task: n });
        const approved = task
          ? await recordDecision(task.approvalRequest(request.toolCall.toolCallId)?.key)
          : await naiveDecision(
              {
                approvalId: request.approvalId,
                taskId,
                tool: request.toolCall.toolName,
                reason: chargeApproval(request.toolCall.input as { orderId: string; amount: number }) ?? "",
              },
              cancel.signal,
            );
        emit({ type: "decision", taskId, task: n });
        responses.push({ type: "tool-approval-response", approvalId: request.approvalId, approved });
      }
      messages = [...messages, ...result.responseMessages, { role: "tool", content: responses }];
    }
    emit({ type: "task", taskId, task: n, outcome: "ok" });
  } catch (error) {
    const cancelled = cancel.signal.aborted || isTaskCancelled(error);
    emit({
      type: "task",
      taskId,
      task: n,
      outcome: cancelled ? "cancelled" : "failed",
      ...(cancelled
        ? {}
        : { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }),
    });
  } finally {
    running.delete(taskId);
  }
}

/** once: the loop stopped because the task was cancelled (TaskCancelledError, or a failure caused by one). */
function isTaskCancelled(error: unknown): boolean {
  return (
    OnceError.is(error, "ONCE_TASK_CANCELLED") ||
    (error instanceof Error && error.cause !== undefined && isTaskCancelled(error.cause))
  );
}

await Promise.all(taskNumbers.map(runTask));
process.exit(0);

import { checkJaegerUrl } from "@once/console/internal";
import {
  type Cancellation,
  CancelRefusedError,
  DEFAULT_NAMESPACE,
  deriveTaskKey,
  InvalidKeyPartError,
  type OnceRecord,
  type TaskRecords,
  type TaskRef,
} from "@once/core";
import { ago, errorText, traceIdOf } from "@once/core/internal";
import { askYes } from "../ask.js";
import type { Command } from "../command.js";
import { defaultBy } from "../default-by.js";
import { UsageError } from "../errors.js";
import { ExitCode } from "../exit-code.js";
import { CONNECTION_OPTIONS } from "../options.js";
import type { ParsedOptions } from "../parse-command-line.js";
import { jsonText, recordJson } from "../record-view.js";
import { interactive } from "../redis-connection.js";
import { renderTable } from "../render-table.js";
import { withStore } from "../store-session.js";

// `once task` and `once cancel`: a task as its store keeps it (every call filed under it, in step order) and its
// cancellation, which no effect of the task starts after (docs/cancellation.md).

/** The task an operator means, checked the way a key part is: a malformed one is bad usage. */
function taskArgument(taskId: string | undefined, options: ParsedOptions): Required<TaskRef> {
  if (taskId === undefined) throw new UsageError("which task? give its task id");
  const task = { namespace: options.string("namespace") ?? DEFAULT_NAMESPACE, taskId };
  try {
    deriveTaskKey(task);
  } catch (error) {
    if (error instanceof InvalidKeyPartError) throw new UsageError(error.message, { cause: error });
    throw error;
  }
  return task;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** `by alice at 2026-…Z (3m ago): why`. */
function cancellationLine(cancellation: Cancellation, now: number): string {
  const { by, why, at } = cancellation;
  return `by ${by} at ${iso(at)} (${ago(at, now)})${why === "" ? "" : `: ${why}`}`;
}

/** What the call came to, in a few words: the result, the error, or what it waits for. */
function outcomeOf(record: OnceRecord): string {
  if (record.state === "done") return record.result ?? "-";
  if (record.error !== undefined) return errorText(record.error);
  if (record.state === "cancelled") return "never ran";
  if (record.state === "awaiting_approval") return "waits for a person";
  // Its effect may have been under way when the task was cancelled: its owner was told to stop.
  if (record.cancellation !== undefined) return "told to stop (task cancelled)";
  return "-";
}

/** The approval request and its decision, when the tool's policy asked for one. */
function approvalOf(record: OnceRecord): string {
  const approval = record.approval;
  if (approval === undefined) return "-";
  const decision = approval.decision;
  const asked = `asked: ${approval.reason}`;
  if (decision === undefined)
    return record.state === "awaiting_approval" ? `${asked}; expires ${iso(approval.expiresAt)}` : asked;
  if (decision.as === "expired") return `${asked}; expired`;
  return `${asked}; ${decision.as} by ${decision.by}${decision.why === "" ? "" : `: ${decision.why}`}`;
}

function traceOf(record: OnceRecord, jaegerUrl: string | undefined): string | undefined {
  if (record.trace === undefined) return undefined;
  const id = traceIdOf(record.trace);
  if (id === undefined) return record.trace;
  return jaegerUrl === undefined ? id : `${jaegerUrl}/trace/${id}`;
}

/** The `--namespace` option again, for the commands a page of output suggests. */
function namespaceOption(task: Required<TaskRef>): string {
  return task.namespace === DEFAULT_NAMESPACE ? "" : ` --namespace ${task.namespace}`;
}

/** `once task`: every call of one task in step order, with its state, outcome, approvals and trace. */
export const taskCommand: Command = {
  name: "task",
  summary: "show one task: its cancellation, and every call filed under it in step order",
  usage: ["task <taskId> [--namespace <ns>] [--jaeger-url <url>] [options]"],
  options: ["namespace", "jaeger-url", ...CONNECTION_OPTIONS],
  details:
    'Lists every call claimed with this task (namespace default "default"), in the order of its first claim: ' +
    "its step, state, tool, outcome (result or error), approval request and decision, trace (a link with " +
    "--jaeger-url) and key, and the task's cancellation (who, why, when) if it was cancelled. A store told not " +
    "to keep task identities (keepTaskIdentity: false) still lists the calls, without their steps. Exits 1 " +
    "when the store knows nothing of the task.",
  examples: [
    "once task order-1042",
    "once task order-1042 --namespace checkout --jaeger-url http://localhost:16686",
    "once task order-1042 --json",
  ],
  async run({ io, options, positionals }) {
    if (positionals.length > 1)
      throw new UsageError(`expected one task id, got ${positionals.length}: ${positionals.join(" ")}`);
    const task = taskArgument(positionals[0], options);
    const jaegerOption = options.string("jaeger-url");
    const jaegerUrl = jaegerOption === undefined ? undefined : jaegerUrlOf(jaegerOption);
    return withStore(options, io, async (session) => {
      const read = await session.operator.task(task);
      const now = await session.operator.now();
      const found = read.records.length > 0 || read.cancellation !== undefined;
      if (options.flag("json")) {
        io.stdout.write(
          jsonText({
            namespace: read.namespace,
            taskId: read.taskId,
            found,
            serverTime: now,
            ...(read.cancellation === undefined ? {} : { cancellation: read.cancellation }),
            records: read.records.map((record) => {
              const traceUrl = jaegerUrl === undefined ? undefined : traceOf(record, jaegerUrl);
              return { ...recordJson(record, now), ...(traceUrl === undefined ? {} : { traceUrl }) };
            }),
          }),
        );
      }
      if (!found) {
        io.stderr.write(
          `no call filed under task ${JSON.stringify(task.taskId)} (namespace ${task.namespace}) ${session.where} on ${session.label}` +
            " (never claimed with this task, expired after its retention, or another namespace?)\n",
        );
        return ExitCode.problem;
      }
      if (options.flag("json")) return ExitCode.ok;
      io.stdout.write(taskText(read, now, jaegerUrl));
      if (read.cancellation === undefined) {
        io.stdout.write(
          `\nto stop it: once cancel --task ${task.taskId}${namespaceOption(task)} --why '…'` +
            "   (no effect of the task starts after it returns)\n",
        );
      }
      return ExitCode.ok;
    });
  },
};

function jaegerUrlOf(text: string): string {
  try {
    return checkJaegerUrl(text);
  } catch (error) {
    throw new UsageError(`--jaeger-url: ${(error as Error).message}`, { cause: error });
  }
}

function taskText(read: TaskRecords, now: number, jaegerUrl: string | undefined): string {
  const lines = [
    `task ${read.taskId} (namespace ${read.namespace}): ${read.records.length} call${read.records.length === 1 ? "" : "s"}`,
    read.cancellation === undefined
      ? "not cancelled"
      : `CANCELLED ${cancellationLine(read.cancellation, now)}`,
    "",
  ];
  const rows = read.records.map((record, i) => [
    String(i + 1),
    record.task?.stepId ?? "-",
    record.state,
    record.tool,
    outcomeOf(record),
    approvalOf(record),
    traceOf(record, jaegerUrl) ?? "-",
    record.key,
  ]);
  if (rows.length === 0) lines.push("no call filed under it yet: each that comes is answered cancelled");
  else
    lines.push(
      renderTable(["#", "step", "state", "tool", "outcome", "approval", "trace", "key"], rows, {
        right: [0],
        maxCellWidth: 80,
      }),
    );
  return `${lines.join("\n")}\n`;
}

/** `once cancel`: cancels a task once; after it returns no effect of the task starts. */
export const cancelCommand: Command = {
  name: "cancel",
  summary: "cancel a task: no effect of it starts after this returns; running ones are told to stop",
  usage: ["cancel --task <taskId> --why '<text>' [--namespace <ns>] [--by <who>] [--yes] [options]"],
  options: ["task", "namespace", "why", "by", "yes", ...CONNECTION_OPTIONS],
  details:
    "Records the task's cancellation once (who: --by, default $USER@hostname; why: --why, required; when), " +
    "then every call filed under it that has not started its effect (no record yet, prepare, released, " +
    "awaiting or approved) becomes cancelled: it never runs, and every attempt is answered cancelled. A call " +
    "whose effect may be under way (claimed in the effect phase, reconciling, unknown) keeps its state and is " +
    "settled as usual; its owner's next heartbeat tells it to stop. Calls that are done, failed or cancelled " +
    "are left as they are. A task cancelled before is refused (exit 1) with the first cancel's who, why and " +
    "when, nothing changed. Asks for confirmation on a terminal; without one, --yes is required (exit 2 " +
    "otherwise).",
  examples: [
    "once cancel --task order-1042 --why 'customer cancelled the order'",
    "once cancel --task order-1042 --namespace checkout --by alice --why 'runaway agent loop' --yes --json",
  ],
  async run({ io, options }) {
    const task = taskArgument(options.string("task"), options);
    const why = options.string("why");
    if (why === undefined) throw new UsageError("--why is required: say why, it is kept with the task");
    const by = options.string("by") ?? defaultBy(io.env);
    if (by.trim() === "") throw new UsageError("--by is empty: say who cancels, it is kept with the task");
    const confirmed = options.flag("yes");
    if (!confirmed && !interactive(io)) {
      throw new UsageError(
        "cancel stops a task and asks for confirmation, but stdin is not a terminal: pass --yes to cancel without asking",
      );
    }
    const json = options.flag("json");

    return withStore(options, io, async (session) => {
      const { operator } = session;
      const before = await operator.task(task);
      const now = await operator.now();
      if (before.cancellation !== undefined)
        return refuse(
          `refused: task ${JSON.stringify(task.taskId)} was already cancelled ${cancellationLine(before.cancellation, now)}. Nothing changed`,
          before.cancellation,
        );
      if (!confirmed) {
        io.stderr.write(`${describeCancel(before, by, why)}\n`);
        if (!(await askYes(io, `Cancel task ${task.taskId}? Type yes to go on: `)))
          return refuse("not cancelled: not confirmed. Nothing changed");
      }
      let outcome: Awaited<ReturnType<typeof operator.cancel>>;
      try {
        outcome = await operator.cancel(task, { by, why });
      } catch (error) {
        if (error instanceof CancelRefusedError) return refuse(error.message);
        throw error;
      }
      if (outcome.outcome === "already_cancelled")
        return refuse(
          `refused: task ${JSON.stringify(task.taskId)} was already cancelled ${cancellationLine(outcome.cancellation, now)}. Nothing changed`,
          outcome.cancellation,
        );
      if (json) {
        io.stdout.write(
          jsonText({
            namespace: task.namespace,
            taskId: task.taskId,
            cancelled: true,
            cancellation: outcome.cancellation,
            stopped: outcome.stopped,
            running: outcome.running,
          }),
        );
      } else {
        io.stdout.write(
          `cancelled task ${task.taskId} (namespace ${task.namespace}), by ${by}: ${why}\n` +
            `${outcome.stopped.length} not started: now cancelled, never run\n` +
            `${outcome.running.length} whose effect may be under way: told to stop at the next heartbeat, settled as usual\n` +
            "every later call of the task is answered cancelled\n",
        );
        for (const key of outcome.running) io.stdout.write(`  running: ${key}\n`);
        io.stdout.write(`see it: once task ${task.taskId}${namespaceOption(task)}\n`);
      }
      return ExitCode.ok;
    });

    function refuse(message: string, cancellation?: Cancellation): number {
      if (json)
        io.stdout.write(
          jsonText({
            namespace: task.namespace,
            taskId: task.taskId,
            cancelled: false,
            reason: message,
            ...(cancellation === undefined ? {} : { cancellation }),
          }),
        );
      io.stderr.write(`${message}\n`);
      return ExitCode.problem;
    }
  },
};

function describeCancel(task: TaskRecords, by: string, why: string): string {
  const counts = new Map<string, number>();
  for (const record of task.records) counts.set(record.state, (counts.get(record.state) ?? 0) + 1);
  const states = [...counts].map(([state, n]) => `${n} ${state}`).join(", ");
  return [
    `task ${task.taskId} (namespace ${task.namespace}): ${
      task.records.length === 0 ? "no call filed under it yet" : `${task.records.length} calls (${states})`
    }`,
    "CANCEL: calls that have not started their effect never run; running effects are told to stop; every later call is answered cancelled",
    `by ${by}, why: ${why}`,
  ].join("\n");
}

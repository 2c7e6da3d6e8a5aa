import { type Dispatcher, DispatchTimeoutError, JobFailedError } from "@once/bullmq";
import {
  type AnyTool,
  CallFailedError,
  DEFAULT_NAMESPACE,
  deriveKey,
  ReplayedFailureError,
  type ToolKind,
} from "@once/core";
import type { OrderAgentTools } from "@once/order-agent";
import { SpanStatusCode, trace } from "@opentelemetry/api";
import { planNextStep } from "./plan-next-step.js";
import type { JournalStep, TaskJournal } from "./task-journal.js";

/**
 * `once`: a step keeps its journaled step id through every retry and restart, so every retry is the same
 * key. `naive`: the article's WRONG example — each attempt mints a fresh key (`hash(task + step + time)`),
 * so the dedup store never sees a repeat and a timed-out call that still succeeds fires again.
 */
export type OrchestratorMode = "once" | "naive";

export interface OrderOrchestratorOptions {
  dispatcher: Dispatcher;
  tools: OrderAgentTools;
  journal: TaskJournal;
  mode: OrchestratorMode;
  /**
   * The first wait for a call before it is sent again; each later wait doubles, up to `maxTimeoutMs`.
   * The same policy in both modes: careful retry logic, with backoff. Only the key differs.
   */
  timeoutMs: number;
  /** The longest wait. Default 8 × `timeoutMs`. */
  maxTimeoutMs?: number;
  /** Gives up a step (the task fails, resumable) when it has not finished after this long. Default 60 s. */
  stepDeadlineMs?: number;
  namespace?: string;
  /** Told about every step as it begins, resumes, finishes or fails. */
  onStep?: (event: StepEvent) => void;
}

export interface StepEvent {
  type: "step";
  phase: "started" | "resumed" | "done" | "failed";
  taskId: string;
  n: number;
  stepId: string;
  tool: string;
  /** The key of the latest attempt (effect tools). */
  key?: string;
  replayed?: boolean;
}

/** One logical tool call of a task, however many times it was sent. */
export interface CallRecord {
  taskId: string;
  n: number;
  stepId: string;
  tool: string;
  kind: ToolKind;
  /** Idempotency keys used: one under `once`, one per attempt under `naive` (effect tools). */
  keys: string[];
  /** Jobs enqueued for it (0 when the store answered before any enqueue). */
  sends: number;
  /** Times the call was made again after a timeout or a failure: the retries fired. */
  retries: number;
  /** The result came from the store: an earlier attempt had produced it. */
  replayed: boolean;
  /** From the first send to the answer, across retries. */
  latencyMs: number;
  ok: boolean;
  /** The error's name when the call failed. */
  error?: string;
  /** Re-issued from the journal after a restart. */
  resumed: boolean;
}

export interface TaskReport {
  taskId: string;
  orderId: string;
  ok: boolean;
  /** Why the task stopped early, e.g. `DispatchTimeoutError`. */
  error?: string;
  /** The trace of this task (when tracing is on). */
  traceId?: string;
  calls: CallRecord[];
}

const tracer = trace.getTracer("@once/orchestrator", "0.1.0");

/** Runs order tasks: plans each step, journals it before calling it, calls it through the dispatcher. */
export class OrderOrchestrator {
  readonly #options: Required<Omit<OrderOrchestratorOptions, "onStep">> &
    Pick<OrderOrchestratorOptions, "onStep">;
  readonly #byName: Map<string, AnyTool>;

  constructor(options: OrderOrchestratorOptions) {
    this.#options = {
      stepDeadlineMs: 60_000,
      namespace: DEFAULT_NAMESPACE,
      maxTimeoutMs: 8 * options.timeoutMs,
      ...options,
    };
    this.#byName = new Map(options.tools.all.map((tool) => [tool.name, tool as AnyTool]));
  }

  /** Runs (or resumes) one task to its end; never throws for a failed call, the report says so. */
  runTask(taskId: string, orderId: string): Promise<TaskReport> {
    // One root span per task, so every call of the task shares one trace.
    return tracer.startActiveSpan(
      `task ${taskId}`,
      { attributes: { "once.task_id": taskId, "order.id": orderId, "once.mode": this.#options.mode } },
      async (span) => {
        const sc = span.spanContext();
        const report: TaskReport = {
          taskId,
          orderId,
          ok: false,
          calls: [],
          ...(trace.isSpanContextValid(sc) && span.isRecording() ? { traceId: sc.traceId } : {}),
        };
        try {
          await this.#run(taskId, orderId, report);
          report.ok = true;
        } catch (error) {
          report.error = error instanceof Error ? error.name : "Error";
          span.setAttribute("error.type", report.error);
          span.setStatus({ code: SpanStatusCode.ERROR, message: report.error });
        } finally {
          span.end();
        }
        return report;
      },
    );
  }

  async #run(taskId: string, orderId: string, report: TaskReport): Promise<void> {
    const { journal, tools } = this.#options;
    const steps = await journal.load(taskId);
    for (;;) {
      // An unfinished step is re-issued as it was journaled: same step id, same input, same key.
      let step = steps.find((s) => s.state === "started");
      const resumed = step !== undefined;
      if (!step) {
        const next = planNextStep(tools, orderId, steps);
        if (!next) return;
        step = await journal.begin(taskId, next);
        steps.push(step);
      }
      const call = await this.#call(taskId, step, resumed);
      report.calls.push(call.record);
      if (call.outcome === "done") {
        await journal.finish(taskId, step.n, call.result);
        Object.assign(step, { state: "done", result: call.result });
      } else {
        await journal.fail(taskId, step.n, call.error);
        Object.assign(step, { state: "failed", error: call.error });
      }
    }
  }

  /** One step until it has an answer: a result, or a failure the planner can act on (a stored, terminal one). */
  async #call(
    taskId: string,
    step: JournalStep,
    resumed: boolean,
  ): Promise<
    | { outcome: "done"; result: unknown; record: CallRecord }
    | { outcome: "failed"; error: { name: string; code?: string }; record: CallRecord }
  > {
    const { dispatcher, mode, timeoutMs, maxTimeoutMs, stepDeadlineMs, namespace, onStep } = this.#options;
    const tool = this.#byName.get(step.tool);
    if (!tool) throw new Error(`the journal of ${taskId} names an unknown tool ${step.tool}`);
    const record: CallRecord = {
      taskId,
      n: step.n,
      stepId: step.stepId,
      tool: tool.name,
      kind: tool.kind,
      keys: [],
      sends: 0,
      retries: 0,
      replayed: false,
      latencyMs: 0,
      ok: false,
      resumed,
    };
    const event = { type: "step" as const, taskId, n: step.n, stepId: step.stepId, tool: tool.name };
    const started = performance.now();
    for (let attempt = 1; ; attempt++) {
      // The article's WRONG example, on purpose: a new step id (so a new key) for every attempt.
      const stepId = mode === "naive" ? `${step.stepId}@${Date.now()}#${attempt}` : step.stepId;
      const key = tool.kind === "effect" ? deriveKey({ namespace, taskId, stepId }) : undefined;
      if (key && !record.keys.includes(key)) record.keys.push(key);
      if (attempt === 1)
        onStep?.({ ...event, phase: resumed ? "resumed" : "started", ...(key ? { key } : {}) });
      try {
        const answer = await dispatcher.call(
          tool,
          step.input as never,
          {
            taskId,
            stepId,
            namespace,
            timeoutMs: Math.min(timeoutMs * 2 ** (attempt - 1), maxTimeoutMs),
            // This loop owns the retries, so both modes send on the same schedule.
            retries: 0,
          } as never,
        );
        record.sends += answer.enqueues;
        record.replayed = answer.replayed;
        record.ok = true;
        record.retries = attempt - 1;
        record.latencyMs = performance.now() - started;
        onStep?.({ ...event, phase: "done", replayed: answer.replayed, ...(key ? { key } : {}) });
        return { outcome: "done", result: answer.result, record };
      } catch (error) {
        if (error instanceof DispatchTimeoutError) record.sends += error.attempts;
        record.retries = attempt - 1;
        record.latencyMs = performance.now() - started;
        const overdue = performance.now() - started >= stepDeadlineMs;
        if (!overdue && this.#retryable(error, tool)) continue;
        record.error = error instanceof Error ? error.name : "Error";
        onStep?.({ ...event, phase: "failed", ...(key ? { key } : {}) });
        if (error instanceof CallFailedError || error instanceof ReplayedFailureError) {
          // A failure stored for good (a declined card), now or by an earlier attempt: the planner decides.
          return {
            outcome: "failed",
            error: { name: error.stored.name, ...(error.stored.code ? { code: error.stored.code } : {}) },
            record,
          };
        }
        throw error;
      }
    }
  }

  /** Which failures the orchestrator answers by sending the call again. */
  #retryable(error: unknown, tool: AnyTool): boolean {
    // No answer in time: the call may still be running. `once` re-sends the same key; `naive` a new one.
    if (error instanceof DispatchTimeoutError) return true;
    // A failed job of a read or write tool: a fresh job is safe. Under `naive`, any failure is retried,
    // as the reflex "retry on error" does.
    if (error instanceof JobFailedError) return tool.kind !== "effect" || this.#options.mode === "naive";
    return false;
  }
}

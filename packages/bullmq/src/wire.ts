// What travels between a dispatcher and its workers, both ways, in one place: the job data (a call, as the
// orchestrator meant it), the return value (a call's outcome), and a failure (a named error in BullMQ's
// `failedReason`). The dispatcher writes and reads only through this module, and so does the worker.

import { type AnyTool, OnceError } from "@once/core";
import { describeIssues } from "@once/core/internal";
import type { FlowOutcome } from "@once/engine";
import { UnrecoverableError } from "bullmq";
import { z } from "zod";
import { InvalidJobDataError, ToolKindMismatchError } from "./errors.js";
import { keyFromJobId } from "./job-id.js";

/**
 * The version of the job-data shape. 2 added `kind` (what the orchestrator declared) and `callId`; a worker
 * refuses versions it does not know, so a worker from before a change never runs a job it cannot check.
 */
export const CALL_VERSION = 2;

const fields = {
  tool: z.string().min(1),
  namespace: z.string(),
  taskId: z.string().optional(),
  stepId: z.string().optional(),
  input: z.unknown(),
  /** Trace context of the dispatcher's send span, as written by the OpenTelemetry propagation API. */
  trace: z.record(z.string(), z.string()).optional(),
};

const callSchema = z.discriminatedUnion("v", [
  z.object({
    v: z.literal(CALL_VERSION),
    ...fields,
    /** The tool's kind as the orchestrator declared it; a worker that declares another refuses the job. */
    kind: z.enum(["read", "write", "effect"]),
    /**
     * The dispatcher call that enqueued the job. The first enqueue of a job id creates the job and later ones
     * are no-ops, so this names the one call whose enqueue ran it: every other caller's result is a replay.
     */
    callId: z.string().min(1),
  }),
  // Enqueued by a dispatcher from before `kind`: the job id's shape still tells a keyed (effect) call.
  z.object({ v: z.literal(1), ...fields }),
]);

/** One tool call as it travels in a BullMQ job. It never carries the key: the worker derives it. */
export type CallData = z.infer<typeof callSchema>;

/** What a worker returns for a call, the engine's outcome and the job's call id; BullMQ stores it as the job's return value. */
export interface CallOutcome extends FlowOutcome {
  /** The `callId` of the job that produced this outcome. */
  callId?: string;
}

/**
 * True when job data has the shape of a once call, of any version (so a wrapped processor routes it to
 * once, which refuses a version it does not know, instead of to the user's own processor).
 */
export function isCallData(data: unknown): boolean {
  return (
    typeof data === "object" &&
    data !== null &&
    typeof (data as { v?: unknown }).v === "number" &&
    typeof (data as { tool?: unknown }).tool === "string"
  );
}

/** Parses job data; throws {@link InvalidJobDataError} naming every problem. */
export function parseCallData(data: unknown): CallData {
  const version = (data as { v?: unknown } | null | undefined)?.v;
  if (typeof version === "number" && version > CALL_VERSION) {
    throw new InvalidJobDataError([
      `v: version ${version} is newer than this worker reads (1 to ${CALL_VERSION}): upgrade the worker`,
    ]);
  }
  const parsed = callSchema.safeParse(data);
  if (parsed.success) return parsed.data;
  throw new InvalidJobDataError(describeIssues(parsed.error), { cause: parsed.error });
}

/**
 * Refuses a job that this worker's declaration of its tool disagrees with: the kind the orchestrator
 * declared (in the job data since version 2), or a keyed job id (`once-<key>`, which only effect calls get)
 * for a tool this worker does not run as an effect. Without this, a worker from an older deploy that
 * declares an effect tool `write` would run a keyed call directly: no claim, no record, and a resume would
 * charge again.
 */
export function assertSameDeclaration(tool: AnyTool, call: CallData, jobId: string | undefined): void {
  const declared = call.v === 1 ? undefined : call.kind;
  if (declared !== undefined && declared !== tool.kind) {
    throw new ToolKindMismatchError(tool.name, declared, tool.kind);
  }
  if (tool.kind !== "effect" && jobId !== undefined && keyFromJobId(jobId) !== undefined) {
    throw new ToolKindMismatchError(
      tool.name,
      declared,
      tool.kind,
      `job ${jobId} carries an idempotency key, which only effect calls get`,
    );
  }
}

/**
 * Worker → BullMQ: a failure that retrying cannot mend. BullMQ retries a job unless its error is an
 * `UnrecoverableError`; this one keeps once's named error as `cause` and its name at the head of the
 * message, which BullMQ stores as the job's `failedReason` (read back by {@link failedErrorName}).
 */
export function unrecoverable(error: Error): UnrecoverableError {
  const wrapped = new UnrecoverableError(`${error.name}: ${error.message}`);
  (wrapped as { cause?: unknown }).cause = error;
  return wrapped;
}

/** The once error a failure carries: the error itself, or the cause an {@link unrecoverable} wrapper holds. */
export function onceErrorIn(error: unknown): OnceError | undefined {
  if (OnceError.is(error)) return error;
  const cause = (error as { cause?: unknown } | null | undefined)?.cause;
  return error instanceof UnrecoverableError && OnceError.is(cause) ? cause : undefined;
}

const NAMED_REASON = /^([A-Za-z_$][\w$]*): /;

/** BullMQ → dispatcher: the error name at the head of a failed job's `failedReason`, if it has one. */
export function failedErrorName(failedReason: string): string | undefined {
  return NAMED_REASON.exec(failedReason)?.[1];
}

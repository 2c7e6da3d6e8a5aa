import { InvalidJobDataError } from "@once/core";
import { z } from "zod";

/** The version of the job-data shape; a worker refuses shapes it does not know. */
export const CALL_VERSION = 1;

const callSchema = z.object({
  v: z.literal(CALL_VERSION),
  tool: z.string().min(1),
  namespace: z.string(),
  taskId: z.string().optional(),
  stepId: z.string().optional(),
  input: z.unknown(),
  /** W3C trace context of the dispatcher's call span: `traceparent`, optionally `tracestate`. */
  trace: z.record(z.string(), z.string()).optional(),
});

/** One tool call as it travels in a BullMQ job. It never carries the key: the worker derives it. */
export type CallData = z.infer<typeof callSchema>;

/** What a worker returns for a call; BullMQ stores it as the job's return value. */
export interface CallOutcome {
  result: unknown;
  /** `executed`: ran now; `replay`: answered from the store; `reconciled`: found out from the provider. */
  outcome: "executed" | "replay" | "reconciled" | "direct";
  fence?: number;
}

/** True when job data has the shape of a once call (so a wrapped processor routes it to once). */
export function isCallData(data: unknown): boolean {
  return (
    typeof data === "object" &&
    data !== null &&
    (data as { v?: unknown }).v === CALL_VERSION &&
    "tool" in data
  );
}

/** Parses job data; throws {@link InvalidJobDataError} naming every problem. */
export function parseCallData(data: unknown): CallData {
  const parsed = callSchema.safeParse(data);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map(
    (i) => `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`,
  );
  throw new InvalidJobDataError(issues, { cause: parsed.error });
}

import { OnceError, validateKeyPart } from "@once/core";

/**
 * The one field of a `tools/call` request's `_meta` that names the call's step: an effect call runs once per
 * step, and every call with that step after the first is answered from the store.
 */
export const ONCE_STEP_META = "once/step";

/** The step a call runs as, as a client names it: stable across every retry of that call. */
export interface OnceStep {
  taskId: string;
  stepId: string;
  /** The server's namespace if omitted. */
  namespace?: string;
}

const FIELDS: ReadonlySet<string> = new Set(["taskId", "stepId", "namespace"]);
const SHAPE = `{ taskId, stepId, namespace? }`;

/**
 * The step a request's `_meta` names: the step, `undefined` when it names none, or why it is not a step (in
 * words, for the tool error the caller gets back).
 */
export function readStep(
  meta: Record<string, unknown> | undefined,
): OnceStep | undefined | { refused: string } {
  const field = `_meta[${JSON.stringify(ONCE_STEP_META)}]`;
  const value = meta?.[ONCE_STEP_META];
  if (value === undefined) return undefined;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return { refused: `${field} must be an object ${SHAPE}` };
  // A misspelt field would otherwise be a step without it: refused by name instead.
  const unknown = Object.keys(value).filter((name) => !FIELDS.has(name));
  if (unknown.length > 0)
    return {
      refused: `${field} has unknown field${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")}: it is ${SHAPE}`,
    };
  const { taskId, stepId, namespace } = value as Record<string, unknown>;
  try {
    return {
      taskId: validateKeyPart("taskId", taskId),
      stepId: validateKeyPart("stepId", stepId),
      ...(namespace === undefined ? {} : { namespace: validateKeyPart("namespace", namespace) }),
    };
  } catch (error) {
    if (OnceError.is(error, "ONCE_INVALID_KEY_PART")) return { refused: `${field}: ${error.message}` };
    throw error;
  }
}

import { hash } from "node:crypto";
import { InvalidKeyPartError, MissingStepIdentityError } from "./errors.js";

const KEY_VERSION = Buffer.from("once/key/v1", "utf8");
const TASK_KEY_VERSION = Buffer.from("once/task/v1", "utf8");
const MAX_PART_LENGTH = 256;
// C0, DEL and C1 controls: invisible in logs and dashboards, so never part of an identity.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export interface StepIdentity {
  namespace?: string;
  taskId: string;
  stepId: string;
}

export const DEFAULT_NAMESPACE = "default";

/** Checks one key part; throws {@link InvalidKeyPartError} naming the part and the problem. */
export function validateKeyPart(part: string, value: unknown): string {
  if (typeof value !== "string") throw new InvalidKeyPartError(part, `must be a string, got ${typeof value}`);
  if (value.length === 0) throw new InvalidKeyPartError(part, "must not be empty");
  if (value.length > MAX_PART_LENGTH) {
    throw new InvalidKeyPartError(part, `must be at most ${MAX_PART_LENGTH} characters, got ${value.length}`);
  }
  if (CONTROL.test(value)) throw new InvalidKeyPartError(part, "must not contain control characters");
  if (!value.isWellFormed())
    throw new InvalidKeyPartError(part, "must be well-formed UTF-16 (a lone surrogate)");
  return value;
}

/**
 * The idempotency key of one step of one task: 64 lowercase hex chars, sha256 over a versioned,
 * length-prefixed encoding of (namespace, taskId, stepId), so no two distinct triples share a key.
 */
export function deriveKey(identity: StepIdentity): string {
  return hashParts(KEY_VERSION, [
    validateKeyPart("namespace", identity.namespace ?? DEFAULT_NAMESPACE),
    validateKeyPart("taskId", identity.taskId),
    validateKeyPart("stepId", identity.stepId),
  ]);
}

/**
 * The key of a task (what its calls are filed under, and its cancellation kept by): 64 lowercase hex chars,
 * the same encoding as {@link deriveKey} over (namespace, taskId) under its own version tag, so a task key is
 * never a call's key.
 */
export function deriveTaskKey(task: { namespace?: string; taskId: string }): string {
  return hashParts(TASK_KEY_VERSION, [
    validateKeyPart("namespace", task.namespace ?? DEFAULT_NAMESPACE),
    validateKeyPart("taskId", task.taskId),
  ]);
}

function hashParts(version: Buffer, parts: string[]): string {
  // One buffer and one hash for the whole encoding (this runs for every job): the same bytes as hashing the
  // version and then each part's 4-byte big-endian length and its UTF-8 bytes.
  let size = version.length;
  for (const part of parts) size += 4 + Buffer.byteLength(part, "utf8");
  const encoded = Buffer.allocUnsafe(size);
  let at = version.copy(encoded, 0);
  for (const part of parts) {
    const length = encoded.write(part, at + 4, "utf8");
    encoded.writeUInt32BE(length, at);
    at += 4 + length;
  }
  return hash("sha256", encoded);
}

/** The key of an effect call, whose `taskId` and `stepId` are required: a {@link MissingStepIdentityError} names the missing ones. */
export function effectKey(
  tool: string,
  parts: { namespace?: string; taskId?: string; stepId?: string },
): string {
  const { namespace, taskId, stepId } = parts;
  if (taskId === undefined || stepId === undefined) {
    throw new MissingStepIdentityError(
      tool,
      (["taskId", "stepId"] as const).filter((part) => parts[part] === undefined),
    );
  }
  return deriveKey(namespace === undefined ? { taskId, stepId } : { namespace, taskId, stepId });
}

const KEY_PATTERN = /^[0-9a-f]{64}$/;

/** True when `value` has the shape of a key from {@link deriveKey}. */
export function isKey(value: string): boolean {
  return KEY_PATTERN.test(value);
}

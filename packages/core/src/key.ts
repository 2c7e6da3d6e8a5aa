import { hash } from "node:crypto";
import { InvalidKeyPartError, MissingStepIdentityError } from "./errors.js";

const KEY_VERSION = "once/key/v1";
const VERSION_BYTES = Buffer.from(KEY_VERSION, "utf8");
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
  const parts = [
    validateKeyPart("namespace", identity.namespace ?? DEFAULT_NAMESPACE),
    validateKeyPart("taskId", identity.taskId),
    validateKeyPart("stepId", identity.stepId),
  ];
  // One buffer and one hash for the whole encoding (this runs for every job): the same bytes as hashing the
  // version and then each part's 4-byte big-endian length and its UTF-8 bytes.
  let size = VERSION_BYTES.length;
  for (const part of parts) size += 4 + Buffer.byteLength(part, "utf8");
  const encoded = Buffer.allocUnsafe(size);
  let at = VERSION_BYTES.copy(encoded, 0);
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

/**
 * The BullMQ job id of an effect call. BullMQ rejects all-digit ids and most ids with ':', so the key
 * gets a letter prefix: always valid, and the key can be read back from it.
 */
export function jobIdForKey(key: string): string {
  return `once-${key}`;
}

/** The key inside a job id made by {@link jobIdForKey}, or undefined. */
export function keyFromJobId(jobId: string): string | undefined {
  const key = jobId.startsWith("once-") ? jobId.slice(5) : undefined;
  return key !== undefined && isKey(key) ? key : undefined;
}

import { isKey } from "@once/core";

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

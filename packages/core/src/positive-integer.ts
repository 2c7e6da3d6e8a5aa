import { MIN_LIVENESS_TTL_MS } from "./store.js";

/**
 * Refuses anything but a positive safe integer with a RangeError naming the setting (`leaseMs`, `retentionMs`,
 * `timeoutMs`, `batchSize`...): checked before any command is sent, so a bad setting touches nothing.
 */
export function positiveInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
}

/**
 * Refuses a liveness entry's time to live below MIN_LIVENESS_TTL_MS (a RangeError): shorter, a heartbeat
 * across a network could not keep up, and every claim of a healthy process would look dead.
 */
export function livenessTtl(ttlMs: number): void {
  if (!Number.isSafeInteger(ttlMs) || ttlMs < MIN_LIVENESS_TTL_MS)
    throw new RangeError(`ttlMs must be an integer of at least ${MIN_LIVENESS_TTL_MS}, got ${ttlMs}`);
}

import { randomBytes } from "node:crypto";

function hex(bytes: number): string {
  return randomBytes(bytes).toString("hex");
}

function sanitizeLabel(label: string): string {
  const clean = label.replace(/[^A-Za-z0-9_.-]+/g, "-").slice(0, 24);
  return clean === "" ? "t" : clean;
}

/**
 * A unique key prefix for one test, e.g. `once-test:dedup:3f9a0c12:`. It carries no hash tag, so keys
 * under it still spread over a cluster's slots (and `{…}` in the label is replaced).
 */
export function randomPrefix(label: string): string {
  return `once-test:${sanitizeLabel(label)}:${hex(4)}:`;
}

/**
 * A unique BullMQ queue prefix for a Redis Cluster, e.g. `{bull-dedup-3f9a0c12}`: BullMQ's keys for one
 * queue must share a slot, which the hash tag guarantees (without it: CROSSSLOT errors).
 */
export function clusterQueuePrefix(label: string): string {
  return `{bull-${sanitizeLabel(label)}-${hex(4)}}`;
}

/** Where a process's liveness entry lives, after the store's prefix (docs/protocol.md, "Liveness"). */
const LIVENESS_ENTRY = "live:";

/** A process's liveness entry: a string key of its own, in whatever slot it hashes to (not the records'). */
export function livenessKey(id: string): string {
  return LIVENESS_ENTRY + id;
}

/** True when `fullKey` (prefix included) is a liveness entry, not a record: scans pass over it. */
export function isLivenessEntry(fullKey: string, prefix: string): boolean {
  return fullKey.startsWith(prefix + LIVENESS_ENTRY);
}

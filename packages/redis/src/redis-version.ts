/** The oldest Redis once's scripts run on. Any Valkey does. */
export const MIN_REDIS_VERSION = [6, 2] as const;

/** `7.2.4` → `[7, 2, 4]`. */
export function versionParts(version: string): number[] {
  return version.split(".").map((part) => Number.parseInt(part, 10) || 0);
}

/** True when `version` (e.g. `7.2.4`) is older than `than` (compared part by part). */
export function olderThan(version: string, than: readonly number[]): boolean {
  const parts = versionParts(version);
  for (let i = 0; i < than.length; i++) {
    const a = parts[i] ?? 0;
    const b = than[i] ?? 0;
    if (a !== b) return a < b;
  }
  return false;
}

import { UsageError } from "./errors.js";

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;

/**
 * Milliseconds in a duration like `30s`, `10m`, `2h`, `1d`, `250ms` or `1h30m`. A bare number is refused:
 * whether `10` meant seconds or minutes is exactly the kind of guess an operator tool must not make.
 */
export function parseDuration(option: string, text: string): number {
  const trimmed = text.trim();
  let total = 0;
  PART.lastIndex = 0;
  let matched = 0;
  for (let match = PART.exec(trimmed); match !== null; match = PART.exec(trimmed)) {
    total += Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
    matched = PART.lastIndex;
  }
  if (trimmed === "" || matched !== trimmed.length) {
    throw new UsageError(
      `${option} ${JSON.stringify(text)} is not a duration: use a number with a unit, e.g. 30s, 10m, 2h, 1d, 250ms or 1h30m`,
    );
  }
  return Math.round(total);
}

// One home for how once writes a duration, shared with the console.
export { formatDuration } from "@once/core/internal";

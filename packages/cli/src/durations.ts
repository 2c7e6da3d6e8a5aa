import { readDuration } from "@once/core/internal";
import { UsageError } from "./errors.js";

/**
 * Milliseconds in a duration like `30s`, `10m`, `2h`, `1d`, `250ms` or `1h30m`; anything else, a bare
 * number included, is bad usage naming the option.
 */
export function parseDuration(option: string, text: string): number {
  const ms = readDuration(text);
  if (ms === undefined) {
    throw new UsageError(
      `${option} ${JSON.stringify(text)} is not a duration: use a number with a unit, e.g. 30s, 10m, 2h, 1d, 250ms or 1h30m`,
    );
  }
  return ms;
}

// One home for how once writes a duration, shared with the console.
export { formatDuration } from "@once/core/internal";

import { UsageError } from "./errors.js";

/** `text` as a positive integer, or UsageError naming the option. */
export function positiveInteger(option: string, text: string, min = 1): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`${option} ${JSON.stringify(text)} must be an integer of at least ${min}`);
  }
  return value;
}

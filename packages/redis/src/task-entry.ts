import type { Cancellation } from "@once/core";
import { cancellationOf } from "./to-record.js";

// A task's entry: one hash at `<prefix>task:<deriveTaskKey(task)>` beside the records, holding the task's
// cancellation (`cancel_*`), its identity when kept (`ns`, `task_id`), a counter (`seq`) and one field per
// filed call, `c:<key>` = the order of its first filing. A record's key is 64 hex characters, so no record's
// key starts with `task:`.
const TASK_ENTRY = "task:";

/** The key (under the store's prefix) of the entry of the task whose key is `taskKey`. */
export function taskEntryKey(taskKey: string): string {
  return TASK_ENTRY + taskKey;
}

/** True when `fullKey` (prefix included) is a task entry, not a record: scans pass over it. */
export function isTaskEntry(fullKey: string, prefix: string): boolean {
  return fullKey.startsWith(prefix + TASK_ENTRY);
}

/** What a task entry's fields (HGETALL) say: the cancellation, if any, and the filed keys in filing order. */
export function readTaskEntry(fields: Record<string, string>): {
  cancellation: Cancellation | undefined;
  filed: string[];
} {
  const filed: [string, number][] = [];
  for (const [field, value] of Object.entries(fields))
    if (field.startsWith("c:")) filed.push([field.slice(2), Number(value)]);
  filed.sort((a, b) => a[1] - b[1]);
  return { cancellation: cancellationOf(new Map(Object.entries(fields))), filed: filed.map(([key]) => key) };
}

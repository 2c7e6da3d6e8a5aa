import { CancelRefusedError, InvalidKeyPartError } from "./errors.js";
import { deriveTaskKey } from "./key.js";
import type { CancelRequest, TaskRef } from "./store.js";

/**
 * The task key of a cancel, or CancelRefusedError for one that must not change anything: no `by`, or a task id
 * (or namespace) that is not a valid key part. Every store checks a cancel this way before it writes.
 */
export function cancellableTaskKey(task: TaskRef, request: CancelRequest): string {
  const taskId = String(task.taskId);
  if (typeof request.by !== "string" || request.by.trim() === "")
    throw new CancelRefusedError(taskId, "`by` must name who cancels");
  if (typeof request.why !== "string") throw new CancelRefusedError(taskId, "`why` must be a string");
  try {
    return deriveTaskKey(task);
  } catch (error) {
    if (error instanceof InvalidKeyPartError) throw new CancelRefusedError(taskId, error.message);
    throw error;
  }
}

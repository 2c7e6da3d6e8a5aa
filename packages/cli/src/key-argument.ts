// The job-id format alone: this subpath loads no BullMQ.
import { keyFromJobId } from "@once/bullmq/job-id";
import { deriveKey, InvalidKeyPartError, isKey } from "@once/core";
import { UsageError } from "./errors.js";
import type { ParsedOptions } from "./parse-command-line.js";

/** How the operator named the key: as given, or derived from a task and a step. */
export interface KeyArgument {
  key: string;
  derivedFrom?: { namespace: string; taskId: string; stepId: string };
}

/**
 * The key an operator means: a 64-hex key, a BullMQ job id (`once-<key>`), or the Redis key itself
 * (`<prefix><key>`), or derived from `--task`/`--step`/`--namespace`. Anything else is bad usage.
 */
export function keyArgument(
  positionals: readonly string[],
  options: ParsedOptions,
  prefix: string,
): KeyArgument {
  const taskId = options.string("task");
  const stepId = options.string("step");
  const namespace = options.string("namespace");
  const derive = taskId !== undefined || stepId !== undefined || namespace !== undefined;
  if (positionals.length > 1) {
    throw new UsageError(`expected one key, got ${positionals.length}: ${positionals.join(" ")}`);
  }
  const [given] = positionals;
  if (given !== undefined && derive) {
    throw new UsageError("give a key or --task/--step, not both");
  }
  if (derive) {
    if (taskId === undefined || stepId === undefined) {
      throw new UsageError("--task and --step go together: the key is derived from both");
    }
    const parts = { namespace: namespace ?? "default", taskId, stepId };
    try {
      return { key: deriveKey(parts), derivedFrom: parts };
    } catch (error) {
      if (error instanceof InvalidKeyPartError) throw new UsageError(error.message, { cause: error });
      throw error;
    }
  }
  if (given === undefined) {
    throw new UsageError("which record? give its key, or --task <taskId> --step <stepId>");
  }
  const text = given.trim();
  const candidate = text.startsWith(prefix) ? text.slice(prefix.length) : text;
  const key = keyFromJobId(candidate) ?? candidate.toLowerCase();
  if (!isKey(key)) {
    throw new UsageError(
      `${JSON.stringify(given)} is not a key: expected 64 hex characters, a job id once-<key>, or ${prefix}<key>`,
    );
  }
  return { key };
}

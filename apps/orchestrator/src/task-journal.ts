/** One tool call of a task as the journal keeps it. `stepId` is fixed when the step begins. */
export interface JournalStep {
  /** 1, 2, 3… in the order the steps began. */
  n: number;
  /** The step's identity for its key: `step-<n>`, stable across retries and orchestrator restarts. */
  stepId: string;
  tool: string;
  /** The exact input, so a resumed step is the same call (same fingerprint), not a re-generated one. */
  input: unknown;
  state: "started" | "done" | "failed";
  result?: unknown;
  /** The error's name and code when the step failed for good (e.g. a declined card). */
  error?: { name: string; code?: string };
}

/**
 * Where an orchestrator writes down its steps *before* calling them, so a restarted orchestrator
 * re-issues an unfinished step with the same step id, hence the same idempotency key.
 */
export interface TaskJournal {
  /** The task's steps, oldest first. */
  load(taskId: string): Promise<JournalStep[]>;
  /** Allocates the next step number and records the step as started, in one write. */
  begin(taskId: string, call: { tool: string; input: unknown }): Promise<JournalStep>;
  finish(taskId: string, n: number, result: unknown): Promise<void>;
  fail(taskId: string, n: number, error: { name: string; code?: string }): Promise<void>;
}

/** The step id of step `n`. */
export function stepIdOf(n: number): string {
  return `step-${n}`;
}

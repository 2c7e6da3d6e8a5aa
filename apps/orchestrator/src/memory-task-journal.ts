import { type JournalStep, stepIdOf, type TaskJournal } from "./task-journal.js";

/** A journal in this process's memory: it does not survive a restart (the naive mode, unit tests). */
export class MemoryTaskJournal implements TaskJournal {
  readonly #tasks = new Map<string, JournalStep[]>();

  async load(taskId: string): Promise<JournalStep[]> {
    return (this.#tasks.get(taskId) ?? []).map((step) => ({ ...step }));
  }

  async begin(taskId: string, call: { tool: string; input: unknown }): Promise<JournalStep> {
    const steps = this.#tasks.get(taskId) ?? [];
    this.#tasks.set(taskId, steps);
    const n = steps.length + 1;
    const step: JournalStep = {
      n,
      stepId: stepIdOf(n),
      tool: call.tool,
      input: call.input,
      state: "started",
    };
    steps.push(step);
    return { ...step };
  }

  async finish(taskId: string, n: number, result: unknown): Promise<void> {
    Object.assign(this.#find(taskId, n), { state: "done", result });
  }

  async fail(taskId: string, n: number, error: { name: string; code?: string }): Promise<void> {
    Object.assign(this.#find(taskId, n), { state: "failed", error });
  }

  #find(taskId: string, n: number): JournalStep {
    const step = this.#tasks.get(taskId)?.find((s) => s.n === n);
    if (!step) throw new Error(`task ${taskId} has no step ${n} in its journal`);
    return step;
  }
}

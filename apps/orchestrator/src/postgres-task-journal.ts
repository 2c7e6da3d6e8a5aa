import type { PostgresLayout } from "@once/order-agent";
import type pg from "pg";
import { type JournalStep, stepIdOf, type TaskJournal } from "./task-journal.js";

/** A task journal in a table: one row per step, `(task_id, n)`, the step as JSON. */
export class PostgresTaskJournal implements TaskJournal {
  readonly #pool: pg.Pool;
  readonly #table: string;

  constructor(pool: pg.Pool, layout: PostgresLayout) {
    this.#pool = pool;
    this.#table = `"${layout.schema}".journal`;
  }

  async load(taskId: string): Promise<JournalStep[]> {
    const { rows } = await this.#pool.query<{ n: number; step: Omit<JournalStep, "n" | "stepId"> }>(
      `select n, step from ${this.#table} where task_id = $1 order by n`,
      [taskId],
    );
    return rows.map((row) => ({ ...row.step, n: row.n, stepId: stepIdOf(row.n) }));
  }

  async begin(taskId: string, call: { tool: string; input: unknown }): Promise<JournalStep> {
    const draft = { tool: call.tool, input: call.input, state: "started" as const };
    // The next number and the step in one statement; the primary key refuses a number taken meanwhile.
    const { rows } = await this.#pool.query<{ n: number }>(
      `insert into ${this.#table} (task_id, n, step)
       select $1, coalesce(max(n), 0) + 1, $2 from ${this.#table} where task_id = $1 returning n`,
      [taskId, JSON.stringify(draft)],
    );
    const n = Number(rows[0]?.n);
    return { n, stepId: stepIdOf(n), ...draft };
  }

  async finish(taskId: string, n: number, result: unknown): Promise<void> {
    await this.#update(taskId, n, { state: "done", result });
  }

  async fail(taskId: string, n: number, error: { name: string; code?: string }): Promise<void> {
    await this.#update(taskId, n, { state: "failed", error });
  }

  async #update(taskId: string, n: number, fields: Partial<JournalStep>): Promise<void> {
    const { rowCount } = await this.#pool.query(
      `update ${this.#table} set step = step || $3::jsonb where task_id = $1 and n = $2`,
      [taskId, n, JSON.stringify(fields)],
    );
    if (rowCount !== 1) throw new Error(`task ${taskId} has no step ${n} in its journal`);
  }
}

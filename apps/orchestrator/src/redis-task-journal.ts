import type { Redis } from "ioredis";
import { type JournalStep, stepIdOf, type TaskJournal } from "./task-journal.js";

export interface RedisTaskJournalOptions {
  /** The client; the journal never closes it. */
  redis: Redis;
  /** Prepended to the task id: one hash per task. */
  prefix: string;
  /** How long a task's journal is kept after its last write. Default 24 h, like once's records. */
  retentionMs?: number;
}

// Allocating the step number and recording the step is one script: a crash cannot leave a number that
// was handed out but never written down (harmless, but it would make the journal harder to read).
const BEGIN = `
local n = redis.call("HINCRBY", KEYS[1], "next", 1)
redis.call("HSET", KEYS[1], "step:" .. n, ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return n`;
const UPDATE = `
local step = redis.call("HGET", KEYS[1], "step:" .. ARGV[1])
if not step then return 0 end
redis.call("HSET", KEYS[1], "step:" .. ARGV[1], ARGV[2])
redis.call("PEXPIRE", KEYS[1], ARGV[3])
return 1`;

/** A task journal in Redis: hash `<prefix><taskId>` with `next` and one `step:<n>` JSON field per step. */
export class RedisTaskJournal implements TaskJournal {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #retentionMs: number;

  constructor(options: RedisTaskJournalOptions) {
    this.#redis = options.redis;
    this.#prefix = options.prefix;
    this.#retentionMs = options.retentionMs ?? 24 * 60 * 60 * 1000;
  }

  async load(taskId: string): Promise<JournalStep[]> {
    const fields = await this.#redis.hgetall(this.#prefix + taskId);
    return Object.entries(fields)
      .filter(([name]) => name.startsWith("step:"))
      .map(([name, json]) => withIdentity(Number(name.slice("step:".length)), json))
      .sort((a, b) => a.n - b.n);
  }

  async begin(taskId: string, call: { tool: string; input: unknown }): Promise<JournalStep> {
    // The number is only known inside the script, so the stored JSON leaves it out; it is the field's name.
    const key = this.#prefix + taskId;
    const draft = { tool: call.tool, input: call.input, state: "started" as const };
    const n = Number(await this.#redis.eval(BEGIN, 1, key, JSON.stringify(draft), this.#retentionMs));
    return { n, stepId: stepIdOf(n), ...draft };
  }

  async finish(taskId: string, n: number, result: unknown): Promise<void> {
    const step = await this.#step(taskId, n);
    await this.#write(taskId, { ...step, state: "done", result });
  }

  async fail(taskId: string, n: number, error: { name: string; code?: string }): Promise<void> {
    const step = await this.#step(taskId, n);
    await this.#write(taskId, { ...step, state: "failed", error });
  }

  async #step(taskId: string, n: number): Promise<JournalStep> {
    const json = await this.#redis.hget(this.#prefix + taskId, `step:${n}`);
    if (json === null) throw new Error(`task ${taskId} has no step ${n} in its journal`);
    return withIdentity(n, json);
  }

  async #write(taskId: string, step: JournalStep): Promise<void> {
    const { n, stepId: _stepId, ...stored } = step;
    const updated = await this.#redis.eval(
      UPDATE,
      1,
      this.#prefix + taskId,
      String(n),
      JSON.stringify(stored),
      this.#retentionMs,
    );
    if (updated !== 1) throw new Error(`task ${taskId} has no step ${step.n} in its journal`);
  }
}

/** A stored step with its number and step id, which the field name carries. */
function withIdentity(n: number, json: string): JournalStep {
  const stored = JSON.parse(json) as Omit<JournalStep, "n" | "stepId">;
  return { ...stored, n, stepId: stepIdOf(n) };
}

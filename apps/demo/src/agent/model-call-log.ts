import type { Redis } from "ioredis";

/** What the log holds, summed. */
export interface ModelCallCounts {
  /** Every answer the model gave. */
  answers: number;
  /** Answers for a (task, turn) whose earlier answer had reached the loop. */
  repeated: number;
  /** Answers beyond the first for a (task, turn) whose earlier answers never reached the loop. */
  cutOff: number;
}

// One script, so the answer is counted and classified in one step: the flag it reads is the one the loop set
// for an earlier answer of the same turn.
const ANSWERED = `
redis.call("HINCRBY", KEYS[1], "answers:" .. ARGV[1], 1)
if redis.call("HEXISTS", KEYS[1], "taken:" .. ARGV[1]) == 1 then redis.call("HINCRBY", KEYS[1], "repeated", 1) end`;

/**
 * The model's answers per (task, turn), in one Redis hash shared by every orchestrator process of a run: it
 * outlives a SIGKILLed one. The model counts each answer (`answered`); the loop marks each turn whose answer
 * it took (`taken`), so a later answer for the same turn is told apart — asked again after the loop had
 * acted on an answer, or after a kill cut the answer off first.
 */
export class ModelCallLog {
  readonly #redis: Redis;
  readonly #key: string;

  constructor(redis: Redis, key: string) {
    this.#redis = redis;
    this.#key = key;
  }

  async answered(taskId: string, turn: number): Promise<void> {
    await this.#redis.eval(ANSWERED, 1, this.#key, `${taskId}/${turn}`);
  }

  async taken(taskId: string, turn: number): Promise<void> {
    await this.#redis.hset(this.#key, `taken:${taskId}/${turn}`, 1);
  }

  async read(): Promise<ModelCallCounts> {
    const fields = await this.#redis.hgetall(this.#key);
    let answers = 0;
    let turns = 0;
    for (const [name, value] of Object.entries(fields)) {
      if (!name.startsWith("answers:")) continue;
      answers += Number(value);
      turns++;
    }
    const repeated = Number(fields.repeated ?? 0);
    return { answers, repeated, cutOff: answers - turns - repeated };
  }
}

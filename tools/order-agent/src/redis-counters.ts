import type { Redis } from "ioredis";
import type { Counters } from "./counting-store.js";

/**
 * Counters in one Redis hash, shared by every process of a run. They live outside the processes on
 * purpose: a SIGKILLed worker's counts survive it.
 */
export class RedisCounters implements Counters {
  readonly #redis: Redis;
  readonly #key: string;

  constructor(redis: Redis, key: string) {
    this.#redis = redis;
    this.#key = key;
  }

  async increment(field: string): Promise<void> {
    await this.#redis.hincrby(this.#key, field, 1);
  }

  /** Every counter, as numbers. */
  async read(): Promise<Record<string, number>> {
    const fields = await this.#redis.hgetall(this.#key);
    return Object.fromEntries(Object.entries(fields).map(([name, value]) => [name, Number(value)]));
  }
}

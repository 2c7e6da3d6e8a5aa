import type { Redis } from "ioredis";

/** Calls per command since the server started, from INFO commandstats (`hset`, `evalsha`, `client|setname`…). */
export async function commandCalls(redis: Redis): Promise<Map<string, number>> {
  const text = await redis.info("commandstats");
  const calls = new Map<string, number>();
  for (const line of text.split(/\r?\n/)) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (match?.[1] && match[2]) calls.set(match[1], Number(match[2]));
  }
  return calls;
}

/**
 * What happened between two commandstats readings, without the bench's own INFO calls. On a dedicated
 * server nothing else runs; on a shared one the delta includes other clients' traffic.
 */
export function commandDelta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const delta = new Map<string, number>();
  for (const [name, calls] of after) {
    if (name === "info") continue;
    const d = calls - (before.get(name) ?? 0);
    if (d > 0) delta.set(name, d);
  }
  return delta;
}

/** Seconds of CPU the Redis server has used (user + system, main thread and children). */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const text = await redis.info("cpu");
  let total = 0;
  for (const line of text.split(/\r?\n/)) {
    const match = /^used_cpu_(sys|user):([\d.]+)/.exec(line);
    if (match?.[2]) total += Number(match[2]);
  }
  return total;
}

/** One field of INFO (e.g. `used_memory`, `redis_version`). */
export async function infoField(redis: Redis, section: string, field: string): Promise<string | undefined> {
  const text = await redis.info(section);
  for (const line of text.split(/\r?\n/)) {
    if (line.startsWith(`${field}:`)) return line.slice(field.length + 1).trim();
  }
  return undefined;
}

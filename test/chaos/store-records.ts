// The store's records as Redis holds them, read by the suite directly (never through a worker's store):
// after a Redis restart, to see what it kept, and at the end of a run, for the verdict.

import { Redis } from "ioredis";

/** One record's fields the suite compares (`result` only when asked for). */
export interface RecordState {
  state: string | null;
  phase: string | null;
  fence: number;
  result?: string | null;
}

/** How many records there are under `prefix`. */
export async function countRecords(redis: Redis, prefix: string): Promise<number> {
  let cursor = "0";
  let count = 0;
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1_000);
    cursor = next;
    count += keys.length;
  } while (cursor !== "0");
  return count;
}

/** Every record under `prefix` (key without the prefix → state, phase, fence), on a connection of its own. */
export async function snapshotRecords(
  url: string,
  prefix: string,
  withResult = false,
): Promise<Map<string, RecordState>> {
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  redis.on("error", () => {});
  try {
    const found = new Map<string, RecordState>();
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1_000);
      cursor = next;
      if (keys.length === 0) continue;
      const pipeline = redis.pipeline();
      for (const key of keys)
        pipeline.hmget(key, "state", "phase", "fence", ...(withResult ? ["result"] : []));
      const replies = (await pipeline.exec()) ?? [];
      keys.forEach((key, n) => {
        const values = (replies[n]?.[1] ?? []) as (string | null)[];
        found.set(key.slice(prefix.length), {
          state: values[0] ?? null,
          phase: values[1] ?? null,
          fence: Number(values[2] ?? 0),
          ...(withResult ? { result: values[3] ?? null } : {}),
        });
      });
    } while (cursor !== "0");
    return found;
  } finally {
    redis.disconnect();
  }
}

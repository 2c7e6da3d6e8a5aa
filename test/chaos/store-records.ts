// The store's records as Redis holds them, read by the suite directly (never through a worker's store):
// after a Redis kill, to see what it kept, and at the end of a run, for the verdict. A Cluster's records
// are spread over its masters: each is read on its own, and together they are all the records.

import { Redis } from "ioredis";

/** One record's fields the suite compares (`result` only when asked for). */
export interface RecordState {
  state: string | null;
  phase: string | null;
  fence: number;
  result?: string | null;
}

/** Every record under `prefix` on the masters at `urls` (key without the prefix → state, phase, fence). */
export async function snapshotRecords(
  urls: readonly string[],
  prefix: string,
  withResult = false,
): Promise<Map<string, RecordState>> {
  const found = new Map<string, RecordState>();
  for (const url of urls) await readNode(url, prefix, withResult, found);
  return found;
}

async function readNode(
  url: string,
  prefix: string,
  withResult: boolean,
  found: Map<string, RecordState>,
): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  redis.on("error", () => {});
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1_000);
      cursor = next;
      if (keys.length === 0) continue;
      const pipeline = redis.pipeline();
      for (const key of keys)
        pipeline.hmget(key, "state", "phase", "fence", ...(withResult ? ["result", "result2"] : []));
      const replies = (await pipeline.exec()) ?? [];
      keys.forEach((key, n) => {
        const values = (replies[n]?.[1] ?? []) as (string | null)[];
        found.set(key.slice(prefix.length), {
          state: values[0] ?? null,
          phase: values[1] ?? null,
          fence: Number(values[2] ?? 0),
          // A result of 65 to 128 bytes is kept in two parts (record layout v3): joined as the store joins them.
          ...(withResult ? { result: values[3] == null ? null : values[3] + (values[4] ?? "") } : {}),
        });
      });
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}

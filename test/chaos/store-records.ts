// The store's records as Redis holds them, read by the suite directly (never through a worker's store, but
// decoded by the store's own record reader, scanRecords):
// after a Redis kill, to see what it kept, and at the end of a run, for the verdict. A Cluster's records
// are spread over its masters: each is read on its own, and together they are all the records.

import { scanRecords } from "@once/redis";
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
    // Read as the store reads them (any layout it reads), straight off this node.
    for await (const record of scanRecords(redis, { prefix, batchSize: 1_000 }))
      found.set(record.key, {
        state: record.state,
        phase: record.phase,
        fence: record.fence,
        ...(withResult ? { result: record.result ?? null } : {}),
      });
  } finally {
    redis.disconnect();
  }
}

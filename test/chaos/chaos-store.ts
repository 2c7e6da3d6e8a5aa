// Where a chaos run keeps once's records: on the run's Redis (beside the queue), or with `--store postgres`
// on a PostgreSQL server the run started for itself, which the workers and the orchestrator reach through
// TCP proxies of their own (the faults cut them, and restart the server).

import type { OnceStore } from "@once/core";
import { PostgresStore } from "@once/postgres";
import { RedisStore } from "@once/redis";
import type { Cluster, Redis } from "ioredis";
import pg from "pg";
import { z } from "zod";
import type { RecordState } from "./store-records.js";

export const chaosStoreLocation = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("redis") }),
  z.object({ kind: z.literal("postgres"), url: z.string(), schema: z.string() }),
]);
export type ChaosStoreLocation = z.infer<typeof chaosStoreLocation>;

/** The store a worker or the orchestrator uses; `close` ends what it opened for it. */
export async function openChaosStore(
  location: ChaosStoreLocation,
  options: {
    redis: Redis | Cluster;
    prefix: string;
    timeoutMs: number;
    poolSize: number;
    /** RedisStore's `durability` (store `redis` only). */
    durability?: { replicas: number; timeoutMs: number; fsync?: boolean };
  },
): Promise<{ store: OnceStore; close(): Promise<void> }> {
  if (location.kind === "redis") {
    const store = await RedisStore.create({
      redis: options.redis,
      prefix: options.prefix,
      timeoutMs: options.timeoutMs,
      ...(options.durability === undefined ? {} : { durability: options.durability }),
    });
    return { store, close: async () => {} };
  }
  const pool = new pg.Pool({
    connectionString: location.url,
    max: options.poolSize,
    connectionTimeoutMillis: 2_000,
    // A connection the proxy cut is found dead on its next use; keepalive finds an idle one sooner.
    keepAlive: true,
  });
  pool.on("error", () => {});
  try {
    const store = await PostgresStore.create({
      pool,
      schema: location.schema,
      migrate: false,
      checks: false,
      timeoutMs: options.timeoutMs,
    });
    return { store, close: () => pool.end() };
  } catch (error) {
    await pool.end().catch(() => {});
    throw error;
  }
}

/** Every record of a PostgresStore (key → state, phase, fence, result), read past the proxies. */
export async function snapshotPostgresRecords(
  url: string,
  schema: string,
  withResult = false,
): Promise<Map<string, RecordState>> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{
      key: string;
      state: string;
      phase: string;
      fence: string;
      result: string | null;
    }>(
      `select key, state, phase, fence, result from "${schema}".records where expires_at > "${schema}".now_ms()`,
    );
    return new Map(
      rows.map((row) => [
        row.key,
        {
          state: row.state,
          phase: row.phase,
          fence: Number(row.fence),
          ...(withResult ? { result: row.result } : {}),
        },
      ]),
    );
  } finally {
    await client.end().catch(() => {});
  }
}

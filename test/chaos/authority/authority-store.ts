// Where the authority run keeps once's records, the same for its agents and its driver: the shared Redis, a
// Redis Cluster, or a schema on the shared PostgreSQL.

import type { OperatorStore, TaskStore } from "@once/core";
import { PostgresOperatorStore, PostgresStore } from "@once/postgres";
import { RedisOperatorStore, RedisStore } from "@once/redis";
import {
  cleanupPrefix,
  clusterNodes,
  postgresUrl,
  randomPrefix,
  randomSchema,
  redisUrl,
} from "@once/support";
import { Cluster, Redis } from "ioredis";
import pg from "pg";
import { z } from "zod";

export const authorityStoreLocation = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("redis"), url: z.string(), prefix: z.string() }),
  z.object({
    kind: z.literal("cluster"),
    nodes: z.array(z.object({ host: z.string(), port: z.number() })),
    prefix: z.string(),
  }),
  z.object({
    kind: z.literal("sentinel"),
    sentinels: z.array(z.object({ host: z.string(), port: z.number() })),
    name: z.string(),
    prefix: z.string(),
    /** The store's `durability.replicas`: every replica of the primary. */
    replicas: z.number().int().positive(),
  }),
  z.object({ kind: z.literal("postgres"), url: z.string(), schema: z.string() }),
]);
export type AuthorityStoreLocation = z.infer<typeof authorityStoreLocation>;

/** The name a report gives the location's kind of store. */
export function storeName(location: AuthorityStoreLocation): string {
  return location.kind === "redis" ? "redis" : location.kind === "cluster" ? "redis-cluster" : location.kind;
}

export interface OpenedAuthorityStore {
  store: TaskStore;
  operator: OperatorStore;
  close(): Promise<void>;
}

/** Opens the store and its operator view; the first opener of a PostgreSQL schema creates it. */
export async function openAuthorityStore(location: AuthorityStoreLocation): Promise<OpenedAuthorityStore> {
  if (location.kind === "postgres") {
    const pool = new pg.Pool({ connectionString: location.url, max: 8 });
    pool.on("error", () => {});
    const store = await PostgresStore.create({ pool, schema: location.schema });
    const operator = await PostgresOperatorStore.create({ pool, schema: location.schema });
    return { store, operator, close: () => pool.end() };
  }
  const redis =
    location.kind === "cluster"
      ? new Cluster(location.nodes, { redisOptions: { maxRetriesPerRequest: 2 } })
      : location.kind === "sentinel"
        ? new Redis({ sentinels: location.sentinels, name: location.name, maxRetriesPerRequest: 2 })
        : new Redis(location.url, { maxRetriesPerRequest: 2 });
  redis.on("error", () => {});
  const store = await RedisStore.create({
    redis,
    prefix: location.prefix,
    ...(location.kind === "sentinel"
      ? { durability: { replicas: location.replicas, timeoutMs: 1_000 } }
      : {}),
  });
  const operator = new RedisOperatorStore({ redis, prefix: location.prefix });
  return {
    store,
    operator,
    close: async () => {
      redis.disconnect();
    },
  };
}

/** A fresh place on the shared servers for one run (a key prefix, a schema), and how to remove it after. */
export function freshAuthorityLocation(kind: "redis" | "cluster" | "postgres"): {
  location: AuthorityStoreLocation;
  remove(): Promise<void>;
} {
  if (kind === "postgres") {
    const location = { kind, url: postgresUrl(), schema: randomSchema("authority") } as const;
    return {
      location,
      remove: async () => {
        const client = new pg.Client({ connectionString: location.url });
        await client.connect();
        try {
          await client.query(`drop schema if exists "${location.schema}" cascade`);
        } finally {
          await client.end();
        }
      },
    };
  }
  const prefix = randomPrefix("authority");
  const location =
    kind === "cluster"
      ? ({ kind, nodes: clusterNodes(), prefix } as const)
      : ({ kind, url: redisUrl(), prefix } as const);
  return {
    location,
    remove: async () => {
      const redis = location.kind === "cluster" ? new Cluster(location.nodes) : new Redis(location.url);
      try {
        await cleanupPrefix(redis, prefix);
      } finally {
        redis.disconnect();
      }
    },
  };
}

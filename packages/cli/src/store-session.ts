import type { OnceRecord, OnceStore } from "@once/core";
import { PostgresStore } from "@once/postgres";
import { RedisStore, scanRecords } from "@once/redis";
import type { Cluster, Redis } from "ioredis";
import pg from "pg";
import type { CliIo } from "./cli-io.js";
import { CommandFailedError, UsageError } from "./errors.js";
import type { ParsedOptions } from "./parse-command-line.js";
import { assertNotClusterNode, redisTarget, serverNow, storePrefix, withRedis } from "./redis-connection.js";

/**
 * The store a command reads and writes, on Redis or on PostgreSQL, with what the commands need besides the
 * store itself: the server's clock, every record, the size of what holds them.
 */
export interface StoreSession {
  backend: "redis" | "postgres";
  /** Where the server is, for messages (a password never shown). */
  label: string;
  /** Where the records are on it: `under prefix "once:"`, `in schema once`. */
  where: string;
  /** The location of one record: its Redis key, or its table and key. */
  locate(key: string): string;
  /** The store, with this retention for its writes (default: the store's default). */
  store(options?: { retentionMs?: number }): Promise<OnceStore>;
  /** The server's clock, in ms: the clock once's records are written with. */
  now(): Promise<number>;
  /** Every record; `onSkipped` is called for each thing that is not one (a foreign key under the prefix). */
  scan(onSkipped: () => void): AsyncIterable<OnceRecord>;
  /** How much the server holds: Redis' DBSIZE (every key), or the records table's rows (expired ones too). */
  size(): Promise<{ count: number; of: string }>;
}

/** The options that say where the store is, for the commands that use one. */
export function storeSelected(options: ParsedOptions): "redis" | "postgres" {
  const postgres = options.string("postgres-url");
  if (
    postgres !== undefined &&
    (options.string("redis-url") !== undefined || options.string("cluster") !== undefined)
  )
    throw new UsageError("give --postgres-url or --redis-url/--cluster, not both");
  if (
    postgres === undefined &&
    (options.string("schema") !== undefined || options.string("table-prefix") !== undefined)
  )
    throw new UsageError("--schema and --table-prefix are for a PostgresStore: give --postgres-url too");
  if (postgres !== undefined && options.string("prefix") !== undefined)
    throw new UsageError(
      "--prefix is the Redis key prefix: for a PostgresStore use --schema and --table-prefix",
    );
  return postgres === undefined ? "redis" : "postgres";
}

/**
 * Opens the store the options name (`--postgres-url`, else Redis as {@link redisTarget} says), runs `use`,
 * and closes every connection it opened whatever happens.
 */
export async function withStore<T>(
  options: ParsedOptions,
  io: CliIo,
  use: (session: StoreSession) => Promise<T>,
): Promise<T> {
  if (storeSelected(options) === "postgres") return withPostgres(options, use);
  const prefix = storePrefix(options);
  const target = redisTarget(options, io.env);
  return withRedis(target, async (redis) => {
    await assertNotClusterNode(redis, target);
    return use({
      backend: "redis",
      label: target.label,
      where: `under prefix ${JSON.stringify(prefix)}`,
      locate: (key) => prefix + key,
      store: (o = {}) => RedisStore.create({ redis, prefix, checks: false, ...o }),
      now: () => serverNow(redis),
      scan: (onSkipped) => scanRecords(redis, { prefix, onSkipped }),
      size: async () => ({ count: await databaseSize(redis), of: "DBSIZE keys in all" }),
    });
  });
}

async function withPostgres<T>(
  options: ParsedOptions,
  use: (session: StoreSession) => Promise<T>,
): Promise<T> {
  const url = options.string("postgres-url") as string;
  let label: string;
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") throw new Error("protocol");
    if (parsed.password !== "") parsed.password = "***";
    label = parsed.toString();
  } catch {
    throw new UsageError(
      `--postgres-url ${JSON.stringify(url)} is not a PostgreSQL URL: use postgres://user@host:5432/database`,
    );
  }
  const schema = options.string("schema") ?? "once";
  const tablePrefix = options.string("table-prefix") ?? "";
  const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 5_000 });
  pool.on("error", () => {});
  try {
    const open = (retentionMs?: number) =>
      PostgresStore.create({
        pool,
        schema,
        tablePrefix,
        migrate: false,
        checks: false,
        ...(retentionMs === undefined ? {} : { retentionMs }),
      });
    let reader: PostgresStore;
    try {
      reader = await open();
    } catch (error) {
      throw new CommandFailedError(`cannot use the PostgresStore at ${label}: ${describe(error)}`, {
        cause: error,
      });
    }
    return await use({
      backend: "postgres",
      label,
      where: `in schema ${schema}${tablePrefix === "" ? "" : ` (table prefix ${tablePrefix})`}`,
      locate: (key) => `${schema}.${tablePrefix}records key ${key}`,
      store: async (o = {}) => (o.retentionMs === undefined ? reader : open(o.retentionMs)),
      now: () => reader.now(),
      scan: () => reader.scan(),
      size: async () => {
        const { rows, expired } = await reader.size();
        return {
          count: rows,
          of: `rows in ${schema}.${tablePrefix}records, ${expired} expired not yet swept`,
        };
      },
    });
  } finally {
    await pool.end();
  }
}

function describe(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause;
  const message = error instanceof Error ? error.message : String(error);
  return cause instanceof Error ? `${message}: ${cause.message}` : message;
}

/** DBSIZE of the server, or summed over a Cluster's masters (each holds its own slots). */
async function databaseSize(redis: Redis | Cluster): Promise<number> {
  const nodes = redis.isCluster ? (redis as Cluster).nodes("master") : [redis as Redis];
  const sizes = await Promise.all(nodes.map((node) => node.dbsize()));
  return sizes.reduce((sum, n) => sum + n, 0);
}

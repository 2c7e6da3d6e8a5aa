import type { OperatorStore } from "@once/core";
import { PostgresOperatorStore } from "@once/postgres";
import { RedisOperatorStore } from "@once/redis";
import pg from "pg";
import type { CliIo } from "./cli-io.js";
import { CommandFailedError, UsageError } from "./errors.js";
import type { ParsedOptions } from "./parse-command-line.js";
import { assertNotClusterNode, redisTarget, storePrefix, withRedis } from "./redis-connection.js";
import { POSTGRES_URL, storeUrlLabel } from "./store-url.js";

/**
 * The store a command reads and resolves through, on Redis or on PostgreSQL: the OperatorStore, with where
 * its records are for messages.
 */
export interface StoreSession {
  backend: "redis" | "postgres";
  /** Where the server is, for messages (a password never shown). */
  label: string;
  /** Where the records are on it: `under prefix "once:"`, `in schema once`. */
  where: string;
  /** The location of one record: its Redis key, or its table and key. */
  locate(key: string): string;
  /** What an operator lists, counts, reads and resolves. */
  operator: OperatorStore;
  /** What `totalKeys` of the operator's counts are: DBSIZE keys, or the table's rows (expired ones too). */
  size(): Promise<string>;
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
      operator: new RedisOperatorStore({ redis, prefix, label: target.label }),
      size: async () => "DBSIZE keys in all",
    });
  });
}

async function withPostgres<T>(
  options: ParsedOptions,
  use: (session: StoreSession) => Promise<T>,
): Promise<T> {
  const { session, close } = await openPostgres(options);
  try {
    return await use(session);
  } finally {
    await close();
  }
}

/**
 * The PostgresStore `--postgres-url`, `--schema` and `--table-prefix` name, as a session that lasts until
 * `close` (for `once console`, which outlives one command's work). Fails when the schema is not usable.
 */
export async function openPostgres(
  options: ParsedOptions,
): Promise<{ session: StoreSession; close: () => Promise<void> }> {
  const url = options.string("postgres-url") as string;
  const label = storeUrlLabel(url, "--postgres-url", POSTGRES_URL);
  const schema = options.string("schema") ?? "once";
  const tablePrefix = options.string("table-prefix") ?? "";
  const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 5_000 });
  pool.on("error", () => {});
  const close = () => pool.end();
  try {
    let operator: PostgresOperatorStore;
    try {
      operator = await PostgresOperatorStore.create({ pool, schema, tablePrefix, label });
    } catch (error) {
      throw new CommandFailedError(`cannot use the PostgresStore at ${label}: ${describe(error)}`, {
        cause: error,
      });
    }
    const table = `${schema}.${tablePrefix}records`;
    const session: StoreSession = {
      backend: "postgres",
      label,
      where: `in schema ${schema}${tablePrefix === "" ? "" : ` (table prefix ${tablePrefix})`}`,
      locate: (key) => `${table} key ${key}`,
      operator,
      size: async () => `rows in ${table}, ${(await operator.size()).expired} expired not yet swept`,
    };
    return { session, close };
  } catch (error) {
    await close();
    throw error;
  }
}

function describe(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause;
  const message = error instanceof Error ? error.message : String(error);
  return cause instanceof Error ? `${message}: ${cause.message}` : message;
}

import type { Pool, PoolClient } from "pg";
import { withClient } from "./checkout.js";
import { PostgresSchemaError } from "./errors.js";
import { migrations, SCHEMA_VERSION } from "./migrations.js";
import type { Names } from "./names.js";

/** What a migration run did. */
export interface MigrationResult {
  /** The version the schema was at before. 0: there was none. */
  from: number;
  /** The version it is at now. */
  to: number;
  /** The versions this run applied (empty when another process had done it, or nothing was pending). */
  applied: number[];
}

/**
 * Brings the store's schema to {@link SCHEMA_VERSION}, in one transaction on one connection: a
 * transaction-scoped advisory lock (keyed by schema and prefix) first, so of two processes migrating at once
 * one waits for the other, then finds nothing left to do; neither fails. A schema migrated by a newer build
 * is left alone and refused (PostgresSchemaError): downgrades are not supported.
 */
export async function runMigrations(
  pool: Pool,
  names: Names,
  options: { connectTimeoutMs: number },
): Promise<MigrationResult> {
  // A throw rolls the whole run back (withClient), the advisory lock with it.
  return withClient(pool, { operation: "migration", ...options }, async (client) => {
    await client.query("begin");
    await client.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [names.lockKey]);
    await client.query(`create schema if not exists ${names.qSchema}`);
    await client.query(
      `create table if not exists ${names.q("migrations")} (version integer primary key, description text not null, applied_at timestamptz not null default now())`,
    );
    const from = await currentVersion(client, names);
    if (from > SCHEMA_VERSION) throw newerSchema(names, from);
    const applied: number[] = [];
    for (const migration of migrations(names)) {
      if (migration.version <= from) continue;
      await client.query(migration.sql);
      await client.query(`insert into ${names.q("migrations")} (version, description) values ($1, $2)`, [
        migration.version,
        migration.description,
      ]);
      applied.push(migration.version);
    }
    await client.query("commit");
    return { from, to: Math.max(from, SCHEMA_VERSION), applied };
  });
}

/**
 * The schema's version, read without locks or DDL: 0 when there is no ledger. For a store created with
 * `migrate: false`, which must find the schema at this build's version.
 */
export async function schemaVersion(pool: Pool | PoolClient, names: Names): Promise<number> {
  const { rows } = await pool.query<{ ledger: string | null }>("select to_regclass($1) as ledger", [
    names.q("migrations"),
  ]);
  if (!rows[0]?.ledger) return 0;
  return currentVersion(pool, names);
}

/** Refuses a schema this build cannot use: behind it (when not migrating) or ahead of it. */
export function assertUsable(names: Names, version: number): void {
  if (version > SCHEMA_VERSION) throw newerSchema(names, version);
  if (version < SCHEMA_VERSION)
    throw new PostgresSchemaError(
      names.schema,
      version,
      SCHEMA_VERSION,
      `the once schema ${names.schema} (prefix ${JSON.stringify(names.tablePrefix)}) is at version ${version}, this build needs ${SCHEMA_VERSION}: create the store with migrate: true (the default) once`,
    );
}

async function currentVersion(client: Pool | PoolClient, names: Names): Promise<number> {
  const { rows } = await client.query<{ version: number | null }>(
    `select max(version) as version from ${names.q("migrations")}`,
  );
  return rows[0]?.version ?? 0;
}

function newerSchema(names: Names, version: number): PostgresSchemaError {
  return new PostgresSchemaError(
    names.schema,
    version,
    SCHEMA_VERSION,
    `the once schema ${names.schema} is at version ${version}, newer than ${SCHEMA_VERSION}, the newest this build of @once/postgres knows: upgrade @once/postgres (schemas are never downgraded)`,
  );
}
